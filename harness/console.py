"""What the command prints of a sweep: with ``dry_run=true`` the trials and how they would be
packed; after a sweep its counts (:func:`print_summary`; the end-of-sweep table and figures are
the analysis's own: :mod:`analysis.summary`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Collection

from harness.records import SweepSummary

MEASURED_AT = 0.1  # the share of a sweep's trials back when its measured rate replaces the estimate
MEASURED_MIN_TRIALS = 10  # a shorter sweep prints no rate: its first trials include Ray's start-up


def load_note(cores: int, load: float | None = None) -> str:
    """What a printed duration assumes: ``""`` on a machine whose 1-minute load average is at
    most ``cores``, else ``"; the load average is L on C cores: expect longer"``. ``load``:
    the load average (default: this machine's now)."""
    import os

    load = os.getloadavg()[0] if load is None else load
    return f"; the load average is {load:.1f} on {cores} cores: expect longer" if load > cores else ""


def measured_line(name: str, back: int, total: int, elapsed_s: float, cores: int,
                  load: float | None = None) -> str:
    """The line that replaces a sweep's printed estimate once :data:`MEASURED_AT` of its
    ``total`` trials are back (``back`` of them after ``elapsed_s`` seconds): the measured rate
    on this machine as it is, and the time left at that rate (:func:`load_note` with it)."""
    rate = back / max(elapsed_s, 1e-9) * 60
    left = (total - back) / rate if rate > 0 else float("inf")
    return (f"{name}: measured {back} of {total} trials in {elapsed_s / 60:.1f} min ({rate:.3g} trials/min on "
            f"this machine as it is now): ≈ {left:.1f} min left, replacing the estimate above"
            f"{load_note(cores, load)}")

if TYPE_CHECKING:
    from harness.expansion import Trial


def print_trials(trials: list[Trial], finished: Collection[str] = ()) -> None:
    """One line per trial: id, ``done`` if its id is in ``finished`` (already FINISHED in the
    store, so a run would skip it), variant, overrides."""
    done = sum(t.trial_id in finished for t in trials)
    print(f"{len(trials)} trials" + (f", {done} already finished (done)" if finished else ""))
    width = max(len(t.variant) for t in trials)
    for t in trials:
        mark = "done " if t.trial_id in finished else "     "
        print(f"{t.trial_id}  {mark}{t.variant:<{width}}  {' '.join(t.overrides)}")


def print_packs(trials: list[Trial], pack_size: str, device: str) -> None:
    """How the trials would run (``cluster.pack_size``, harness/pack.py): the number of packs
    and their sizes, and the trials that run alone (:func:`harness.pack.runs_alone`: they cannot
    be packed, or ``auto`` runs their family alone on this device), by reason."""
    from harness.pack import resolve_pack_size, runs_alone
    from harness.scheduler import plan

    size = resolve_pack_size(pack_size, device)
    units = plan(trials, pack_size, device)
    packs = [len(u) for u in units if len(u) > 1]
    alone: dict[str, list[str]] = {}
    for trial in trials:
        reason = runs_alone(trial.config, pack_size, device)
        if reason:
            alone.setdefault(reason, []).append(trial.variant)
    print(f"packing (cluster.pack_size={pack_size} -> {size}): {sum(packs)} trials in {len(packs)} "
          f"packs (sizes {min(packs, default=0)}-{max(packs, default=0)}), "
          f"{len(units) - len(packs)} alone")
    for reason, variants in alone.items():
        verb = "run alone" if reason.startswith("pack_size=auto") else "cannot pack"
        print(f"  {verb}: {len(variants)} trials ({', '.join(sorted(set(variants)))}): {reason}")
    _print_choices(trials, pack_size, device)


def _print_choices(trials: list[Trial], pack_size: str, device: str) -> None:
    """What ``cluster.pack_size=auto`` chose per model family, and ``train.compile`` per pack
    shape where it is not ``off`` (harness/pack_table.py: from committed measurements)."""
    from harness.pack import device_kind, resolve_compile, resolve_pack_size
    from harness.pack_table import auto_compile, measured_pack

    kind = device_kind(device)
    seen: set[str] = set()
    for trial in trials:
        cfg = trial.config
        family = cfg.model.name
        if str(pack_size) == "auto" and family not in seen:
            seen.add(family)
            size = resolve_pack_size("auto", device, cfg)
            print(f"  auto: {family} -> pack {size} ({measured_pack(kind, family)[1]})")
        mode = cfg.train.compile.value
        if mode != "off" and f"compile {family}" not in seen:
            seen.add(f"compile {family}")
            size = resolve_pack_size(pack_size, device, cfg)
            why = auto_compile(kind, family, size, cfg.train.max_steps)[1] if mode == "auto" else "train.compile=on"
            print(f"  compile: {family} -> {'on' if resolve_compile(cfg, device, size) else 'off'} ({why})")


def rate(trials: int, seconds: float) -> str:
    """``trials`` in ``seconds`` as words: trials a second, or a minute where that reads below
    0.1 a second (a sweep of long trials printed "0.0 trials/s" at one decimal)."""
    per_s = trials / seconds
    return f"{per_s:.1f} trials/s" if per_s >= 0.1 else f"{60 * per_s:.3g} trials/min"


def print_summary(summary: SweepSummary) -> None:
    """Counts, then one line per failed or diverged trial (stderr)."""
    print(f"{summary.ablation + ': ' if summary.ablation else ''}"
          f"{summary.n_trials} trials: {summary.n_skipped} already finished (skipped), "
          f"{summary.finished} finished now, {len(summary.failed)} failed, "
          f"{len(summary.diverged)} diverged" +
          (f", {summary.n_elsewhere} run by another invocation (skipped" +
           (f"; {summary.n_elsewhere_unfinished} did not finish there: rerun to run them"
            if summary.n_elsewhere_unfinished else "") + ")" if summary.n_elsewhere else "") +
          (f", {summary.n_lost} lost (closed as stale by another invocation; rerun to record)"
           if summary.n_lost else "") +
          (f", {summary.n_unrecorded} not recorded (a write to the store failed; rerun to record)"
           if summary.n_unrecorded else "") +
          (f"; closed {summary.n_stale_closed} stale RUNNING runs" if summary.n_stale_closed else "") +
          (f" (trial phase {summary.trial_phase_s:.1f} s, {rate(summary.finished, summary.trial_phase_s)})"
           if summary.finished and summary.trial_phase_s > 0 else ""))
    for line in summary.failed:
        print(f"FAILED {line}", file=sys.stderr)
    for line in summary.diverged:
        print(f"DIVERGED {line}", file=sys.stderr)
