"""``python -m harness [+ablation=NAME] [key=value ...]``: compose → expand → schedule → summarise.

Without ``+ablation`` it runs one trial of the defaults. ``dry_run=true`` lists the trials;
``force=true`` reruns trials that already finished. A sweep on the command line (``seed=0,1,2``,
with or without Hydra's ``-m``) is one more axis of the ablation. Exit status: 0 every trial
finished, 1 some failed (named on stderr), 2 bad input (nothing run, nothing recorded),
130 interrupted (SIGINT or SIGTERM).

``--help`` and a misspelled group choice are answered by :mod:`harness.cli` before torch, Ray or
MLflow is imported; those are imported here only once the command needs them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.signals import end_at_once_until_the_sweep

end_at_once_until_the_sweep()  # before the imports below: nothing is recorded yet

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from harness.cli import HARNESS_USAGE, call_main, precheck, take_sweeps  # noqa: E402

_ENTERED = False  # whether Hydra composed the config and called main (see cli())
_SWEEPS: list[str] = []  # command-line sweeps, taken out of argv before Hydra sees them (cli())
# A dry run writes nothing: no output folder, no .hydra/ copy, no log file.
_DRY_RUN_HYDRA = ["hydra.run.dir=.", "hydra.output_subdir=null", "hydra/job_logging=none"]


def _bad_input(err: Exception) -> None:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)


def _dry_run(ablations, store, cluster) -> None:
    """List each ablation's trials, marking those already FINISHED in the store (read only), and
    how they would be packed (``cluster.pack_size``)."""
    from harness.console import print_packs, print_trials
    from harness.store import finished_ids

    for name, trials in ablations:
        print(f"== {name}")
        print_trials(trials, finished_ids(store, name))
        print_packs(trials, cluster.pack_size, cluster.device)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    from harness.sweep import Sweep
    from harness.expansion import SweepError, expand_suite
    from harness.store import StoreError, resolve_store

    global _ENTERED
    _ENTERED = True
    hydra_cfg = HydraConfig.get()
    searchpath = [o for o in hydra_cfg.overrides.hydra if o.startswith("hydra.searchpath=")]
    cli = [*hydra_cfg.overrides.task, *_SWEEPS]
    try:
        ablations = expand_suite(cfg, [*cli, *searchpath])
        cluster = OmegaConf.to_object(cfg.cluster)
        # the store stays where the command started, also with hydra.job.chdir=True
        tracking = OmegaConf.to_object(cfg.tracking)
        store = resolve_store(tracking, Path(hydra_cfg.runtime.cwd))
        sweep = Sweep(ablations, cluster, store, cli, tracking.lease_s, force=cfg.force,
                      relocate_artifacts=tracking.relocate_artifacts)
        sweep.check(store=not cfg.dry_run)  # a dry run reads the store, and only if it exists
    except (SweepError, StoreError) as err:  # bad input: nothing run or recorded
        _bad_input(err)
    if cfg.dry_run:
        _dry_run(ablations, store, cluster)
        return
    from analysis.summary import summarise
    from harness.paths import folder_name

    out_dir = Path(hydra_cfg.runtime.output_dir)

    def after(name, summary) -> None:
        summarise(name, dict(ablations)[name], store, summary.parent_id,
                  out_dir / folder_name(name) if len(ablations) > 1 else out_dir, cfg.scale.name)

    sys.exit(sweep.main(after=after if cfg.summary else None, store_checked=True))


def _take_sweeps(argv: list[str]) -> list[str]:
    """Take ``-m`` and the command line's sweeps out of ``argv`` into :data:`_SWEEPS`
    (:func:`harness.cli.take_sweeps`). Returns the new argv."""
    argv, _SWEEPS[:] = take_sweeps(argv)
    return argv


def _is_dry_run(args: list[str]) -> bool:
    return any(a.lstrip("+").lower() in ("dry_run=true", "dry_run=1") for a in args)


def cli() -> None:
    """Run :func:`main`; a config that Hydra cannot compose exits with 2 (Hydra's text kept).

    ``--help`` and unknown group choices are answered first, without heavy imports.
    """
    from harness.secrets import scrub_command_line

    scrub_command_line()  # before Hydra writes .hydra/: a URI's password goes to the environment
    precheck(HARNESS_USAGE)
    from harness.expansion import SweepError, check_config_files

    try:  # a YAML syntax error: one line with file and line, not Hydra's traceback
        check_config_files(sys.argv[1:])
    except SweepError as err:
        _bad_input(err)
    sys.argv = _take_sweeps(sys.argv)
    if _is_dry_run(sys.argv[1:]):
        sys.argv += _DRY_RUN_HYDRA
    from harness.config import register_configs

    register_configs()
    call_main(main, lambda: _ENTERED)


if __name__ == "__main__":
    cli()
