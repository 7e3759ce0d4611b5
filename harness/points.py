"""The learning-curve channel's actor (:class:`Points`), in a module of its own: the actor's
process imports only this module (Ray pickles the class by reference), not the scheduler's
torch, models and tasks (seconds of CPU for a process that only holds lists)."""

from __future__ import annotations


class Points:
    """The learning-curve channel's actor (``ray.remote(Points)``, on the driver's side): units
    :meth:`put` lists of ``(index, point)``, the driver :meth:`take` s every list put so far in
    one call. ``ray.util.queue.Queue`` took two calls a look (its size, then that many items):
    83 of the main thread's 188 samples holding the GIL over a ``knowledge_forms`` phase."""

    def __init__(self) -> None:
        self._batches: list[list[tuple[int, dict]]] = []

    def put(self, batch: list[tuple[int, dict]]) -> None:
        self._batches.append(batch)

    def take(self) -> list[list[tuple[int, dict]]]:
        taken, self._batches = self._batches, []
        return taken
