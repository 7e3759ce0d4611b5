"""The sweep driver (harness/sweep.py): several ablations run as one queue on one scheduler, and
each is still recorded as its own sweep (experiment, parent run, summary)."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient


@pytest.mark.slow
@pytest.mark.e2e  # Ray's scheduler is what it tests: it starts a local instance
def test_ablations_share_one_queue_and_each_is_recorded_as_its_own_sweep(tmp_path, hydra_conf, trial_runs):
    from harness.config import ClusterConfig, SchedulerKind
    from harness.loop import run_sweeps
    from harness.scheduler import RayScheduler
    from harness.expansion import compose_trial
    from harness.tracking import Store, Tracker

    trials = [compose_trial(["train.max_steps=6", "train.eval_every=2", "task.n_val=16",
                             "task.n_test=16"], [f"seed={s}"]) for s in range(3)]
    # seed 1 is in both ablations: one Trial object, one trial id, a run in each experiment
    groups = [("first", trials[:2]), ("second", trials[1:])]
    store = Store(f"sqlite:///{tmp_path / 'mlflow.db'}", (tmp_path / "mlartifacts").as_uri())
    calls, done = [], []
    with RayScheduler(ClusterConfig(scheduler=SchedulerKind.local, num_cpus=2, pack_size="4")) as scheduler:
        run = scheduler.run

        seen: dict[str, list[int]] = {}  # trial id → steps of the points that came live

        def spy(todo, on_start=None, on_progress=None, prepare=None):
            calls.append(len(todo))

            def progress(trial, point):
                seen.setdefault(trial.trial_id, []).append(int(point["step"]))
                on_progress(trial, point)

            for outcome in run(todo, on_start, progress, prepare):
                # every point of a trial reaches the driver before its outcome (one batch per unit;
                # seed 1 runs twice, once per ablation, so its points may have come twice)
                got, steps = seen.get(outcome.trial.trial_id, []), [p["step"] for p in outcome.result.curve]
                repeats = len(got) // len(steps)
                assert 1 <= repeats <= todo.count(outcome.trial) and got == steps * repeats, got
                yield outcome

        scheduler.run = spy
        summaries = run_sweeps(groups, scheduler, Tracker(store), [],
                               on_done=lambda name, s: done.append((name, s.finished)))
        assert calls == [4]  # one queue for both ablations
        assert [(s.ablation, s.finished) for s in summaries] == [("first", 2), ("second", 2)]
        assert sorted(done) == [("first", 2), ("second", 2)]  # on_done once per ablation

        client = MlflowClient(tracking_uri=store.uri)
        for (name, group), summary in zip(groups, summaries):
            runs = trial_runs(store.uri, name)
            assert sorted(r.data.tags["trial_id"] for r in runs) == sorted(t.trial_id for t in group)
            assert {r.info.status for r in runs} == {"FINISHED"}
            assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {summary.parent_id}
            assert client.get_run(summary.parent_id).info.status == "FINISHED"
            for r in runs:  # the learning curve came back to the right run while it ran
                steps = [m.step for m in client.get_metric_history(r.info.run_id, "val/loss")]
                assert steps == [2, 4, 6]
            # the trial phase runs from the first claim to the last record written: it holds
            # its runs' own span in the store (the first run's creation to the last run's end;
            # it ended at the last outcome back before, ahead of the writer's queue), with 50 ms
            # for the two clocks
            span_s = (max(r.info.end_time for r in runs) - min(r.info.start_time for r in runs)) / 1000
            assert summary.trial_phase_s >= span_s - 0.05, (summary.trial_phase_s, span_s)

        # run again: every trial is found finished in its own experiment, nothing runs
        calls.clear()
        again = run_sweeps(groups, scheduler, Tracker(store), [])
        assert calls == [0] and [(s.n_skipped, s.finished) for s in again] == [(2, 0), (2, 0)]


def test_a_resume_with_everything_finished_writes_no_run(tmp_path, hydra_conf):
    """Run a sweep, then the same again: the second finds every trial FINISHED, starts no
    scheduler and writes no parent run (it wrote one more, empty, parent run per resume)."""
    from harness.config import ClusterConfig, SchedulerKind
    from harness.sweep import run_suite
    from harness.expansion import compose_trial
    from harness.tracking import Store

    trials = [compose_trial(["train.max_steps=4", "train.eval_every=2", "task.n_val=16",
                             "task.n_test=16"], [f"seed={s}"]) for s in range(2)]
    store = Store(f"sqlite:///{tmp_path / 'mlflow.db'}", (tmp_path / "mlartifacts").as_uri())
    cluster = ClusterConfig(scheduler=SchedulerKind.serial)
    for _ in range(2):
        assert run_suite([("unit", trials)], cluster, store, [], 60.0) is False
    client = MlflowClient(tracking_uri=store.uri)
    runs = client.search_runs([client.get_experiment_by_name("unit").experiment_id])
    assert sum("trial_id" in r.data.tags for r in runs) == 2
    assert len([r for r in runs if r.data.tags.get("role") == "sweep"]) == 1
