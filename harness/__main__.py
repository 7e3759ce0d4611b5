"""``python -m harness [+ablation=NAME] [key=value ...]``: compose → expand → schedule → summarise.

Without ``+ablation`` it runs one trial of the defaults. ``dry_run=true`` lists the trials;
``force=true`` reruns trials that already finished. Exit status: 0 every trial finished,
1 some failed (named on stderr), 2 bad input (nothing run, nothing recorded), 130 interrupted.

``--help`` and a misspelled group choice are answered by :mod:`harness.cli` before torch, Ray or
MLflow is imported; those are imported here only once the command needs them.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from harness.cli import HARNESS_USAGE, precheck

_ENTERED = False  # whether Hydra composed the config and called main (see cli())
# A dry run writes nothing: no output folder, no .hydra/ copy, no log file.
_DRY_RUN_HYDRA = ["hydra.run.dir=.", "hydra.output_subdir=null", "hydra/job_logging=none"]


def _bad_input(err: Exception) -> None:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _dry_run(ablations, store) -> None:
    """List each ablation's trials, marking those already FINISHED in the store (read only)."""
    from harness.report import print_trials
    from harness.tracking import finished_ids

    for name, trials in ablations:
        print(f"== {name}")
        print_trials(trials, finished_ids(store, name))


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    from harness.sweep import SweepError, expand_suite
    from harness.tracking import StoreError, resolve_store
    from harness.validate import preflight

    global _ENTERED
    _ENTERED = True
    cli = list(HydraConfig.get().overrides.task)
    try:
        ablations = expand_suite(cfg, cli)
        preflight([t for _, trials in ablations for t in trials], cfg.cluster.device)
        store = resolve_store(OmegaConf.to_object(cfg.tracking), Path.cwd())
        if not cfg.dry_run:
            from harness.tracking import check_store

            check_store(store)
    except (SweepError, StoreError) as err:
        _bad_input(err)
    if cfg.dry_run:
        _dry_run(ablations, store)
        return
    from harness.driver import print_summary, run_sweep
    from harness.report import summarise
    from harness.scheduler import make_scheduler
    from harness.tracking import Tracker

    signal.signal(signal.SIGTERM, _interrupt)
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    any_failed = False
    try:
        with make_scheduler(OmegaConf.to_object(cfg.cluster)) as scheduler:  # Ray starts once
            for name, trials in ablations:
                summary = run_sweep(trials, scheduler, Tracker(store), name, cli, force=cfg.force)
                print_summary(summary)
                summarise(name, store, Tracker(store), summary.parent_id,
                          out_dir / name if len(ablations) > 1 else out_dir)
                any_failed = any_failed or bool(summary.failed)
    except KeyboardInterrupt:
        print("interrupted: running trials cancelled and closed as KILLED; finished ones are "
              "recorded, and the same command resumes", file=sys.stderr)
        sys.exit(130)
    except ValueError as err:  # the cluster cannot run a trial; nothing was recorded
        _bad_input(err)
    sys.exit(1 if any_failed else 0)


def _is_dry_run(args: list[str]) -> bool:
    return any(a.lstrip("+").lower() in ("dry_run=true", "dry_run=1") for a in args)


def cli() -> None:
    """Run :func:`main`; a config that Hydra cannot compose exits with 2 (Hydra's text kept).

    ``--help`` and unknown group choices are answered first, without heavy imports.
    """
    precheck(HARNESS_USAGE)
    if _is_dry_run(sys.argv[1:]):
        sys.argv += _DRY_RUN_HYDRA
    from harness.config import register_configs

    register_configs()
    try:
        main()
    except SystemExit as exit_:
        if exit_.code == 1 and not _ENTERED:
            sys.exit(2)
        raise


if __name__ == "__main__":
    cli()
