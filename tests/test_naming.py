"""Run names that tell runs apart in the MLflow UI (harness/naming.py)."""

from __future__ import annotations

from datetime import datetime

from harness.naming import parent_name, run_name
from harness.expansion import Trial

POINT = ("model=mlp", "task.n_train=64", "seed=0")


def _trial(variant: str = "mlp", point=POINT) -> Trial:
    return Trial("0" * 16, variant, tuple(point), None, "teacher")


def test_overrides_off_the_grid_tell_runs_apart():
    """Two runs of one grid point with another train.max_steps had one name ('mlp teacher
    n_train=64 seed=0'); keys that leave the trial unchanged stay out."""
    cli = ["+ablation=smoke", "cluster=serial", "tracking.db_path=x.db", "train.max_steps=50",
           "seed=0,1", "hydra.job.chdir=True"]
    assert run_name(_trial(), cli) == "mlp n_train=64 seed=0 max_steps=50"
    assert run_name(_trial(), ["train.max_steps=1000"]) != run_name(_trial(), ["train.max_steps=50"])
    assert run_name(_trial()) == "mlp n_train=64 seed=0"
    # the variant names its model overrides; a task on the grid shows by name
    point = ("model=softmax_free", "model.k=4", "task=nearest", "seed=1")
    assert run_name(_trial("softmax_free[k=4]", point), ["task.n_train=8"]) == \
        "softmax_free[k=4] nearest seed=1 n_train=8"
    # a command-line key that replaces a grid axis is the point's, not repeated
    assert run_name(_trial(), ["task.n_train=64"]) == "mlp n_train=64 seed=0"


def test_parent_name_starts_with_its_time():
    """The UI cut 'smoke 2026-12-01 14:03:07' to 'smoke 2026-12-0…': the time comes first."""
    assert parent_name("smoke", datetime(2026, 12, 1, 14, 3, 7)) == "12-01 14:03:07 smoke"
