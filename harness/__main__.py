"""``python -m harness [+ablation=NAME] [key=value ...]``: compose → expand → schedule → summarise.

Without ``+ablation`` it runs one trial of the defaults. ``dry_run=true`` lists the trials;
``force=true`` reruns trials that already finished. Exit status: 0 every trial finished,
1 some failed (named on stderr), 2 bad input (nothing run, nothing recorded), 130 interrupted.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from harness.config import register_configs
from harness.driver import print_summary, run_sweep
from harness.report import print_packs, print_trials, summarise
from harness.scheduler import make_scheduler
from harness.sweep import SweepError, expand_suite
from harness.tracking import StoreError, Tracker, check_store, resolve_store
from harness.validate import preflight
from harness.writer import TrackingError

register_configs()
_ENTERED = False  # whether Hydra composed the config and called main (see cli())


def _bad_input(err: Exception) -> None:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    global _ENTERED
    _ENTERED = True
    cli = list(HydraConfig.get().overrides.task)
    try:
        ablations = expand_suite(cfg, cli)
        preflight([t for _, trials in ablations for t in trials], cfg.cluster.device, cfg.cluster.pack_size)
        store = resolve_store(OmegaConf.to_object(cfg.tracking), Path.cwd())
        if not cfg.dry_run:
            check_store(store)
    except (SweepError, StoreError) as err:
        _bad_input(err)
    if cfg.dry_run:
        for name, trials in ablations:
            print(f"== {name}")
            print_trials(trials)
            print_packs(trials, cfg.cluster.pack_size, cfg.cluster.device)
        return
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
    except TrackingError as err:  # the sweep ran, but some of it is not recorded
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except ValueError as err:  # the cluster cannot run a trial; nothing was recorded
        _bad_input(err)
    sys.exit(1 if any_failed else 0)


def cli() -> None:
    """Run :func:`main`; a config that Hydra cannot compose exits with 2 (Hydra's text kept)."""
    try:
        main()
    except SystemExit as exit_:
        if exit_.code == 1 and not _ENTERED:
            sys.exit(2)
        raise


if __name__ == "__main__":
    cli()
