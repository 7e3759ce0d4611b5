"""``python -m analysis +ablation=NAME [tracking=...]``: redraw an ablation's figures from MLflow.

Reads every trial run of experiment ``NAME`` from the configured store (the same ``tracking``
settings as ``python -m harness``) and writes the sample-efficiency plot and table to this
command's output folder (``outputs/NAME/<time>/``). Nothing is trained and nothing is written
to MLflow.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from analysis.load import load_runs
from analysis.plots import sample_efficiency
from harness.config import register_configs
from harness.tracking import resolve_store

register_configs()


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
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "runs.csv", index=False)
    paths = sample_efficiency(df, out / "sample_efficiency")
    counts = df["status"].value_counts().to_dict()
    print(f"{len(df)} trial runs {counts}\nruns table: {out / 'runs.csv'}\nplot: {paths[0]}")


if __name__ == "__main__":
    main()
