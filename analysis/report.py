"""``python -m analysis.report [scale=default|full|tiny] [report.run=false] [report.runs=BUNDLE]``

Runs the ``paper`` suite in this process as ``python -m harness +ablation=paper`` does (one Ray
start; finished trials are skipped; an interrupt exits 130),
extends the learning-rate grid one step past every edge that a deciding part chose (paper.md
§13, at most ``report.extend_lr`` times), exports the runs of exactly the suite's trials to the
results bundle ``<report folder>/runs.csv.gz`` and writes the report from that bundle: per claim
of paper.md §13 the verdict of its pre-registered parts (:mod:`analysis.protocol`), the exact
checks apart (:mod:`analysis.claims`), and every ablation's figures and tables.

``report.runs=PATH`` regenerates the report offline from a bundle (nothing is run, no store is
opened). Scales ``default`` and ``full`` write ``docs/report.md`` (figures and tables in
``docs/report/``); any other scale (``tiny``) is a check of the path, not evidence: it writes
``outputs/report-<scale>/report.md`` (figures as PNG only) and every verdict reads "path check,
not evidence".
``report.out=PATH`` writes elsewhere: a ``.md`` file, or a folder that gets ``report.md`` (figures,
tables and the bundle beside it, in the folder of the same name without ``.md``).
"""

from __future__ import annotations

import sys

from harness.cli import Runtime


def run(cfg, runtime: Runtime) -> int:
    """Write the report as the module docstring says (:func:`analysis.reporting.generate`);
    returns the exit status: 0; 2 for bad input found before any trial starts (one ``error:``
    line); 1 when Ray did not start (a busy machine, one line). An interrupted suite exits 130 from :class:`harness.sweep.Sweep`."""
    from analysis.reporting import ReportInputError, generate
    from harness.scheduler import RayStartError

    cli = [*(o for o in runtime.overrides if not o.startswith(("report.", "+ablation"))), *runtime.searchpath]
    try:
        # the searchpath too: a suite or ablation of the user's own folder composes in every round
        if cfg.dry_run:
            return _dry_run(cfg, cli)
        generate(cfg, cli)
    except ReportInputError as err:
        if str(err):
            print(f"error: {err}", file=sys.stderr)
        return 2
    except RayStartError as err:  # a busy machine: one line, and the same command later resumes
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


def _dry_run(cfg, cli: list[str]) -> int:
    """``dry_run=true``: the suite's trials (those already in the store marked ``done``) and
    where the report would go; nothing run or written (a bundle given as ``report.runs`` is
    read: its report needs no trial). Exit status 0, 2 bad input (one line)."""
    from pathlib import Path

    from omegaconf import OmegaConf

    from analysis.report_paths import read_runs
    from analysis.reporting import ReportInputError, _compose_suite, _out_path, check_columns, check_confirm_seeds
    from harness.command import dry_run
    from harness.expansion import SweepError, expand_suite
    from harness.store import resolve_store

    out = _out_path(cfg)
    if cfg.report.runs:
        given = Path(cfg.report.runs)
        bundle = read_runs(given if given.is_absolute() else Path.cwd() / given, cfg.report.runs)
        print(f"report: dry run: would write {out} from the {len(bundle)} runs of {cfg.report.runs}; nothing written")
        return 0
    suite_cfg, configs = _compose_suite(cfg.report.suite, cli)
    try:
        ablations = expand_suite(suite_cfg, [f"+ablation={cfg.report.suite}", *cli], configs)
    except SweepError as err:
        raise ReportInputError(str(err)) from err
    check_confirm_seeds(cfg)
    check_columns(cfg)
    store = resolve_store(OmegaConf.to_object(cfg.tracking), Path.cwd())
    if dry_run(ablations, OmegaConf.to_object(cfg.cluster), store, cli, cfg.tracking.lease_s) is None:
        return 2
    what = ("run the trials not done, extend the lr grid past its edges" if cfg.report.run
            else "read the runs of these trials (report.run=false)")
    print(f"report: dry run: would {what} and write {out}; nothing was run or written")
    return 0


if __name__ == "__main__":
    from harness.shell import main

    main("analysis.report")
