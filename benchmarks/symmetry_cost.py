"""What the trial-end symmetry measurement costs on every preset (the wall-clock check that was
``tests/test_symmetry.py``'s: a shared machine made it fail at 1.16 s against 1.0 s).

``python -m benchmarks.symmetry_cost [--budget-s 1.0]`` builds each preset at d=16, n=8, calls
:func:`harness.symmetry.measure` on a batch of 64 in float32 and float64, best of three, and
prints the seconds per call, marking every call over the budget (the trial-end call should be
well under a second). Exit status 1 if any is over: a benchmark to run on a quiet machine, not
a test.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from harness.models import build_model
from harness.presets import preset_config, preset_names
from harness.symmetry import measure


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def seconds(preset: str, dtype: torch.dtype, repeat: int = 3) -> float:
    """Best of ``repeat`` wall seconds of one ``measure`` call (batch 64, d=16, n=8)."""
    model = build_model(preset_config(preset), 16, 8, _gen(0)).to(dtype)
    x = torch.randn(64, 8, 16, generator=_gen(1)).to(dtype)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        measure(model, x, _gen(2))
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=1.0)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; budget {args.budget_s:g} s per call")
    over = 0
    for preset in preset_names():
        for dtype in (torch.float32, torch.float64):
            s = seconds(preset, dtype)
            over += s >= args.budget_s
            print(f"  {preset:24s} {str(dtype).split('.')[-1]:8s} {s:7.3f} s"
                  f"{'  OVER BUDGET' if s >= args.budget_s else ''}")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
