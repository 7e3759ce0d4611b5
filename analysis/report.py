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

from harness.cli import REPORT_USAGE, Runtime, hydra_shell, precheck


def run(cfg, runtime: Runtime) -> int:
    """Write the report as the module docstring says (:func:`analysis.reporting.generate`);
    returns the exit status: 0; 2 for bad input found before any trial starts (one ``error:``
    line); 1 when Ray did not start (a busy machine, one line). An interrupted suite exits 130 from :class:`harness.sweep.Sweep`."""
    from analysis.reporting import ReportInputError, generate
    from harness.scheduler import RayStartError

    try:
        # the searchpath too: a suite or ablation of the user's own folder composes in every round
        generate(cfg, [*(o for o in runtime.overrides if not o.startswith(("report.", "+ablation"))),
                       *runtime.searchpath])
    except ReportInputError as err:
        if str(err):
            print(f"error: {err}", file=sys.stderr)
        return 2
    except RayStartError as err:  # a busy machine: one line, and the same command later resumes
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


def cli() -> None:
    """``--help`` and unknown group choices first (no heavy imports), then the exit status of
    :func:`run` under Hydra (:func:`harness.cli.hydra_shell`)."""
    from harness.secrets import scrub_command_line

    scrub_command_line()  # a tracking URI's password never reaches .hydra/ (harness.secrets)
    precheck(REPORT_USAGE)
    from harness.config import register_configs

    register_configs()
    sys.exit(hydra_shell("report", run))


if __name__ == "__main__":
    cli()
