"""MLflow recording: one experiment per ablation, one parent run per invocation, one child run
per trial. Only the driver process writes, so a SQLite store never sees two writers, and the
experiment and parent run are created once, by the driver, before any trial starts.

A child run is opened (RUNNING) when its trial starts and closed when its outcome arrives:
FINISHED (tag ``diverged``), FAILED (tag and artifact ``error``), or KILLED on an interrupt.

Many drivers may share one store (several researchers, or one sweep launched twice): leases,
stale runs, a lost lease and the bakery claim are :mod:`harness.leases`'s; this module opens and
closes the runs they decide about.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import math
import os
import subprocess
import time
import urllib.parse
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Sequence

import yaml
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME, MLFLOW_RUN_NOTE

from harness.artifacts import Artifacts
from harness.bulk import BulkStore, Record, bulk_capable
from harness.cli import ablation_question
from harness.naming import parent_name, run_name, view_state_tag  # noqa: F401  (run_name: also tracking's)
from harness.config import to_plain
from harness.paths import folder_name
from harness.mlflow_sql import finished_runs
from harness.store import (Store, StoreError, deleted_experiment_error, sqlite_path,
                           sqlite_uri)
from harness.leases import LEASE_S, LOCK_TRY_S, Heartbeat, Leases, LockWait, lease_lost, now_ms, search_all
from harness.records import Outcome, Trial, config_identity
from harness.secrets import mask

_BATCH = {"metrics": 1000, "params": 100, "tags": 100}  # MLflow's log_batch limits
# MLflow 3 opens an experiment on its GenAI pages unless the experiment says it holds training
# runs; the UI reads this tag (values as in MLflow's own experiment kinds).
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
# MLflow prints a "View run … at" link per closed run on a server store: noise in sweep logs.
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
# libyaml's emitter where PyYAML has it (10× the pure-Python one; the same text)
_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
MAX_PARAM = 6000  # MLflow's longest param value (mlflow.utils.validation.MAX_PARAM_VAL_LENGTH)


_DUMPED: dict[tuple[str, str], str] = {}  # (top-level key, repr of its value) → its YAML text
# (top-level key, id of a config group object) → (the object, kept so that its id stays its own;
# its YAML text)
_GROUPS: dict[tuple[str, int], tuple[Any, str]] = {}
_DUMPED_MAX = 4096


def config_yaml(config: Any) -> str:
    """A trial's ``config.yaml`` text: ``yaml.dump(to_plain(config))`` (safe, block style, keys
    in order) of a config object (or of its plain dict), built one top-level key at a time,
    each key's text kept for the next trial whose value has the same ``repr``: a sweep's trials
    share most groups (the ablation, the model, the cluster), and PyYAML's representer is pure
    Python (~1.7 ms of driver CPU per trial's dump on a loaded 2-core box). A block mapping's
    text is its keys' texts one after the other; ``to_plain`` shares no object between keys, so
    no anchor spans two of them. A config object's group (a dataclass) is converted and dumped
    once per object: the trials composed from one base share their unchanged groups' objects
    (:mod:`harness.expansion` copies what a point changes, and a composed config is never
    changed in place), and converting those groups (``to_plain``) was most of a claim's CPU."""
    if not hasattr(config, "__dataclass_fields__"):
        return _dump_keys(config.items())
    parts = []
    for key in config.__dataclass_fields__:
        value = getattr(config, key)
        if not hasattr(value, "__dataclass_fields__"):
            parts.append(_dump_keys([(key, to_plain(value))]))
            continue
        kept = _GROUPS.get((key, id(value)))
        if kept is None or kept[0] is not value:
            if len(_GROUPS) >= _DUMPED_MAX:
                _GROUPS.clear()
            kept = _GROUPS[(key, id(value))] = (value, _dump_keys([(key, to_plain(value))]))
        parts.append(kept[1])
    return "".join(parts) if parts else _dump_keys([])


def _dump_keys(items) -> str:
    """The YAML text of a mapping's ``(key, plain value)`` items, each key's text kept by the
    ``repr`` of its value (:func:`config_yaml`)."""
    parts = []
    for key, value in items:
        memo = (key, repr(value))
        text = _DUMPED.get(memo)
        if text is None:
            if len(_DUMPED) >= _DUMPED_MAX:
                _DUMPED.clear()
            text = _DUMPED[memo] = yaml.dump({key: value}, Dumper=_YAML_DUMPER, sort_keys=False, allow_unicode=True)
        parts.append(text)
    return "".join(parts) if parts else yaml.dump({}, Dumper=_YAML_DUMPER, sort_keys=False, allow_unicode=True)


def _unquoting_parent_dirs() -> None:
    """MLflow creates the parent folder of a SQLite file from the URI text without decoding it,
    which for a path with ``%25`` makes a stray folder; decode first (idempotent)."""
    from mlflow.store.db import utils

    original = getattr(utils, "_make_parent_dirs_if_sqlite", None)
    if original is None or getattr(original, "_harness_unquotes", False):
        return

    def unquoted(db_uri: str) -> None:
        path = sqlite_path(db_uri)
        original(f"sqlite:///{path}" if path is not None else db_uri)

    unquoted._harness_unquotes = True
    utils._make_parent_dirs_if_sqlite = unquoted


@contextlib.contextmanager
def store_lock(store: Store) -> Iterator[None]:
    """Hold an exclusive ``flock`` on a SQLite store's file while MLflow creates or migrates its
    tables, so that drivers started together cannot race (``duplicate column``, ``table
    alembic_version already exists``). Creates the (empty) file if missing. No-op for a server."""
    db = sqlite_path(store.uri)
    if db is None:
        yield
        return
    with open(db, "ab") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_client(store: Store) -> MlflowClient:
    """An ``MlflowClient`` on ``store`` whose tables exist.

    A new SQLite store is created under :func:`store_lock` in a temporary file beside it and
    renamed into place, so a driver killed while MLflow creates the tables never leaves a
    half-made store behind (MLflow's table creation is not one transaction).
    """
    _unquoting_parent_dirs()
    db = sqlite_path(store.uri)
    with store_lock(store):  # MLflow creates / migrates the tables when the client is made
        if db is not None and db.stat().st_size == 0:
            tmp = db.with_name(f".{db.name}.creating-{os.getpid()}")
            tmp.unlink(missing_ok=True)
            # MLflow logs "Creating initial MLflow database tables..." at INFO: not news to a
            # researcher whose first sweep makes its store
            quiet = logging.getLogger("mlflow.store.db.utils")
            level = quiet.level
            quiet.setLevel(max(level, logging.WARNING))  # setLevel: it clears logging's level cache
            try:
                MlflowClient(tracking_uri=sqlite_uri(tmp)).search_experiments(max_results=1)
            finally:
                quiet.setLevel(level)
            os.replace(tmp, db)
        client = MlflowClient(tracking_uri=client_uri(store))
        client.search_experiments(max_results=1)
    return client


def client_uri(store: Store) -> str:
    """The URI MLflow's client opens ``store`` by: its own, except a PostgreSQL store's, whose
    connections wait at most :data:`harness.leases.LOCK_TRY_S` for another connection's lock
    (``lock_timeout``, :func:`harness.bulk.pg_lock_timeout`: PostgreSQL's default waits for
    ever), so that the driver's writes wait in tries and say so (:class:`LockWait`)."""
    if sqlite_path(store.uri) is not None or not bulk_capable(store.uri):
        return store.uri
    parts = urllib.parse.urlsplit(store.uri)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-c lock_timeout={int(LOCK_TRY_S * 1000)}"))
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query, quote_via=urllib.parse.quote)))


def describe(ablation: str) -> str:
    """The description MLflow shows for an ablation's experiment and parent runs: its question
    (``conf/ablation/NAME.yaml``), or what a run without an ablation is."""
    question = ablation_question(ablation)
    if question:
        return f"**{ablation}**: {question}"
    return f"**{ablation}**: trials run without an ablation (`python -m harness KEY=VALUE ...`)"


def git_commit() -> str:
    """The harness checkout's commit (with ``+dirty`` if it has local changes), or ``unknown``."""
    repo = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}} → {"a.b": 1}``."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def batches(metrics: Sequence[Metric] = (), params: Sequence[Param] = (),
            tags: Sequence[RunTag] = ()) -> list[tuple[list, list, list]]:
    """``(metrics, params, tags)`` in as few ``log_batch`` calls as MLflow's limits allow (100
    params, 100 tags, 1,000 metrics and 1,000 values in all per call); at least one, which may
    be empty."""
    metrics, params, tags = list(metrics), list(params), list(tags)
    out = []
    while True:
        p, t = params[:_BATCH["params"]], tags[:_BATCH["tags"]]
        params, tags = params[len(p):], tags[len(t):]
        room = _BATCH["metrics"] - len(p) - len(t)
        m, metrics = metrics[:room], metrics[room:]
        out.append((m, p, t))
        if not (metrics or params or tags):
            return out


def param_value(value: Any) -> str:
    """A param's text; one longer than MLflow's limit (6,000 characters) is replaced by a note
    with its length and SHA-256, so two different values never look alike (the full value is in
    the run's ``config.yaml``)."""
    text = str(value)
    if len(text) <= MAX_PARAM:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"<{len(text)} characters, too long for an MLflow param; sha256 {digest}; full value in config.yaml>"


def _point_metrics(points: list[dict[str, float]]) -> list[Metric]:
    """Live learning-curve points as MLflow metrics (:func:`_point_rows`)."""
    return [Metric(*row) for row in _point_rows(points)]


def _point_rows(points: list[dict[str, float]]) -> list[tuple[str, float, int, int]]:
    """Live learning-curve points as ``(key, value, timestamp ms, step)`` rows, each at the time
    it was measured (now if the point has none), non-finite values left out (the final record
    names them); the batched writer's rows, built without an MLflow ``Metric`` per value."""
    rows = []
    for point in points:
        step = int(point["step"])
        ts = int(point.get("time_ms", datetime.now().timestamp() * 1000))  # when it was measured
        for key, value in point.items():
            if key != "step" and key != "time_ms" and math.isfinite(value := float(value)):
                rows.append((key, value, ts, step))
    return rows


def split_finite(metrics: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """``(finite, non-finite)`` metrics: MLflow stores inf as 1.797e308, which tables would
    average, so non-finite values are kept out of the metrics and named in a tag instead."""
    finite = {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}
    return finite, {k: float(v) for k, v in metrics.items() if k not in finite}


class Tracker:
    """Records an invocation and its trials in MLflow through one ``MlflowClient``.

    ``lease_s``: how long this driver's runs count as alive after its last heartbeat.
    :attr:`leases` (:class:`harness.leases.Leases`, on the same client) holds this driver's
    lease on its parent runs, finds stale runs and claims trials.
    """

    def __init__(self, store: Store, lease_s: float = LEASE_S) -> None:
        self.store = store
        self.lease_s = lease_s
        self.leases = Leases(open_client(store), lease_s, sqlite_path(store.uri))
        if bulk_capable(store.uri):  # another connection's lock on a database: wait, up to the lease
            self.leases.lock_wait = LockWait(mask(store.uri), lease_s, self.leases.give_up, sqlite_path(store.uri))
        # a database store (SQLite, PostgreSQL) takes claims and records in batched transactions
        self.bulk = (BulkStore(store.uri, self.leases.lose, self.leases.lock_wait)
                     if bulk_capable(store.uri) else None)
        self.leases.bulk = self.bulk
        self.client = self.leases.client  # every write confirms this driver's lease first
        self.commit = git_commit()
        self._live: dict[str, set[int]] = {}  # run id → learning-curve steps logged as measured
        self._parent: dict[str, str] = {}  # trial run id → its parent, for the runs this tracker claimed
        self._unlogged: dict[str, Trial] = {}  # claimed run id → its trial, whose params ride on its next write
        self.artifacts = Artifacts(store.uri)  # where each claimed run's files go
        self.cli: list[str] = []  # the command line's overrides (start_parent)

    def experiment(self, name: str) -> str:
        """The id of experiment ``name``, created (with artifacts beside the store) if missing.

        Raises:
            StoreError: if the experiment exists but is deleted.
        """
        found = self.client.get_experiment_by_name(name)
        if found is None:
            location = f"{self.store.artifact_root}/{folder_name(name)}" if self.store.artifact_root else None
            try:
                return self.client.create_experiment(name, artifact_location=location, tags={
                    EXPERIMENT_KIND[0]: EXPERIMENT_KIND[1], MLFLOW_RUN_NOTE: describe(name),
                    **dict([view_state_tag()])})
            except MlflowException:  # another driver created it first
                found = self.client.get_experiment_by_name(name)
                if found is None:
                    raise
        if found.lifecycle_stage == "deleted":
            raise StoreError(deleted_experiment_error(name, found.experiment_id, self.store.uri))
        return found.experiment_id

    def finished_trials(self, experiment_id: str,
                        trial_ids: Collection[str] | None = None) -> dict[str, list[str]]:
        """``trial_id → run ids`` of the experiment's FINISHED trial runs (of ``trial_ids`` only,
        if given): on a SQLite store one query of the ``trial_id`` tags
        (:func:`harness.mlflow_sql.finished_runs`; with ``trial_ids`` flat with the store's size); on
        a server, MLflow's search (it returns whole runs)."""
        db = sqlite_path(self.store.uri)
        if db is not None:
            return finished_runs(db, experiment_id, trial_ids)
        wanted = None if trial_ids is None else set(trial_ids)
        found: dict[str, list[str]] = {}
        for run in search_all(self.client, experiment_id, "attributes.status = 'FINISHED'"):
            if "trial_id" in run.data.tags and (wanted is None or run.data.tags["trial_id"] in wanted):
                found.setdefault(run.data.tags["trial_id"], []).append(run.info.run_id)
        return found

    def close_stale(self, experiment_id: str) -> int:
        """:meth:`harness.leases.Leases.close_stale`: close the RUNNING runs whose driver's lease
        expired as KILLED; returns how many."""
        return self.leases.close_stale(experiment_id)

    def held_elsewhere(self, experiment_id: str, parent_id: str, trial_ids: Collection[str]) -> set[str]:
        """:meth:`harness.leases.Leases.held_elsewhere`: the ``trial_ids`` a live rival driver
        runs or has claimed."""
        return self.leases.held_elsewhere(experiment_id, trial_ids, parent_id)

    def start_parent(self, experiment_id: str, ablation: str, n_trials: int, n_skipped: int,
                     overrides: list[str]) -> str:
        """Open the invocation's parent run, named after the ablation and its start time
        (``06-01 14:03:07 smoke``, :func:`harness.naming.parent_name`), described by the ablation's question and holding this
        driver's lease; returns its id."""
        started = datetime.now().astimezone()
        self.cli = overrides  # the children's names show the overrides off the grid
        run = self.client.create_run(
            experiment_id, run_name=parent_name(ablation, started),
            start_time=int(started.timestamp() * 1000),
            tags={"ablation": ablation, "git_commit": self.commit, "role": "sweep",
                  MLFLOW_RUN_NOTE: describe(ablation),
                  "lease_s": str(self.lease_s), "heartbeat_ms": str(now_ms())})
        self.client.log_batch(run.info.run_id, params=[
            Param("n_trials", str(n_trials)), Param("n_skipped_finished", str(n_skipped)),
            Param("overrides", param_value(" ".join(overrides)))])
        self.leases.hold(run.info.run_id)
        return run.info.run_id

    def heartbeat(self, parent_id: str) -> Heartbeat:
        """The heartbeat that keeps ``parent_id``'s lease (use as a context manager); it notes a
        lost lease in :attr:`leases`."""
        return self.leases.heartbeat(client_uri(self.store), parent_id)

    def end_run(self, run_id: str, status: str = "FINISHED", patience_s: float = 60.0) -> None:
        """Close a still RUNNING run with ``status`` (FINISHED, FAILED or KILLED); a run already
        closed (by this driver, or by another invocation that found this one's lease expired)
        is left as it is: never reopened or re-closed. On a busy SQLite store ("database is
        locked": other drivers, a reader) it tries again for ``patience_s`` seconds, so an
        interrupted sweep still closes its runs."""
        deadline = time.monotonic() + patience_s
        while True:
            try:
                self.leases.guard(run_id)  # a lost lease: not even its own runs are closed
                if self.client.get_run(run_id).info.status == "RUNNING":
                    pending = self._pending_params(run_id)  # stopped before its first write: say what it was
                    for _, params, _ in batches(params=pending) if pending else ():
                        self.client.log_batch(run_id, params=params)
                    self.client.set_terminated(run_id, status)
                self._forget(run_id)
                return
            except Exception as err:  # noqa: BLE001 - sqlalchemy's OperationalError, MLflow's wrapper
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(1.0)

    def _trial_tags(self, parent_id: str, ablation: str, trial: Trial) -> dict[str, str]:
        tags = {MLFLOW_PARENT_RUN_ID: parent_id, MLFLOW_RUN_NAME: run_name(trial, self.cli),
                "trial_id": trial.trial_id, "ablation": ablation, "variant": trial.variant,
                "task": trial.task, "git_commit": self.commit, "overrides": " ".join(trial.overrides)}
        if trial.extends:  # an lr past a grid edge (paper.md §13): the analysis reads it with its arm
            tags["extends"] = trial.extends
        if trial.phase:  # the round that started it: the report reads it instead of guessing
            tags["phase"] = trial.phase
        if trial.design:  # the staged design its block ran in: the report reads its looks
            tags["design"] = trial.design
        return tags

    def claim_batch(self, experiment_id: str, parent_id: str, ablation: str, trials: Sequence[Trial],
                    ignore: Collection[str] = frozenset(), since_ms: int = 0,
                    stop: Callable[[], bool] = lambda: False) -> list[str | None]:
        """Open a RUNNING child run for each of ``trials`` that no other live driver runs and
        none has finished, in one bakery round (:meth:`harness.leases.Leases.claim`); each won
        run gets its params and ``config.yaml``. Returns one run id per trial, None where the
        trial is another driver's (its claim run is then closed and deleted).

        ``ignore``: FINISHED runs that do not count (the old runs of a forced rerun).
        ``since_ms``: the sweep's plan time less the lease (rivals that finished before it
        were skipped by the plan); 0 reads every finished rival.

        Raises:
            harness.leases.LeaseLost: ``parent_id`` is no longer this driver's RUNNING parent
                (another invocation closed it): nothing is claimed.
        """
        infos = self.leases.claim(experiment_id, parent_id, [self._trial_tags(parent_id, ablation, t) for t in trials],
                                  ignore, since_ms, stop=stop)
        won: list[str | None] = []
        try:
            for trial, info in zip(trials, infos):
                if info is not None:
                    self._parent[info.run_id] = parent_id
                    self.artifacts.known(info.run_id, info.artifact_uri)
                    self._log_config(info.run_id, trial)
                won.append(None if info is None else info.run_id)
        except BaseException:  # an interrupt or a failed write mid-batch: close what it claimed
            for info in infos:
                if info is not None:
                    with contextlib.suppress(Exception):
                        self.end_run(info.run_id, "KILLED")
            raise
        return won

    def log_points(self, run_id: str, points: list[dict[str, float]]) -> None:
        """Log learning-curve points of a running trial in one batch, each at the time it was
        measured, so that MLflow shows a running sweep's curves; :meth:`finish_trial` then logs
        only the points that did not arrive this way. Non-finite values are left out (the final
        record names them)."""
        if self.bulk is not None:
            self.log_points_batch([(run_id, points)])
            return
        for m, p, _ in batches(_point_metrics(points), self._pending_params(run_id)):
            if m or p:
                self.client.log_batch(run_id, metrics=m, params=p)
        self._unlogged.pop(run_id, None)  # after the writes: a failed one leaves them for the record
        self._live.setdefault(run_id, set()).update(int(p["step"]) for p in points)

    def log_points_batch(self, items: Sequence[tuple[str, list[dict[str, float]]]]) -> None:
        """:meth:`log_points` for several running trials ``(run id, points)`` in one transaction
        of the batched writer (:attr:`bulk`; the lease checked inside it); a run no longer
        RUNNING gets nothing.

        Raises:
            harness.leases.LeaseLost, harness.records.StoreWriteError: nothing written.
        """
        if self.leases.lost is not None:
            raise lease_lost(self.leases.lost)
        parents = set()
        for run_id, _ in items:  # no read of each parent first (guard): the transaction checks their lease
            parent_id = self._parent_of(run_id)
            if parent_id in self.leases.own:
                parents.add(parent_id)
        records = [Record(run_id, None, _point_rows(points), [(p.key, p.value) for p in self._pending_params(run_id)], [])
                   for run_id, points in items]
        for (run_id, points), ok in zip(items, self.bulk.record(records, parents)):
            if ok:
                self._unlogged.pop(run_id, None)
                self._live.setdefault(run_id, set()).update(int(p["step"]) for p in points)

    @staticmethod
    def _params(trial: Trial) -> list[Param]:
        identity = trial.identity or config_identity(trial.config)  # composed once (Trial.identity)
        return [Param(k, param_value(v)) for k, v in flatten(identity).items()]

    def _pending_params(self, run_id: str) -> list[Param]:
        """The params of a claimed run not yet logged (none once they are: the writer that logs
        them forgets the run's entry after its writes, :meth:`_forget` at the latest)."""
        trial = self._unlogged.get(run_id)
        return [] if trial is None else self._params(trial)

    def _log_config(self, run_id: str, trial: Trial) -> None:
        """The run's ``config.yaml``, written at its claim; its params ride on the run's next
        write (its first learning-curve points, its record, or its closing if it stops first),
        so that a trial's record is three MLflow calls: its run created, one ``log_batch``, its
        closing. Only a run another invocation closes as stale (its driver died) before that
        write has no params: its tags (``trial_id``, ``variant``, ``task``, ``overrides``) and
        ``config.yaml`` say what the trial is."""
        self._unlogged[run_id] = trial
        text = config_yaml(trial.config)
        self._put(run_id, "config.yaml", lambda path: path.write_text(text))

    def _put(self, run_id: str, name: str, write) -> None:
        """Write an artifact of a trial run (:class:`harness.artifacts.Artifacts`; a run this
        tracker did not open is read once for its location); not once the lease is lost."""
        self.leases.guard(run_id)
        uri = None if run_id in self.artifacts else self.client.get_run(run_id).info.artifact_uri
        self.artifacts.put(run_id, name, write, uri)

    def _parent_of(self, run_id: str) -> str | None:
        """The parent run of a trial run: known from its claim, else read from the run."""
        if run_id in self._parent:
            return self._parent[run_id]
        return self.client.get_run(run_id).data.tags.get(MLFLOW_PARENT_RUN_ID)

    def finish_trial(self, run_id: str, outcome: Outcome, supersede: list[str] = ()) -> bool:
        """Record an outcome in its run and close it FINISHED or FAILED (its end time: now, when
        it became FINISHED in the store, which the bakery's rivals read); returns False (and
        records nothing) if this driver lost its lease: its parent is no longer this driver's
        RUNNING parent (:meth:`harness.leases.Leases.holds`, read at most once a second), so
        that its trial never gets two FINISHED runs (another invocation that finds the lease
        expired closes the parent with the runs).

        ``supersede``: older FINISHED runs of the same trial (a forced rerun); they are deleted
        (MLflow's soft delete, recoverable) once this one is FINISHED, so that no trial ever has
        two FINISHED runs.
        """
        if self.bulk is not None:
            return self.finish_trials([(run_id, outcome, supersede)])[0]
        parent_id = self._parent_of(run_id)
        if parent_id is not None and not self.leases.holds(parent_id):
            return False
        result = outcome.result
        node = RunTag("node", outcome.node)
        if result is None:
            for _, params, tags in batches(params=self._pending_params(run_id),
                                           tags=[node, RunTag("error", outcome.error[-5000:])]):
                self.client.log_batch(run_id, params=params, tags=tags)
            self._put(run_id, "error.txt", lambda path: path.write_text(outcome.error))
            self.client.set_terminated(run_id, "FAILED")
        else:
            self._log_result(run_id, result, node)
            self.client.set_terminated(run_id, "FINISHED", end_time=now_ms())
            for old in supersede:  # another invocation's runs: the lease is this run's parent's
                self.leases.guard(None, parent_id)
                self.client.delete_run(old)
        self._forget(run_id)
        return True

    def finish_trials(self, items: Sequence[tuple[str, Outcome, Sequence[str]]]) -> list[bool]:
        """:meth:`finish_trial` for a batch of ``(run id, outcome, supersede)``; on a store
        written in batches (:attr:`bulk`; through a server, one trial after the other): the artifacts first, then every record in one
        transaction that checks the lease inside it (:meth:`harness.bulk.BulkStore.record`), so
        the batch is recorded whole or not at all; each run's end time is that transaction's.
        Returns one answer per item: False where the lease is lost or the run was closed
        meanwhile (nothing recorded there).

        Raises:
            harness.leases.LeaseLost: the lease was found lost inside the transaction.
            harness.records.StoreWriteError: the store refused the batch (nothing recorded).
        """
        if self.bulk is None:  # a server: MLflow's REST API writes one run per call
            return [self.finish_trial(run_id, outcome, list(supersede)) for run_id, outcome, supersede in items]
        answers = [False] * len(items)
        todo = []  # (index, run id, parent id, outcome, supersede) of the runs still held
        for i, (run_id, outcome, supersede) in enumerate(items):
            parent_id = self._parent_of(run_id)
            if parent_id is None or self.leases.holds(parent_id):
                todo.append((i, run_id, parent_id, outcome, supersede))
        if not todo:
            return answers
        records = [self._record(run_id, outcome) for _, run_id, _, outcome, _ in todo]
        parents = {p for _, _, p, _, _ in todo if p in self.leases.own}
        written = self.bulk.record(records, parents)
        for (i, run_id, parent_id, outcome, supersede), ok in zip(todo, written):
            answers[i] = ok
            if ok and outcome.result is not None:
                for old in supersede:  # another invocation's runs: the lease is this run's parent's
                    self.leases.guard(None, parent_id)
                    self.client.delete_run(old)
            self._forget(run_id)
        return answers

    def _record(self, run_id: str, outcome: Outcome) -> Record:
        """A trial's record as rows (:class:`harness.bulk.Record`), its artifact written: the
        same params, metrics and tags as :meth:`finish_trial`'s ``log_batch`` calls."""
        node = RunTag("node", outcome.node)
        params = [(p.key, p.value) for p in self._pending_params(run_id)]
        if outcome.result is None:
            self._put(run_id, "error.txt", lambda path: path.write_text(outcome.error))
            return Record(run_id, "FAILED", [], params, [(node.key, node.value), ("error", outcome.error[-5000:])])
        metrics, tags = self._result_rows(run_id, outcome.result, node)
        self._put(run_id, "model_state.pt", lambda path: path.write_bytes(outcome.result.state_bytes()))
        return Record(run_id, "FINISHED", metrics, params, tags)

    def drop(self, run_id: str, why: str) -> None:
        """Close and delete a claimed run that never started (:meth:`harness.leases.Leases.drop`)
        and forget it: a sweep that stops drops the runs it claimed ahead."""
        try:
            self.leases.drop(run_id, why)
        finally:
            self._forget(run_id)

    def _forget(self, run_id: str) -> None:
        self._parent.pop(run_id, None)
        self._unlogged.pop(run_id, None)
        self.artifacts.forget(run_id)
        self._live.pop(run_id, None)

    def _log_result(self, run_id: str, result, node: RunTag) -> None:
        """Metrics, curve and tags in as few ``log_batch`` calls as MLflow's limits allow (one for
        a trial of up to 1,000 values: each call costs a SQLite store about 8 ms of CPU, more
        than its rows), then the ``model_state.pt`` artifact."""
        rows, tag_rows = self._result_rows(run_id, result, node)
        metrics, tags = [Metric(*row) for row in rows], [RunTag(*tag) for tag in tag_rows]
        for m, p, t in batches(metrics, self._pending_params(run_id), tags):
            self.client.log_batch(run_id, metrics=m, params=p, tags=t)
        self._put(run_id, "model_state.pt", lambda path: path.write_bytes(result.state_bytes()))

    def _result_rows(self, run_id: str, result, node: RunTag) -> tuple[list[tuple[str, float, int, int]],
                                                                        list[tuple[str, str]]]:
        """A result's metrics as ``(key, value, timestamp ms, step)`` rows (its summaries at the
        last step, its curve's points not logged live, each at the time it was measured) and
        its tags as ``(key, value)`` (non-finite values named in one); plain tuples, the
        batched writer's rows (an MLflow ``Metric`` per value cost a tenth of a record's CPU)."""
        ts = result.end_ms
        finite, nonfinite = split_finite(result.metrics)
        last = int(result.curve[-1]["step"]) if result.curve else 0  # summaries at the last step,
        metrics = [(k, v, ts, last) for k, v in finite.items()]  # not a step-0 point on a curve
        metrics.append(("n_params", float(result.n_params), ts, last))
        live = self._live.get(run_id, ())
        for point in result.curve:  # each point carries the time it was measured
            step = int(point["step"])
            when, logged = int(point["time_ms"]) if "time_ms" in point else ts, step in live
            for k, v in point.items():
                if k == "step" or k == "time_ms":
                    continue
                if not math.isfinite(v := float(v)):  # named in a tag, live or not
                    nonfinite[f"{k}@{step}"] = v
                elif not logged:
                    metrics.append((k, v, when, step))
        tags = [(node.key, node.value), ("diverged", str(result.diverged).lower()),
                ("device", result.info.get("device", "")), ("processor", result.info.get("processor", "")),
                # its pack (size and members, comma-separated trial ids) and whether it was
                # compiled: what a packed trial's result reproduces given (harness/pack.py)
                ("pack_size", str(result.info.get("pack_size", 1))),
                ("pack_members", str(result.info.get("pack_members", ""))[:8000]),
                ("compiled", str(result.info.get("compiled", False)).lower())]
        if nonfinite:  # name=value pairs, e.g. test/rel_mse=inf,train/loss@40=nan
            tags.append(("nonfinite", ",".join(f"{k}={v}" for k, v in nonfinite.items())[:5000]))
        return metrics, tags

    def log_metrics(self, run_id: str, metrics: dict[str, float]) -> None:
        """Log ``metrics`` (name → value) in a run at step 0, now (a sweep's own figures)."""
        ts = now_ms()
        self.client.log_batch(run_id, metrics=[Metric(k, float(v), ts, 0) for k, v in metrics.items()])

    def log_artifact(self, run_id: str, path: Path) -> None:
        """Attach a file (a plot, a table) to a run."""
        self.client.log_artifact(run_id, str(path))
