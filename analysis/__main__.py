"""``python -m analysis +ablation=NAME [tracking=...]``: an ablation's figures and tables from
MLflow; the command :func:`analysis.command.run` in the shell of every command (:mod:`harness.shell`).

Composes the ablation with the command's overrides exactly as ``python -m harness`` does (a
sweep on the command line, with or without ``-m``, is one more axis of the one analysis; the
same ``hydra.searchpath`` and ``--config-dir``) and
reads the runs of exactly those trials (and of their lr-edge extensions) from the configured
store, so runs made with other overrides in the same experiment are never mixed in
(:mod:`analysis.trials`); each run is labelled with its arm (the variant plus every other swept
axis). Writes to this command's output folder (``outputs/NAME/<time>/``):

* ``runs.csv``: the runs table as loaded;
* ``sample_efficiency.{png,pdf}`` and ``sample_efficiency_table.{csv,md}``;
* ``length_generalisation.{png,pdf}`` when some run has ``test/n_<n>/…`` metrics;
* ``symmetry.{csv,md}`` when the runs have ``symmetry/*`` metrics;
* ``counts.{csv,md}``: finished, failed, killed and diverged trials per task and variant;
* ``learning_curves.{png,pdf}``: ``train/loss`` and ``val/loss`` of at most ``MAX_CURVES`` runs
  (the first FINISHED run of each task × variant, largest training set, smallest seed).

It prints the end-of-sweep table that ``python -m harness`` prints (:mod:`analysis.summary`: the
same code on the same runs) and writes it to ``sample_efficiency.csv``.

Nothing is trained and nothing is written to MLflow. Exit status 2 if the ablation does not
compose, is a suite (use ``python -m analysis.report``), or none of its trials has a run.
"""

from __future__ import annotations

from harness.shell import main

if __name__ == "__main__":
    main("analysis")
