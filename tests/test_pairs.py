"""Minimal pairs (paper.md §13, harness/pairs.py): each part's arms differ in exactly the keys it
declares, checked before any trial runs; M0's Z g2 switch removes only that term."""

from __future__ import annotations

import copy
import dataclasses
import functools
from pathlib import Path

import pytest
import torch

from harness import pairs
from harness.presets import preset_config
from harness.models import build_model
from harness.expansion import SweepError

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def _trials(name: str, *extra: str) -> tuple:
    """The ablation's trials at ``scale=tiny`` (``extra``: more overrides), composed once per
    test process: eleven compositions serve the file's 25 uses (about half its CPU), so the tests
    only read them (a change goes to a copy: ``dataclasses.replace``, ``copy.deepcopy``)."""
    from hydra import compose

    from harness.expansion import expand

    cli = [f"+ablation={name}", "scale=tiny", *extra]
    return tuple(expand(compose(config_name="config", overrides=cli), cli))


def _part(trials, **kw):
    """The ablation's parts, the one matching ``kw`` replaced by ``replace``."""
    return [p for p in trials[0].config.ablation.parts if all(getattr(p, k) == v for k, v in kw.items())]


def test_general_without_zg2_is_general_minus_its_zg2_term_only():
    """Same generator: Z, ψ and φ1 are drawn identically; the output is exactly M0's X g1."""
    with_term = build_model(preset_config("general"), 16, 8, torch.Generator().manual_seed(3)).double()
    without = build_model(preset_config("general_nozg2"), 16, 8, torch.Generator().manual_seed(3)).double()
    kept = dict(without.named_parameters())
    assert set(kept) == {k for k, _ in with_term.named_parameters() if not k.startswith("phi2.")}
    for name, value in with_term.named_parameters():
        if name in kept:
            assert torch.equal(value, kept[name]), name
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    g1, _ = with_term.coefficients(x)
    assert torch.allclose(without(x), g1 @ x, atol=1e-12)
    assert not torch.allclose(with_term(x), g1 @ x, atol=1e-6)  # the term is really there in M0


def test_every_ablations_parts_are_the_pairs_they_declare(hydra_conf):
    for name in ("knowledge_forms", "arithmetic_mod", "residual_value", "practical", "knowledge_size",
                 "control", "sigma_vs_softmax"):
        pairs.check_pairs(_trials(name))  # raises on any mismatch


REDESIGNED = {  # (ablation, task, a, b) of every part redesigned after a verdict run (issue 28)
    ("control", "teacher_squashed", "coordwise", "softmax"), ("control", "teacher_control", "coordwise", "softmax"),
    ("practical", "teacher", "softmax", "softmax_unscaled"),
    ("practical", "teacher_general", "softmax", "softmax_unscaled"),
    ("sigma_vs_softmax", "nearest", "quad_sigma[sigma=softmax]", "best elementwise σ"),
    ("sigma_vs_softmax", "argmax_hard", "quad_sigma[sigma=softmax]", "best elementwise σ"),
    ("sigma_vs_softmax", "nearest_length", "quad_sigma[sigma=softmax]", "best elementwise σ"),
    ("residual_value", "teacher_residual", "residual", "value"), ("residual_value", "teacher_noisy", "value", "softmax"),
    ("knowledge_size", "teacher_noisy2", "softmax_free[k=8]", "softmax_free[k=4]"),
    ("knowledge_forms", "nearest", "general", "general_nozg2"), ("knowledge_forms", "nearest", "value", "softmax"),
    ("knowledge_forms", "teacher_general", "general", "general_nozg2"),
    ("knowledge_forms", "nearest", "general", "xg"), ("knowledge_forms", "teacher_general", "general", "xg"),
    ("knowledge_forms", "nearest", "xg", "mlp"), ("arithmetic_mod", "arithmetic_mod", "general", "general_nozg2"),
    ("arithmetic_mod", "arithmetic_mod", "value", "softmax"), ("higher_order", "repeated", "higher_order_gram[k=2]",
                                                               "higher_order_identity[k=2]"),
}


def test_every_redesigned_part_carries_its_registration_trail_and_every_equivalence_a_control(hydra_conf):
    """paper.md §13 "Registration trail" and "Power": a part redesigned after a verdict run says
    its original design and outcome (`reregistered`), the others say nothing; every deciding
    equivalence of C9, C10 and C12 registers a positive control."""
    for name in sorted({r[0] for r in REDESIGNED} | {"finite_information"}):
        for p in _trials(name)[0].config.ablation.parts:
            redesigned = (name, p.task, p.a, p.b) in REDESIGNED
            assert bool(p.reregistered) == redesigned, (name, p.name)
            assert "\n" not in p.reregistered  # one line (the verdict table prints it)
            if p.test.value == "equivalence" and p.role.value == "deciding" and p.claim in ("C9", "C10", "C12"):
                assert len(p.control) == 2, (name, p.name)


def test_c12b_is_steps_to_target_on_a_task_both_arms_learn_and_c9_not_on_b7s_form(hydra_conf):
    [b] = [p for p in _trials("practical")[0].config.ablation.parts if p.role.value == "deciding"]
    assert (b.task, b.value, b.differ, b.control) == ("teacher", "steps_to_1e-06", ["model.scale"], ["softmax", "xg"])
    from harness.trial import STEPS_TO_TARGETS

    assert float(b.value.removeprefix("steps_to_")) in STEPS_TO_TARGETS  # every run records it
    [c9] = [p for p in _trials("control")[0].config.ablation.parts if p.role.value == "deciding"]
    assert (c9.task, c9.differ, c9.value) == ("teacher_squashed", ["family"], "auc")
    sizes = {t.config.task.n_train for t in _trials("control", "scale=default") if t.task == c9.task}
    assert len(sizes) >= 4  # paper.md §13 C9: the area over ≥ 4 training-set sizes


def test_the_m0_vs_m1_pair_declared_as_only_the_zg2_switch_is_refused(hydra_conf):
    """The audit's case: M0 general and M1 xg differ in φ1's inputs (model.name, model.p) as well."""
    trials = _trials("knowledge_forms")
    [obs] = _part(trials, task="nearest", a="general", b="xg")
    wrong = dataclasses.replace(obs, differ=["model.zg2"])
    arms = pairs.arm_labels(trials)
    problem = pairs.check_part(wrong, *pairs._one_pair(trials, arms, wrong))
    assert "model.name ('general' vs 'xg')" in problem and "model.p (4 vs None)" in problem
    assert "model.zg2 (" not in problem  # the declared key is not reported as extra
    right = dataclasses.replace(wrong, b="general_nozg2")  # the minimal pair passes the same declaration
    assert pairs.check_part(right, *pairs._one_pair(trials, arms, right)) == ""


def test_the_cli_exits_2_naming_the_extra_keys_before_any_trial(tmp_path, invoke):
    """``python -m harness`` with the M0-vs-M1 part declared as differing only in model.zg2:
    exit 2, one line naming model.name and model.p, and nothing written to MLflow (the command
    called in-process: the refusal, not the process, is under test)."""
    parts = _yaml_parts()
    index = next(i for i, p in enumerate(parts) if p["task"] == "nearest" and (p["a"], p["b"]) == ("general", "xg"))
    code, _, err = invoke("harness", ["+ablation=knowledge_forms", "scale=tiny", "cluster=serial",
                                      f"ablation.parts.{index}.differ=[model.zg2]"], tmp_path)
    assert code == 2, err[-2000:]
    [line] = [x for x in err.splitlines() if "model.zg2" in x]
    assert "model.name ('general' vs 'xg')" in line and "model.p (4 vs None)" in line
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()


def _yaml_parts() -> list[dict]:
    import yaml

    return yaml.safe_load((ROOT / "conf" / "ablation" / "knowledge_forms.yaml").read_text())["ablation"]["parts"]


def test_declared_but_equal_keys_wildcards_and_undeclared_deciding_parts_are_refused(hydra_conf):
    trials = _trials("knowledge_forms")
    arms = pairs.arm_labels(trials)
    [zg2] = _part(trials, task="nearest", a="general", b="general_nozg2")
    extra = dataclasses.replace(zg2, differ=["model.zg2", "model.k"])
    assert "declared but equal: ['model.k']" in pairs.check_part(extra, *pairs._one_pair(trials, arms, extra))
    star = dataclasses.replace(zg2, differ=["model.*"])
    assert "exact leaf keys" in pairs.check_part(star, *pairs._one_pair(trials, arms, star))
    undeclared = copy.deepcopy(trials[0].config)  # the composed trials are shared (_trials)
    undeclared.ablation.parts[0] = dataclasses.replace(zg2, differ=[])
    with pytest.raises(SweepError, match="must declare `differ`"):
        pairs.check_pairs([dataclasses.replace(t, config=undeclared) for t in trials])


def test_a_comparison_between_families_must_be_capacity_matched(hydra_conf):
    """C9: B1 mlp (131,712 parameters) against M1 xg (705) passes; reversed, the baseline xg has
    fewer parameters than the other arm and the check names both counts."""
    trials = _trials("knowledge_forms")
    arms = pairs.arm_labels(trials)
    [c9] = _part(trials, claim="C9")
    assert c9.differ == ["family"]
    assert pairs.check_part(c9, *pairs._one_pair(trials, arms, c9)) == ""
    flipped = dataclasses.replace(c9, a="mlp", b="xg")
    problem = pairs.check_part(flipped, *pairs._one_pair(trials, arms, flipped))
    assert "not capacity-matched" in problem and "705" in problem and "131712" in problem


def test_arm_labels_agree_with_the_analysis(hydra_conf):
    from analysis.trials import arm_label, swept_axes

    for name in ("sigma_vs_softmax", "rotation"):
        trials = _trials(name)
        axes = swept_axes(trials)
        assert pairs.arm_labels(trials) == {t.trial_id: arm_label(t, axes) for t in trials}


def test_a_steps_to_target_value_must_name_a_recorded_target(hydra_conf):
    """A target no run records is refused before any trial (exit 2 via SweepError)."""
    from harness.validate import check_part_values

    trials = _trials("practical")
    check_part_values(trials)  # the registered steps_to_0.003: fine
    [b] = [p for p in trials[0].config.ablation.parts if p.role.value == "deciding"]
    for bad in ("steps_to_0.02", "steps_to_x"):
        part = dataclasses.replace(b, value=bad)
        ablation = dataclasses.replace(trials[0].config.ablation, parts=[part])
        odd = dataclasses.replace(trials[0], config=dataclasses.replace(trials[0].config, ablation=ablation))
        with pytest.raises(SweepError, match=f"value='{bad}'; allowed steps-to-target values: steps_to_0.1, "):
            check_part_values([odd])
