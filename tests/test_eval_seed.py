"""``task.eval_seed`` (paper.md §13 "Confirmation block"): fresh validation/test sets without
touching the training set. Unset (None, the default since issue 51) it is the trial's own seed;
an explicit 0, the shared sets every trial used before, is left out of the trial identity, so
those trials keep their ids."""

from __future__ import annotations

import dataclasses
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
def test_an_explicit_eval_seed_0_keeps_the_ids_from_before(compose, preset):
    trial = compose(preset, "task.eval_seed=0")
    assert trial.trial_id == BEFORE[preset]
    assert "eval_seed" not in trial.identity["task"] and "eval_seed" not in config_identity(trial.config)["task"]
    default = compose(preset)  # unset: the trial's own seed (3), a new id, as eval_seed=3 set explicitly
    assert default.trial_id != BEFORE[preset] and default.identity["task"]["eval_seed"] == 3
    assert default.trial_id == compose(preset, "task.eval_seed=3").trial_id
    zero = lambda *x: compose_trial([f"task={preset}", *SMALL, *x], ["seed=0"]).trial_id  # noqa: E731
    assert zero() == zero("task.eval_seed=0")  # seed 0's own sets are the shared ones: the id from before


@pytest.mark.parametrize("preset", ["teacher", "nearest", "arithmetic_mod"])
def test_unset_eval_seed_evaluates_on_the_trials_own_seeds_sets(compose, preset):
    """Seed 3 unset builds the sets of an explicit eval_seed 3, not the shared ones (eval_seed 0)."""
    from harness.trial import prepare

    cpu = torch.device("cpu")
    unset, three, shared = (prepare(compose(preset, *x).config, cpu)
                            for x in ([], ["task.eval_seed=3"], ["task.eval_seed=0"]))
    assert _equal(_rows(unset.val), _rows(three.val)) and not _equal(_rows(unset.val), _rows(shared.val))
    assert _equal(_rows(unset.train), _rows(shared.train))  # the training set never depends on it
    by_hand = dataclasses.replace(compose(preset).config.task, eval_seed=None)  # built outside a trial
    assert _equal(_rows(build_task(by_hand).val_set()), _rows(shared.val))  # no seed to take: the shared sets
    cfg = compose(preset).config
    again = prepare(dataclasses.replace(cfg, task=by_hand), cpu)  # a trial resolves it to its seed
    assert _equal(_rows(again.val), _rows(three.val))


@pytest.mark.parametrize("preset", PRESETS)
def test_eval_seed_changes_id_and_evaluation_sets_not_training_set(compose, preset):
    base, fresh = compose(preset, "task.eval_seed=0"), compose(preset, "task.eval_seed=1")
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
    base = compose("nearest", "task.eval_seed=0")
    composer = Composer(["task=nearest", *SMALL])
    assert composer.extension(base, {"task.eval_seed": "1000"}).trial_id != base.trial_id
    assert composer.extension(base, {"task.eval_seed": "0"}).trial_id == base.trial_id
