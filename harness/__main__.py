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

import os
import signal
import sys
from pathlib import Path


def _interrupted_early(signum, frame) -> None:
    """SIGINT/SIGTERM before the sweep starts: nothing has been run or recorded, so the process
    ends at once (``os._exit``, exit status 130). An exception raised here would land in whatever
    import or config composition is under way and come out as another error (a RuntimeError from
    a class body, an OmegaConf error reported as bad input with exit status 2)."""
    os.write(2, b"interrupted before any trial started: nothing was run or recorded\n")
    os._exit(130)


signal.signal(signal.SIGTERM, _interrupted_early)  # before the imports below
signal.signal(signal.SIGINT, _interrupted_early)

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from harness.cli import HARNESS_USAGE, precheck  # noqa: E402

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
    from harness.report import print_packs, print_trials
    from harness.store import finished_ids

    for name, trials in ablations:
        print(f"== {name}")
        print_trials(trials, finished_ids(store, name))
        print_packs(trials, cluster.pack_size, cluster.device)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    from harness.sweep import SweepError, expand_suite
    from harness.store import StoreError, check_store, resolve_store
    from harness.validate import check_cluster, preflight

    global _ENTERED
    _ENTERED = True
    hydra_cfg = HydraConfig.get()
    searchpath = [o for o in hydra_cfg.overrides.hydra if o.startswith("hydra.searchpath=")]
    cli = [*hydra_cfg.overrides.task, *_SWEEPS]
    try:
        ablations = expand_suite(cfg, [*cli, *searchpath])
        preflight([t for _, trials in ablations for t in trials], cfg.cluster.device, cfg.cluster.pack_size)
        cluster = OmegaConf.to_object(cfg.cluster)
        check_cluster(cluster)
        # the store stays where the command started, also with hydra.job.chdir=True
        tracking = OmegaConf.to_object(cfg.tracking)
        store = resolve_store(tracking, Path(hydra_cfg.runtime.cwd))
        if not cfg.dry_run:
            from harness.tracking import check_experiments

            check_store(store, [name for name, _ in ablations], tracking.relocate_artifacts)
            check_experiments(store, [name for name, _ in ablations])
    except (SweepError, StoreError) as err:
        _bad_input(err)
    if cfg.dry_run:
        _dry_run(ablations, store, cluster)
        return
    from harness.driver import run_suite
    from harness.paths import folder_name
    from harness.report import summarise
    from harness.tracking import Tracker
    from harness.writer import TrackingError

    out_dir = Path(hydra_cfg.runtime.output_dir)

    def after(name, summary) -> None:
        summarise(name, store, Tracker(store), summary.parent_id,
                  out_dir / folder_name(name) if len(ablations) > 1 else out_dir)

    # run_suite's own handlers interrupt the sweep; once it is over it puts back these, the
    # defaults: a signal in the interpreter's teardown then just ends the process (the sweep is
    # recorded, and _interrupted_early's "nothing was recorded" would be false)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        any_failed = run_suite(ablations, cluster, store, cli, tracking.lease_s, force=cfg.force,
                               after=after if cfg.summary else None)
    except TrackingError as err:  # the sweep ran, but some of it is not recorded
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except (ValueError, StoreError) as err:  # the cluster cannot run a trial; nothing was recorded
        _bad_input(err)
    sys.exit(1 if any_failed else 0)


def _take_sweeps(argv: list[str]) -> list[str]:
    """Take Hydra's ``-m``/``--multirun`` and the command line's sweeps out of ``argv`` (into
    :data:`_SWEEPS`): this harness runs them as axes of its own sweep, in one invocation with one
    store, instead of one Hydra job per value. Returns the new argv."""
    from hydra._internal.utils import get_args_parser

    from harness.sweep import SweepError, split_sweeps

    try:
        args = get_args_parser().parse_args(argv[1:])
        sweeps = split_sweeps(args.overrides)[1]
    except (SystemExit, SweepError):  # --help, or an override Hydra will reject with its own text
        return argv
    _SWEEPS[:] = sweeps
    return [argv[0], *(a for a in argv[1:] if a not in sweeps and a not in ("-m", "--multirun"))]


def _is_dry_run(args: list[str]) -> bool:
    return any(a.lstrip("+").lower() in ("dry_run=true", "dry_run=1") for a in args)


def cli() -> None:
    """Run :func:`main`; a config that Hydra cannot compose exits with 2 (Hydra's text kept).

    ``--help`` and unknown group choices are answered first, without heavy imports.
    """
    from harness.secrets import CredentialsError, scrub_argv

    try:  # before Hydra writes the overrides to .hydra/: a URI's password goes to the environment
        sys.argv = scrub_argv(sys.argv)
    except CredentialsError as err:
        _bad_input(err)
    precheck(HARNESS_USAGE)
    from harness.sweep import SweepError, check_config_files

    try:  # a YAML syntax error: one line with file and line, not Hydra's traceback
        check_config_files(sys.argv[1:])
    except SweepError as err:
        _bad_input(err)
    sys.argv = _take_sweeps(sys.argv)
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
