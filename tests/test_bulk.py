"""The batched writer (:mod:`harness.bulk`, issue 61): a store written in batches reads, through
MLflow's client and search, exactly as one written through MLflow's client API; its schema
revision is checked; the lease is checked inside each transaction; a failure is typed and
commits nothing.

The field-by-field comparison writes the same trials both ways into one store (two experiments):
a finished trial with a curve partly logged live, one with non-finite values, a failed one, one
with a ``phase`` tag; and compares every run field: params, every metric's full history (value,
step, timestamp), latest metrics, tags (the parent, run name, ticket and the record's tags),
status, lifecycle, user, run name, artifact files, and ``mlflow.search_runs``' frame.
"""

from __future__ import annotations

import dataclasses
import math
import time

import mlflow
import pytest
import sqlalchemy as sa
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from harness.bulk import SCHEMA_REVISION, BulkStore, Record
from harness.config import TrackingConfig, TrackingKind
from harness.expansion import compose_trial
from harness.leases import LeaseLost
from harness.records import Outcome, SchemaMismatch, StoreWriteError
from harness.store import resolve_store
from harness.tracking import Tracker
from harness.trial import run_trial

FAST = ["train.max_steps=20", "train.eval_every=5", "task.n_train=32", "task.n_val=32", "task.n_test=32"]
# tags whose value names a run of its own experiment (compared for what they point to) or a time
PER_RUN = {MLFLOW_PARENT_RUN_ID, "ticket"}


def _outcomes(trials, result):
    """Four outcomes of one real result: plain, non-finite metrics (test and curve; its curve
    newest first), failed, and plain again (the ``phase`` trial)."""
    curve = [{**p, "train/loss": math.nan} if i == 1 else p for i, p in enumerate(result.curve)]
    # its curve given newest first: a run's latest metric is MLflow's largest (step, time, value),
    # not the point written last
    bad = dataclasses.replace(result, metrics={**result.metrics, "test/rel_mse": math.inf}, curve=curve[::-1])
    return [Outcome(trials[0], result, None, "node-a"), Outcome(trials[1], bad, None, "node-b"),
            Outcome(trials[2], None, "Traceback: the test's error", "node-c"),
            Outcome(trials[3], result, None, "node-d")]


def _write(tracker: Tracker, name: str, trials, outcomes) -> tuple[str, list[str], dict]:
    """Claim ``trials`` in one round, log trial 0's first two curve points live, record every
    outcome (batched where the tracker is); returns the experiment, the run ids, and the claim's
    and records' wall-clock windows (ms)."""
    experiment = tracker.experiment(name)
    parent = tracker.start_parent(experiment, "unit", len(trials), 0, FAST)
    before = int(time.time() * 1000)
    run_ids = tracker.claim_batch(experiment, parent, "unit", trials)  # one ablation, two experiments
    claimed = int(time.time() * 1000)
    tracker.log_points(run_ids[0], outcomes[0].result.curve[:2])
    recorded = int(time.time() * 1000)
    if tracker.bulk is not None:
        assert tracker.finish_trials([(r, o, []) for r, o in zip(run_ids, outcomes)]) == [True] * 4
    else:
        assert all(tracker.finish_trial(r, o) for r, o in zip(run_ids, outcomes))
    done = int(time.time() * 1000)
    tracker.end_run(parent)
    return experiment, run_ids, {"claim": (before, claimed), "record": (recorded, done), "parent": parent}


def _run_fields(client: MlflowClient, run_id: str, parent: str) -> dict:
    """Everything a reader sees of a run, the fields that name the run itself left out."""
    run = client.get_run(run_id)
    tags = {k: v for k, v in run.data.tags.items() if k not in PER_RUN}
    assert run.data.tags[MLFLOW_PARENT_RUN_ID] == parent and int(run.data.tags["ticket"]) >= 1
    history = {key: sorted((m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, key))
               for key in run.data.metrics}
    return {"status": run.info.status, "lifecycle": run.info.lifecycle_stage, "user": run.info.user_id,
            "name": run.info.run_name, "artifact_uri_tail": run.info.artifact_uri.endswith(f"/{run_id}/artifacts"),
            "params": run.data.params, "metrics": run.data.metrics, "tags": tags, "history": history,
            "artifacts": sorted(a.path for a in client.list_artifacts(run_id)),
            "end_set": run.info.end_time is not None and run.info.end_time >= run.info.start_time}


def test_a_store_written_in_batches_reads_as_one_written_through_the_client(hydra_conf, db_store):
    """Mutation-checked: a latest metric taken as the last point written (not MLflow's largest
    step, time, value), a record's tags left out, or a claimed run's user left empty fail it."""
    _reads_as_one_written_through_the_client(db_store)


def _reads_as_one_written_through_the_client(db_store) -> None:
    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(4)]
    trials[3] = dataclasses.replace(trials[3], phase="exploratory")
    result = run_trial(trials[0].config)
    outcomes = _outcomes(trials, result)
    store = db_store
    client_path = Tracker(store)
    client_path.bulk = client_path.leases.bulk = None  # MLflow's client API: the reference
    batched = Tracker(store)
    assert batched.bulk is not None
    ref_exp, ref_ids, ref = _write(client_path, "by-client", trials, outcomes)
    new_exp, new_ids, new = _write(batched, "in-batches", trials, outcomes)
    reader = MlflowClient(store.uri)
    for ref_id, new_id in zip(ref_ids, new_ids):
        expected, got = _run_fields(reader, ref_id, ref["parent"]), _run_fields(reader, new_id, new["parent"])
        assert got == expected, {k: (expected[k], got[k]) for k in expected if expected[k] != got[k]}
    assert reader.get_run(new_ids[3]).data.tags["phase"] == "exploratory"
    assert len(reader.get_metric_history(new_ids[0], "val/loss")) == len(result.curve)  # live + recorded
    for run_id in new_ids:  # start: the claim's commit; end: the record's
        info = reader.get_run(run_id).info
        assert new["claim"][0] <= info.start_time <= new["claim"][1]
        assert new["record"][0] <= info.end_time <= new["record"][1]
    mlflow.set_tracking_uri(store.uri)
    frames = [mlflow.search_runs([e], filter_string="tags.trial_id != ''", order_by=["tags.trial_id"])
              .set_index("tags.trial_id") for e in (ref_exp, new_exp)]
    keep = [c for c in frames[0].columns if c.startswith(("metrics.", "params.", "tags.", "status"))
            and c not in {f"tags.{t}" for t in PER_RUN}]
    assert sorted(frames[0].columns) == sorted(frames[1].columns)
    assert frames[1][keep].equals(frames[0][keep])


def test_the_schema_revision_is_mlflows_pinned_head_and_another_is_refused(tmp_path):
    from mlflow.store.db.utils import _get_latest_schema_revision

    assert SCHEMA_REVISION == _get_latest_schema_revision()  # MLflow bumped: review harness.bulk
    store = resolve_store(TrackingConfig(), tmp_path)
    Tracker(store)
    engine = sa.create_engine(store.uri)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = 'abc123'"))
    with pytest.raises(SchemaMismatch, match="abc123.*dc11669786a5") as err:
        BulkStore(store.uri)
    assert err.value.cause == "schema"
    from harness.store import StoreError, check_store  # before any trial: exit 2, naming both

    with pytest.raises(StoreError, match="abc123.*dc11669786a5"):
        check_store(store)


@pytest.fixture
def db_store(tmp_path):
    """A store the driver writes directly, in-process: a SQLite file. The same checks on a
    database of the session's private PostgreSQL (a server process, so e2e) run in one test,
    :func:`test_the_batched_writer_keeps_its_contract_on_postgresql`."""
    return resolve_store(TrackingConfig(), tmp_path)


@pytest.fixture
def pg_store(postgres_database, tmp_path, monkeypatch):
    """A database of the session's private PostgreSQL, written directly (``tracking=postgres``)."""
    monkeypatch.delenv("PGUSER", raising=False)  # resolve_store moves the URI's user there
    return resolve_store(TrackingConfig(kind=TrackingKind.postgres, uri=postgres_database), tmp_path)


def _claimed(store, n=2, lease_s=120.0):
    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(n)]
    tracker = Tracker(store, lease_s=lease_s)
    experiment = tracker.experiment("unit")
    parent = tracker.start_parent(experiment, "unit", n, 0, [])
    return store, tracker, parent, trials, tracker.claim_batch(experiment, parent, "unit", trials)


def _rows(store) -> dict:
    engine = sa.create_engine(store.uri)
    with engine.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT * FROM {t} ORDER BY 1, 2, 3")).all()
                for t in ("runs", "tags", "params", "metrics", "latest_metrics")}


@pytest.mark.parametrize("how", ["closed", "heartbeat"])
def test_a_batch_in_flight_when_its_lease_is_lost_commits_nothing(hydra_conf, db_store, how):
    """The driver's own check passed (its last read of the parent is fresh), then the lease is
    lost before the batch's transaction: another invocation closed the parent, or the parent's
    heartbeat aged past its lease. The transaction reads the parent itself and commits nothing;
    the lease is lost for good. Mutation-checked: without the check inside the transaction both
    cases record the trials."""
    _in_flight_commits_nothing(db_store, how)


def _in_flight_commits_nothing(db_store, how: str) -> None:
    store, tracker, parent, trials, run_ids = _claimed(db_store)
    result = run_trial(trials[0].config)
    assert tracker.leases.holds(parent)  # fresh: the records' own check will not read again
    raw = MlflowClient(store.uri)
    if how == "closed":
        raw.set_tag(parent, "closed_by", "another invocation (lease expired)")
        raw.set_terminated(parent, "KILLED")
    else:
        raw.set_tag(parent, "heartbeat_ms", str(int(time.time() * 1000) - 121_000))
    before = _rows(store)
    with pytest.raises(LeaseLost):
        tracker.finish_trials([(r, Outcome(t, result, None, "n"), []) for r, t in zip(run_ids, trials)])
    assert _rows(store) == before
    assert tracker.leases.lost is not None
    assert [raw.get_run(r).info.status for r in run_ids] == ["RUNNING", "RUNNING"]


def test_the_lease_read_is_the_parents_row_not_mlflows_whole_run(hydra_conf, db_store, monkeypatch):
    """On a store written in batches, the driver's read of its own parent (:meth:`Leases.holds`,
    before each claim, record and artifact) reads the parent's status, lifecycle and
    ``closed_by`` tag in one statement, not MLflow's ``get_run`` (the run with every param,
    metric and input: the largest share of the writer's CPU), and still finds a parent another
    invocation closed. Mutation-checked: the read through ``get_run`` fails it."""
    store, tracker, parent, _, _ = _claimed(db_store)
    reads = []
    real = MlflowClient.get_run
    monkeypatch.setattr(MlflowClient, "get_run", lambda self, run_id: reads.append(run_id) or real(self, run_id))
    tracker.leases._read.clear()  # not fresh: the next check reads
    assert tracker.leases.holds(parent) and not reads
    raw = MlflowClient(store.uri)
    raw.set_tag(parent, "closed_by", "another invocation (lease expired)")
    tracker.leases._read.clear()
    assert not tracker.leases.holds(parent) and not reads
    assert tracker.leases.lost == f"parent run {parent} is RUNNING, closed by another invocation (lease expired)"
    assert BulkStore(store.uri).run_state("0" * 32) == ("absent", "deleted", None)


def test_a_failed_batch_is_typed_and_commits_nothing(hydra_conf, db_store):
    """A row that the store refuses (here: a param already there, as a full disk or a lock
    refuses any row) rolls the whole batch back, and the error says why (``cause``)."""
    _failed_batch_commits_nothing(db_store)


def _failed_batch_commits_nothing(db_store) -> None:
    store, tracker, parent, trials, run_ids = _claimed(db_store)
    result = run_trial(trials[0].config)
    MlflowClient(store.uri).log_param(run_ids[1], "seed", "1")  # the record's params conflict with it
    before = _rows(store)
    with pytest.raises(StoreWriteError) as err:
        tracker.finish_trials([(r, Outcome(t, result, None, "n"), []) for r, t in zip(run_ids, trials)])
    assert err.value.cause == "conflict" and "committed nothing" in str(err.value)
    assert _rows(store) == before




KILLED_DRIVER = r"""
import sys, time
import harness.bulk as bulk
from harness.config import TrackingConfig, TrackingKind
from harness.expansion import compose_trial
from harness.records import Outcome
from harness.store import Store
from harness.tracking import Tracker
from harness.trial import TrialResult

from hydra import initialize_config_dir
from harness.config import register_configs

register_configs()
store = Store(sys.argv[1], sys.argv[2])
with initialize_config_dir(config_dir=sys.argv[3], version_base="1.3"):
    trials = [compose_trial([], [f"seed={s}"]) for s in range(4)]
result = TrialResult({"test/rel_mse": 0.5}, [{"step": 0, "train/loss": 1.0}, {"step": 10, "train/loss": 0.5}],
                     {}, 10, end_ms=int(time.time() * 1000))
tracker = Tracker(store, lease_s=2.0)
experiment = tracker.experiment("killed")
parent = tracker.start_parent(experiment, "killed", 4, 0, [])
runs = tracker.claim_batch(experiment, parent, "killed", trials)
tracker.finish_trials([(r, Outcome(t, result, None, "n"), []) for r, t in zip(runs[:2], trials[:2])])
real = bulk._latest

def stalled(conn, records):  # every row of the batch but its latest metrics and closing is in
    real(conn, records)
    print("inside", flush=True)
    time.sleep(120)

bulk._latest = stalled
tracker.finish_trials([(r, Outcome(t, result, None, "n"), []) for r, t in zip(runs[2:], trials[2:])])
"""


@pytest.mark.e2e  # a driver process SIGKILLed inside a batch is what it tests
def test_a_driver_killed_inside_a_batch_leaves_nothing_of_it_and_its_trials_are_rerun(hydra_conf, db_store):
    """A driver SIGKILLed inside a batch's transaction (its params, tags and metrics inserted,
    not committed) leaves those runs RUNNING without a row of the batch; the next invocation,
    once the lease expired, closes them as stale and reruns exactly the two trials whose batch
    did not commit."""
    _killed_inside_a_batch(db_store, hydra_conf)


@pytest.mark.e2e  # the session's PostgreSQL server and a killed driver are processes
def test_the_batched_writer_keeps_its_contract_on_postgresql(hydra_conf, pg_store, capsys):
    """The checks above on PostgreSQL written directly (``FOR UPDATE`` where SQLite has
    ``BEGIN IMMEDIATE``), in one test as each needs the server: the same store read as one
    written through the client, a batch in flight when its lease is lost, a refused batch, a
    driver killed inside a batch, and a row or table another connection holds locked."""
    _reads_as_one_written_through_the_client(pg_store)
    for how in ("closed", "heartbeat"):
        _in_flight_commits_nothing(pg_store, how)
    _failed_batch_commits_nothing(pg_store)
    _killed_inside_a_batch(pg_store, hydra_conf)
    _a_lock_is_waited_for_up_to_the_lease(pg_store, capsys)


def _a_lock_is_waited_for_up_to_the_lease(store, capsys) -> None:
    """Another connection holds the driver's parent run ``FOR UPDATE`` (let go within the
    lease), or the table of runs (``LOCK TABLE``, held past it), when the driver claims: it says
    once that it waits for the store's write lock, then claims once the lock is let go, or gives
    up at the lease with a fault whose cause is ``locked``. Before, PostgreSQL's default
    ``lock_timeout`` (none) made the claim wait for ever."""
    import threading

    import psycopg

    from harness.records import store_fault

    for lock, lease_s in (("row", 30.0), ("table", 2.0)):
        _, tracker, parent, trials, _ = _claimed(store, 1, lease_s)
        experiment = tracker.experiment("unit")
        holder = psycopg.connect(store.uri.replace("postgresql+psycopg://", "postgresql://", 1))
        holder.execute("SELECT run_uuid FROM runs WHERE run_uuid = %s FOR UPDATE" if lock == "row"
                       else "LOCK TABLE runs IN ACCESS EXCLUSIVE MODE", (parent,) if lock == "row" else None)

        def release(lock=lock, lease_s=lease_s, holder=holder, wait=tracker.leases.lock_wait) -> None:
            """The row: once the driver says it waits (then a try more), at most 20 s; the table: past the lease."""
            until = time.monotonic() + (20.0 if lock == "row" else lease_s + 3.0)
            while time.monotonic() < until and not (lock == "row" and wait.told):
                time.sleep(0.05)
            time.sleep(1.5 if lock == "row" else 0)
            holder.rollback()

        timer = threading.Thread(target=release)
        timer.start()
        capsys.readouterr()
        started = time.monotonic()
        try:
            won, fault = tracker.claim_batch(experiment, parent, "unit", [compose_trial(FAST, ["seed=7"])]), None
        except Exception as err:  # noqa: BLE001 - the fault the sweep's one line names
            won, fault = None, err
        took = time.monotonic() - started
        timer.join()
        holder.close()
        waiting = [line for line in capsys.readouterr().err.splitlines() if line.startswith("waiting for the write")]
        assert len(waiting) == 1 and f"giving up after tracking.lease_s={lease_s:g} s" in waiting[0], (lock, waiting, took, fault)
        if lock == "row":
            assert fault is None and won[0] is not None and took < lease_s, (took, fault)
        else:
            assert won is None and store_fault(fault)[0] == "locked", repr(fault)
            assert lease_s <= took < lease_s + 10, took


def _killed_inside_a_batch(db_store, hydra_conf) -> None:
    import os
    import signal
    import subprocess
    import sys

    from harness.store import file_uri_path

    file_uri_path(db_store.artifact_root).mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen([sys.executable, "-c", KILLED_DRIVER, db_store.uri, db_store.artifact_root,
                              str(hydra_conf)],
                             stdout=subprocess.PIPE, text=True, cwd=hydra_conf.parent)
    try:
        assert child.stdout.readline().strip() == "inside"
        before = _rows(db_store)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    tracker = Tracker(db_store, lease_s=2.0)
    experiment = tracker.experiment("killed")
    finished = tracker.finished_trials(experiment)
    trials = [compose_trial([], [f"seed={s}"]) for s in range(4)]
    assert set(finished) == {t.trial_id for t in trials[:2]}
    raw = MlflowClient(db_store.uri)
    runs = {r.data.tags["trial_id"]: r for r in raw.search_runs([experiment], "tags.trial_id != ''")}
    for trial in trials[2:]:  # claimed, its record never committed: nothing of the batch
        run = runs[trial.trial_id]
        assert run.info.status == "RUNNING" and run.data.metrics == {} and run.data.params == {}
        assert "node" not in run.data.tags
    assert _rows(db_store) == before
    time.sleep(2.5)  # the dead driver's lease expires
    assert tracker.close_stale(experiment) == 3  # its parent and the two runs
    parent = tracker.start_parent(experiment, "killed", 4, 0, [])
    again = tracker.claim_batch(experiment, parent, "killed", trials)
    assert [r is not None for r in again] == [False, False, True, True]


def test_a_latest_metric_is_replaced_only_by_a_larger_point(hydra_conf, db_store):
    """``latest_metrics`` follows MLflow's rule across batches (one upsert per row): a later
    batch's point replaces the stored one only if its ``(step, timestamp, value)`` is larger,
    as ``get_run`` then reads it; a point in a batch of its own run is kept otherwise."""
    store, tracker, parent, _, runs = _claimed(db_store, n=1)
    client = MlflowClient(store.uri)
    for (step, ts, value), expect in [((10, 1000, 1.0), 1.0), ((5, 2000, 2.0), 1.0), ((10, 1000, 3.0), 3.0),
                                      ((10, 999, 9.0), 3.0), ((11, 0, 0.5), 0.5)]:
        tracker.bulk.record([Record(runs[0], None, [("val/loss", value, ts, step)], [], [])], {parent})
        assert client.get_run(runs[0]).data.metrics["val/loss"] == expect
    assert len(client.get_metric_history(runs[0], "val/loss")) == 5
