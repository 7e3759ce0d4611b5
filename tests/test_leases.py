"""Leases (harness/leases.py) and counted writes: a driver that lost its lease stops, and a record
that failed is counted as not recorded and rerun (issue 27, items 1 and 2)."""

from __future__ import annotations

import contextlib
import time

import pytest
from mlflow.tracking import MlflowClient

import harness.trial as trial_module
from harness.config import ClusterConfig, SchedulerKind, TrackingConfig
from harness.loop import run_sweep, run_sweeps
from harness.console import print_summary
from harness.records import TrackingError
from harness.scheduler import SerialScheduler
from harness.store import resolve_store
from harness.expansion import compose_trial
from harness.leases import Heartbeat
from harness.tracking import Tracker

FAST = ["train.max_steps=10", "train.eval_every=5", "task.n_val=32", "task.n_test=64"]
LONE = ClusterConfig(scheduler=SchedulerKind.serial, pack_size="1")  # one claim per trial


def _runs(store, experiment_id: str) -> list:
    return MlflowClient(store.uri).search_runs([experiment_id])


def test_a_driver_whose_lease_another_invocation_closed_claims_and_records_nothing_more(
        hydra_conf, tmp_path, monkeypatch):
    """Driver A is paused during its second trial for longer than its lease (a laptop lid, a
    preempted VM, SIGSTOP: its heartbeat stops too); driver B starts meanwhile and closes A's
    parent and running trial as stale. When A goes on it records nothing (its trial is lost),
    claims no further trial and never re-closes the parent B closed; it ends with LeaseLost.
    On the original code A claimed the third trial under the closed parent, recorded it FINISHED
    and re-closed B's KILLED parent as FINISHED."""
    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(3)]
    store = resolve_store(TrackingConfig(), tmp_path)
    paused = Tracker(store, lease_s=0.5)
    experiment = paused.experiment("unit")
    stopped: list[bool] = []  # the pause stops A's heartbeat too (its last beat then ages)
    monkeypatch.setattr(paused, "heartbeat", lambda parent_id: Heartbeat(
        store.uri, parent_id, 0.5, on_lost=paused.leases.lose, held=lambda: not stopped))
    original, closed = trial_module.run_trial, []

    def pausing(cfg, device="cpu", progress=None):
        if cfg.seed == 1:  # A is paused past its lease, and B starts
            stopped.append(True)
            time.sleep(0.6)
            closed.append(Tracker(store).close_stale(experiment))
        return original(cfg, device, progress)

    monkeypatch.setattr("harness.scheduler.run_trial", pausing)
    with SerialScheduler(LONE) as scheduler, pytest.raises(TrackingError, match="lease lost"):
        run_sweep(trials, scheduler, paused, "unit", [])
    assert closed == [2]  # A's parent and A's running trial
    runs = _runs(store, experiment)
    seed_of = {t.trial_id: str(t.config.seed) for t in trials}  # by tag: a run closed as stale
    by_seed = {seed_of[r.data.tags["trial_id"]]: r for r in runs if "trial_id" in r.data.tags}  # has no params
    assert set(by_seed) == {"0", "1"}  # the third trial was never claimed
    assert by_seed["0"].info.status == "FINISHED"
    assert by_seed["1"].info.status == "KILLED" and "closed_by" in by_seed["1"].data.tags
    parent = next(r for r in runs if r.data.tags.get("role") == "sweep")
    assert parent.info.status == "KILLED" and "closed_by" in parent.data.tags  # not re-closed
    assert sorted(Tracker(store).finished_trials(experiment)) == [trials[0].trial_id]


def test_the_heartbeat_stops_before_the_driver_closes_its_own_parent(hydra_conf, tmp_path, monkeypatch):
    """A beat that reads the parent after this driver closed it must not take that close for
    another invocation's: a sweep that recorded every trial then ended "lease lost" with exit
    status 1 (seen once in `.ci/run` on a loaded machine, where the heartbeat thread ran between
    the parent's close and the heartbeat's stop). Here a last beat runs as each heartbeat stops,
    the worst moment: the sweep ends as usual, its parent FINISHED."""
    from harness.leases import Heartbeat

    real_exit = Heartbeat.__exit__

    def beat_then_stop(self, *exc):
        self.beat()  # the thread's beat, at the last moment before the stop
        real_exit(self, *exc)

    monkeypatch.setattr(Heartbeat, "__exit__", beat_then_stop)
    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(2)]
    store = resolve_store(TrackingConfig(), tmp_path)
    with SerialScheduler(LONE) as scheduler:
        summary = run_sweep(trials, scheduler, Tracker(store), "unit", [])
    assert (summary.finished, summary.n_lost, summary.n_unrecorded) == (2, 0, 0)
    parent = next(r for r in _runs(store, summary.experiment_id) if r.data.tags.get("role") == "sweep")
    assert parent.info.status == "FINISHED"


def _rival_holding(store, trial, lease_s: float = 120.0) -> tuple[Tracker, str, str]:
    """Another driver (no heartbeat: its lease lasts ``lease_s`` from its parent's start) that
    has claimed ``trial``; returns it, its experiment and the claimed run."""
    rival = Tracker(store, lease_s=lease_s)
    experiment = rival.experiment("unit")
    parent = rival.start_parent(experiment, "unit", 1, 0, [])
    (run_id,) = rival.claim_batch(experiment, parent, "unit", [trial])
    return rival, experiment, run_id


@pytest.mark.parametrize("rival_ends", ["finishes", "dies"])
def test_a_sweep_waits_for_the_trials_a_live_rival_claimed_before_its_summary(
        hydra_conf, tmp_path, rival_ends):
    """The same sweep started twice: the invocation that lost a claim to a live rival ends its
    ablation (the summary, the end-of-sweep table) only once the rival no longer holds that
    trial, so its table has every trial that finished. Before, it summarised at once, often with
    no finished trial and no table (tests/test_concurrency.py, once in five CI runs). A rival
    that dies holds nothing once its lease expires: the wait ends, the trial unfinished."""
    import threading

    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(2)]
    store = resolve_store(TrackingConfig(), tmp_path)
    start = time.monotonic()
    rival, experiment, held = _rival_holding(store, trials[0], lease_s=120.0 if rival_ends == "finishes" else 3.0)
    released = []

    def finish() -> None:
        rival.end_run(held, "FINISHED")
        released.append(time.monotonic())

    if rival_ends == "finishes":
        threading.Timer(3.0, finish).start()
    ended = []
    with SerialScheduler(LONE) as scheduler:
        run_sweeps([("unit", trials)], scheduler, Tracker(store), [],
                   on_done=lambda name, s: ended.append((time.monotonic(), s)))
    ((when, summary),) = ended
    assert (summary.finished, summary.n_elsewhere) == (1, 1)
    assert summary.n_elsewhere_unfinished == (0 if rival_ends == "finishes" else 1)
    status = {r.info.run_id: r.info.status for r in _runs(store, experiment)}
    if rival_ends == "finishes":
        assert released and when >= released[0]  # the summary came after the rival's trial finished
        assert sorted(Tracker(store).finished_trials(experiment)) == sorted(t.trial_id for t in trials)
    else:
        assert status[held] == "RUNNING"  # the dead rival's run: closed as stale by the next sweep
        assert sorted(Tracker(store).finished_trials(experiment)) == [trials[1].trial_id]
        assert when - start >= 3.0  # it waited until the rival's lease (3 s from its start) expired


def test_a_record_that_failed_is_counted_not_recorded_its_runs_fail_and_it_is_rerun(
        hydra_conf, tmp_path, monkeypatch, capsys):
    """A write that fails while a trial's outcome is recorded (a full disk) counts that trial as
    not recorded in the summary and the sweep line, closes its run and the parent FAILED, and
    the next invocation reruns it. On the original code the sweep line said '3 finished now',
    the trial's run stayed RUNNING and the parent was closed FINISHED."""
    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(3)]
    store = resolve_store(TrackingConfig(), tmp_path)
    full = Tracker(store)
    real = full.finish_trials  # the batched writer's one write point of records (serial: one a batch)

    def disk_full(items):
        if any(outcome.trial.config.seed == 1 for _, outcome, _ in items):
            raise OSError(28, "No space left on device")
        return real(items)

    monkeypatch.setattr(full, "finish_trials", disk_full)
    done = []
    with SerialScheduler(LONE) as scheduler:
        with pytest.raises(TrackingError, match="No space left on device"):
            run_sweeps([("unit", trials)], scheduler, full, [], on_done=lambda name, s: done.append(s))
        (summary,) = done
        assert (summary.finished, summary.failed) == (2, [])
        assert summary.n_unrecorded == 1
        print_summary(summary)
        assert "2 finished now" in capsys.readouterr().out
        runs = _runs(store, summary.experiment_id)
        failed = [r for r in runs if r.data.params.get("seed") == "1"]
        assert [r.info.status for r in failed] == ["FAILED"]
        parent = next(r for r in runs if r.data.tags.get("role") == "sweep")
        assert parent.info.status == "FAILED"
        again = run_sweep(trials, scheduler, Tracker(store), "unit", [])
    assert (again.n_skipped, again.finished) == (2, 1)


def test_print_summary_names_records_that_failed(capsys):
    from harness.records import SweepSummary

    print_summary(SweepSummary("1", "p", 3, 0, 0, finished=2, n_unrecorded=1, ablation="unit"))
    line = capsys.readouterr().out
    assert "2 finished now" in line and "1 not recorded" in line


def test_the_analysis_never_pools_two_finished_runs_of_one_trial(tmp_path, capsys):
    """Two FINISHED runs of one trial id (a driver recorded it just after another closed its
    parent: the lease check is check-then-act) are one row: the run whose parent was not closed
    by another invocation, else the earliest to end; the other is named on stderr."""
    from analysis.load import load_runs
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("dup")

    def child(parent: str, trial: str, end_ms: int) -> str:
        run = client.create_run(experiment, tags={MLFLOW_PARENT_RUN_ID: parent, "trial_id": trial})
        client.log_param(run.info.run_id, "seed", "0")
        client.set_terminated(run.info.run_id, "FINISHED", end_time=end_ms)
        return run.info.run_id

    lost = client.create_run(experiment, tags={"role": "sweep", "closed_by": "another invocation"})
    client.set_terminated(lost.info.run_id, "KILLED")
    kept = client.create_run(experiment, tags={"role": "sweep"})
    client.set_terminated(kept.info.run_id, "FINISHED")
    early_but_lost = child(lost.info.run_id, "a", 1_000)
    late = child(kept.info.run_id, "a", 2_000)
    first = child(kept.info.run_id, "b", 1_000)
    second = child(kept.info.run_id, "b", 2_000)
    df = load_runs("dup", uri)
    assert sorted(df["run_id"]) == sorted([late, first])
    err = capsys.readouterr().err
    assert f"left out {early_but_lost}" in err and f"left out {second}" in err


def test_a_server_stores_rivals_are_read_from_where_the_last_read_left_off(tmp_path):
    """On a server store (MLflow's search: no list of trial ids) a claim round reads the other
    drivers' runs FINISHED since the previous round less the lease, not since the sweep's plan,
    and keeps what earlier rounds found: the read stays a lease's worth of the rivals' work
    however long the sweep runs (it grew with the sweep before), and no rival is forgotten; a
    run that an earlier read returned is not returned again (left out by run id), in this sweep
    or the next one on the same experiment."""
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    from harness.leases import Leases, now_ms

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("unit", artifact_location=(tmp_path / "art").as_uri())
    leases = Leases(client, lease_s=60.0, db=None)  # db=None: the server store's path
    read: list[int] = []  # runs each search returned
    search = client.search_runs

    def counted(*args, **kwargs):
        page = search(*args, **kwargs)
        read.append(len(page))
        return page
    client.search_runs = counted

    def rival(trial_id: str, end_ms: int) -> str:
        run = client.create_run(experiment, tags={MLFLOW_PARENT_RUN_ID: "other", "trial_id": trial_id})
        client.set_terminated(run.info.run_id, "FINISHED", end_time=end_ms)
        return run.info.run_id

    now = now_ms()
    since = now - 3_600_000  # a sweep planned an hour ago
    old = rival("a", now - 1_800_000)  # finished half an hour ago, another driver
    rival("x", now - 1_700_000)  # another trial, not this batch's
    batch = {"a", "b", "c"}
    assert leases._finished_rivals(experiment, batch, "own", (), since) == {"a"}
    assert read == [2]
    rival("b", now_ms())  # finishes between the rounds
    assert leases._finished_rivals(experiment, batch, "own", (), since) == {"a", "b"}  # "a" kept
    assert read == [2, 1]  # only "b": the first round's runs ended more than a lease before it
    assert leases._finished_rivals(experiment, batch, "own", {old}, since) == {"b"}  # a superseded run
    assert read[-1] == 0  # "b" is in this read's window, left out by run id: the last read returned it
    assert leases._finished_rivals(experiment, batch, "mine", (), since) == {"a", "b"}  # another sweep
    assert read[-1] == 2  # reads anew from its own plan: "a" and "x", but not "b" again
