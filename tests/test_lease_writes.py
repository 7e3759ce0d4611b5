"""A driver that lost its lease writes nothing at all (issue 47, item 3; README, "Many
invocations, one store"): at every write point of a sweep in turn, a rival closes the driver's
parent and running runs as stale (what :meth:`harness.leases.Leases.close_stale` does once the
lease expired) while the driver's clocks jump past its lease (the pause), and from then on no run
of the experiment is created or changed: not its status, times, lifecycle, tags, params or
metrics, nor its artifacts.

Deterministic and in-process: a serial scheduler, one claim per trial, the writer's queued writes
run inline (in call order) and every learning-curve point written at once, so that write ``j`` is
the same call in every repetition. A write point is an MLflow client write or a transaction of
the batched writer (:mod:`harness.bulk`: the claimed runs, a batch of records): ported from the
per-call writes when claims and records became batches (issue 61), with the same comparisons of
the store's state."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import types

from mlflow.tracking import MlflowClient

import harness.leases as leases_module
import harness.loop as loop_module
from harness.bulk import BulkStore
from harness.config import ClusterConfig, SchedulerKind, TrackingConfig
from harness.expansion import compose_trial
from harness.loop import run_sweep
from harness.records import TrackingError
from harness.scheduler import SerialScheduler
from harness.store import resolve_store, sqlite_path
from harness.tracking import Tracker
from harness.writer import TrackingWriter

FAST = ["train.max_steps=4", "train.eval_every=2", "task.n_val=16", "task.n_test=16", "task.n_train=32"]
LONE = ClusterConfig(scheduler=SchedulerKind.serial, pack_size="1")
WRITES = ("create_run", "set_tag", "log_batch", "log_metric", "log_param", "set_terminated",
          "delete_run", "log_artifact", "delete_tag")
# the batched writer's transactions (harness.bulk): the claimed runs, a batch of records
BULK_WRITES = ("create_runs", "record")


class InlineWriter(TrackingWriter):
    """The sweep's writer with every queued write run at once, in call order (no thread race
    between the claim and the records: write ``j`` is the same call in every repetition)."""

    def __init__(self, tracker) -> None:
        super().__init__(tracker, progress_every_s=0.0)

    def _put(self, what, call, record=None) -> None:
        self.writes += 1
        if record is None:
            self._do(what, call)
        else:  # a batch of one record: its transaction a write point of its own
            self._do_records([(what, call, record)])


def _state(db, experiment_id: str, artifacts) -> dict:
    """Every row of the experiment's runs, tags, params and metrics, and its artifact files."""
    with contextlib.closing(sqlite3.connect(db)) as con:
        runs = "SELECT run_uuid FROM runs WHERE experiment_id = ?"
        state = {"runs": con.execute("SELECT run_uuid, status, start_time, end_time, lifecycle_stage FROM runs "
                                     "WHERE experiment_id = ? ORDER BY run_uuid", (experiment_id,)).fetchall()}
        for table in ("tags", "params", "metrics", "latest_metrics"):
            state[table] = sorted(con.execute(f"SELECT * FROM {table} WHERE run_uuid IN ({runs})",
                                              (experiment_id,)).fetchall(), key=repr)
    state["files"] = sorted(str(p.relative_to(artifacts)) for p in artifacts.rglob("*") if p.is_file())
    return state


class Rig:
    """One store; per repetition an experiment of its own, with trial 0 finished before (the sweep
    reruns it with ``force``: the old run is deleted) and trial 1 failing (FAILED, ``error.txt``)."""

    def __init__(self, tmp_path, monkeypatch) -> None:
        self.store = resolve_store(TrackingConfig(), tmp_path)
        self.db = sqlite_path(self.store.uri)
        self.raw = MlflowClient(self.store.uri)
        self.trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(2)]
        self.writes: list[str] = []  # the driver's raw writes, in order
        self.after: int | None = None  # the rival closes the driver's runs after this write
        self.snapshot: dict | None = None
        self.offset = 0.0  # the driver's clocks jump past the lease when the rival closes
        self.rival = False
        self._patch(monkeypatch)

    def _patch(self, monkeypatch) -> None:
        rig = self
        fake = types.SimpleNamespace(time=lambda: time.time() + rig.offset,
                                     monotonic=lambda: time.monotonic() + rig.offset, sleep=time.sleep)
        monkeypatch.setattr(leases_module, "time", fake)
        monkeypatch.setattr(loop_module, "TrackingWriter", InlineWriter)
        monkeypatch.setattr("harness.tracking.git_commit", lambda: "test")  # two git calls a driver

        def failing(cfg, device="cpu", progress=None, real=__import__("harness.trial").trial.run_trial):
            if cfg.seed == 1:
                raise RuntimeError("this trial fails (the test's)")
            return real(cfg, device, progress)

        monkeypatch.setattr("harness.scheduler.run_trial", failing)
        for name in WRITES:
            real = getattr(MlflowClient, name)

            def write(client, *args, _real=real, _name=name, **kwargs):
                answer = _real(client, *args, **kwargs)
                if not rig.rival and threading.current_thread().name != "harness-heartbeat":
                    rig.writes.append(_name)
                    if rig.after is not None and len(rig.writes) - 1 == rig.after:
                        rig.expire()
                return answer

            monkeypatch.setattr(MlflowClient, name, write)
        for name in BULK_WRITES:  # each committed transaction is a write point
            real = getattr(BulkStore, name)

            def transaction(store, *args, _real=real, _name=name, **kwargs):
                answer = _real(store, *args, **kwargs)
                rig.writes.append(_name)
                if rig.after is not None and len(rig.writes) - 1 == rig.after:
                    rig.expire()
                return answer

            monkeypatch.setattr(BulkStore, name, transaction)

    def expire(self) -> None:
        """The rival: every RUNNING run of the experiment closed KILLED as stale (parent and
        trials, as close_stale closes them); the driver's clocks jump past its lease."""
        self.rival = True
        try:
            for run in self.raw.search_runs([self.experiment], "attributes.status = 'RUNNING'"):
                self.raw.set_tag(run.info.run_id, "closed_by", "another invocation (lease expired)")
                self.raw.set_terminated(run.info.run_id, "KILLED")
        finally:
            self.rival = False
        self.offset += 1000.0
        self.snapshot = _state(self.db, self.experiment, self.artifacts)

    def sweep(self, name: str, after: int | None):
        """One repetition: the sweep of experiment ``name``, the rival closing after write ``after``
        (None: never). Returns the raised error (None if the sweep ended)."""
        self.rival = True
        self.experiment = self.raw.create_experiment(
            name, artifact_location=f"{self.store.artifact_root}/{name}")
        self.artifacts = self.db.parent / "mlartifacts" / name
        old = self.raw.create_run(self.experiment, tags={"trial_id": self.trials[0].trial_id})
        self.raw.set_terminated(old.info.run_id, "FINISHED")
        self.rival = False
        self.writes, self.after, self.snapshot = [], after, None
        tracker = Tracker(self.store, lease_s=600.0)
        tracker.heartbeat = lambda parent_id: contextlib.nullcontext()  # the pause stops it too
        try:
            with SerialScheduler(LONE) as scheduler:
                run_sweep(self.trials, scheduler, tracker, name, [], force=True)
        except TrackingError as err:
            return err
        return None


def test_a_driver_that_lost_its_lease_writes_nothing_after_any_write_point(hydra_conf, tmp_path, monkeypatch):
    """On the code before issue 47 the driver went on writing after the rival's close: it logged
    learning-curve points and params into its closed trial runs, re-wrote the parent's
    ``choosing`` tag, and (within a second of its last read of the parent) recorded a trial into
    a run the rival had closed."""
    rig = Rig(tmp_path, monkeypatch)
    assert rig.sweep("reference", None) is None
    plan = list(rig.writes)
    first = plan.index("log_batch") + 1  # the parent opened with its params: the lease is held
    kinds = set(plan[first:])
    assert {"create_runs", "record", "set_tag", "log_batch", "set_terminated", "delete_run"} <= kinds, plan
    for j in range(first, len(plan) - 1):  # after the last write there is nothing left to write
        err = rig.sweep(f"at{j}", after=j)
        assert rig.snapshot is not None, (j, plan[j])
        after = _state(rig.db, rig.experiment, rig.artifacts)
        assert after == rig.snapshot, (f"after write {j} ({plan[j]}), the lease lost, the driver still wrote "
                                       f"{rig.writes[j + 1:]}")
        assert err is not None and "lease lost" in str(err), (j, plan[j], err)


def test_a_heartbeat_writes_nothing_once_its_lease_is_lost(tmp_path):
    """The heartbeat reads its parent before each beat: a parent another invocation closed gets
    no ``heartbeat_ms`` (the lease is lost and said so); a driver that knows its lease lost
    beats no more."""
    from harness.leases import Heartbeat

    store = resolve_store(TrackingConfig(), tmp_path)
    tracker = Tracker(store)
    experiment = tracker.experiment("unit")
    parent = tracker.start_parent(experiment, "unit", 1, 0, [])
    raw = MlflowClient(store.uri)
    tracker.leases.lose("test")
    before = raw.get_run(parent).data.tags["heartbeat_ms"]
    time.sleep(0.002)
    assert tracker.heartbeat(parent).beat() is False
    assert raw.get_run(parent).data.tags["heartbeat_ms"] == before
    raw.set_terminated(parent, "KILLED")
    lost = []
    assert Heartbeat(store.uri, parent, 120.0, on_lost=lost.append).beat() is False
    assert raw.get_run(parent).data.tags["heartbeat_ms"] == before and lost
