"""The progress bar's count is the sum of its parts (issue 47, item 5): before, a trial skipped
as another invocation's moved the count but not its postfix ("13 trials" beside done=12,
failed=0)."""

from __future__ import annotations

import io
import types

from tqdm import tqdm

from harness.loop import Queue, _Ablation
from harness.records import Outcome, SweepSummary


def _parts(bar: tqdm) -> dict[str, int]:
    return {k: int(v) for k, v in (p.split("=") for p in bar.postfix.split(", "))}


def test_the_progress_bars_count_is_done_plus_failed_plus_elsewhere():
    queue = Queue(types.SimpleNamespace(), [])
    sweep = _Ablation({}, [], set(), SweepSummary("1", "", 3, 0, 0, ablation="unit"), left=99)
    ours, failed, theirs = (types.SimpleNamespace(trial_id=t, variant="v", overrides=[]) for t in "abc")
    for trial in (ours, failed, theirs):
        queue.owner[id(trial)] = sweep
    queue.bar = tqdm(total=3, file=io.StringIO())
    try:
        queue.running[id(ours)] = queue.running[id(failed)] = "run"
        queue.record(Outcome(ours, types.SimpleNamespace(diverged=False), None, "node"))
        queue.record(Outcome(failed, None, "boom", "node"))
        queue.claimed[id(theirs)] = None  # another invocation's
        assert queue.on_start(theirs) is False
        parts = _parts(queue.bar)
        assert queue.bar.n == 3 == parts["done"] + parts["failed"] + parts.get("elsewhere", 0)
        assert (parts["done"], parts["failed"], parts.get("elsewhere"), parts["remaining"]) == (1, 1, 1, 0)
    finally:
        queue.bar.close()
        queue.writer.close(raise_errors=False)
