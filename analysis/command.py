"""``python -m analysis`` as a function: :func:`run` takes the composed config and the
invocation's :class:`harness.cli.Runtime` and returns the exit status; ``analysis/__main__.py``
is its shell. What it reads and writes: see ``analysis/__main__.py``."""

from __future__ import annotations

import sys

from omegaconf import DictConfig, OmegaConf

from harness.cli import Runtime


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run(cfg: DictConfig, runtime: Runtime) -> int:
    """Analyse the runs of exactly the trials ``python -m harness`` runs with the same
    overrides, sweeps and search path; write the figures and tables to ``runtime.output_dir``
    and print the end-of-sweep table and the paths written. Returns 0, or 2 (one ``error:``
    line) if the ablation is a suite, does not expand, or none of its trials has a run."""
    from analysis.summary import analyse, report
    from harness.expansion import SweepError, expand, experiment_name
    from harness.store import resolve_store

    name = cfg.ablation.name
    if cfg.ablation.suite:
        return _fail(f"{name!r} is a suite of ablations {list(cfg.ablation.suite)}: analyse one of them "
                     "(+ablation=NAME) or write the report (python -m analysis.report)")
    try:  # the same trials python -m harness composes: its overrides, its sweeps, its search path
        trials = expand(cfg, [*runtime.overrides, *runtime.sweeps, *runtime.searchpath])
    except SweepError as err:
        return _fail(str(err))
    name = experiment_name(cfg, trials)  # a one-off run's experiment: single/<task>/<model>
    # the store of the directory the command started from, also with hydra.job.chdir=True
    store = resolve_store(OmegaConf.to_object(cfg.tracking), runtime.cwd)
    if cfg.dry_run:
        return _dry_run(name, trials, store)
    out = runtime.output_dir
    try:
        df, paths = analyse(name, trials, store.uri, out, scale=cfg.scale.name, runs_csv=True)
    except LookupError as err:
        return _fail(str(err))
    if df.empty:
        return _fail(f"none of the {len(trials)} trials of {name!r} with these overrides has a run in "
                     f"{store.uri}; run them first: python -m harness +ablation={name} ...")
    counts = df["status"].value_counts().to_dict()
    print(f"{len(df)} trial runs {counts}")
    table = report(df, out)
    for path in [*paths, *([table] if table else [])]:
        print(path)
    print(f"wrote: {out}")
    return 0


def _dry_run(name: str, trials: list, store) -> int:
    """``dry_run=true``: the trials whose runs would be read (``done``: a FINISHED run in the
    store), read-only; nothing is written. Exit status 0."""
    from harness.console import print_trials
    from harness.store import finished_trials

    done = finished_trials(store, name, {t.trial_id for t in trials})
    print(f"== {name}")
    print_trials(trials, done)
    print(f"analysis: dry run: would read the runs of these {len(trials)} trials from {store.uri} and write "
          "the figures and tables to outputs/; nothing was written")
    return 0
