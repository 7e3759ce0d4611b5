"""``python -m harness [+ablation=NAME] [key=value ...]``: compose → expand → schedule → summarise.

Without ``+ablation`` it runs one trial of the defaults. ``dry_run=true`` lists the trials.
Exit status: 0 all trials finished, 1 some failed, 2 bad input (nothing run or recorded),
130 interrupted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from tqdm import tqdm

from harness.config import register_configs
from harness.report import print_trials, summarise
from harness.scheduler import make_scheduler
from harness.sweep import SweepError, Trial, expand
from harness.tracking import Tracker, resolve_store
from harness.validate import preflight

register_configs()


def _sweep(cfg: DictConfig, trials: list[Trial], tracker: Tracker, cli: list[str]) -> tuple[str, str, int]:
    """Run every trial, recording each outcome as it arrives; returns (experiment, parent, failed)."""
    name = cfg.ablation.name
    experiment = tracker.experiment(name)
    parent = tracker.start_parent(experiment, name, len(trials), cli)
    failed: list[str] = []
    status = "KILLED"
    try:
        with make_scheduler(cfg_to_cluster(cfg)) as scheduler, tqdm(
                total=len(trials), desc=name, unit="trial", dynamic_ncols=True) as bar:
            for outcome in scheduler.run(trials):
                tracker.log_trial(experiment, parent, name, outcome)
                if outcome.error is not None:
                    failed.append(f"{outcome.trial.trial_id} {outcome.trial.variant} "
                                  f"{list(outcome.trial.overrides)}: {outcome.error.strip().splitlines()[-1]}")
                bar.update(1)
                bar.set_postfix(done=bar.n - len(failed), failed=len(failed), remaining=bar.total - bar.n)
        status = "FINISHED"
    finally:
        tracker.end_run(parent, status)
    for line in failed:
        print(f"FAILED {line}", file=sys.stderr)
    return experiment, parent, len(failed)


def cfg_to_cluster(cfg: DictConfig):
    """The cluster section as its dataclass (what the scheduler takes)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_object(cfg.cluster)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    cli = list(HydraConfig.get().overrides.task)
    try:
        trials = expand(cfg, cli)
        preflight(trials, cfg.cluster.device)
        store = resolve_store(cfg_to_tracking(cfg), Path.cwd())
    except (SweepError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    if cfg.dry_run:
        print_trials(trials)
        return
    tracker = Tracker(store)
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        _, parent, n_failed = _sweep(cfg, trials, tracker, cli)
    except KeyboardInterrupt:
        print("interrupted: running trials cancelled, finished ones are recorded", file=sys.stderr)
        sys.exit(130)
    summarise(cfg.ablation.name, store, tracker, parent, out_dir)
    sys.exit(1 if n_failed else 0)


def cfg_to_tracking(cfg: DictConfig):
    """The tracking section as its dataclass."""
    from omegaconf import OmegaConf

    return OmegaConf.to_object(cfg.tracking)


if __name__ == "__main__":
    main()
