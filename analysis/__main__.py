"""``python -m analysis +ablation=NAME [tracking=...]``: an ablation's figures and tables from MLflow.

Reads every trial run of experiment ``NAME`` from the configured store (the same ``tracking``
settings as ``python -m harness``) and writes to this command's output folder
(``outputs/NAME/<time>/``):

* ``runs.csv``: the runs table as loaded;
* ``sample_efficiency.{png,pdf}`` and ``sample_efficiency_table.{csv,md}``;
* ``length_generalisation.{png,pdf}`` when some run has ``test/n_<n>/…`` metrics;
* ``symmetry.{csv,md}`` when the runs have ``symmetry/*`` metrics;
* ``counts.{csv,md}``: finished, failed, killed and diverged trials per task and variant;
* ``learning_curves.{png,pdf}``: ``train/loss`` and ``val/loss`` of at most ``MAX_CURVES`` runs
  (the first FINISHED run of each task × variant, largest training set, smallest seed).

Nothing is trained and nothing is written to MLflow. Exit status 2 if the experiment is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from analysis import lengths, plots, stats, tables
from analysis.load import load_runs
from harness.config import register_configs
from harness.tracking import resolve_store

register_configs()
MAX_CURVES = 8


def curve_runs(df: pd.DataFrame, limit: int = MAX_CURVES) -> list[str]:
    """Run ids for the learning-curve figure: per task × variant, the FINISHED run with the
    largest ``task.n_train`` and then the smallest ``seed``; at most ``limit``."""
    ok = stats.finished(stats.add_error(df))
    order = [c for c in ("task.n_train", "seed") if c in ok]
    ok = ok.sort_values(order, ascending=[False, True][:len(order)]) if order else ok
    return list(ok.drop_duplicates(["task", "variant"])["run_id"].head(limit))


def write_all(df: pd.DataFrame, tracking_uri: str, out: Path) -> list[Path]:
    """Every figure and table of the module docstring for the runs ``df``; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "runs.csv", index=False)
    paths = [out / "runs.csv", *tables.write_table(stats.counts(df), out / "counts")]
    if stats.finished(stats.add_error(df), "error").empty:
        print("no finished trial with test/rel_mse or test/acc: no figures", file=sys.stderr)
        return paths
    paths += plots.sample_efficiency(df, out / "sample_efficiency")
    paths += tables.write_table(tables.sample_efficiency_table(df), out / "sample_efficiency_table")
    if not lengths.per_length(stats.finished(df)).empty:
        paths += plots.length_generalisation(df, out / "length_generalisation")
    if any(c.startswith("symmetry/") for c in df.columns):
        paths += tables.write_table(tables.symmetry_table(df), out / "symmetry")
    runs = curve_runs(df)
    if runs:
        paths += plots.learning_curves(tracking_uri, runs, out / "learning_curves")
    return paths


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    store = resolve_store(OmegaConf.to_object(cfg.tracking), Path.cwd())
    try:
        df = load_runs(cfg.ablation.name, store.uri)
    except LookupError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    out = Path(HydraConfig.get().runtime.output_dir)
    paths = write_all(df, store.uri, out)
    counts = df["status"].value_counts().to_dict()
    print(f"{len(df)} trial runs {counts}")
    for path in paths:
        print(path)


if __name__ == "__main__":
    main()
