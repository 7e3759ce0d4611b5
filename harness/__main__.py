"""``python -m harness [+ablation=NAME] [key=value ...]``: the shell of :func:`harness.command.run`.

Without ``+ablation`` it runs one trial of the defaults. ``dry_run=true`` lists the trials;
``force=true`` reruns trials that already finished. A sweep on the command line (``seed=0,1,2``,
with or without Hydra's ``-m``) is one more axis of the ablation. Exit status: 0 every trial
finished, 1 some failed (named on stderr), 2 bad input (nothing run, nothing recorded),
130 interrupted (SIGINT or SIGTERM).

``--help`` and a misspelled group choice or key are answered by :mod:`harness.cli` before torch,
Ray or MLflow is imported; those are imported only once the command needs them.
"""

from __future__ import annotations

import sys

from harness.signals import end_at_once_until_the_sweep

end_at_once_until_the_sweep()  # before the imports below: nothing is recorded yet

from harness.cli import HARNESS_USAGE, hydra_shell, precheck, take_sweeps  # noqa: E402


def cli() -> None:
    """Check what needs no imports, take the sweeps out of the command line, and exit with
    :func:`harness.command.run`'s status under Hydra (:func:`harness.cli.hydra_shell`)."""
    from harness.secrets import scrub_command_line

    scrub_command_line()  # before Hydra writes .hydra/: a URI's password goes to the environment
    precheck(HARNESS_USAGE)
    from harness.expansion import SweepError, check_config_files

    try:  # a YAML syntax error: one line with file and line, not Hydra's traceback
        check_config_files(sys.argv[1:])
    except SweepError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    from harness.command import DRY_RUN_HYDRA, is_dry_run, run
    from harness.config import register_configs

    sys.argv, sweeps = take_sweeps(sys.argv)
    if is_dry_run(sys.argv[1:]):
        sys.argv += DRY_RUN_HYDRA
    register_configs()
    sys.exit(hydra_shell("config", run, sweeps))


if __name__ == "__main__":
    cli()
