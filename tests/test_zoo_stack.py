"""harness/models/stack.py (issue 65): ``model.blocks`` pre-norm residual blocks around any mixer,
one implementation for the built-in families and the plug-in mixers alike. The block's structure
(norm, mixer, residual; norm, 2× MLP, residual, each block its own mixer), the stack's declared
symmetries and causality equal to the ones measured on it in float64, the zoo's pre-flight refusing a
false declaration on the stack, the depth as a regime (ids of the bare model unchanged, the preset's
name kept) and the zoo's regime overrides (the depth for every arm and reference, its task axis)."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch
from omegaconf import OmegaConf

from analysis import scorecard, zoo
from harness.expansion import compose_trial
from harness.external_check import causality_refusal, measure_redrawn
from harness.models import build_model
from harness.models.attention import AttentionConfig
from harness.models.external import ExternalConfig
from harness.models.stack import Stack, rms_norm
from harness.symmetry import CAUSAL_KEY

D, N = 8, 5
EXAMPLES = str(zoo.ROOT / "examples")


def _holds(model) -> set[str]:
    errors, dtype = measure_redrawn(model, D, N)
    return {s for s, k in scorecard.SYMMETRY_KEYS.items() if errors.get(k, float("nan")) <= 1e-8}


def test_the_block_is_norm_mixer_residual_then_norm_mlp_residual():
    """Two blocks of softmax attention: each its own mixer (other weights), an MLP d → 2d → d, and
    the output exactly x + mixer(norm x), then + MLP(norm ·), block after block; blocks = 0 is the
    bare model drawn from the same stream (the first zoo's trials)."""
    stack = build_model(AttentionConfig(blocks=2), D, N, torch.Generator().manual_seed(0))
    bare = build_model(AttentionConfig(), D, N, torch.Generator().manual_seed(0))
    assert isinstance(stack, Stack) and len(stack.blocks) == 2 and not isinstance(bare, Stack)
    first, second = (b.mixer for b in stack.blocks)
    assert torch.equal(first.W_Q, bare.W_Q)  # the first mixer is drawn as the bare model is
    assert not torch.equal(first.W_Q, second.W_Q)
    assert [tuple(w.shape) for w in stack.blocks[0].mlp.weights] == [(2 * D, D), (D, 2 * D)]
    x = torch.randn(3, N, D, generator=torch.Generator().manual_seed(1))
    want = x
    for block in stack.blocks:
        want = want + block.mixer(want / want.square().mean(-1, keepdim=True).add(1e-6).sqrt())
        want = want + block.mlp(rms_norm(want))
    assert torch.allclose(stack(x), want, atol=1e-6)
    with pytest.raises(ValueError, match="model.blocks=-1"):
        build_model(AttentionConfig(blocks=-1), D, N, torch.Generator())


@pytest.mark.parametrize("cfg, said, causal", [
    (AttentionConfig(blocks=2), {"orthogonal_knowledge", "permutation"}, False),
    (AttentionConfig(blocks=2, causal_mask=True), {"orthogonal_knowledge"}, True),
    (AttentionConfig(blocks=2, learned_positions=True), {"orthogonal_knowledge"}, False),
    (ExternalConfig(target="zoo.linear_attention:LinearAttention", kwargs={"causal": True}, blocks=2),
     {"orthogonal_knowledge"}, True),
    (ExternalConfig(target="zoo.linear_attention:LinearAttention", kwargs={"causal": False}, blocks=2),
     {"orthogonal_knowledge", "permutation"}, False),
    (ExternalConfig(target="zoo.mlp_mixer:TokenMixingMLP", blocks=2), set(), False),
])
def test_the_stack_declares_what_is_measured_on_it(monkeypatch, cfg, said, causal):
    """Declared = measured on re-drawn float64 weights, for built-in and plug-in mixers: the MLP
    keeps orthogonal-with-knowledge and permutation, never plain orthogonal (softmax alone has
    neither more nor less); causality is the mixer's and holds through the stack."""
    monkeypatch.syspath_prepend(EXAMPLES)
    stack = build_model(cfg, D, N, torch.Generator().manual_seed(0))
    assert set(stack.symmetries) == said == _holds(stack)
    assert stack.causal is causal
    why, leak, dtype = causality_refusal(stack, D, N)
    assert why is None and dtype == torch.float64 and (leak <= 1e-8) is causal


LEAKY = '''
    import torch
    from torch import nn


    class Leaky(nn.Module):
        """Declares causal, but each output adds the mean over all tokens (the future too)."""

        symmetries = frozenset({"permutation"})

        def __init__(self, d, n_max, generator, causal=True):
            super().__init__()
            self.causal = causal
            self.w = nn.Parameter(torch.randn(d, d, generator=generator) / d)

        def forward(self, x):
            return x.mean(1, keepdim=True).expand_as(x) @ self.w
'''


def test_the_preflight_refuses_a_false_declaration_on_the_stack(hydra_conf, tmp_path, monkeypatch):
    """A mixer whose false causal claim passes through the stack is refused by the zoo's pre-flight
    (exit 2's error) naming the arm; the true claim (causal = False) passes, the stack measured
    bidirectional and permutation-equivariant (declared by the mixer, kept by the blocks); a stack
    whose own declaration is false is refused on its measurement."""
    (tmp_path / "zoo_leaky.py").write_text(textwrap.dedent(LEAKY))
    monkeypatch.syspath_prepend(str(tmp_path))
    base = ["task=nearest", "model=external", "model.target=zoo_leaky:Leaky", "model.blocks=2"]
    lie = compose_trial([*base, "model.kwargs.causal=true"], [])
    with pytest.raises(zoo.ZooInputError, match="zoo arm 'leaky'.*declares causal, but a change at position t moved"):
        zoo.preflight("leaky", [lie], "mixer", "zoo_leaky:Leaky")
    honest = compose_trial([*base, "model.kwargs.causal=false"], [])
    row = zoo.preflight("leaky", [honest], "mixer", "zoo_leaky:Leaky")
    assert row["causal"] is False and row["declared"] == "permutation" and row["symmetry/permutation_err"] < 1e-8
    # the stack's own declaration is measured too: a stack declaring causal over an honest mixer is refused
    monkeypatch.setattr("harness.models.stack._declared_causal", lambda mixer: True)
    with pytest.raises(zoo.ZooInputError, match="zoo arm 'leaky': model.target='zoo_leaky:Leaky' declares causal, but a change"):
        zoo.preflight("leaky", [honest], "mixer", "zoo_leaky:Leaky")
    sys.modules.pop("zoo_leaky", None)


def test_the_depth_is_a_regime_not_a_name(hydra_conf):
    """``model.blocks=0`` is the bare model's trial (same id: every earlier trial stands); two
    blocks is another trial under the same preset name, with ``model.blocks`` in its params."""
    bare = compose_trial(["task=nearest", "model=softmax"], [])
    zero = compose_trial(["task=nearest", "model=softmax", "model.blocks=0"], [])
    two = compose_trial(["task=nearest", "model=softmax", "model.blocks=2"], [])
    assert bare.trial_id == zero.trial_id != two.trial_id
    assert bare.variant == two.variant == "softmax" and two.identity["model"]["blocks"] == 2
    ext = compose_trial(["task=nearest", "model=external", "model.target=zoo.s4d:S4D", "model.variant=s4d",
                         "model.kwargs.causal=true", "model.blocks=2"], [])
    assert ext.variant == "s4d[kwargs.causal=true]"


def test_the_zoo_regime_sets_the_depth_and_its_task_axis():
    """conf/zoo.yaml: two blocks, the recall task and MQAR at T ∈ {32, 64} × d ∈ {16, 32} beside the
    first zoo's tasks at the zoo's scale; the regime's overrides carry them unless the command line
    gives task=… and scale=…; MQAR's trials of an arm measured bidirectional are dropped."""
    cfg = OmegaConf.load(zoo.ROOT / "conf" / "zoo.yaml")
    assert cfg.zoo.blocks == 2
    assert list(cfg.zoo.tasks) == ["nearest", "teacher_general", "repeated", "recall", "mqar_t32_d16",
                                   "mqar_t32_d32", "mqar_t64_d16", "mqar_t64_d32"]
    plain = zoo.regime_overrides(cfg, type("R", (), {"overrides": (), "sweeps": ()})())
    assert plain == ["model.blocks=2", "scale=zoo", "ablation.grid.task='nearest,teacher_general,repeated,recall,"
                     "mqar_t32_d16,mqar_t32_d32,mqar_t64_d16,mqar_t64_d32,teacher_length'"]
    given = zoo.regime_overrides(cfg, type("R", (), {"overrides": ("task=recall", "scale=tiny"), "sweeps": ()})())
    assert given == ["model.blocks=2"]
    # MQAR is run by the arms measured causal alone (and every reference)
    assert list(cfg.zoo.causal_only) == [t for t in cfg.zoo.tasks if t.startswith("mqar")]
    trials = [[type("T", (), {"task": t})() for t in ("recall", "mqar_t32_d16")] for _ in range(2)]
    rows = [{CAUSAL_KEY: 0.0, "tolerance": 1e-8}, {CAUSAL_KEY: 0.3, "tolerance": 1e-8}]
    kept = zoo.causal_only(cfg, trials, rows)
    assert [[t.task for t in arm] for arm in kept] == [["recall", "mqar_t32_d16"], ["recall"]]
    with pytest.raises(zoo.ZooInputError, match="zoo.blocks=-1"):
        zoo.regime_overrides(OmegaConf.merge(cfg, {"zoo": {"blocks": -1}}), type("R", (), {"overrides": (), "sweeps": ()})())


def test_on_mqar_only_the_causal_reference_and_the_control_pair_run():
    """On a task of zoo.causal_only the references kept are those serving causal arms and the
    control pair (mlp, softmax); elsewhere every reference runs."""
    cfg = OmegaConf.load(zoo.ROOT / "conf" / "zoo.yaml")
    parts = [{"control": ["mlp", "softmax"]}]
    trials = [type("T", (), {"task": task, "variant": v})() for task in ("recall", "mqar_t64_d32")
              for v in ("softmax", "softmax_causal", "softmax_pos", "value", "mlp")]
    refs, groups = zoo.references_on_causal_tasks(cfg, parts, zoo.references_of(cfg), trials, [(trials, ["x"])])
    shown = sorted((t.task, t.variant) for t in refs)
    assert shown == sorted([*(("recall", v) for v in ("softmax", "softmax_causal", "softmax_pos", "value", "mlp")),
                            ("mqar_t64_d32", "softmax"), ("mqar_t64_d32", "softmax_causal"), ("mqar_t64_d32", "mlp")])
    assert groups == [(refs, ["x"])]


def test_the_cost_estimate_counts_every_trial_and_its_reruns():
    """analysis/zoo_cost.estimate: per (arm, task) the grid's points × (steps × the step's cost +
    the trial's fixed part), plus the lr-edge and ×4 budget reruns; a skipped pair costs nothing,
    an unmeasured one its task's dearest."""
    from analysis import zoo_cost

    scale = OmegaConf.create({"n_train": "128,256,512,1024", "lrs": "0.003,0.01,0.03", "seeds": "range(5)", "steps": 300})
    costs = {("a", "t"): (10.0, 1.0), ("b", "t"): (20.0, 0.0)}
    one = 300 * 0.010 + 1.0  # a's trial: 4 CPU-s
    rerun = zoo_cost.RERUNS["lr_edge"] * one + zoo_cost.RERUNS["budget_rows"] * (300 * 0.010 * 4 + 1.0)
    e = zoo_cost.estimate(costs, ["a"], ["t"], scale, 2)
    assert e["grid_trials"] == 60 and e["cpu_h"] == pytest.approx(60 * (one + rerun) / 3600)
    assert e["wall_h"] == pytest.approx(e["cpu_h"] / 2)
    assert zoo_cost.estimate(costs, ["a", "b"], ["t"], scale, 2, {("b", "t")})["cpu_h"] == pytest.approx(e["cpu_h"])
    missing = zoo_cost.estimate({("b", "t"): (20.0, 0.0)}, ["a"], ["t"], scale, 2)
    assert missing["missing"] == [("a", "t")] and missing["cpu_h"] > e["cpu_h"]  # costed as b, the dearest
    with pytest.raises(KeyError, match="no measured cost on task 'u'"):
        zoo_cost.estimate(costs, ["a"], ["u"], scale, 2)
