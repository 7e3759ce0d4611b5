"""The faults of a real tracking store met by a running sweep on the batched writer
(:mod:`harness.bulk`), each injected in-process through the shared ``invoke`` fixture: a full
disk (the database's ``database or disk is full``, or ENOSPC writing an artifact), a store
write-locked by another connection, a tracking server away for longer than MLflow's retries.
Each ends the sweep with one ``error:`` line naming the store and the cause (exit status 1, no
traceback), no trial marked FINISHED without its record, and the same command, run again once
the fault is gone, runs every trial not recorded and only those (issue 62, item 5)."""

from __future__ import annotations

import errno
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

TINY = ["cluster=serial", "cluster.pack_size=1", "train.max_steps=4", "train.eval_every=2", "task.n_val=32", "task.n_test=64",
        "task.n_train=16", "summary=false"]
SEEDS = 3


def _args(*more: str) -> list[str]:
    return [*TINY, f"seed=range({SEEDS})", *more]


def _statuses(db: Path) -> Counter:
    """``(trial id, status)`` → how many runs (the trial runs: those with a ``trial_id`` tag)."""
    with sqlite3.connect(db) as con:
        return Counter(con.execute(
            "SELECT t.value, r.status FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
            "WHERE t.key = 'trial_id' AND r.lifecycle_stage = 'active'").fetchall())


def _finished_with_metrics(db: Path) -> dict[str, int]:
    """Trial id → how many of its FINISHED runs have their final metrics (``test/mse``... : any
    metric at all but the live curve's would do; ``n_params`` is written with the record only)."""
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT t.value, EXISTS (SELECT 1 FROM metrics m WHERE m.run_uuid = r.run_uuid AND m.key = 'n_params') "
            "FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
            "WHERE t.key = 'trial_id' AND r.status = 'FINISHED' AND r.lifecycle_stage = 'active'").fetchall()
    found: Counter = Counter()
    for trial, has in rows:
        assert has, f"trial {trial} has a FINISHED run without its record"
        found[trial] += 1
    return dict(found)


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:") or "Traceback" in line]


def test_a_store_fault_is_found_in_an_errors_chain_and_every_cause_is_one_line():
    """:func:`harness.records.store_fault` finds the fault behind the error a sweep ends with
    (a lost lease caused by it, MLflow's wrapper around the driver's error) and
    :func:`harness.records.store_fault_line` says every cause in one line naming the store."""
    from harness.records import STORE_WRITE_CAUSES, StoreWriteError, store_fault, store_fault_line

    def chained(outer: BaseException, inner: BaseException) -> BaseException:
        outer.__cause__ = inner
        return outer

    assert store_fault(chained(RuntimeError("lease lost"), StoreWriteError("m", "full", "s", "disk I/O"))) == \
        ("full", "disk I/O")
    assert store_fault(OSError(errno.ENOSPC, "No space left on device", "/x/model_state.pt")) == \
        ("full", "No space left on device: /x/model_state.pt")
    assert store_fault(chained(RuntimeError("wrapped"), sqlite3.OperationalError("database is locked"))) == \
        ("locked", "database is locked")
    assert store_fault(RuntimeError("API request to http://h:5000/api/2.0/mlflow/runs/create failed with exception "
                                    "HTTPConnectionPool(host='h', port=5000): Max retries exceeded"))[0] == "unreachable"
    assert store_fault(OSError(errno.EROFS, "Read-only file system")) is None  # harness.shell's own line
    assert store_fault(ValueError("a bad value")) is None
    for cause in STORE_WRITE_CAUSES:
        line = store_fault_line("sqlite:////data/mlflow.db", cause, "what the\ndatabase said")
        assert "\n" not in line and line.startswith("tracking store sqlite:////data/mlflow.db: ")
        assert "(what the database said)" in line and "runs every trial not recorded" in line


STORE_MESSAGES = [  # what a driver says → its cause (None: no fault of the store)
    ("database or disk is full", "full"),
    ('could not extend file "base/16384/2619": No space left on device', "full"),
    ("Disk quota exceeded", "full"),
    ("database is locked", "locked"),
    ("canceling statement due to lock timeout", "locked"),
    ('could not obtain lock on row in relation "runs"', "locked"),
    ("deadlock detected", "locked"),
    ('connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused', "unreachable"),
    ("server closed the connection unexpectedly", "unreachable"),
    ("terminating connection due to administrator command", "unreachable"),
    ("no such table: runs", None),
    ("the batch was successfully prepared", None)]


@pytest.mark.parametrize("message, cause", STORE_MESSAGES)
def test_the_batched_writer_and_the_sweeps_line_read_a_store_error_with_one_table(message, cause):
    """:func:`harness.bulk.classify` (the cause of a batched write's error) and
    :func:`harness.records.store_fault` (the cause a sweep's one line names) read a driver's
    message with one word table (:data:`harness.records.FAULT_WORDS`) and agree. Before, each
    had its own: the sweep's line did not know PostgreSQL's lock timeout, a deadlock or a
    dropped connection, and the writer took any message with "full" in it for a full disk."""
    import sqlalchemy as sa

    from harness.bulk import classify
    from harness.records import store_fault

    err = sa.exc.OperationalError("INSERT INTO runs ...", {}, sqlite3.OperationalError(message))
    assert classify(err) == (cause or "other")
    assert store_fault(err) == (None if cause is None else (cause, message))
    conflict = sa.exc.IntegrityError("INSERT INTO runs ...", {}, sqlite3.IntegrityError("UNIQUE constraint failed"))
    assert classify(conflict) == "conflict" and store_fault(conflict) is None


def _full_in_transaction(monkeypatch, after: int) -> None:
    """Make the batched writer's transactions of trial records fail as SQLite does on a full
    disk (the ``OperationalError`` raised inside the transaction, which then rolls back) once
    ``after`` of them have committed."""
    import sqlalchemy as sa

    from harness import bulk

    committed = []
    real = bulk.BulkStore.record

    def record(self, records, parents):
        finals = [r for r in records if r.status is not None]
        if not finals or len(committed) < after:
            committed.extend(finals[:1])
            return real(self, records, parents)
        with self.transaction(parents, f"recording {len(records)} trials") as conn:
            conn.execute(bulk.RUNS.update().where(bulk.RUNS.c.run_uuid.in_([r.run_id for r in finals]))
                         .values(status="FINISHED"))  # rolled back with the failure below
            raise sa.exc.OperationalError("INSERT INTO metrics ...", {},
                                          sqlite3.OperationalError("database or disk is full"))

    monkeypatch.setattr(bulk.BulkStore, "record", record)


def _full_artifact(monkeypatch, name: str, after: int) -> None:
    """Make writing a run's artifact ``name`` fail with ENOSPC, as a full disk does, once
    ``after`` of them were written."""
    from harness import artifacts

    written = []
    real = artifacts.Artifacts.put

    def put(self, run_id, artifact, write, artifact_uri=None):
        if artifact == name and sum(written) >= after:
            raise OSError(errno.ENOSPC, "No space left on device", f"mlartifacts/{run_id}/{artifact}")
        written.append(artifact == name)
        return real(self, run_id, artifact, write, artifact_uri)

    monkeypatch.setattr(artifacts.Artifacts, "put", put)


@pytest.mark.parametrize("where", ["transaction", "model_state.pt", "config.yaml"])
def test_a_full_disk_is_one_line_exit_1_and_the_rerun_runs_only_the_trials_not_recorded(tmp_path, invoke,
                                                                                        monkeypatch, where):
    """The disk fills while the sweep records: inside the record's transaction (SQLite's
    ``database or disk is full``), writing a trial's ``model_state.pt`` with its record, or
    writing a claimed run's ``config.yaml`` (ENOSPC). One line names the store and says the
    disk is full (exit 1, no traceback); no trial has a FINISHED run without its record; the
    same command, once there is space, runs exactly the trials not recorded, and then every
    trial has one FINISHED run. Before, ENOSPC at a claim ended in a traceback, and a record
    that failed ended in 'N of M MLflow writes to ... failed; first: record trial ...:
    StoreWriteError: ...'."""
    db = tmp_path / "mlflow.db"
    if where == "transaction":
        _full_in_transaction(monkeypatch, after=1)
    else:
        _full_artifact(monkeypatch, where, after=1)
    code, out, err = invoke("harness", _args(), tmp_path)
    lines = _error_lines(err)
    assert code == 1 and len(lines) == 1, err[-3000:]
    assert lines[0].startswith(f"error: tracking store sqlite:///{db}: disk full (") and \
        ("database or disk is full" in lines[0] or "No space left on device" in lines[0]), lines
    assert "same command run again once the disk has space again runs every trial not recorded" in lines[0]
    recorded = _finished_with_metrics(db)
    assert set(recorded.values()) <= {1} and len(recorded) < SEEDS
    assert not any(status == "RUNNING" for _, status in _statuses(db))

    monkeypatch.undo()
    code, out, err = invoke("harness", _args(), tmp_path)
    assert code == 0, err[-3000:]
    assert f"{SEEDS} trials: {len(recorded)} already finished (skipped), {SEEDS - len(recorded)} finished now" in out
    after = _finished_with_metrics(db)
    assert len(after) == SEEDS and set(after.values()) == {1}
    assert not any(status == "RUNNING" for _, status in _statuses(db))


def _lock_at_first_record(monkeypatch, db: Path, hold_s: float) -> list:
    """Another connection takes the store's write lock (``BEGIN IMMEDIATE``, as a ``sqlite3``
    shell or a driver suspended inside its transaction holds it) just before the sweep's first
    trial record is written, and lets go after ``hold_s`` seconds; returns ``[(taken, released)]``
    (monotonic seconds) once it has (:func:`_lock_before`)."""
    from harness import bulk

    return _lock_before(monkeypatch, db, bulk.BulkStore, "record", hold_s,
                        when=lambda self, records, parents: any(r.status is not None for r in records))


@pytest.mark.parametrize("released", [True, False], ids=["released-in-time", "held-past-the-lease"])
def test_a_store_write_locked_by_another_connection_is_waited_for_up_to_the_lease(tmp_path, invoke, monkeypatch,
                                                                                  released):
    """Another connection holds the SQLite store's write lock while the sweep records. The
    driver says once that it waits for that store's write lock; released within the lease, the
    sweep completes (exit 0); held past the lease (``tracking.lease_s=3``), the driver stops
    writing and exits 1 in one line saying the store is write-locked, with no traceback and no
    trial marked FINISHED without its record, and the same command, once the lock is gone and a
    lease has passed, runs exactly the trials not recorded. Before, a write waited SQLite's
    30 s busy timeout in silence and then counted as failed with 'database is locked'."""
    import time

    db = tmp_path / "mlflow.db"
    lease_s = 30 if released else 3
    held = _lock_at_first_record(monkeypatch, db, hold_s=3.0 if released else 8.0)
    code, out, err = invoke("harness", _args(f"tracking.lease_s={lease_s}"), tmp_path)
    lines = _waited_once_then(code, out, err, db, lease_s, released, trials=SEEDS)
    if released:
        assert len(_finished_with_metrics(db)) == SEEDS
        return
    assert code == 1 and len(lines) == 1, err[-3000:]
    assert lines[0].startswith(f"error: tracking store sqlite:///{db}: write-locked by another process for longer "
                               "than tracking.lease_s (database is locked)"), lines
    recorded = _finished_with_metrics(db)
    assert len(recorded) < SEEDS
    while not isinstance(held[0], tuple):  # the other connection lets go (its timer); then a lease passes
        time.sleep(0.1)
    time.sleep(lease_s)
    monkeypatch.undo()
    code, out, err = invoke("harness", _args(f"tracking.lease_s={lease_s}"), tmp_path)
    assert code == 0, err[-3000:]
    assert f"{SEEDS} trials: {len(recorded)} already finished (skipped), {SEEDS - len(recorded)} finished now" in out
    after = _finished_with_metrics(db)
    assert len(after) == SEEDS and set(after.values()) == {1}
    assert not any(status == "RUNNING" for _, status in _statuses(db))


def _server_away_after_first_record(monkeypatch) -> list[bool]:
    """Every MLflow REST call (the driver's, its heartbeat's, an artifact upload) goes to a port
    nobody listens on once the first trial run was closed FINISHED, as when the tracking server
    stops; MLflow's own retries are none (``MLFLOW_HTTP_REQUEST_MAX_RETRIES=0``), so they are spent
    at once. Returns ``[away]``."""
    import socket
    import urllib.parse

    from mlflow.utils import rest_utils

    with socket.socket() as free:  # a port that was free a moment ago: nothing answers there
        free.bind(("127.0.0.1", 0))
        dead = free.getsockname()[1]
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")
    away = [False]
    real = rest_utils._get_http_response_with_retries

    def request(method, url, *args, **kwargs):
        if away[0]:
            url = urllib.parse.urlparse(url)._replace(netloc=f"127.0.0.1:{dead}").geturl()
        response = real(method, url, *args, **kwargs)
        if url.endswith("/runs/update") and "FINISHED" in str(kwargs):
            away[0] = True
        return response

    monkeypatch.setattr(rest_utils, "_get_http_response_with_retries", request)
    return away


def test_a_tracking_server_away_past_the_retries_is_one_line_and_the_resume_completes(tmp_path, invoke, monkeypatch,
                                                                                     shared_mlflow_server):
    """The tracking server stops answering mid-sweep for longer than MLflow's retries: one line
    names the server (its password never shown) and says it does not answer (exit 1, no
    traceback); no trial run is FINISHED without its metrics; once the server is back and a
    lease has passed, the same command runs the trials not recorded and every trial has one
    FINISHED run. Before, MLflow's 'API request ... failed' ended the driver in a traceback."""
    import time
    import uuid

    from mlflow.tracking import MlflowClient

    secret = "S3cr3t-away-62f"
    host = shared_mlflow_server.removeprefix("http://")
    name = f"away-{uuid.uuid4().hex[:8]}"
    args = ["+ablation=smoke", f"ablation.name={name}", "model=softmax", "task.n_train=16",
            f"tracking.uri=http://alice:{secret}@{host}", "tracking=server", "tracking.lease_s=2",
            *[a for a in _args() if not a.startswith("task.n_train")]]
    away = _server_away_after_first_record(monkeypatch)
    code, out, err = invoke("harness", args, tmp_path)
    assert away[0], err[-3000:]
    lines = _error_lines(err)
    assert code == 1 and len(lines) == 1, err[-3000:]
    assert lines[0].startswith(f"error: tracking store http://{host}: not answering (API request to "), lines
    assert "Max retries exceeded" in lines[0] and secret not in err + out

    monkeypatch.undo()  # the server is back
    client = MlflowClient(shared_mlflow_server)

    def finished() -> Counter:
        experiment = client.get_experiment_by_name(name).experiment_id
        runs = [r for r in client.search_runs([experiment], max_results=1000) if "trial_id" in r.data.tags]
        assert all("n_params" in r.data.metrics for r in runs if r.info.status == "FINISHED")
        return Counter(r.data.tags["trial_id"] for r in runs if r.info.status == "FINISHED")

    recorded = finished()
    assert 1 <= len(recorded) < SEEDS and set(recorded.values()) == {1}
    time.sleep(2.5)  # its lease: the runs the stopped driver left RUNNING are then stale
    code, out, err = invoke("harness", args, tmp_path)
    assert code == 0, err[-3000:]
    assert f"{SEEDS} trials: {len(recorded)} already finished (skipped), {SEEDS - len(recorded)} finished now" in out
    after = finished()
    assert len(after) == SEEDS and set(after.values()) == {1}


@pytest.mark.e2e
def test_a_driver_suspended_inside_its_write_transaction_is_waited_for_then_one_line(tmp_path, invoke):
    """Another process stopped (SIGSTOP) inside a write transaction on the store, as a driver
    suspended mid-write holds it: a second driver (a real ``python -m harness``) says once that
    it waits for the store's write lock, gives up after ``tracking.lease_s`` and exits 1 in one
    line, no traceback and no 'database is locked' stack; nothing of its trials is recorded. Once
    the stopped process is gone and a lease has passed, the same command runs the trials not
    recorded. Before, the driver waited in silence and ended in a traceback."""
    import os
    import signal
    import subprocess
    import sys
    import time

    db = tmp_path / "mlflow.db"
    code, _, err = invoke("harness", [*TINY, "seed=0"], tmp_path)  # the store, one trial recorded
    assert code == 0, err[-3000:]
    holder = subprocess.Popen([sys.executable, "-c",
                               "import sqlite3, sys, time\n"
                               "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                               "con.execute('BEGIN IMMEDIATE')\n"
                               "print('locked', flush=True)\n"
                               "time.sleep(600)\n", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        os.kill(holder.pid, signal.SIGSTOP)  # suspended inside its transaction: the lock stays held
        lease_s = 3
        proc = subprocess.run([sys.executable, "-m", "harness", *_args(f"tracking.lease_s={lease_s}")], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()  # its transaction dies with it: the lock is free
        holder.wait()
    waiting = [line for line in proc.stderr.splitlines() if line.startswith("waiting for the write lock")]
    assert waiting == [f"waiting for the write lock of tracking store sqlite:///{db}: another process or "
                       f"connection holds it; giving up after tracking.lease_s={lease_s} s"], proc.stderr[-3000:]
    lines = _error_lines(proc.stderr)
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"error: tracking store sqlite:///{db}: write-locked by another process"), lines
    assert "OperationalError" not in proc.stderr
    assert len(_finished_with_metrics(db)) == 1
    time.sleep(lease_s)
    code, out, err = invoke("harness", _args(f"tracking.lease_s={lease_s}"), tmp_path)
    assert code == 0, err[-3000:]
    assert f"{SEEDS} trials: 1 already finished (skipped), {SEEDS - 1} finished now" in out
    after = _finished_with_metrics(db)
    assert len(after) == SEEDS and set(after.values()) == {1}
    assert not any(status == "RUNNING" for _, status in _statuses(db))


def _lock_before(monkeypatch, db: Path, owner, name: str, hold_s: float, when=lambda *args: True) -> list:
    """Another connection takes the store's write lock (``BEGIN IMMEDIATE``) just before the
    first call of ``owner.name`` for which ``when(*args)`` holds, and lets go after ``hold_s``
    seconds; returns ``[taken]``, then ``[(taken, released)]`` (monotonic seconds) once it has."""
    import threading
    import time

    held: list = []
    real = getattr(owner, name)

    def locked_first(*args, **kwargs):
        if not held and when(*args):
            holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
            holder.execute("BEGIN IMMEDIATE")
            taken = time.monotonic()
            held.append(taken)

            def release() -> None:
                holder.execute("ROLLBACK")
                holder.close()
                held[0] = (taken, time.monotonic())

            threading.Timer(hold_s, release).start()
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, locked_first)
    return held


def _waited_once_then(code: int, out: str, err: str, db: Path, lease_s: float, released: bool,
                      trials: int = 1) -> list[str]:
    """The one waiting line a sweep of ``trials`` trials prints for a locked store, then (the
    lock let go in time) its clean finish; returns the ``error:`` lines."""
    waiting = [line for line in err.splitlines() if line.startswith("waiting for the write lock")]
    assert waiting == [f"waiting for the write lock of tracking store sqlite:///{db}: another process or "
                       f"connection holds it; giving up after tracking.lease_s={lease_s} s"], err[-3000:]
    lines = _error_lines(err)
    if released:
        assert code == 0 and lines == [], err[-3000:]
        assert f"{trials} trials: 0 already finished (skipped), {trials} finished now" in out, out[-3000:]
    return lines


def _write_point(point: str):
    """``(owner, method name, when)`` of a store write of the driver before or after its trials."""
    from analysis import summary
    from harness import leases, tracking

    return {"experiment creation": (tracking.Tracker, "experiment", lambda *a: True),
            "parent run creation": (tracking.Tracker, "start_parent", lambda *a: True),
            "first claim": (leases.Leases, "claim", lambda *a: True),
            "parent run's figures": (tracking.Tracker, "log_metrics", lambda *a: True),
            "parent run's closing": (tracking.Tracker, "end_run", lambda self, run_id, *a: run_id in self.leases.own),
            "summary's writes": (summary, "summarise", lambda *a: True)}[point]


WRITE_POINTS = ["experiment creation", "parent run creation", "first claim", "parent run's figures",
                "parent run's closing", "summary's writes"]


# held past the lease at every write point; released in time where the wait used to be silent or
# the default lease's (the other points' released case is the record batches' test above)
CASES = [*[(point, False) for point in WRITE_POINTS], ("experiment creation", True), ("summary's writes", True)]


@pytest.mark.parametrize("point,released", CASES,
                         ids=[f"{p}-{'released-in-time' if r else 'held-past-the-lease'}" for p, r in CASES])
def test_a_store_write_locked_before_or_after_the_trials_is_waited_for_with_one_message(tmp_path, invoke, monkeypatch,
                                                                                      point, released):
    """Another connection holds the SQLite store's write lock when the driver comes to a write
    outside its trials' records: the experiment's creation, the parent run's creation, the first
    claim, the parent run's figures and closing, the end-of-sweep summary's writes. The driver
    says once which store it waits for, that it waits for the write lock, and up to how long
    (``tracking.lease_s``); released within the lease, the sweep completes (exit 0); held past
    it, the sweep ends in one ``error:`` line saying the store is write-locked (exit 1), with
    no traceback. Before, the experiment's creation waited MLflow's 20 s busy timeout in silence
    and the summary waited the default lease, 120 s, not the sweep's."""
    import time

    db = tmp_path / "mlflow.db"
    lease_s = 20 if released else 2
    owner, name, when = _write_point(point)
    held = _lock_before(monkeypatch, db, owner, name, hold_s=2.0 if released else lease_s + 3.0, when=when)
    summary = "true" if point == "summary's writes" else "false"
    started = time.monotonic()
    code, out, err = invoke("harness", [*TINY, "seed=0", f"tracking.lease_s={lease_s}", f"summary={summary}"], tmp_path)
    took = time.monotonic() - started
    assert held, f"the lock was never taken before {point}: {err[-3000:]}"
    lines = _waited_once_then(code, out, err, db, lease_s, released)
    if released:
        assert _finished_with_metrics(db) == {next(iter(_statuses(db)))[0]: 1}
        return
    assert code == 1 and len(lines) == 1, err[-3000:]
    assert lines[0].startswith(f"error: tracking store sqlite:///{db}: write-locked by another process for longer "
                               "than tracking.lease_s (database is locked)"), lines
    assert took < lease_s + 15, f"gave up after {took:.0f} s, not after the lease of {lease_s} s"
    while not isinstance(held[0], tuple):  # the other connection lets go (its timer)
        time.sleep(0.1)


def _pg_lock_timeout(message: str = "canceling statement due to lock timeout") -> BaseException:
    """The error psycopg raises when a statement waited PostgreSQL's ``lock_timeout`` for a
    row or table lock another connection holds (SQLSTATE 55P03)."""
    psycopg = pytest.importorskip("psycopg")
    return psycopg.errors.LockNotAvailable(message)


def _pg_locked_at(monkeypatch, point: str, hold_s: float) -> list:
    """Make the driver's first write at ``point`` fail as a write on PostgreSQL does while
    another connection holds the row or table it needs (each try gives up after its
    ``lock_timeout``), until ``hold_s`` seconds after that first try: ``batched`` a
    transaction of the batched writer (the first claim's: its lease check ``SELECT ... FOR
    UPDATE`` of the parent run), ``client`` a write through MLflow's client (the parent run's
    creation). Returns the monotonic times of the tries that failed."""
    import time

    import sqlalchemy as sa
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from harness import bulk

    tries: list = []

    def locked() -> bool:
        now = time.monotonic()
        if tries and now - tries[0] >= hold_s:
            return False
        tries.append(now)
        return True

    if point == "batched":
        real = bulk.BulkStore._lease_problem

        def lease_problem(self, conn, parents):
            if parents and locked():
                raise sa.exc.OperationalError("SELECT runs.run_uuid ... FOR UPDATE OF runs", {}, _pg_lock_timeout())
            return real(self, conn, parents)

        monkeypatch.setattr(bulk.BulkStore, "_lease_problem", lease_problem)
    else:
        real_create = MlflowClient.create_run

        def create_run(self, experiment_id, *args, **kwargs):
            if locked():
                raise MlflowException(f"(psycopg.errors.LockNotAvailable) {_pg_lock_timeout()}")
            return real_create(self, experiment_id, *args, **kwargs)

        monkeypatch.setattr(MlflowClient, "create_run", create_run)
    return tries


@pytest.mark.parametrize("released", [True, False], ids=["released-in-time", "held-past-the-lease"])
@pytest.mark.parametrize("point", ["batched", "client"])
def test_a_postgresql_lock_timeout_is_waited_for_up_to_the_lease_with_one_message(tmp_path, invoke, monkeypatch,
                                                                                   point, released):
    """The driver's lock logic for a PostgreSQL store, in-process: its writes fail with
    PostgreSQL's lock timeout (``LockNotAvailable``, what each statement says after
    ``lock_timeout`` while another connection holds a row ``FOR UPDATE`` or the table) in a
    batched transaction (the first claim) or in a write through MLflow's client (the parent
    run's creation). The driver says once that it waits for the store's write lock and up to how
    long; the lock let go within the lease, it tries again and completes (exit 0); held past
    the lease, it ends in one ``error:`` line saying the store is write-locked (exit 1, no
    traceback). Before, the first failed try ended the sweep (a lock timeout was not a lock to
    wait for), and without a ``lock_timeout`` a write waited for ever."""
    db = tmp_path / "mlflow.db"
    lease_s = 20 if released else 2
    tries = _pg_locked_at(monkeypatch, point, hold_s=2.0 if released else lease_s + 3.0)
    code, out, err = invoke("harness", [*TINY, "seed=0", f"tracking.lease_s={lease_s}"], tmp_path)
    assert len(tries) > 1, err[-3000:]
    lines = _waited_once_then(code, out, err, db, lease_s, released)
    if released:
        return
    assert code == 1 and len(lines) == 1, err[-3000:]
    assert lines[0].startswith(f"error: tracking store sqlite:///{db}: write-locked by another process for longer "
                               "than tracking.lease_s (") and "lock timeout" in lines[0], lines
    assert tries[-1] - tries[0] < lease_s + 5
