"""``train.augment``: the augmentation control beside C9 (harness/augment.py; issue 51)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.augment import check, permute_positions
from harness.config import Augment
from harness.expansion import compose_trial
from harness.pack import cannot_pack
from harness.trial import run_trial
from tasks import build_task
from tasks.base import Batch

CONF = Path(__file__).parent.parent / "conf"
# the token-task presets (their targets are a function of the tokens: what the test can permute);
# the regression teachers declare no symmetry (tasks.base.TaskBase.symmetries)
PRESETS = sorted(p.stem for p in (CONF / "task").glob("*.yaml") if "selection_schema" in p.read_text())
FAST = ["task=nearest", "model=mlp", "train.max_steps=30", "train.eval_every=10", "task.n_train=64",
        "task.n_val=32", "task.n_test=64"]


@pytest.fixture(scope="module")
def tasks_by_preset():
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfgs = {p: compose_trial([f"task={p}", "task.n_train=32", "task.n_val=8", "task.n_test=8"], []).config.task
                for p in PRESETS}
    GlobalHydra.instance().clear()
    return {p: build_task(cfg) for p, cfg in cfgs.items()}


@pytest.mark.parametrize("preset", PRESETS)
def test_a_declared_permutation_symmetry_holds_and_an_undeclared_one_fails(tasks_by_preset, preset):
    """y(X P) = y(X) P for every task that declares ``permutation``; a token task whose
    targets do not commute (recall) must not declare it."""
    task = tasks_by_preset[preset]
    batch = task.train_set(0)[0]
    perm = torch.rand(batch.tokens.shape, generator=torch.Generator().manual_seed(1)).argsort(-1)
    y, mask = task.targets(batch.tokens.gather(1, perm))
    commutes = torch.equal(y[mask], batch.y.gather(1, perm)[mask]) and torch.equal(mask, batch.mask.gather(1, perm))
    assert commutes == ("permutation" in task.symmetries()), (preset, task.symmetries())


def test_each_example_is_permuted_by_its_own_permutation_inputs_and_targets_alike():
    B, n, d = 4, 6, 3
    x = torch.arange(B * n * d, dtype=torch.float32).reshape(B, n, d)
    y = torch.arange(B * n).reshape(B, n)
    batch = Batch(x=x, y=y, tokens=y.clone(), mask=y % 2 == 0, groups={"g": torch.ones(B, dtype=torch.bool)})
    out = permute_positions(batch, torch.Generator().manual_seed(0))
    perms = [(out.y[b] - b * n).tolist() for b in range(B)]  # where each new position came from
    assert all(sorted(p) == list(range(n)) for p in perms) and len({tuple(p) for p in perms}) > 1
    for b, p in enumerate(perms):
        assert torch.equal(out.x[b], x[b, p]) and torch.equal(out.tokens[b], y[b, p])
        assert torch.equal(out.mask[b], batch.mask[b, p])
    assert torch.equal(out.groups["g"], batch.groups["g"])
    with pytest.raises(ValueError, match="no position axis"):
        permute_positions(Batch(x=None, y=torch.zeros(B), tokens=y), torch.Generator())


def test_a_task_not_symmetric_under_the_group_is_refused_naming_what_is_allowed(tasks_by_preset):
    with pytest.raises(ValueError, match=r"train.augment=permutation.*'recall'.*allowed for this task: none"):
        check(Augment.permutation, tasks_by_preset["recall"], "recall")
    check(Augment.permutation, tasks_by_preset["nearest"], "nearest")  # declared: no error


def test_an_augmented_trial_is_deterministic_runs_alone_and_keeps_the_unaugmented_id(hydra_conf):
    plain, explicit = compose_trial(FAST, []), compose_trial([*FAST, "train.augment=none"], [])
    assert plain.trial_id == explicit.trial_id  # every trial recorded before the key keeps its id
    aug = compose_trial([*FAST, "train.augment=permutation"], [])
    assert aug.trial_id != plain.trial_id
    assert "train.augment=permutation" in cannot_pack(aug.config) and cannot_pack(plain.config) is None
    a, b, c = run_trial(aug.config), run_trial(aug.config), run_trial(plain.config)
    losses = lambda r: [p["train/loss"] for p in r.curve]  # noqa: E731 (time_ms differs)
    assert a.metrics["test/acc"] == b.metrics["test/acc"] and losses(a) == losses(b)
    assert a.curve[0]["train/loss"] != c.curve[0]["train/loss"]  # the minibatches were transformed


def test_the_preflight_refuses_an_augmentation_the_task_lacks_before_any_trial(invoke, tmp_path):
    code, out, err = invoke("harness", ["+ablation=augmentation", "task=recall", "scale=tiny", "dry_run=true"], tmp_path)
    assert code == 2, err
    assert "train.augment=permutation" in err and "'selection (recall)'" in err and "allowed for this task: none" in err
    assert not (tmp_path / "mlflow.db").exists()
