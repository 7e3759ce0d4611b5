"""MLflow writes off the driver's critical path: a :class:`~harness.tracking.Tracker`'s per-trial
writes run in order on one writer thread, so a slow store never holds up starting the next trial
or collecting the next outcome.

The driver calls :meth:`TrackingWriter.log_progress`, :meth:`~TrackingWriter.finish_trial`,
:meth:`~TrackingWriter.end_run`, :meth:`~TrackingWriter.drop` and
:meth:`~TrackingWriter.log_metrics` as it would the tracker's; they return at once
(``finish_trial`` returns a :class:`~concurrent.futures.Future` of the tracker's answer: False
when the run was closed as stale meanwhile). :meth:`~TrackingWriter.claim_batch` is *not* queued: its
answer decides whether the trials run, so it runs on the caller's thread at once (the scheduler's
claim thread; MLflow's client and store are thread-safe, and the claimed runs are new ones that
no queued write touches).
:meth:`~TrackingWriter.flush` waits
until every queued write is done; :meth:`~TrackingWriter.close` flushes, stops the thread and
raises :class:`TrackingError` if any write failed, so a sweep never ends looking recorded when it
is not. Other attributes (``heartbeat``, ``experiment``, ...) pass through to the tracker.
Live learning-curve points are buffered and written together every ``progress_every_s`` seconds
(one ``log_batch`` per run instead of one per point: the store's cost is per call).

On a database store (SQLite, PostgreSQL: the tracker's ``bulk``) the records are written in
batches, group-commit style: the writer thread takes every record queued behind the one it is
at (up to :data:`MAX_RECORDS`) and writes them in one transaction
(:meth:`harness.tracking.Tracker.finish_trials`); it never waits for a batch to fill, so a
record waits at most for the transaction before it (well under :data:`FLUSH_S`) and a pack's
outcomes, which arrive together, go in together. A failed batch fails each of its records
(each closed FAILED where the store still allows it); the failure is kept, typed
(:class:`~harness.records.StoreWriteError`), in :attr:`TrackingWriter.failures`.
"""

from __future__ import annotations

import contextlib
import queue
from concurrent.futures import Future
import sys
import threading
import time
import traceback
from typing import Any, Callable, Optional

from harness.leases import LeaseLost
from harness.records import Outcome, TrackingError, Trial


# A run: its id, or a handle whose ``run_id`` a queued write fills in (an object with ``run_id``
# and ``trial_id``, as the tests' writer makes them).
Run = Any

# How long live learning-curve points wait to be written together (seconds): MLflow's SQLite store
# spends about 13 ms of CPU on a one-point log_batch and 5 ms per point in a batch of 30 (measured
# on the 2-core CPU box), CPU that the driver takes from the workers; the UI's curves lag this much.
PROGRESS_EVERY_S = 10.0
MAX_RECORDS = 512  # records in one transaction at most (a pack of 256 twice over)
# the longest a queued record waits for its batch (the writer never lingers), and on a database
# store how often the live curve points of every running trial are written (one transaction)
FLUSH_S = 2.0
_NOTHING = object()


class TrackingWriter:
    """Queue a tracker's writes on one thread, in call order (see the module docstring).

    Live learning-curve points (:meth:`log_progress`) are buffered and written every
    ``progress_every_s`` seconds, one ``log_batch`` per run; a trial's points still buffered
    when its outcome is recorded are written by ``finish_trial`` with the rest of its curve.

    Args:
        tracker: a :class:`~harness.tracking.Tracker` (or anything with its methods).
        progress_every_s: the buffering interval for live points (0: each point at once; None:
            :data:`FLUSH_S` on a database store, whose flush is one transaction, else
            :data:`PROGRESS_EVERY_S`).
    """

    def __init__(self, tracker: Any, progress_every_s: Optional[float] = None) -> None:
        self.tracker = tracker
        if progress_every_s is None:  # a database store's batch of every run's points is one transaction
            progress_every_s = FLUSH_S if getattr(tracker, "bulk", None) is not None else PROGRESS_EVERY_S
        self.errors: list[str] = []
        self.failures: list[BaseException] = []  # the exceptions behind ``errors`` (typed: StoreWriteError, ...)
        self.writes = 0
        self.lost: Optional[str] = None  # set once the tracker refused a record: the lease is lost
        self.progress_every_s = progress_every_s
        self._points: dict[Any, tuple[Any, list[dict]]] = {}  # run key → (run, buffered points)
        self._points_since = time.monotonic()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="mlflow-writer", daemon=True)
        self._thread.start()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tracker, name)

    def _work(self) -> None:
        pending = _NOTHING
        while True:
            job, pending = (self._queue.get() if pending is _NOTHING else pending), _NOTHING
            if job is None:
                return
            what, call, record = job
            if record is None:
                self._do(what, call)
                continue
            batch = [job]  # the records queued behind it, up to the next other write
            while len(batch) < MAX_RECORDS:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None or nxt[2] is None:
                    pending = nxt
                    break
                batch.append(nxt)
            self._do_records(batch)

    def _do(self, what: str, call: Callable[[], None]) -> None:
        """Run one queued write; a failure is kept for :meth:`close`, a lost lease noted."""
        try:
            call()
        except LeaseLost:  # nothing written: the loop stops at its next safe point
            self._lose(self._lost_reason())
        except Exception as err:  # noqa: BLE001 - recorded; close() raises with it
            self._fail(what, err)

    def _lost_reason(self) -> str:
        return (getattr(getattr(self.tracker, "leases", None), "lost", None)
                or "a write found this driver's parent closed")

    def _fail(self, what: str, err: BaseException) -> None:
        self.failures.append(err)
        self.errors.append(f"{what}: {''.join(traceback.format_exception_only(err)).strip().splitlines()[-1]}")

    def _do_records(self, batch: list) -> None:
        """Write a batch of queued records in one transaction (the module docstring); answer
        each one's future as :meth:`finish_trial` says."""
        items, live = [], []
        for what, _, (handle, outcome, supersede, answer) in batch:
            run_id = _run_id(handle)
            if run_id is None:
                answer.set_result(None)
                self._fail(what, TrackingError("its run was never opened (an earlier write failed)"))
                continue
            items.append((run_id, outcome, supersede))
            live.append((what, run_id, answer))
        if not items:
            return
        try:
            answers = self.tracker.finish_trials(items)
        except LeaseLost:  # found lost inside the transaction: nothing written, not even closings
            self._lose(self._lost_reason())
            answers = [False] * len(items)
        except Exception as err:  # noqa: BLE001 - each record failed; close() raises with it
            for what, run_id, answer in live:
                answer.set_result(None)
                self._fail(what, err)
                with contextlib.suppress(Exception):  # not recorded: FAILED where the store allows it
                    self.tracker.end_run(run_id, "FAILED")
            return
        for (what, run_id, answer), recorded in zip(live, answers):
            if recorded is False and self.lost is None:
                self.lost = f"the run of {what.removeprefix('record ')} was closed by another invocation"
            answer.set_result(recorded)

    def _lose(self, reason: str) -> None:
        """Note that a write found the lease lost (the first reason is kept)."""
        if self.lost is None:
            self.lost = reason

    def _put(self, what: str, call: Optional[Callable[[], None]], record: Optional[tuple] = None) -> None:
        """Queue a write: ``call``, or a ``record`` ``(handle, outcome, supersede, future)``
        written in a batch with the records queued beside it."""
        self.writes += 1
        self._queue.put((what, call, record))

    def claim_batch(self, experiment_id: str, parent_id: str, ablation: str, trials: list[Trial],
                    ignore: set[str] = frozenset(), since_ms: int = 0,
                    stop: Callable[[], bool] = lambda: False) -> list[Optional[str]]:
        """The tracker's :meth:`~harness.tracking.Tracker.claim_batch`, at once on the caller's
        thread (the scheduler's claim thread): one run id per trial, None where it is another
        driver's."""
        return self.tracker.claim_batch(experiment_id, parent_id, ablation, trials, ignore, since_ms, stop)

    def drop(self, run_id: str, why: str) -> None:
        """Queue closing and deleting a claimed run that never started
        (:meth:`harness.leases.Leases.drop`)."""
        self._put(f"drop claimed run {run_id}", lambda: self.tracker.drop(run_id, why))

    def log_metrics(self, run_id: str, metrics: dict[str, float]) -> None:
        """Queue logging ``metrics`` (name → value, at step 0) in a run (a parent's figures)."""
        self._put(f"log metrics of run {run_id}", lambda: self.tracker.log_metrics(run_id, metrics))

    def log_progress(self, run: Run, point: dict[str, float]) -> None:
        """Buffer one learning-curve point of a trial's run (before its finish); the buffered
        points of every run are queued for writing once ``progress_every_s`` has passed."""
        self._points.setdefault(_key(run), (run, []))[1].append(point)
        if time.monotonic() - self._points_since >= self.progress_every_s:
            self._points_since = time.monotonic()
            self._write_points(list(self._points))

    def _write_points(self, keys: list) -> None:
        """Queue writing the buffered points of the runs ``keys``, one batch per run (on a
        database store one transaction for them all)."""
        if getattr(self.tracker, "bulk", None) is not None:
            runs = [self._points.pop(key) for key in keys if key in self._points]
            if runs:
                def log_all(runs=runs) -> None:
                    ready = [(_run_id(run), points) for run, points in runs if _run_id(run) is not None]
                    if ready:
                        self.tracker.log_points_batch(ready)

                self._put(f"log progress of {len(runs)} runs", log_all)
            return
        for key in keys:
            if key not in self._points:
                continue
            run, points = self._points.pop(key)

            def log(run=run, points=points) -> None:
                run_id = _run_id(run)
                if run_id is not None:
                    self.tracker.log_points(run_id, points)

            self._put(f"log progress of {getattr(run, 'trial_id', run)}", log)

    def finish_trial(self, handle: Run, outcome: Outcome, supersede: list[str] = ()) -> Future:
        """Queue recording ``outcome`` in its run (a handle, or a claimed run id) and closing it
        (FINISHED or FAILED). Returns a future of the tracker's answer (False: the run was closed
        as stale by another invocation and nothing was recorded, and :attr:`lost` is set; None
        if the write failed, and then the run is closed FAILED where the store still allows it,
        so that the next invocation reruns the trial)."""
        answer: Future = Future()
        if getattr(outcome, "result", None) is not None:  # its curve has every point: logged there
            self._points.pop(_key(handle), None)
        else:  # a failed trial records no curve: keep the points that came live
            self._write_points([_key(handle)])
        if getattr(self.tracker, "bulk", None) is not None:  # batched with its neighbours
            self._put(f"record trial {getattr(handle, 'trial_id', handle)}", None,
                      (handle, outcome, supersede, answer))
            return answer

        def finish() -> None:
            run_id = _run_id(handle)
            try:
                if run_id is None:
                    raise TrackingError("its run was never opened (an earlier write failed)")
                recorded = self.tracker.finish_trial(run_id, outcome, supersede)
            except LeaseLost:  # found lost mid-record: nothing more written, not even its closing
                recorded = False
            except BaseException:
                answer.set_result(None)
                if run_id is not None:  # not recorded: FAILED where the store still allows it
                    with contextlib.suppress(Exception):
                        self.tracker.end_run(run_id, "FAILED")
                raise
            if recorded is False and self.lost is None:
                self.lost = f"the run of trial {getattr(handle, 'trial_id', run_id)} was closed by another invocation"
            answer.set_result(recorded)

        self._put(f"record trial {getattr(handle, 'trial_id', handle)}", finish)
        return answer

    def end_run(self, run: Run, status: str = "FINISHED") -> None:
        """Queue closing a run (a handle, or a run id such as the parent's) with ``status``,
        after writing its buffered learning-curve points (an interrupted trial keeps them)."""
        self._write_points([_key(run)])

        def end() -> None:
            run_id = _run_id(run)
            if run_id is not None:
                self.tracker.end_run(run_id, status)

        self._put(f"close run {getattr(run, 'trial_id', run)} as {status}", end)

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Write the buffered points and wait until every write queued so far is done
        (``timeout`` seconds at most); returns whether it is."""
        self._write_points(list(self._points))
        done = threading.Event()
        self._queue.put(("flush", done.set, None))
        return done.wait(timeout)

    def close(self, raise_errors: bool = True, quiet: bool = False) -> None:
        """Wait for every queued write (flush) and stop the thread.

        Raises:
            TrackingError: if any write failed (``raise_errors``; else the failures are one
                line on stderr, unless ``quiet``), naming how many and the first.
        """
        self._write_points(list(self._points))
        self._queue.put(None)
        self._thread.join()
        if not self.errors:
            return
        store = getattr(getattr(self.tracker, "store", None), "uri", "the tracking store")
        message = (f"{len(self.errors)} of {self.writes} MLflow writes to {store} failed; "
                   f"first: {self.errors[0]}")
        if raise_errors:
            raise TrackingError(message) from self.failures[0] if self.failures else None
        if not quiet:
            print(f"error: {message}", file=sys.stderr)


def _run_id(run: Run) -> Optional[str]:
    """A run's id: the run id itself, or a handle's ``run_id`` (None while not yet known)."""
    return run if isinstance(run, str) else run.run_id


def _key(run: Run) -> Any:
    """A run's key in the point buffer: the id, or the handle itself (its id may not be known yet)."""
    return run if isinstance(run, str) else id(run)
