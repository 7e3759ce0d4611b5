"""The driver's side of the learning-curve channel (:meth:`harness.scheduler.RayScheduler._collect`,
issue 61): it looks into the points actor as often as a unit sends (every
:data:`~harness.scheduler.PROGRESS_SEND_S`), not at every wake-up of its wait, and always when a
unit finishes, so that every point of a trial reaches ``on_progress`` before its outcome. Ray's
``wait`` and ``get`` are replaced by fakes: nothing is started."""

from __future__ import annotations

import pytest

from harness.config import ClusterConfig
from harness.records import Outcome, Trial
from harness.scheduler import PROGRESS_SEND_S, RayScheduler

ray = pytest.importorskip("ray")


class Points:
    """A stand-in for the points actor: its batches, and every call the driver made to it."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, dict]]] = []
        self.calls: list[str] = []

    def take(self) -> list:
        self.calls.append("take")
        taken, self.batches = self.batches, []
        return taken


def test_the_queue_is_read_once_per_send_interval_and_before_each_outcome(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr("harness.scheduler.time.monotonic", lambda: clock[0])
    finished: list = []  # what ray.wait answers next: [] (its timeout) or [ref]
    monkeypatch.setattr(ray, "wait", lambda pending, num_returns, timeout: (
        (finished[:1], [r for r in pending if r not in finished[:1]]) if finished else ([], pending)))
    trials = [Trial(f"t{i}", "softmax", (), None) for i in range(2)]
    monkeypatch.setattr(ray, "get", lambda ref: [Outcome(None, None, "boom", "node") for _ in trials])
    scheduler = RayScheduler(ClusterConfig())
    monkeypatch.setattr(scheduler, "_take", lambda points: points.take())  # the actor call
    scheduler._pending = ["unit"]
    points, events = Points(), []
    on_progress = lambda trial, point: events.append(("point", trial.trial_id, point["step"]))  # noqa: E731

    def collect() -> None:
        for outcome in scheduler._collect({"unit": trials}, points, trials, on_progress):
            events.append(("outcome", outcome.trial.trial_id))

    collect()  # the first wake-up looks (nothing read before)
    assert points.calls == ["take"]  # one call a look
    points.batches.append([(0, {"step": 20}), (1, {"step": 20})])
    for _ in range(3):  # woken up (the wait's one-second timeout) within the send interval: no look
        clock[0] += PROGRESS_SEND_S / 4
        collect()
    assert points.calls == ["take"] and events == []
    clock[0] += PROGRESS_SEND_S / 4
    collect()
    assert points.calls == ["take", "take"]
    assert events == [("point", "t0", 20), ("point", "t1", 20)]
    # the unit finishes right after sending its last points: they come before its outcomes
    points.batches.append([(0, {"step": 40}), (1, {"step": 40})])
    clock[0] += 0.1
    finished.append("unit")
    collect()
    assert events[2:] == [("point", "t0", 40), ("point", "t1", 40), ("outcome", "t0"), ("outcome", "t1")]
    assert scheduler._pending == []
