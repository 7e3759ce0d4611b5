"""One owner for a sweep's life: :class:`Sweep` runs the checks (preflight, cluster, store,
experiments), starts the scheduler, runs the queue (:mod:`harness.loop`), holds the stop flag
and the signal policy, and maps errors to the exit status. ``python -m harness`` and
``python -m analysis.report`` (and its rerun rounds) both run their sweeps through it.

Signal policy (README "Faults"): a first SIGINT or SIGTERM is noted in the sweep's own stop flag
(:mod:`harness.signals` installs the handlers) and the sweep stops at its next safe point (a
trial's start, a learning-curve point, an outcome, each second of a wait for Ray, after Ray
starts); a second one raises at once. Running trials are then cancelled and closed as KILLED,
finished ones stay recorded, and the process ends with exit status 130. Only this module reads
the flag: the scheduler and the queue get its ``should_stop`` callable.

Exit status (:meth:`Sweep.main`): 0 every trial finished; 1 some trial failed, or some of the
sweep is not recorded (a failed write, a lost lease), or Ray's local instance timed out at
start-up twice (a busy machine: :class:`harness.scheduler.RayStartError`); 2 bad input (nothing run or recorded);
130 interrupted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Callable, Sequence

from harness import signals
from harness.config import ClusterConfig, SchedulerKind
from harness.records import SweepSummary, TrackingError, Trial, store_fault, store_fault_line
from harness.console import print_summary
from harness.scheduler import RayStartError, make_scheduler
from harness.secrets import mask
from harness.store import Store, check_experiments, check_store, experiments, finished_trials, has_running
from harness.validate import check_cluster, preflight

if TYPE_CHECKING:  # imported where a trial will run (_run_queue): they import MLflow
    from harness.loop import OnDone, Scheduler

INTERRUPTED = 130  # exit status of an interrupted sweep (128 + SIGINT, as a shell reports it)


class Sweep:
    """A composed suite's ablations (``[(name, trials)]``, :func:`harness.expansion.expand_suite`)
    run as one queue on one scheduler, from the checks to the exit status.

    Args:
        ablations: ``[(name, trials)]``.
        cluster, store: where the trials run and are recorded.
        cli: the command line's overrides (recorded in each parent run).
        lease_s: ``tracking.lease_s``.
        force: rerun finished trials.
        relocate_artifacts: ``tracking.relocate_artifacts``: point an experiment whose artifacts
            live outside this store's folder (a copied or moved store) at this store's folder.
    """

    def __init__(self, ablations: Sequence[tuple[str, list[Trial]]], cluster: ClusterConfig,
                 store: Store, cli: list[str], lease_s: float, force: bool = False,
                 relocate_artifacts: bool = False) -> None:
        self.ablations, self.cluster, self.store = list(ablations), cluster, store
        self.cli, self.lease_s, self.force = cli, lease_s, force
        self.relocate_artifacts = relocate_artifacts
        self.stop = threading.Event()  # this sweep's: set by a first signal while it runs
        # ablation → {trial id: its FINISHED run ids} before this invocation, read once (check())
        self.finished: dict[str, dict[str, list[str]]] | None = None
        self.finished_at_ms = 0  # when finished was read (ms since the epoch)
        self.checked = False  # check() ran: main() does not run it again

    def should_stop(self) -> bool:
        """Whether a signal asked this sweep to stop (what the scheduler and queue are given)."""
        return self.stop.is_set()

    def check(self, dry_run: bool = False) -> None:
        """Everything that can be checked before a trial starts, once per invocation: the
        cluster values; unless ``dry_run``, the store and experiments; the finished trials
        (read once, here: the dry run's "done" column, the preflight and the queue's resume plan
        all use :attr:`finished`; a dry run reads a store only if it exists, and never creates
        one); then the device, pack size, tasks and models of the trials that will run (those
        already FINISHED are not built again: a no-op resume builds none), or of every trial in
        a dry run.

        Raises:
            ValueError: bad input (:class:`harness.expansion.SweepError`,
                :class:`harness.store.StoreError`), one line naming the value.
        """
        check_cluster(self.cluster)
        names = [name for name, _ in self.ablations]
        if not dry_run:
            check_store(self.store, names, self.relocate_artifacts)
            check_experiments(self.store, names)
        self._read_finished()
        skip = {} if self.force or dry_run else self.finished
        preflight([t for name, trials in self.ablations for t in trials
                   if t.trial_id not in skip.get(name, ())], self.cluster.device, self.cluster.pack_size)
        self.checked = True

    def _read_finished(self) -> None:
        """:attr:`finished`: each ablation's trials with a FINISHED run, and those runs' ids."""
        self.finished_at_ms = int(time.time() * 1000)  # as leases.now_ms; before the read: a run that ends during it is read again
        self.finished = {name: finished_trials(self.store, name, {t.trial_id for t in trials})
                         for name, trials in self.ablations}

    def _nothing_to_run(self) -> dict[str, str] | None:
        """``ablation → experiment id`` if this is a no-op resume: every trial already has a
        FINISHED run (and no ``force``), every experiment exists and none holds a RUNNING run
        (a live sweep's, or a stale one that a sweep with trials would close); else ``None``.
        Reads the store (by SQL where it is local) and opens no MLflow client; lists the
        finished trials unless :meth:`check` did."""
        if self.finished is None:
            self._read_finished()
        if self.force:
            return None
        names = [name for name, _ in self.ablations]
        if any(t.trial_id not in self.finished[name] for name, trials in self.ablations for t in trials):
            return None
        found = experiments(self.store, names)
        if any(found.get(name, ("", ""))[1] != "active" for name in names):
            return None
        ids = {name: found[name][0] for name in names}
        return None if any(has_running(self.store, i) for i in set(ids.values())) else ids

    def _scheduler(self, stack: contextlib.ExitStack) -> Scheduler:
        """The entered scheduler: Ray starts once, its own SIGTERM handlers noting the signal."""
        scheduler = make_scheduler(self.cluster, should_stop=self.should_stop)
        noting = (contextlib.nullcontext() if self.cluster.scheduler is SchedulerKind.serial
                  else signals.noting_ray_handlers(self.stop))
        with noting:
            stack.enter_context(scheduler)
        return scheduler

    def run(self, after: OnDone = None) -> bool:
        """Run the suite, printing each ablation's :class:`SweepSummary` and calling
        ``after(name, summary)`` (the end-of-sweep table and plot) as each ablation completes;
        returns whether any trial failed. Once the suite is over the signal handlers found on
        entry are back. A no-op resume (:meth:`_nothing_to_run`) starts no scheduler (no Ray),
        imports no MLflow and writes no run: it prints each ablation's summary at once.

        An interrupt ends the process with exit status 130 once Ray is down (:meth:`_interrupted`).

        Raises:
            harness.records.TrackingError: the sweep ran, but some of it is not recorded.
            ValueError: the cluster cannot run a trial (nothing was recorded).
        """
        previous = signals.install(self.stop)  # SIGINT and SIGTERM (Slurm, Kubernetes)
        try:
            done = self._done(after)
            resumed = self._nothing_to_run()
            if resumed is not None:
                summaries = [SweepSummary(resumed[name], "", len(trials), len(trials), 0, ablation=name)
                             for name, trials in self.ablations]
                for summary in summaries:
                    done(summary.ablation, summary)
            else:
                summaries = self._run_queue(done)
            sys.stdout.flush()
            # the suite is over and recorded: a later signal ends the process as before the
            # suite, not as a KeyboardInterrupt in exit callbacks (a Traceback, exit 0); one that
            # came before these lines is the interrupt below
            signals.restore(previous)
            self._stop_point()
        except BaseException as stop:
            self._interrupted(stop)
            raise
        return any(s.failed for s in summaries)

    def _run_queue(self, done: Callable[[str, SweepSummary], None]) -> list[SweepSummary]:
        """The suite as one queue on one scheduler (:func:`harness.loop.run_sweeps`), Ray shut
        down before this returns."""
        # MLflow (about 2 s to import and open) only where a trial will run or be recorded
        from harness.loop import run_sweeps
        from harness.tracking import Tracker

        with contextlib.ExitStack() as stack:
            # Ray first: its workers start (and import the trial code) while MLflow opens
            scheduler = self._scheduler(stack)
            signals.install(self.stop)  # again: ray.init installed its own SIGTERM handler
            self._stop_point()  # a signal during ray.init (noted, or swallowed by Python)
            tracker = Tracker(self.store, self.lease_s)
            return run_sweeps(self.ablations, scheduler, tracker, self.cli, force=self.force,
                              on_done=done, should_stop=self.should_stop, finished=self.finished,
                              closing=signals.closing, finished_at_ms=self.finished_at_ms)

    def _stop_point(self) -> None:
        if self.stop.is_set():
            raise KeyboardInterrupt("interrupt requested")

    @staticmethod
    def _done(after: OnDone) -> Callable[[str, SweepSummary], None]:
        def done(name: str, summary: SweepSummary) -> None:
            print_summary(summary)
            if after is not None:
                after(name, summary)

        return done

    def _interrupted(self, stop: BaseException) -> None:
        """End the process with 130 if ``stop`` is an interrupt; return otherwise (re-raised).

        SystemExit: SIGTERM while ray.init had its own handler installed (it exits with 15 or,
        having torn down the new Ray instance, with 1); any other error once the flag is set: a
        second signal's KeyboardInterrupt (raised at once) landed in a library that turned it
        into its own error (OmegaConf raises AttributeError); the queue has closed the runs
        either way."""
        sigterm = isinstance(stop, SystemExit) and stop.code == signal.SIGTERM
        if not (isinstance(stop, KeyboardInterrupt) or sigterm or self.stop.is_set()):
            return
        if signals.CLOSING.cut:  # a third signal cut the closing short: say what it left
            print("interrupted while closing: some runs of this sweep may stay RUNNING until their lease "
                  "(tracking.lease_s) expires, when the next invocation closes them; finished ones are "
                  "recorded, and the same command resumes", file=sys.stderr)
        else:
            print("interrupted: running trials cancelled and closed as KILLED; finished ones are "
                  "recorded, and the same command resumes", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        # Ray is shut down and every run closed; skip the interpreter's teardown, where Ray's C++
        # core, having seen the SIGTERM, can abort (-6) or re-raise it (-15) after our message
        os._exit(INTERRUPTED)

    def main(self, after: OnDone = None) -> int:
        """:meth:`check` (unless the caller ran it), then :meth:`run`; the exit status (module
        docstring), each error as one ``error:`` line on stderr."""
        try:
            if not self.checked:
                self.check()
        except ValueError as err:  # SweepError, StoreError: bad input, nothing run or recorded
            return _error(err, 2)
        try:
            any_failed = self.run(after)
        except (TrackingError, RayStartError) as err:  # not recorded; or Ray did not start (busy)
            return _error(self._fault_line(err) or err, 1)
        except ValueError as err:  # the cluster cannot run a trial; nothing was recorded
            return _error(err, 2)
        except Exception as err:  # noqa: BLE001 - a store fault is one line, anything else re-raised
            # an artifact that could not be written (ENOSPC), MLflow's REST client out of retries
            line = self._fault_line(err)
            if line is None:
                raise
            return _error(line, 1)
        return 1 if any_failed else 0

    def _fault_line(self, err: BaseException) -> str | None:
        """:func:`harness.records.store_fault_line` of this sweep's store if ``err`` (or what
        caused it) is a fault of the store (full, locked, unreachable, ...), else None."""
        fault = store_fault(err)
        if fault is None or fault[0] == "schema":  # a refusal before any trial: its own line says what to do
            return None
        return store_fault_line(mask(self.store.uri), *fault)


def _error(err: Exception | str, status: int) -> int:
    print(f"error: {err}", file=sys.stderr)
    return status


def run_suite(ablations: Sequence[tuple[str, list[Trial]]], cluster: ClusterConfig, store: Store,
              cli: list[str], lease_s: float, force: bool = False, after: OnDone = None) -> bool:
    """:meth:`Sweep.run` of a new :class:`Sweep` (no checks): whether any trial failed."""
    return Sweep(ablations, cluster, store, cli, lease_s, force).run(after)
