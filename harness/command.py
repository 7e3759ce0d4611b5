"""``python -m harness`` as a function: :func:`run` takes the composed config and the
invocation's :class:`harness.cli.Runtime` and returns the exit status. Its shell is the one of
every command (:mod:`harness.shell`: ``--help``, the checks that need no imports, Hydra); the
tests call it in-process on a config composed with Hydra's compose API (``tests/conftest.py``:
``invoke``). The end-of-sweep table is the shell's to pass in (``runtime.summarise``): this
module draws nothing itself.

Exit status: 0 every trial finished (or a dry run), 1 some failed (named on stderr), 2 bad input
(nothing run, nothing recorded), 130 interrupted (:class:`harness.sweep.Sweep`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from harness.cli import Runtime

if TYPE_CHECKING:
    from harness.config import ClusterConfig
    from harness.records import Trial

def run(cfg: DictConfig, runtime: Runtime) -> int:
    """Expand the ablation (or suite) with the command line's overrides and sweeps, check
    everything once (:meth:`harness.sweep.Sweep.check`: the preflight builds each trial to run,
    the finished trials are read once), then list the trials (``dry_run``) or run them and
    summarise each ablation (``summary``). Returns the exit status (module docstring).
    """
    from harness.expansion import SweepError, expand_suite
    from harness.store import StoreError, resolve_store
    from harness.sweep import Sweep

    cli = [*runtime.overrides, *runtime.sweeps]
    try:
        ablations = expand_suite(cfg, [*cli, *runtime.searchpath])
        cluster = OmegaConf.to_object(cfg.cluster)
        tracking = OmegaConf.to_object(cfg.tracking)
        # the store stays where the command started, also with hydra.job.chdir=True
        store = resolve_store(tracking, runtime.cwd)
        sweep = Sweep(ablations, cluster, store, cli, tracking.lease_s, force=cfg.force,
                      relocate_artifacts=tracking.relocate_artifacts)
        sweep.check(dry_run=cfg.dry_run)  # a dry run reads the store, and only if it exists
    except (SweepError, StoreError) as err:  # bad input: nothing run or recorded
        print(f"error: {err}", file=sys.stderr)
        return 2
    if cfg.dry_run:
        _dry_run(ablations, sweep.finished, cluster)
        return 0
    draw = cfg.summary and runtime.summarise is not None
    return sweep.main(after=_summariser(cfg, runtime, ablations, store) if draw else None)


def dry_run(ablations: list[tuple[str, list[Trial]]], cluster: ClusterConfig, store, cli: list[str],
            lease_s: float) -> dict[str, dict[str, list[str]]] | None:
    """The dry run of a command that runs trials (``analysis.report``, ``analysis.scorecard``,
    ``analysis.zoo``): every check of a real run but the store's writability
    (:meth:`harness.sweep.Sweep.check` with ``dry_run``), then each ablation's trials listed as
    ``python -m harness dry_run=true`` lists them. Returns the finished trials as read (ablation →
    trial id → run ids), or None after printing one ``error:`` line for bad input (exit 2).
    Nothing is run or written; a store that does not exist is not created."""
    from harness.sweep import Sweep

    sweep = Sweep(ablations, cluster, store, cli, lease_s)
    try:
        sweep.check(dry_run=True)
    except ValueError as err:  # SweepError, StoreError: bad input
        print(f"error: {err}", file=sys.stderr)
        return None
    _dry_run(ablations, sweep.finished, cluster)
    return sweep.finished


def _dry_run(ablations: list[tuple[str, list[Trial]]], finished: dict[str, dict[str, list[str]]],
             cluster: ClusterConfig) -> None:
    """List each ablation's trials, marking those already FINISHED in the store, and how they
    would be packed (``cluster.pack_size``)."""
    from harness.console import print_packs, print_trials

    for name, trials in ablations:
        print(f"== {name}")
        print_trials(trials, finished.get(name, {}))
        print_packs(trials, cluster.pack_size, cluster.device)


def _summariser(cfg: DictConfig, runtime: Runtime, ablations, store):
    """The end-of-sweep table and figures of each ablation as it completes
    (``runtime.summarise``), in its folder of this invocation's output folder (one folder per
    ablation of a suite)."""
    from harness.paths import folder_name

    trials = dict(ablations)

    def after(name, summary) -> None:
        out = runtime.output_dir / folder_name(name) if len(ablations) > 1 else runtime.output_dir
        runtime.summarise(name, trials[name], store, summary.parent_id, out, cfg.scale.name,
                          lease_s=cfg.tracking.lease_s)

    return after
