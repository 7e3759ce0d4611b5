"""``task.eval_seed`` (paper.md §13 "Confirmation block"): fresh validation/test sets without
touching the training set, left out of the trial identity at its default 0 so every trial
recorded before the key existed keeps its id."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from harness.records import config_identity
from harness.expansion import Composer, compose_trial
from tasks import build_task

SMALL = ["task.n_train=48", "task.n_val=16", "task.n_test=24"]
# ids of these trials as composed before task.eval_seed existed (commit ae07a30): they must not move
BEFORE = {"teacher": "04ee94781dec8097", "nearest": "bb84a1769c1e81ff", "arithmetic_mod": "3a368d78a9bbf333"}
# a teacher task, token tasks (i.i.d. streams and a finite pool), a length-generalisation task
PRESETS = [*BEFORE, "teacher_residual", "duplicate", "arithmetic_length"]


@pytest.fixture(scope="module")
def compose():
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(Path(__file__).parent.parent / "conf"), version_base="1.3"):
        yield lambda preset, *extra: compose_trial([f"task={preset}", *SMALL, *extra], ["seed=3"])
    GlobalHydra.instance().clear()


def _rows(batches) -> list[torch.Tensor]:
    return [b.tokens if b.tokens is not None else b.x for b in batches]


def _equal(a, b) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("preset", sorted(BEFORE))
def test_existing_trial_ids_are_unchanged(compose, preset):
    trial = compose(preset)
    assert trial.trial_id == BEFORE[preset]
    assert compose(preset, "task.eval_seed=0").trial_id == BEFORE[preset]  # set explicitly: the same
    assert "eval_seed" not in trial.identity["task"] and "eval_seed" not in config_identity(trial.config)["task"]


@pytest.mark.parametrize("preset", PRESETS)
def test_eval_seed_changes_id_and_evaluation_sets_not_training_set(compose, preset):
    base, fresh = compose(preset), compose(preset, "task.eval_seed=1")
    assert fresh.trial_id != base.trial_id and fresh.identity["task"]["eval_seed"] == 1
    assert config_identity(fresh.config) == fresh.identity
    a, b = build_task(base.config.task), build_task(fresh.config.task)
    assert _equal(_rows(a.train_set(3)), _rows(b.train_set(3)))
    assert not _equal(_rows(a.test_sets()[""]), _rows(b.test_sets()[""]))
    assert not _equal(_rows(a.val_set()), _rows(b.val_set()))
    for key in a.test_sets():  # every extra test length too
        assert key == "" or not _equal(_rows(a.test_sets()[key]), _rows(b.test_sets()[key]))


def test_fresh_evaluation_sets_stay_disjoint_from_training_on_a_finite_pool(compose):
    task = build_task(compose("arithmetic_mod", "task.eval_seed=7").config.task)
    rows = lambda bs: {tuple(t.tolist()) for b in bs for t in b.tokens}  # noqa: E731
    train = rows(task.train_set(0)) | rows(task.train_set(1))
    test, val = rows(task.test_sets()[""]), rows(task.val_set())
    assert not train & test and not train & val and not test & val


def test_an_extension_with_eval_seed_changes_the_id(compose):
    base = compose("nearest")
    composer = Composer(["task=nearest", *SMALL])
    assert composer.extension(base, {"task.eval_seed": "1000"}).trial_id != base.trial_id
    assert composer.extension(base, {"task.eval_seed": "0"}).trial_id == base.trial_id
