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
from dataclasses import dataclass, field, replace
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
    ablation: str = ""  # its name: a suite's summaries come in completion order


def _describe(outcome: Outcome) -> str:
    t = outcome.trial
    return f"{t.trial_id} {t.variant} {' '.join(t.overrides)}"


@dataclass
class _Sweep:
    """One ablation's share of :func:`run_sweeps`: its experiment, what is left to run, and the
    outcomes recorded so far (each with the future of ``finish_trial``'s answer)."""

    finished: dict[str, list[str]]  # trial id → FINISHED run ids before this invocation
    todo: list[Trial]
    superseded: set[str]  # old FINISHED runs a forced rerun replaces (the claim ignores them)
    summary: SweepSummary
    left: int  # trials not yet come back (or skipped as another invocation's)
    heartbeat: object = None  # the entered Heartbeat of the parent run, until the sweep ends
    recorded: list = field(default_factory=list)


def run_sweep(trials: list[Trial], scheduler: Scheduler, tracker: Tracker, ablation: str,
              cli: list[str], force: bool = False) -> SweepSummary:
    """Run the trials of ``ablation`` not yet finished and record each outcome as it arrives
    (:func:`run_sweeps` with one ablation)."""
    return run_sweeps([(ablation, trials)], scheduler, tracker, cli, force)[0]


def run_sweeps(groups: Sequence[tuple[str, list[Trial]]], scheduler: Scheduler, tracker: Tracker,
               cli: list[str], force: bool = False,
               on_done: Callable[[str, SweepSummary], None] | None = None) -> list[SweepSummary]:
    """Run the not yet finished trials of several ablations (``[(name, trials)]``) as one queue
    on ``scheduler`` and record each outcome in its ablation's experiment as it arrives; returns
    one :class:`SweepSummary` per ablation, in the order given.

    One queue, not one sweep after another: the scheduler packs and orders the trials of every
    ablation together (:func:`harness.scheduler.plan`), so no slot idles while one ablation's
    last pack runs and small groups (a few reruns per ablation) still fill packs. Each ablation
    keeps its own experiment, parent run (opened at the start, holding this driver's lease) and
    summary; once its last trial is recorded its parent is closed and ``on_done(name, summary)``
    is called (the end-of-sweep table and plot), so ablations end in completion order.

    On an interrupt (KeyboardInterrupt, SIGTERM turned into one by the CLI) the running trials
    are cancelled, their runs and the open parent runs are closed as KILLED, and the exception
    propagates; everything that finished stays recorded.

    ``scheduler`` is an entered scheduler (:func:`harness.scheduler.make_scheduler`), shared by
    the rounds of a suite so that Ray starts once. Each trial start, learning-curve point and
    outcome calls :func:`harness.signals.check`: a signal only sets :data:`harness.signals.STOP`,
    and the sweep stops there, never inside a call to the store.

    Raises:
        harness.writer.TrackingError: the trials ran, but some writes to the store failed.
    """
    sweeps: list[_Sweep] = []
    owner: dict[int, _Sweep] = {}  # id(trial) of each queued trial → its ablation's sweep
    queue: list[Trial] = []
    for ablation, trials in groups:
        experiment = tracker.experiment(ablation)
        stale = tracker.close_stale(experiment)
        finished = tracker.finished_trials(experiment)
        todo = trials if force else [t for t in trials if t.trial_id not in finished]
        todo = [replace(t) if id(t) in owner else t for t in todo]  # one object per queued trial
        superseded = {run for t in todo for run in finished.get(t.trial_id, [])} if force else set()
        sweep = _Sweep(finished, todo, superseded,
                       SweepSummary(experiment, "", len(trials), len(trials) - len(todo), stale,
                                    ablation=ablation),
                       len(todo))
        sweeps.append(sweep)
        for trial in todo:
            owner[id(trial)] = sweep
            queue.append(trial)
    writer = TrackingWriter(tracker)  # per-trial writes on a writer thread, flushed below
    running: dict[int, str] = {}  # id(trial) → its claimed run
    open_parents: list[_Sweep] = []

    def end(sweep: _Sweep) -> None:  # the ablation's last trial is back: close its parent
        writer.end_run(sweep.summary.parent_id, "FINISHED")  # after its trials' writes (in order)
        writer.flush()  # while the heartbeat still holds the lease
        sweep.heartbeat.__exit__(None, None, None)
        open_parents.remove(sweep)
        _tally(sweep)
        if on_done is not None:
            with tqdm.external_write_mode():  # the progress bar is still open: print below it
                on_done(sweep.summary.ablation, sweep.summary)
                sys.stdout.flush()

    def on_start(trial: Trial) -> bool:
        signals.check()  # before the claim: an interrupt never stops a claim half done
        sweep = owner[id(trial)]
        summary = sweep.summary
        run_id = writer.claim(summary.experiment_id, summary.parent_id, summary.ablation, trial,
                              sweep.superseded)
        if run_id is None:  # another invocation runs or finished it
            sweep.summary.n_elsewhere += 1
            sweep.left -= 1
            bar.update(1)
            if sweep.left == 0:
                end(sweep)
            return False
        running[id(trial)] = run_id
        return True

    def on_progress(trial: Trial, point: dict) -> None:  # the learning curve, as it is measured
        signals.check()
        if id(trial) in running:
            writer.log_progress(running[id(trial)], point)

    failed = 0  # outcomes with an error so far (the progress bar's count)
    ok = False
    desc = sweeps[0].summary.ablation if len(sweeps) == 1 else f"{len(sweeps)} ablations"
    try:
        for sweep in sweeps:
            summary = sweep.summary
            summary.parent_id = tracker.start_parent(summary.experiment_id, summary.ablation,
                                                     len(sweep.todo), summary.n_skipped, cli)
            sweep.heartbeat = tracker.heartbeat(sweep.summary.parent_id)
            sweep.heartbeat.__enter__()
            open_parents.append(sweep)
        with tqdm(total=len(queue), desc=desc, unit="trial", dynamic_ncols=True) as bar:
            for sweep in [s for s in sweeps if s.left == 0]:  # nothing to run: done at once
                end(sweep)
            for outcome in scheduler.run(queue, on_start, on_progress):
                signals.check()
                key = id(outcome.trial)
                sweep = owner[key]
                old = sweep.finished.get(outcome.trial.trial_id, []) if force else []
                sweep.recorded.append((outcome, writer.finish_trial(running[key], outcome, old)))
                del running[key]  # after: an interrupt mid-way closes it KILLED
                bar.update(1)
                failed += outcome.error is not None
                bar.set_postfix(done=bar.n - failed, failed=failed, remaining=bar.total - bar.n)
                sweep.left -= 1
                if sweep.left == 0:
                    end(sweep)
        ok = True
    finally:
        for run_id in running.values():
            writer.end_run(run_id, "KILLED")
        for sweep in open_parents:  # interrupted (or a parent that failed to open)
            writer.end_run(sweep.summary.parent_id, "KILLED")
            if sweep.heartbeat is not None:
                sweep.heartbeat.__exit__(None, None, None)
        writer.close(raise_errors=ok)  # raises TrackingError if a write failed
    return [s.summary for s in sweeps]


def _tally(sweep: _Sweep) -> None:
    """Fill the sweep's summary from its recorded outcomes (their writes are done)."""
    summary = sweep.summary
    for outcome, answer in sweep.recorded:
        if answer.result() is False:  # closed as stale by another invocation: not recorded
            summary.n_lost += 1
        elif outcome.error is not None:
            last = outcome.error.strip().splitlines()[-1]
            summary.failed.append(f"{_describe(outcome)}: {last}")
        else:
            summary.finished += 1
            if outcome.result.diverged:
                summary.diverged.append(_describe(outcome))


def print_summary(summary: SweepSummary) -> None:
    """Counts, then one line per failed or diverged trial (stderr)."""
    print(f"{summary.ablation + ': ' if summary.ablation else ''}"
          f"{summary.n_trials} trials: {summary.n_skipped} already finished (skipped), "
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
    as one queue on one scheduler (:func:`run_sweeps`: Ray starts once, packs and slots are
    shared across ablations), printing each ablation's :class:`SweepSummary` and calling
    ``after(name, summary)`` (the end-of-sweep table and plot) as each ablation completes;
    returns whether any trial failed. Used by ``python -m harness`` and ``python -m analysis.report``.

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
            signals.check()  # a signal during ray.init (noted, or swallowed by Python)
            def done(name: str, summary: SweepSummary) -> None:
                print_summary(summary)
                if after is not None:
                    after(name, summary)

            summaries = run_sweeps(list(ablations), scheduler, Tracker(store, lease_s), cli,
                                   force=force, on_done=done)
            any_failed = any(s.failed for s in summaries)
        sys.stdout.flush()
        # the suite is over and recorded: a later signal ends the process as before the suite,
        # not as a KeyboardInterrupt in exit callbacks (a Traceback, exit 0); one that came
        # before these lines is the interrupt below
        signals.restore(previous)
        signals.check()
    except BaseException as stop:
        # SystemExit: SIGTERM while ray.init had its own handler installed (it exits with 15 or,
        # having torn down the new Ray instance, with 1); any other error once signals.STOP is
        # set: a second signal's KeyboardInterrupt (raised at once) landed in a library that
        # turned it into its own error (OmegaConf raises AttributeError); run_sweeps has closed
        # the runs either way
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
