"""The sweep loop: skip finished trials, run the rest on a scheduler, record every outcome.

Resume is by trial id: a trial whose id already has a FINISHED run in the ablation's experiment
is skipped (``force=true`` reruns it and deletes the old run once the new one finishes).
Because the id leaves out where a trial runs, a sweep started on a laptop and resumed on a
cluster against the same store skips what the laptop finished.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from tqdm import tqdm

from harness.scheduler import Outcome, RayScheduler, SerialScheduler
from harness.sweep import Trial
from harness.tracking import Tracker
from harness.writer import TrackingWriter


Scheduler = RayScheduler | SerialScheduler


@dataclass
class SweepSummary:
    """What one invocation did."""

    experiment_id: str
    parent_id: str
    n_trials: int  # trials of the ablation
    n_skipped: int  # already FINISHED before this invocation
    n_stale_closed: int  # RUNNING runs of a dead driver closed as KILLED
    finished: int = 0
    failed: list[str] = field(default_factory=list)  # one line per failed trial
    diverged: list[str] = field(default_factory=list)


def _describe(outcome: Outcome) -> str:
    t = outcome.trial
    return f"{t.trial_id} {t.variant} {' '.join(t.overrides)}"


def run_sweep(trials: list[Trial], scheduler: Scheduler, tracker: Tracker, ablation: str,
              cli: list[str], force: bool = False) -> SweepSummary:
    """Run the trials of ``ablation`` not yet finished and record each outcome as it arrives.

    On an interrupt (KeyboardInterrupt, SIGTERM turned into one by the CLI) the running trials
    are cancelled, their runs and the parent run are closed as KILLED, and the exception
    propagates; everything that finished stays recorded.

    ``scheduler`` is an entered scheduler (:func:`harness.scheduler.make_scheduler`), shared by
    the ablations of a suite so that Ray starts once.
    """
    experiment = tracker.experiment(ablation)
    stale = tracker.close_stale(experiment)
    finished = tracker.finished_trials(experiment)
    todo = trials if force else [t for t in trials if t.trial_id not in finished]
    parent = tracker.start_parent(experiment, ablation, len(todo), len(trials) - len(todo), cli)
    tracker = TrackingWriter(tracker)  # per-trial writes on a writer thread, flushed below
    summary = SweepSummary(experiment, parent, len(trials), len(trials) - len(todo), stale)
    running: dict[str, str] = {}

    def on_start(trial: Trial) -> None:
        running[trial.trial_id] = tracker.start_trial(experiment, parent, ablation, trial)

    status = "KILLED"
    try:
        with tqdm(total=len(todo), desc=ablation, unit="trial", dynamic_ncols=True) as bar:
            for outcome in scheduler.run(todo, on_start):
                old = finished.get(outcome.trial.trial_id, []) if force else []
                tracker.finish_trial(running.pop(outcome.trial.trial_id), outcome, old)
                if outcome.error is not None:
                    last = outcome.error.strip().splitlines()[-1]
                    summary.failed.append(f"{_describe(outcome)}: {last}")
                else:
                    summary.finished += 1
                    if outcome.result.diverged:
                        summary.diverged.append(_describe(outcome))
                bar.update(1)
                bar.set_postfix(done=summary.finished, failed=len(summary.failed),
                                remaining=bar.total - bar.n)
        status = "FINISHED"
    finally:
        for run_id in running.values():
            tracker.end_run(run_id, "KILLED")
        tracker.end_run(parent, status)
        tracker.close(raise_errors=status == "FINISHED")  # raises TrackingError if a write failed
    return summary


def print_summary(summary: SweepSummary) -> None:
    """Counts, then one line per failed or diverged trial (stderr)."""
    print(f"{summary.n_trials} trials: {summary.n_skipped} already finished (skipped), "
          f"{summary.finished} finished now, {len(summary.failed)} failed, "
          f"{len(summary.diverged)} diverged" +
          (f"; closed {summary.n_stale_closed} stale RUNNING runs" if summary.n_stale_closed else ""))
    for line in summary.failed:
        print(f"FAILED {line}", file=sys.stderr)
    for line in summary.diverged:
        print(f"DIVERGED {line}", file=sys.stderr)
