"""``python -m analysis +ablation=NAME [tracking=...]``: an ablation's figures and tables from MLflow.

Composes the ablation with the command's overrides exactly as ``python -m harness`` does and
reads the runs of exactly those trials (and of their lr-edge extensions) from the configured
store, so runs made with other overrides in the same experiment are never mixed in
(:mod:`analysis.trials`); each run is labelled with its arm (the variant plus every other swept
axis). Writes to this command's output folder (``outputs/NAME/<time>/``):

* ``runs.csv``: the runs table as loaded;
* ``sample_efficiency.{png,pdf}`` and ``sample_efficiency_table.{csv,md}``;
* ``length_generalisation.{png,pdf}`` when some run has ``test/n_<n>/…`` metrics;
* ``symmetry.{csv,md}`` when the runs have ``symmetry/*`` metrics;
* ``counts.{csv,md}``: finished, failed, killed and diverged trials per task and variant;
* ``learning_curves.{png,pdf}``: ``train/loss`` and ``val/loss`` of at most ``MAX_CURVES`` runs
  (the first FINISHED run of each task × variant, largest training set, smallest seed).

Nothing is trained and nothing is written to MLflow. Exit status 2 if the ablation does not
compose, is a suite (use ``python -m analysis.report``), or none of its trials has a run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from harness.cli import ANALYSIS_USAGE, precheck


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    from analysis.load import load_runs
    from analysis.outputs import write_all
    from analysis.trials import restrict, swept_axes
    from harness.sweep import SweepError, expand
    from harness.store import resolve_store

    name = cfg.ablation.name
    if cfg.ablation.suite:
        _fail(f"{name!r} is a suite of ablations {list(cfg.ablation.suite)}: analyse one of them "
              "(+ablation=NAME) or write the report (python -m analysis.report)")
    try:
        trials = expand(cfg, list(HydraConfig.get().overrides.task))
    except SweepError as err:
        _fail(str(err))
    # the store of the directory the command started from, also with hydra.job.chdir=True
    store = resolve_store(OmegaConf.to_object(cfg.tracking), Path(HydraConfig.get().runtime.cwd))
    try:
        df = restrict(load_runs(name, store.uri), trials, name)
    except LookupError as err:
        _fail(str(err))
    if df.empty:
        _fail(f"none of the {len(trials)} trials of {name!r} with these overrides has a run in "
              f"{store.uri}; run them first: python -m harness +ablation={name} ...")
    out = Path(HydraConfig.get().runtime.output_dir)
    paths = write_all(df, out, tracking_uri=store.uri, runs_csv=True, ablation=name,
                      scale=cfg.scale.name, axes=swept_axes(trials),
                      figures=list(cfg.ablation.figures))
    counts = df["status"].value_counts().to_dict()
    print(f"{len(df)} trial runs {counts}")
    for path in paths:
        print(path)


def cli() -> None:
    """``--help`` and unknown group choices first (no heavy imports), then :func:`main`."""
    precheck(ANALYSIS_USAGE)
    from harness.config import register_configs

    register_configs()
    main()


if __name__ == "__main__":
    cli()
