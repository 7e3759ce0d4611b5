"""The MLflow writer thread (harness/writer.py): writes leave the driver's critical path, keep
their order, are flushed on exit, and a failed write fails the sweep clearly."""

from __future__ import annotations

import threading

import pytest

from harness.writer import TrackingError, TrackingWriter
from tests.recording import QueuedStarts, RunHandle


class SlowStore:
    """A tracker whose writes wait for ``gate`` (a store that does not answer) and are logged."""

    def __init__(self, fail_on: str = "") -> None:
        self.gate, self.log, self.fail_on = threading.Event(), [], fail_on

    def start_trial(self, experiment_id, parent_id, ablation, trial):
        self.gate.wait(timeout=120)
        self.log.append(("start", trial.trial_id))
        return f"run-{trial.trial_id}"

    def finish_trial(self, run_id, outcome, supersede=()):
        if run_id == self.fail_on:
            raise OSError("database is locked")
        self.log.append(("finish", run_id))

    def end_run(self, run_id, status="FINISHED"):
        self.log.append(("end", run_id, status))


class _Trial:
    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id


def test_writes_do_not_wait_for_the_store_and_are_flushed_in_order_on_close():
    store = SlowStore()
    writer = QueuedStarts(store)
    handles = [writer.start_trial("e", "p", "a", _Trial(f"t{i}")) for i in range(3)]
    # the store has answered nothing yet, and every call above has returned
    assert store.log == [] and all(isinstance(h, RunHandle) and h.run_id is None for h in handles)
    for handle in handles:
        writer.finish_trial(handle, outcome=None)
    writer.end_run("parent", "FINISHED")
    store.gate.set()
    writer.close()
    assert store.log == [("start", "t0"), ("start", "t1"), ("start", "t2"), ("finish", "run-t0"),
                         ("finish", "run-t1"), ("finish", "run-t2"), ("end", "parent", "FINISHED")]
    assert [h.run_id for h in handles] == ["run-t0", "run-t1", "run-t2"]


def test_a_failed_write_fails_on_close_naming_it_and_the_other_writes_still_happen():
    store = SlowStore(fail_on="run-t0")
    store.gate.set()
    writer = QueuedStarts(store)
    handles = [writer.start_trial("e", "p", "a", _Trial(f"t{i}")) for i in range(2)]
    for handle in handles:
        writer.finish_trial(handle, outcome=None)
    with pytest.raises(TrackingError, match=r"1 of 4 MLflow writes .* failed; first: record trial t0: "
                                            r"OSError: database is locked"):
        writer.close()
    assert ("finish", "run-t1") in store.log


def test_run_sweep_records_every_trial_through_the_writer(tmp_path, hydra_conf, trial_runs):
    from harness.config import ClusterConfig, SchedulerKind
    from harness.loop import run_sweep
    from harness.scheduler import SerialScheduler
    from harness.expansion import compose_trial
    from harness.tracking import Store, Tracker

    trials = [compose_trial(["train.max_steps=10", "train.eval_every=5", "task.n_val=32",
                             "task.n_test=64"], [f"seed={s}"]) for s in range(3)]
    store = Store(f"sqlite:///{tmp_path / 'mlflow.db'}", (tmp_path / "mlartifacts").as_uri())
    with SerialScheduler(ClusterConfig(scheduler=SchedulerKind.serial)) as scheduler:
        summary = run_sweep(trials, scheduler, Tracker(store), "writer", [])
    assert summary.finished == 3
    runs = trial_runs(store.uri, "writer")
    assert sorted(r.data.tags["trial_id"] for r in runs) == sorted(t.trial_id for t in trials)
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert all("test/rel_mse" in r.data.metrics and r.data.params["seed"] in "012" for r in runs)


def test_claim_answers_at_once_and_finish_answers_through_a_future_after_queued_progress():
    class Claims(SlowStore):
        def claim_batch(self, experiment_id, parent_id, ablation, trials, ignore=frozenset(), since_ms=0,
                        stop=None):
            return [None if t.trial_id == "taken" else f"run-{t.trial_id}" for t in trials]

        def log_points(self, run_id, points):
            self.gate.wait(timeout=120)
            self.log.append(("progress", run_id, [p["step"] for p in points]))

        def finish_trial(self, run_id, outcome, supersede=()):
            self.log.append(("finish", run_id))
            return run_id != "run-stale"  # False: closed as stale by another driver

    store = Claims()
    writer = TrackingWriter(store, progress_every_s=0)  # each point queued at once
    assert writer.claim_batch("e", "p", "a", [_Trial("taken")]) == [None]  # synchronous: decides the start
    (run_id,) = writer.claim_batch("e", "p", "a", [_Trial("t0")])
    assert run_id == "run-t0"
    writer.log_progress(run_id, {"step": 5})
    answers = [writer.finish_trial(run_id, outcome=None), writer.finish_trial("run-stale", outcome=None)]
    assert store.log == [] and not any(a.done() for a in answers)  # queued behind the gate
    store.gate.set()
    writer.close()
    assert [a.result() for a in answers] == [True, False]
    assert store.log == [("progress", "run-t0", [5]), ("finish", "run-t0"), ("finish", "run-stale")]


class _Outcome:
    def __init__(self, result) -> None:
        self.result = result


def test_live_points_are_written_together_per_run_and_a_finished_curve_is_left_to_finish_trial():
    class Points(SlowStore):
        def log_points(self, run_id, points):
            self.log.append(("points", run_id, [p["step"] for p in points]))

    store = Points()
    store.gate.set()
    writer = TrackingWriter(store, progress_every_s=3600)  # nothing is due in this test
    for step in (1, 2, 3):
        for run in ("a", "b", "c", "d"):
            writer.log_progress(f"run-{run}", {"step": step})
    writer.finish_trial("run-a", _Outcome(result="ok"))  # its curve holds every point: not written
    writer.finish_trial("run-b", _Outcome(result=None))  # failed: no curve, its points are kept
    writer.end_run("run-c", "KILLED")  # interrupted: its points are written before it closes
    writer.flush()
    assert store.log == [("finish", "run-a"), ("points", "run-b", [1, 2, 3]), ("finish", "run-b"),
                         ("points", "run-c", [1, 2, 3]), ("end", "run-c", "KILLED"),
                         ("points", "run-d", [1, 2, 3])]  # flush writes what is still buffered
    writer.log_progress("run-e", {"step": 4})
    writer.close()
    assert store.log[-1] == ("points", "run-e", [4])  # close flushes too
