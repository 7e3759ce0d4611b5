"""What ``cluster.pack_size=auto`` and ``train.compile=auto`` choose, from a committed table of
measurements (``python -m benchmarks``, ``benchmarks/pack_limit.py``; figures and machines in
``benchmarks/RESULTS.md``), never from timing at run time: a packed trial's result reproduces
only given its pack (size and members), so the pack a trial gets must not depend on how busy
the machine was when it started. Pure Python: no torch, Ray, Hydra or MLflow here.

Choices:

* pack size, per device and model family (``model.name``): the smallest measured pack size
  whose CPU seconds per trial are within :data:`NEAR_BEST` of the family's best (smaller packs
  leave more units for the slots, hold less memory, and the rest is within the measurements'
  noise); a family with no row gets :data:`DEFAULT_PACK`; then bounded by memory
  (:func:`memory_bound`);
* compilation (``train.compile=auto``): on for a (device, family) only where a row says the
  steps saved over one pack (``max_steps`` × the measured saving per step) exceed the measured
  compile time (paid once per shape per worker; inductor's cache folder keeps it between runs,
  so this counts it every time, the pessimistic case).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NEAR_BEST = 0.05  # a pack size within 5% of the best measured one is as good (noise)
DEFAULT_PACK = {"cpu": 16, "cuda": 256}  # families without a row: wide enough to amortise per-op overhead
MEMORY_SHARE = 0.25  # a pack may hold at most this share of the device's memory (estimate below)
# Validate a pack vmapped on a CPU (one batched pass) or trial by trial: measured slower vmapped
# on this CPU, on one shared set and on each seed's own sets stacked, beside an eager or a
# compiled step (benchmarks/RESULTS.md, "Issue 46" and its second pass); on CUDA a pack is
# always validated vmapped.
CPU_VMAP_EVAL = False


@dataclass(frozen=True)
class PackRow:
    """One measurement: CPU (or GPU wall) seconds per trial of a typical trial of ``family``
    (teacher T3a, d=16, n=8, 600 steps, validation every 20) trained in packs of ``pack``
    (1 = alone, ``run_trial``), with ``source`` naming the benchmark run."""

    device: str
    family: str
    variant: str
    pack: int
    s_per_trial: float
    source: str


B1 = "benchmarks/RESULTS.md, packing table of 2026-12-01 (AMD EPYC, 1 torch thread)"
I46 = "benchmarks/RESULTS.md, Issue 46 (AMD EPYC, 1 torch thread), after the packed-step rework"

# (family, variant, {pack: s/trial}); pack 1 = the lone trial
_B1 = [
    ("attention", "softmax", {1: 0.251, 4: 0.153, 16: 0.095, 64: 0.092}),
    ("attention", "relu_attention", {1: 0.224, 4: 0.143, 16: 0.083, 64: 0.078}),
    ("mlp", "mlp", {1: 0.618, 4: 0.757, 16: 0.779, 64: 0.869}),
    ("transformer", "transformer", {1: 1.522, 4: 1.212, 16: 0.914, 64: 0.871}),
    ("deepsets", "deepsets", {1: 0.480, 4: 0.339, 16: 0.297, 64: 0.277}),
    ("tokenwise", "tokenwise", {1: 0.421, 4: 0.311, 16: 0.296, 64: 0.277}),
    ("xg", "xg", {1: 0.642, 4: 0.586, 16: 0.534, 64: 0.893}),
]
# the harness arm of benchmarks/pack_limit.py (CPU s/trial, medians of 3 interleaved rounds)
_I46 = [("attention", "softmax", {16: 0.2515, 64: 0.1915})]
PACK_ROWS: tuple[PackRow, ...] = tuple(
    PackRow("cpu", family, variant, pack, s, source) for rows, source in ((_B1, B1), (_I46, I46))
    for family, variant, sizes in rows for pack, s in sizes.items())


@dataclass(frozen=True)
class CompileRow:
    """One measurement of ``torch.compile`` on a packed step: milliseconds per step eager and
    compiled, and the compile time in seconds (first call), for ``pack`` trials of ``family``."""

    device: str
    family: str
    pack: int
    eager_ms: float
    compiled_ms: float
    compile_s: float
    source: str


# benchmarks/pack_limit.py, harness 64 eager against compiled (ms per pack step: ms/trial × 64 /
# 600); the compile time is that of the slow compile test's process with a cold inductor cache
# (C++ compiler processes included, /usr/bin/time), the in-process figure being an undercount
COMPILE_ROWS: tuple[CompileRow, ...] = (
    CompileRow("cpu", "attention", 64, eager_ms=20.4, compiled_ms=17.0, compile_s=35.0, source=I46),
)


def _device_kind(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "cpu"


def measured_pack(device: str, family: str) -> tuple[int, str]:
    """The pack size the table chooses for ``family`` on ``device`` (before the memory bound)
    and why, in a few words (the dry run prints it). Each variant's figures count relative to
    that variant's fastest pack size (measurements of different runs compare as ratios only),
    and a variant measured again counts by its latest run only (rows are in date order)."""
    kind = _device_kind(device)
    rows = [r for r in PACK_ROWS if r.device == kind and r.family == family]
    if not rows:
        return DEFAULT_PACK[kind], f"no measurement for {family} on {kind}: default {DEFAULT_PACK[kind]}"
    latest = {r.variant: r.source for r in rows}
    rows = [r for r in rows if r.source == latest[r.variant]]
    fastest = {v: min(r.s_per_trial for r in rows if r.variant == v) for v in latest}
    by_pack: dict[int, list[float]] = {}
    for r in rows:
        by_pack.setdefault(r.pack, []).append(r.s_per_trial / fastest[r.variant])
    mean = {p: sum(v) / len(v) for p, v in by_pack.items()}
    chosen = min(p for p, ratio in mean.items() if ratio <= 1 + NEAR_BEST)
    sources = "; ".join(sorted(set(latest.values())))
    return chosen, f"measured: {chosen} within {NEAR_BEST:.0%} of the fastest ({sources})"


def memory_bound(per_trial_bytes: float, device_bytes: float) -> int:
    """The most trials a pack may hold: :data:`MEMORY_SHARE` of ``device_bytes`` over the
    estimated bytes of one trial (at least 1)."""
    return max(1, int(MEMORY_SHARE * device_bytes // max(per_trial_bytes, 1.0)))


def auto_pack_size(device: str, family: str, per_trial_bytes: float, device_bytes: float) -> int:
    """``cluster.pack_size=auto``: :func:`measured_pack` within :func:`memory_bound`."""
    return min(measured_pack(device, family)[0], memory_bound(per_trial_bytes, device_bytes))


def auto_compile(device: str, family: str, pack: int, max_steps: int) -> tuple[bool, str]:
    """``train.compile=auto``: whether a pack of ``pack`` trials of ``family`` training
    ``max_steps`` steps on ``device`` is compiled, and why. Uses the row of the nearest measured
    pack size of that device and family; no row: off."""
    kind = _device_kind(device)
    rows = [r for r in COMPILE_ROWS if r.device == kind and r.family == family]
    if not rows:
        return False, f"train.compile=auto: no compile measurement for {family} on {kind}"
    row = min(rows, key=lambda r: abs(math.log(r.pack / max(pack, 1))))
    saved_s = max_steps * (row.eager_ms - row.compiled_ms) / 1000.0
    verdict = saved_s > row.compile_s
    return verdict, (f"train.compile=auto: {max_steps} steps save {saved_s:.1f} s against "
                     f"{row.compile_s:.0f} s of compiling (pack {row.pack}, {row.source})")
