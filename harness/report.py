"""What ``dry_run=true`` prints: the trials and how they would be packed. (The end-of-sweep
summary is the analysis's own: :mod:`analysis.summary`.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Collection

if TYPE_CHECKING:
    from harness.sweep import Trial


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
