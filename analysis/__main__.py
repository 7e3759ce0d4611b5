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
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from analysis.outputs import write_all
from analysis.load import load_runs
from harness.config import register_configs
from harness.tracking import resolve_store

register_configs()
@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    # the store of the directory the command started from, also with hydra.job.chdir=True
    store = resolve_store(OmegaConf.to_object(cfg.tracking), Path(HydraConfig.get().runtime.cwd))
    try:
        df = load_runs(cfg.ablation.name, store.uri)
    except LookupError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    out = Path(HydraConfig.get().runtime.output_dir)
    paths = write_all(df, out, tracking_uri=store.uri, runs_csv=True)
    counts = df["status"].value_counts().to_dict()
    print(f"{len(df)} trial runs {counts}")
    for path in paths:
        print(path)


if __name__ == "__main__":
    main()
