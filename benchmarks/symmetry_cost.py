"""What the trial-end symmetry measurement costs on every preset (the wall-clock check that was
``tests/test_symmetry.py``'s: a shared machine made it fail at 1.16 s against 1.0 s).

``python -m benchmarks.symmetry_cost [--budget-s 1.0]`` builds each preset at d=16, n=8, calls
:func:`harness.symmetry.measure` on a batch of 64 in float32 and float64, best of three, and
prints the seconds per call, marking every call over the budget (the trial-end call should be
well under a second). Exit status 1 if any is over: a benchmark to run on a quiet machine, not
a test.

``python -m benchmarks.symmetry_cost --arm packs [--packs 16,64] [--presets softmax,...]
[--threads 1] [--repeat 3]``: a pack's wrap-up symmetry measurements on the CPU, per trial
(:func:`harness.symmetry.measure_each`, the form before the pack measured them at once) against
once per pack (:func:`harness.pack.measure_pack`: vmapped over the stacked parameters), for
packs of each size of trials of the default task (each seed its own test set, float32, the
models at their initialisation: the cost does not depend on the values), best of ``repeat``
wall seconds, with the largest difference between the two forms' values. Torch runs on
``--threads`` threads (1: as a scheduler's worker runs a pack).
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


def _best(fn, repeat: int) -> tuple[float, object]:
    """Best wall seconds of ``repeat`` calls of ``fn`` and its last answer."""
    best, answer = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        answer = fn()
        best = min(best, time.perf_counter() - start)
    return best, answer


def pack_seconds(P: int, preset: str, repeat: int = 3) -> tuple[float, float, float]:
    """``(per-trial s, per-pack s, largest |difference|)`` of the wrap-up symmetry measurements
    of a pack of ``P`` trials of ``model=preset`` on the default task (Hydra initialised)."""
    from harness.expansion import compose_trial
    from harness.pack import measure_pack, prepare_setups
    from harness.symmetry import measure_each
    from harness.trial import symmetry_input
    from tasks.base import generator

    cfgs = [compose_trial([f"model={preset}"], [f"seed={i}"]).config for i in range(P)]
    setups, _ = prepare_setups(cfgs, torch.device("cpu"))
    names = [n for n, _ in setups[0].model.named_parameters()]
    best = {f"model.{n}": torch.stack([dict(s.model.named_parameters())[n].detach() for s in setups])
            for n in names}

    def per_trial():
        xs = [symmetry_input(s) for s in setups]  # measure_pack builds them too
        return measure_each([s.model for s in setups], xs, [generator(c.seed, "symmetry") for c in cfgs])
    lone_s, lone = _best(per_trial, repeat)
    pack_s, packed = _best(lambda: measure_pack(setups, best), repeat)
    diff = max(abs(a[k] - b[k]) for a, b in zip(lone, packed) for k in a)
    return lone_s, pack_s, diff


def packs(sizes: list[int], presets: list[str], repeat: int) -> None:
    """Print the per-trial and per-pack wrap-up seconds of each preset and pack size."""
    from hydra import initialize_config_dir

    from harness.config import register_configs

    register_configs()
    conf = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")
    print(f"  {'preset':18s} {'pack':>5s} {'per trial s':>12s} {'per pack s':>11s} {'ratio':>6s} "
          f"{'ms/trial':>9s} {'max |diff|':>10s}")
    with initialize_config_dir(config_dir=conf, version_base="1.3"):
        for preset in presets:
            for P in sizes:
                lone_s, pack_s, diff = pack_seconds(P, preset, repeat)
                print(f"  {preset:18s} {P:5d} {lone_s:12.4f} {pack_s:11.4f} {lone_s / pack_s:6.2f} "
                      f"{1000 * pack_s / P:9.3f} {diff:10.1e}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=1.0)
    parser.add_argument("--arm", choices=("presets", "packs"), default="presets")
    parser.add_argument("--packs", default="16,64", help="pack sizes of the packs arm")
    parser.add_argument("--presets", default="softmax,quad_sigma,general,transformer",
                        help="model presets of the packs arm")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the packs arm")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.arm == "packs":
        torch.set_num_threads(args.threads)
        print(f"load average {os.getloadavg()[0]:.2f}; torch threads {torch.get_num_threads()}; "
              f"best of {args.repeat}")
        packs([int(p) for p in args.packs.split(",")], args.presets.split(","), args.repeat)
        return 0
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
