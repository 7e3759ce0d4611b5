"""What the driver prints and draws at the end of a sweep (and for ``dry_run``)."""

from __future__ import annotations

import sys
from pathlib import Path

from analysis.load import load_runs
from analysis.plots import sample_efficiency, with_error
from harness.pack import cannot_pack, resolve_pack_size
from harness.scheduler import plan
from harness.sweep import Trial
from harness.tracking import Store, Tracker


def print_trials(trials: list[Trial]) -> None:
    """One line per trial: id, variant, overrides."""
    print(f"{len(trials)} trials")
    width = max(len(t.variant) for t in trials)
    for t in trials:
        print(f"{t.trial_id}  {t.variant:<{width}}  {' '.join(t.overrides)}")


def print_packs(trials: list[Trial], pack_size: str, device: str) -> None:
    """How the trials would run (``cluster.pack_size``, harness/pack.py): the number of packs
    and their sizes, and the trials that run alone because they cannot be packed, by reason."""
    size = resolve_pack_size(pack_size, device)
    units = plan(trials, size)
    packs = [len(u) for u in units if len(u) > 1]
    alone: dict[str, list[str]] = {}
    for trial in trials:
        reason = cannot_pack(trial.config)
        if reason:
            alone.setdefault(reason, []).append(trial.variant)
    print(f"packing (cluster.pack_size={pack_size} -> {size}): {sum(packs)} trials in {len(packs)} "
          f"packs (sizes {min(packs, default=0)}-{max(packs, default=0)}), "
          f"{len(units) - len(packs)} alone")
    for reason, variants in alone.items():
        print(f"  cannot pack {len(variants)} trials ({', '.join(sorted(set(variants)))}): {reason}")


def summarise(ablation: str, store: Store, tracker: Tracker, parent: str, out_dir: Path) -> None:
    """Load the ablation's runs from MLflow, draw the sample-efficiency plot, print a table.

    The plot (PNG, PDF) and the table (CSV) go to ``out_dir`` and are logged as artifacts of the
    parent run ``parent``.
    """
    df = with_error(load_runs(ablation, store.uri))
    finished = df[df["status"] == "FINISHED"].dropna(subset=["error"])
    if finished.empty:
        print("no finished trial with test/rel_mse or test/acc: no plot", file=sys.stderr)
        return
    table = (finished.groupby(["task", "variant", "task.n_train"])["error"]
             .agg(["mean", "std", "count"]).reset_index())
    out_dir.mkdir(parents=True, exist_ok=True)
    table_path = out_dir / "sample_efficiency.csv"
    table.to_csv(table_path, index=False)
    paths = sample_efficiency(df, out_dir / "sample_efficiency")
    for path in [*paths, table_path]:
        tracker.log_artifact(parent, path)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"plot: {paths[0]}\nrecords: {store.uri} (experiment {ablation!r}, parent run {parent})")
