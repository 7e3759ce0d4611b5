"""``python -m harness [+ablation=NAME] [key=value ...]``: the shell of :func:`harness.command.run`.

Without ``+ablation`` it runs one trial of the defaults. ``dry_run=true`` lists the trials;
``force=true`` reruns trials that already finished. A sweep on the command line (``seed=0,1,2``,
with or without Hydra's ``-m``) is one more axis of the ablation. Exit status: 0 every trial
finished, 1 some failed (named on stderr), 2 bad input (nothing run, nothing recorded),
130 interrupted (SIGINT or SIGTERM).

The shell is the one of every command (:mod:`harness.shell`): ``--help``, a misspelled group
choice, key or value are answered before torch, Ray or MLflow is imported; those are imported
only once the command needs them.
"""

from __future__ import annotations

from harness.signals import end_at_once_until_the_sweep

end_at_once_until_the_sweep()  # before the shell's own imports: a signal there ends the process at once

from harness.shell import main  # noqa: E402

if __name__ == "__main__":
    main("harness")
