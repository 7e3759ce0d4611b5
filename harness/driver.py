"""The sweep loop: skip finished trials, run the rest on a scheduler, record every outcome.

Resume is by trial id: a trial whose id already has a FINISHED run in the ablation's experiment
is skipped (``force=true`` reruns it and deletes the old run once the new one finishes).
Because the id leaves out where a trial runs, a sweep started on a laptop and resumed on a
cluster against the same store skips what the laptop finished.

Several invocations of one ablation may run at once on one store: each trial is claimed when it
starts (:meth:`harness.tracking.Tracker.claim`), so each runs in one invocation only and the
others skip it; a driver's runs stay claimed while its heartbeat renews its lease.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

from tqdm import tqdm

from harness import signals
from harness.config import ClusterConfig
from harness.scheduler import Outcome, RayScheduler, SerialScheduler, make_scheduler
from harness.store import Store
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
    n_stale_closed: int  # RUNNING runs of a dead driver (lease expired) closed as KILLED
    n_elsewhere: int = 0  # claimed or finished by another invocation meanwhile (skipped)
    n_lost: int = 0  # ran here, but the run was closed as stale meanwhile (result not recorded)
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
    the ablations of a suite so that Ray starts once. Each learning-curve point and outcome calls
    :func:`harness.signals.check`, so an interrupt whose exception Python swallowed (a
    garbage-collection callback prints "Exception ignored in") still stops the sweep.
    """
    experiment = tracker.experiment(ablation)
    stale = tracker.close_stale(experiment)
    finished = tracker.finished_trials(experiment)
    todo = trials if force else [t for t in trials if t.trial_id not in finished]
    superseded = {run for t in todo for run in finished.get(t.trial_id, [])} if force else set()
    parent = tracker.start_parent(experiment, ablation, len(todo), len(trials) - len(todo), cli)
    tracker = TrackingWriter(tracker)  # per-trial writes on a writer thread, flushed below
    summary = SweepSummary(experiment, parent, len(trials), len(trials) - len(todo), stale)
    running: dict[str, str] = {}

    def on_start(trial: Trial) -> bool:
        run_id = tracker.claim(experiment, parent, ablation, trial, superseded)
        if run_id is None:  # another invocation runs or finished it
            summary.n_elsewhere += 1
            bar.update(1)
            return False
        running[trial.trial_id] = run_id
        return True

    def on_progress(trial: Trial, point: dict) -> None:  # the learning curve, as it is measured
        signals.check()
        if trial.trial_id in running:
            tracker.log_progress(running[trial.trial_id], point)

    status = "KILLED"
    recorded: list = []  # (outcome, future of finish_trial's answer), tallied once flushed
    failed = 0  # outcomes with an error so far (the progress bar's count)
    try:
        with tracker.heartbeat(parent), \
                tqdm(total=len(todo), desc=ablation, unit="trial", dynamic_ncols=True) as bar:
            for outcome in scheduler.run(todo, on_start, on_progress):
                signals.check()
                old = finished.get(outcome.trial.trial_id, []) if force else []
                recorded.append((outcome, tracker.finish_trial(running[outcome.trial.trial_id], outcome, old)))
                del running[outcome.trial.trial_id]  # after: an interrupt mid-way closes it KILLED
                bar.update(1)
                failed += outcome.error is not None
                bar.set_postfix(done=len(recorded) - failed, failed=failed,
                                remaining=bar.total - bar.n)
            tracker.flush()  # while the heartbeat still holds the lease
        status = "FINISHED"
    finally:
        for run_id in running.values():
            tracker.end_run(run_id, "KILLED")
        tracker.end_run(parent, status)
        tracker.close(raise_errors=status == "FINISHED")  # raises TrackingError if a write failed
    for outcome, answer in recorded:
        if answer.result() is False:  # closed as stale by another invocation: not recorded
            summary.n_lost += 1
        elif outcome.error is not None:
            last = outcome.error.strip().splitlines()[-1]
            summary.failed.append(f"{_describe(outcome)}: {last}")
        else:
            summary.finished += 1
            if outcome.result.diverged:
                summary.diverged.append(_describe(outcome))
    return summary


def print_summary(summary: SweepSummary) -> None:
    """Counts, then one line per failed or diverged trial (stderr)."""
    print(f"{summary.n_trials} trials: {summary.n_skipped} already finished (skipped), "
          f"{summary.finished} finished now, {len(summary.failed)} failed, "
          f"{len(summary.diverged)} diverged" +
          (f", {summary.n_elsewhere} run by another invocation (skipped)" if summary.n_elsewhere else "") +
          (f", {summary.n_lost} lost (closed as stale by another invocation; rerun to record)"
           if summary.n_lost else "") +
          (f"; closed {summary.n_stale_closed} stale RUNNING runs" if summary.n_stale_closed else ""))
    for line in summary.failed:
        print(f"FAILED {line}", file=sys.stderr)
    for line in summary.diverged:
        print(f"DIVERGED {line}", file=sys.stderr)


def run_suite(ablations: Sequence[tuple[str, list[Trial]]], cluster: ClusterConfig, store: Store,
              cli: list[str], lease_s: float, force: bool = False,
              after: Callable[[str, SweepSummary], None] | None = None) -> bool:
    """Run a composed suite's ablations (``[(name, trials)]``, :func:`harness.sweep.expand_suite`)
    one after another on one scheduler (Ray starts once), printing each :class:`SweepSummary`
    and calling ``after(name, summary)`` (the end-of-sweep table and plot); returns whether any
    trial failed. Used by ``python -m harness`` and ``python -m analysis.report``.

    An interrupt (SIGINT or SIGTERM, :mod:`harness.signals`) closes the running trials as KILLED
    and ends the process with exit status 130 once Ray is down, also where a library turned the
    interrupt into an error of its own; finished trials stay recorded. Once the suite is over
    the signal handlers found on entry are back.

    Raises:
        harness.writer.TrackingError: the sweep ran, but some of it is not recorded.
        ValueError: the cluster cannot run a trial (nothing was recorded).
    """
    previous = signals.install()  # SIGINT and SIGTERM (Slurm, Kubernetes) interrupt the sweep
    any_failed = False
    try:
        with make_scheduler(cluster) as scheduler:  # Ray starts once
            signals.install()  # again: ray.init installed its own SIGTERM handler
            signals.check()  # a signal during ray.init whose exception was swallowed
            for name, trials in ablations:
                summary = run_sweep(trials, scheduler, Tracker(store, lease_s), name, cli, force=force)
                print_summary(summary)
                if after is not None:
                    after(name, summary)
                any_failed = any_failed or bool(summary.failed)
        sys.stdout.flush()
        # the suite is over and recorded: a later signal ends the process as before the suite,
        # not as a KeyboardInterrupt in exit callbacks (a Traceback, exit 0); one that came
        # before these lines is the interrupt below
        signals.restore(previous)
        signals.check()
    except BaseException as stop:
        # SystemExit: SIGTERM while ray.init had its own handler installed (it exits with 15 or,
        # having torn down the new Ray instance, with 1); any other error once signals.STOP is
        # set: the KeyboardInterrupt landed in a library that turned it into its own error
        # (OmegaConf raises AttributeError); run_sweep has closed the runs either way
        sigterm = isinstance(stop, SystemExit) and stop.code == signal.SIGTERM
        if not (isinstance(stop, KeyboardInterrupt) or sigterm or signals.STOP.is_set()):
            raise
        print("interrupted: running trials cancelled and closed as KILLED; finished ones are "
              "recorded, and the same command resumes", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        # Ray is shut down and every run closed; skip the interpreter's teardown, where Ray's C++
        # core, having seen the SIGTERM, can abort (-6) or re-raise it (-15) after our message
        os._exit(130)
    return any_failed
