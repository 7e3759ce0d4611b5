"""``python -m analysis +ablation=NAME [tracking=...]``: an ablation's figures and tables from MLflow.

Composes the ablation with the command's overrides exactly as ``python -m harness`` does (a
sweep on the command line, with or without ``-m``, is one more axis of the one analysis; the
same ``hydra.searchpath`` and ``--config-dir``) and
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

It prints the end-of-sweep table that ``python -m harness`` prints (:mod:`analysis.summary`: the
same code on the same runs) and writes it to ``sample_efficiency.csv``.

Nothing is trained and nothing is written to MLflow. Exit status 2 if the ablation does not
compose, is a suite (use ``python -m analysis.report``), or none of its trials has a run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from harness.cli import ANALYSIS_USAGE, call_main, precheck, take_sweeps


_ENTERED = False  # whether Hydra composed the config and called main (see cli())
_SWEEPS: list[str] = []  # command-line sweeps, taken out of argv before Hydra sees them (cli())


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    from analysis.summary import analyse, report
    from harness.store import resolve_store
    from harness.expansion import SweepError, expand, experiment_name

    global _ENTERED
    _ENTERED = True
    name = cfg.ablation.name
    if cfg.ablation.suite:
        _fail(f"{name!r} is a suite of ablations {list(cfg.ablation.suite)}: analyse one of them "
              "(+ablation=NAME) or write the report (python -m analysis.report)")
    hydra_cfg = HydraConfig.get()
    # the same trials python -m harness composes: its overrides, its sweeps, its search path
    searchpath = [o for o in hydra_cfg.overrides.hydra if o.startswith("hydra.searchpath=")]
    try:
        trials = expand(cfg, [*hydra_cfg.overrides.task, *_SWEEPS, *searchpath])
    except SweepError as err:
        _fail(str(err))
    name = experiment_name(cfg, trials)  # a one-off run's experiment: single/<task>/<model>
    # the store of the directory the command started from, also with hydra.job.chdir=True
    store = resolve_store(OmegaConf.to_object(cfg.tracking), Path(hydra_cfg.runtime.cwd))
    out = Path(hydra_cfg.runtime.output_dir)
    try:
        df, paths = analyse(name, trials, store.uri, out, scale=cfg.scale.name, runs_csv=True)
    except LookupError as err:
        _fail(str(err))
    if df.empty:
        _fail(f"none of the {len(trials)} trials of {name!r} with these overrides has a run in "
              f"{store.uri}; run them first: python -m harness +ablation={name} ...")
    counts = df["status"].value_counts().to_dict()
    print(f"{len(df)} trial runs {counts}")
    table = report(df, out)
    for path in [*paths, *([table] if table else [])]:
        print(path)


def cli() -> None:
    """``--help`` and unknown group choices first (no heavy imports), then :func:`main`; the
    command line's sweeps become axes of one analysis (as ``python -m harness`` runs them); a
    config that Hydra cannot compose exits with 2 (Hydra's text kept)."""
    from harness.secrets import scrub_command_line

    scrub_command_line()  # a tracking URI's password never reaches .hydra/ (harness.secrets)
    precheck(ANALYSIS_USAGE)
    sys.argv, _SWEEPS[:] = take_sweeps(sys.argv)
    from harness.config import register_configs

    register_configs()
    call_main(main, lambda: _ENTERED)


if __name__ == "__main__":
    cli()
