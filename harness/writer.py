"""MLflow writes off the driver's critical path: a :class:`~harness.tracking.Tracker`'s per-trial
calls run in order on one writer thread, so a slow store never holds up starting the next trial
or collecting the next outcome.

The driver calls :meth:`TrackingWriter.start_trial`, :meth:`~TrackingWriter.finish_trial` and
:meth:`~TrackingWriter.end_run` as it would the tracker's; they return at once (``start_trial``
returns a :class:`RunHandle` that the writer fills with the run id). :meth:`~TrackingWriter.close`
waits until every queued write is done and raises :class:`TrackingError` if any failed, so a
sweep never ends looking recorded when it is not. Only the writer thread uses the tracker between
the first queued call and ``close``; other attributes pass through to the tracker unchanged.
"""

from __future__ import annotations

import queue
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Optional

from harness.scheduler import Outcome
from harness.sweep import Trial


class TrackingError(RuntimeError):
    """Writes to the tracking store failed (raised by :meth:`TrackingWriter.close`)."""


@dataclass
class RunHandle:
    """A trial run opened by the writer thread: ``run_id`` once its ``create_run`` is done
    (``None`` until then, and for ever if it failed)."""

    trial_id: str
    run_id: Optional[str] = None


class TrackingWriter:
    """Queue a tracker's writes on one thread, in call order (see the module docstring).

    Args:
        tracker: a :class:`~harness.tracking.Tracker` (or anything with its methods).
    """

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self.errors: list[str] = []
        self.writes = 0
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="mlflow-writer", daemon=True)
        self._thread.start()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tracker, name)

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            what, call = job
            try:
                call()
            except Exception:  # noqa: BLE001 - recorded; close() raises with it
                self.errors.append(f"{what}: {traceback.format_exc().strip().splitlines()[-1]}")

    def _put(self, what: str, call: Callable[[], None]) -> None:
        self.writes += 1
        self._queue.put((what, call))

    def start_trial(self, experiment_id: str, parent_id: str, ablation: str, trial: Trial) -> RunHandle:
        """Queue opening the trial's RUNNING child run; returns its handle at once."""
        handle = RunHandle(trial.trial_id)

        def start() -> None:
            handle.run_id = self.tracker.start_trial(experiment_id, parent_id, ablation, trial)

        self._put(f"start trial {trial.trial_id}", start)
        return handle

    def finish_trial(self, handle: RunHandle, outcome: Outcome, supersede: list[str] = ()) -> None:
        """Queue recording ``outcome`` in its run and closing it (FINISHED or FAILED)."""
        def finish() -> None:
            if handle.run_id is None:
                raise TrackingError("its run was never opened (an earlier write failed)")
            self.tracker.finish_trial(handle.run_id, outcome, supersede)

        self._put(f"record trial {handle.trial_id}", finish)

    def end_run(self, run: RunHandle | str, status: str = "FINISHED") -> None:
        """Queue closing a run (a handle, or a run id such as the parent's) with ``status``."""
        def end() -> None:
            run_id = run.run_id if isinstance(run, RunHandle) else run
            if run_id is not None:
                self.tracker.end_run(run_id, status)

        self._put(f"close run {getattr(run, 'trial_id', run)} as {status}", end)

    def close(self, raise_errors: bool = True) -> None:
        """Wait for every queued write (flush) and stop the thread.

        Raises:
            TrackingError: if any write failed (``raise_errors``; else the failures go to
                stderr), naming how many and the first.
        """
        self._queue.put(None)
        self._thread.join()
        if not self.errors:
            return
        store = getattr(getattr(self.tracker, "store", None), "uri", "the tracking store")
        message = (f"{len(self.errors)} of {self.writes} MLflow writes to {store} failed; "
                   f"first: {self.errors[0]}")
        if raise_errors:
            raise TrackingError(message)
        print(f"error: {message}", file=sys.stderr)
