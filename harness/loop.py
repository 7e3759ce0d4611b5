"""The sweep loop: skip finished trials, run the rest on a scheduler, record every outcome.

Resume is by trial id: a trial whose id already has a FINISHED run in the ablation's experiment
is skipped (``force=true`` reruns it and deletes the old run once the new one finishes).
Because the id leaves out where a trial runs, a sweep started on a laptop and resumed on a
cluster against the same store skips what the laptop finished.

Several invocations of one ablation may run at once on one store: trials are claimed in batches
before they start (:meth:`Queue.prepare`, :meth:`harness.tracking.Tracker.claim_batch`), on the
scheduler's claim thread ahead of the slots, so each runs in one invocation only and the others
skip it; a driver's runs stay claimed while its heartbeat renews its lease, and a driver that
lost its lease stops (:mod:`harness.leases`).

No signal handling here: the sweep that owns this loop (:class:`harness.sweep.Sweep`) gives a
``should_stop`` callable, read at the loop's safe points (a trial's start, each learning-curve
point, each outcome); when it answers True the loop raises ``KeyboardInterrupt`` there, never
inside a call to the store.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Callable, ContextManager, Mapping, Optional, Sequence

from tqdm import tqdm

from harness.console import MEASURED_AT, MEASURED_MIN_TRIALS, measured_line
from harness.leases import lease_lost, now_ms
from harness.records import Outcome, SweepSummary, Trial, store_fault
from harness.scheduler import RayScheduler, SerialScheduler
from harness.tracking import Tracker
from harness.writer import TrackingWriter

Scheduler = RayScheduler | SerialScheduler
WAIT_POLL_S = 0.5  # seconds between two reads while waiting for another invocation's trials
OnDone = Optional[Callable[[str, "SweepSummary"], None]]


def _describe(outcome: Outcome) -> str:
    t = outcome.trial
    return f"{t.trial_id} {t.variant} {' '.join(t.overrides)}"


@dataclass
class _Ablation:
    """One ablation's share of the queue: its experiment, what is left to run, and the outcomes
    recorded so far (each with the future of ``finish_trial``'s answer)."""

    finished: dict[str, list[str]]  # trial id → FINISHED run ids before this invocation
    todo: list[Trial]
    superseded: set[str]  # old FINISHED runs a forced rerun replaces (the claim ignores them)
    summary: SweepSummary
    left: int  # trials not yet come back (or skipped as another invocation's)
    first_claim: Optional[float] = None  # time.perf_counter() of its first claim
    last_back: Optional[float] = None  # time.perf_counter() when its last trial came back
    elsewhere: list[str] = field(default_factory=list)  # trial ids another invocation had claimed
    heartbeat: object = None  # the entered Heartbeat of the parent run, until the sweep ends
    recorded: list = field(default_factory=list)


def _never() -> bool:
    return False


class Queue:
    """The trials of several ablations as one queue on one scheduler, each ablation recorded as
    its own sweep (:func:`run_sweeps` documents the behaviour). One method per stage: resume
    (:meth:`plan`), open the parents (:meth:`open`), claim (:meth:`on_start`), live curves
    (:meth:`on_progress`), record (:meth:`record`), close an ablation (:meth:`end`) and close
    what is left after an interrupt or error (:meth:`close`)."""

    def __init__(self, tracker: Tracker, cli: list[str], force: bool = False, on_done: OnDone = None,
                 should_stop: Callable[[], bool] = _never) -> None:
        self.tracker, self.cli, self.force, self.on_done = tracker, cli, force, on_done
        self.should_stop = should_stop
        self.ablations: list[_Ablation] = []
        self.owner: dict[int, _Ablation] = {}  # id(trial) of each queued trial → its ablation
        self.queue: list[Trial] = []
        self.running: dict[int, str] = {}  # id(trial) → its claimed run
        self.claimed: dict[int, Optional[str]] = {}  # id(trial) → its run claimed ahead (None: lost), not yet started
        self.since_ms = 0  # rivals that finished before this were skipped by the plan (bakery reads)
        self.open_parents: list[_Ablation] = []
        self.writer = TrackingWriter(tracker)  # per-trial writes on a writer thread
        self.bar: Optional[tqdm] = None
        self.n_failed = 0  # outcomes with an error so far (the progress bar's count)
        self.n_elsewhere = 0  # trials skipped as another invocation's (the progress bar's count)
        self.waiting: list[_Ablation] = []  # done here, some trials still run by another invocation

    def _safe_point(self) -> None:
        """Stop here if the sweep says so (an interrupt), or if this driver lost its lease."""
        if self.should_stop():
            raise KeyboardInterrupt("interrupt requested")
        self._check_lease()

    def _check_lease(self) -> None:
        """Raise :class:`harness.leases.LeaseLost` if a write or a read found the lease lost."""
        leases = getattr(self.tracker, "leases", None)
        reason = self.writer.lost or (leases.lost if leases is not None else None)
        if reason is not None:
            error = lease_lost(reason)
            error.__cause__ = getattr(leases, "fault", None)  # a store fault: its one line (harness.sweep)
            raise error

    def plan(self, groups: Sequence[tuple[str, list[Trial]]],
             known: Mapping[str, dict[str, list[str]]] | None = None, known_at_ms: int = 0) -> None:
        """Per ablation: its experiment, stale runs closed, finished trials skipped (resume).
        ``known``: ablation → its trials' FINISHED run ids as the caller already read them at
        ``known_at_ms`` (:meth:`harness.sweep.Sweep.check`), so one invocation reads them once;
        the claims then read the rivals that finished since that read (less a lease), so a trial
        a rival finishes after it loses its claim (:meth:`on_start`) instead of running twice
        (Ray's start between the read and this plan can outlast a short lease)."""
        read_ms = now_ms() if known is None else known_at_ms
        # clocks agree within a lease; 0 (no read time given) reads every finished rival
        self.since_ms = max(0, read_ms - int(self.tracker.lease_s * 1000)) if read_ms else 0
        for ablation, trials in groups:
            experiment = self.tracker.experiment(ablation)
            stale = self.tracker.close_stale(experiment)
            finished = (known[ablation] if known is not None and ablation in known
                        else self.tracker.finished_trials(experiment, {t.trial_id for t in trials}))
            todo = trials if self.force else [t for t in trials if t.trial_id not in finished]
            todo = [replace(t) if id(t) in self.owner else t for t in todo]  # one object per queued trial
            superseded = ({run for t in todo for run in finished.get(t.trial_id, [])}
                          if self.force else set())
            summary = SweepSummary(experiment, "", len(trials), len(trials) - len(todo), stale,
                                   ablation=ablation)
            sweep = _Ablation(finished, todo, superseded, summary, len(todo))
            self.ablations.append(sweep)
            for trial in todo:
                self.owner[id(trial)] = sweep
                self.queue.append(trial)

    def open(self) -> None:
        """Open the parent run of each ablation with trials to run and start its heartbeat (the
        lease); an ablation whose trials all finished before writes no run (its summary's
        ``parent_id`` stays empty)."""
        for sweep in self.ablations:
            if not sweep.todo:
                continue
            summary = sweep.summary
            summary.parent_id = self.tracker.start_parent(summary.experiment_id, summary.ablation,
                                                          len(sweep.todo), summary.n_skipped, self.cli)
            sweep.heartbeat = self.tracker.heartbeat(summary.parent_id)
            sweep.heartbeat.__enter__()
            self.open_parents.append(sweep)

    def _back(self, sweep: _Ablation) -> None:
        """One of ``sweep``'s trials is back (or skipped): close the ablation after its last."""
        sweep.left -= 1
        if sweep.left == 0:
            sweep.last_back = time.perf_counter()
            if sweep.elsewhere:
                self.waiting.append(sweep)  # ended by _await_elsewhere, once the scheduler is done
            else:
                self.end(sweep)

    def prepare(self, trials: list[Trial]) -> None:
        """Claim ``trials`` before they start, one bakery round per ablation among them (the
        scheduler calls this on its claim thread, ahead of the slots; :meth:`on_start` then
        takes each claim). Claims nothing once the sweep should stop."""
        if self.should_stop():
            return
        groups: dict[int, list[Trial]] = {}
        for trial in trials:
            groups.setdefault(id(self.owner[id(trial)]), []).append(trial)
        for group in groups.values():
            sweep = self.owner[id(group[0])]
            summary = sweep.summary
            if sweep.first_claim is None:
                sweep.first_claim = time.perf_counter()
            runs = self.writer.claim_batch(summary.experiment_id, summary.parent_id, summary.ablation,
                                           group, sweep.superseded, self.since_ms, self.should_stop)
            self.claimed.update(zip(map(id, group), runs))

    def on_start(self, trial: Trial) -> bool:
        """The scheduler is about to start ``trial``: take its claim (made now if it was not
        made ahead); False if the trial is another invocation's."""
        self._safe_point()  # before the claim: an interrupt never stops a claim half done
        if id(trial) not in self.claimed:
            self.prepare([trial])
        run_id = self.claimed.pop(id(trial))
        sweep = self.owner[id(trial)]
        if run_id is None:  # another invocation runs or finished it
            sweep.summary.n_elsewhere += 1
            sweep.elsewhere.append(trial.trial_id)
            self.n_elsewhere += 1
            self._tick()
            self._back(sweep)
            return False
        self.running[id(trial)] = run_id
        return True

    def on_progress(self, trial: Trial, point: dict) -> None:
        """A learning-curve point of a running trial, as it is measured."""
        self._safe_point()
        if id(trial) in self.running:
            self.writer.log_progress(self.running[id(trial)], point)

    def record(self, outcome: Outcome) -> None:
        """Queue recording an outcome in its claimed run; close its ablation after its last."""
        self._safe_point()
        key = id(outcome.trial)
        sweep = self.owner[key]
        old = sweep.finished.get(outcome.trial.trial_id, []) if self.force else []
        sweep.recorded.append((outcome, self.writer.finish_trial(self.running[key], outcome, old)))
        del self.running[key]  # after: an interrupt mid-way closes it KILLED
        self.n_failed += outcome.error is not None
        self._tick()
        self._back(sweep)

    def _tick(self) -> None:
        """One more trial back (recorded, or another invocation's): the bar's count and its
        parts, which add up to it (done + failed + elsewhere = the count); once a tenth of a
        sweep of at least ten trials is back, one line with the measured rate and the time left
        (:func:`harness.console.measured_line`), which replaces any estimate printed before."""
        self.bar.update(1)
        parts = dict(done=self.bar.n - self.n_failed - self.n_elsewhere, failed=self.n_failed)
        if self.n_elsewhere:
            parts["elsewhere"] = self.n_elsewhere
        self.bar.set_postfix(**parts, remaining=self.bar.total - self.bar.n)
        total = self.bar.total
        if total >= MEASURED_MIN_TRIALS and self.bar.n == max(1, math.ceil(MEASURED_AT * total)):
            tqdm.write(measured_line(self.bar.desc, self.bar.n, total, self.bar.format_dict["elapsed"],
                                     os.cpu_count() or 1))

    def end(self, sweep: _Ablation) -> None:
        """The ablation's last trial is back: tally it, close its parent (FAILED if a record
        failed; left as it is if another invocation closed it) and report it (``on_done``)."""
        self.writer.flush()  # its trials' records are written: their answers are known
        if sweep.first_claim is not None:  # to its last record written (the writer's queue drained),
            # or, if it then waited for a rival's trials, to when its own last trial came back
            last = sweep.last_back if sweep.elsewhere and sweep.last_back else time.perf_counter()
            sweep.summary.trial_phase_s = last - sweep.first_claim
        _tally(sweep)
        if sweep.heartbeat is not None:  # it had a parent (it had trials to run)
            # the heartbeat stops before this driver closes its own parent: a beat that read the
            # parent closed would take it for another invocation's close (a lost lease); its
            # trials' records are written (above), and the last beat holds the lease for the
            # two writes left
            sweep.heartbeat.__exit__(None, None, None)
            if sweep.summary.finished and sweep.summary.trial_phase_s > 0:
                self.writer.log_metrics(sweep.summary.parent_id, _phase_metrics(sweep.summary))
            status = "FAILED" if sweep.summary.n_unrecorded else "FINISHED"
            self.writer.end_run(sweep.summary.parent_id, status)
            self.writer.flush()
            self.open_parents.remove(sweep)
        self._check_lease()  # a lost lease: no summary either (it would write into the closed parent)
        if self.on_done is not None:
            with tqdm.external_write_mode():  # the progress bar is still open: print below it
                self.on_done(sweep.summary.ablation, sweep.summary)
                sys.stdout.flush()

    def run(self, scheduler: Scheduler) -> None:
        """Run the queue on ``scheduler`` and record every outcome as it arrives."""
        self.open()
        desc = (self.ablations[0].summary.ablation if len(self.ablations) == 1
                else f"{len(self.ablations)} ablations")
        with tqdm(total=len(self.queue), desc=desc, unit="trial", dynamic_ncols=True) as self.bar:
            for sweep in [s for s in self.ablations if s.left == 0]:  # nothing to run: done at once
                self.end(sweep)
            # closing: the claim thread stops before close() reads what it claimed
            with contextlib.closing(scheduler.run(self.queue, self.on_start, self.on_progress,
                                                  self.prepare)) as outcomes:
                for outcome in outcomes:
                    self.record(outcome)
            self._await_elsewhere()
        self._safe_point()  # a record refused in the last ablation's end(): the lease is lost

    def _await_elsewhere(self) -> None:
        """End each ablation of :attr:`waiting` once no live rival driver holds any of the trials
        it skipped as another invocation's (the same sweep started twice): each invocation's
        summary then tables every trial of its sweep that finished, not just its own share. A
        rival that dies or is interrupted holds nothing; those trials stay unfinished (the same
        command reruns them). This driver's own records are written first: a rival may be
        waiting for them."""
        if not self.waiting:
            return
        self.writer.flush()
        for sweep in self.waiting:
            summary, told = sweep.summary, False
            while True:
                self._safe_point()  # an interrupt ends the wait (those trials stay the rival's)
                held = self.tracker.held_elsewhere(summary.experiment_id, summary.parent_id, sweep.elsewhere)
                if not held:
                    break
                if not told:
                    tqdm.write(f"{summary.ablation}: waiting for {len(held)} trials that another invocation "
                               "runs, for the summary (an interrupt stops waiting; they stay its)", file=sys.stderr)
                    told = True
                time.sleep(WAIT_POLL_S)
            done = self.tracker.finished_trials(summary.experiment_id, sweep.elsewhere)
            summary.n_elsewhere_unfinished = len(set(sweep.elsewhere) - set(done))
            self.end(sweep)
        self.waiting.clear()

    def close(self, ok: bool, quiet: bool = False) -> None:
        """Close what is still open (interrupted, or an error): running trials and parents
        KILLED (unless another invocation closed them), heartbeats stopped; then wait for every
        write. Raises :class:`harness.records.TrackingError` if a write failed (``ok``; else
        the failures are one line on stderr, none if ``quiet``)."""
        for run_id in self.running.values():
            self.writer.end_run(run_id, "KILLED")
        for run_id in filter(None, self.claimed.values()):  # claimed ahead, never started
            self.writer.drop(run_id, "not started: the sweep stopped first")
        for sweep in self.open_parents:  # interrupted (or a parent that failed to open)
            if sweep.heartbeat is not None:  # first, as in end()
                sweep.heartbeat.__exit__(None, None, None)
            self.writer.end_run(sweep.summary.parent_id, "KILLED")
        self.writer.close(raise_errors=ok, quiet=quiet)


def run_sweep(trials: list[Trial], scheduler: Scheduler, tracker: Tracker, ablation: str,
              cli: list[str], force: bool = False) -> SweepSummary:
    """Run the trials of ``ablation`` not yet finished and record each outcome as it arrives
    (:func:`run_sweeps` with one ablation)."""
    return run_sweeps([(ablation, trials)], scheduler, tracker, cli, force)[0]


def run_sweeps(groups: Sequence[tuple[str, list[Trial]]], scheduler: Scheduler, tracker: Tracker,
               cli: list[str], force: bool = False, on_done: OnDone = None,
               should_stop: Callable[[], bool] = _never,
               finished: Mapping[str, dict[str, list[str]]] | None = None,
               closing: Callable[[], ContextManager] = contextlib.nullcontext,
               finished_at_ms: int = 0) -> list[SweepSummary]:
    """Run the not yet finished trials of several ablations (``[(name, trials)]``) as one queue
    on ``scheduler`` and record each outcome in its ablation's experiment as it arrives; returns
    one :class:`SweepSummary` per ablation, in the order given.

    One queue, not one sweep after another: the scheduler packs and orders the trials of every
    ablation together (:func:`harness.scheduler.plan`), so no slot idles while one ablation's
    last pack runs and small groups (a few reruns per ablation) still fill packs. Each ablation
    keeps its own experiment, parent run (opened at the start, holding this driver's lease) and
    summary; once its last trial is recorded its parent is closed and ``on_done(name, summary)``
    is called (the end-of-sweep table and plot), so ablations end in completion order; an
    ablation some of whose trials another live invocation had claimed ends once that invocation
    no longer holds them (:meth:`Queue._await_elsewhere`), so its table has every finished trial.

    On an interrupt (``should_stop()`` answering True at a safe point, or a KeyboardInterrupt)
    the running trials are cancelled, their runs and the open parent runs are closed as KILLED,
    and ``KeyboardInterrupt`` propagates; everything that finished stays recorded.

    ``closing()``: the context the runs are closed in (the sweep's: a second signal does not
    cut the closing short, :func:`harness.signals.closing`).

    ``scheduler`` is an entered scheduler (:func:`harness.scheduler.make_scheduler`), shared by
    the rounds of a suite so that Ray starts once. ``finished``: the trials' FINISHED run ids per
    ablation as the caller read them at ``finished_at_ms`` (ms since the epoch; :meth:`Queue.plan`);
    read from the store if not given.

    Raises:
        harness.records.TrackingError: the trials ran, but some writes to the store failed.
        harness.leases.LeaseLost: another invocation closed this driver's runs as stale; it
            claimed and recorded nothing more.
    """
    queue = Queue(tracker, cli, force, on_done, should_stop)
    try:
        queue.plan(groups, finished, finished_at_ms)
        queue.run(scheduler)
    except BaseException as stopped:
        with closing():
            # a store fault that stopped the sweep is its one error line: the closing writes
            # it makes fail too are the same fault, not lines of their own
            queue.close(False, quiet=store_fault(stopped) is not None)
        raise
    queue.close(True)  # raises TrackingError if a write failed
    return [s.summary for s in queue.ablations]


def _tally(sweep: _Ablation) -> None:
    """Fill the sweep's summary from its recorded outcomes (their writes are done)."""
    summary = sweep.summary
    for outcome, answer in sweep.recorded:
        if answer.result() is False:  # closed as stale by another invocation: not recorded
            summary.n_lost += 1
        elif answer.result() is None:  # the write failed: not recorded (rerun by the next invocation)
            summary.n_unrecorded += 1
        elif outcome.error is not None:
            last = outcome.error.strip().splitlines()[-1]
            summary.failed.append(f"{_describe(outcome)}: {last}")
        else:
            summary.finished += 1
            if outcome.result.diverged:
                summary.diverged.append(_describe(outcome))


def _phase_metrics(summary: SweepSummary) -> dict[str, float]:
    """The parent run's figures of its trial phase: seconds, and trials recorded per second."""
    return {"sweep/trial_phase_s": summary.trial_phase_s,
            "sweep/trials_per_s": summary.finished / summary.trial_phase_s}
