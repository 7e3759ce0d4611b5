"""Test-only recording helpers (they were production API used only by tests): a trial run opened
without a claim, an outcome recorded in one go, and a writer that queues such opens. The
harness itself opens every trial run through a claim (:meth:`harness.tracking.Tracker.claim_batch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from harness.writer import TrackingWriter


def start_trial(tracker, experiment_id: str, parent_id: str, ablation: str, trial) -> str:
    """Open a RUNNING child run for ``trial`` with its tags, params and ``config.yaml``
    unconditionally (no claim: a test may record one trial twice); returns its run id."""
    tags = tracker._trial_tags(parent_id, ablation, trial)
    run_id = tracker.client.create_run(experiment_id, tags=tags).info.run_id
    tracker._log_config(run_id, trial)
    return run_id


def claim(tracker, experiment_id: str, parent_id: str, ablation: str, trial) -> Optional[str]:
    """Claim one trial (a bakery round of one, :meth:`harness.tracking.Tracker.claim_batch`):
    its run id, or None if it is another driver's."""
    return tracker.claim_batch(experiment_id, parent_id, ablation, [trial])[0]


def log_trial(tracker, experiment_id: str, parent_id: str, ablation: str, outcome) -> str:
    """Open and close a child run for an outcome in one go; returns its run id."""
    run_id = start_trial(tracker, experiment_id, parent_id, ablation, outcome.trial)
    tracker.finish_trial(run_id, outcome)
    return run_id


@dataclass
class RunHandle:
    """A trial run opened by the writer thread: ``run_id`` once its ``create_run`` is done
    (``None`` until then, and for ever if it failed). The writer takes it where a run id goes."""

    trial_id: str
    run_id: Optional[str] = None


class QueuedStarts(TrackingWriter):
    """A :class:`~harness.writer.TrackingWriter` that also queues unconditional opens."""

    def start_trial(self, experiment_id: str, parent_id: str, ablation: str, trial) -> RunHandle:
        """Queue opening the trial's RUNNING child run (the tracker's ``start_trial``); returns
        its handle at once."""
        handle = RunHandle(trial.trial_id)

        def start() -> None:
            handle.run_id = self.tracker.start_trial(experiment_id, parent_id, ablation, trial)

        self._put(f"start trial {trial.trial_id}", start)
        return handle
