"""The mixer zoo, second half (issue 50): Mamba, Hyena, MLP-Mixer's token-mixing MLP and the RWKV
time mix from ``examples/zoo/``, named by import path as a user would. Each: its defining
mechanism on a hand-computed example; its declared symmetries equal to the measured ones on
re-drawn weights, per form ("found, not declared" fails too); packed or alone as its docstring
says; deterministic given the generator, with the global RNG untouched."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from harness.expansion import compose_trial
from harness.external_check import measure_redrawn, symmetry_table
from harness.models import external
from harness.pack import cannot_pack

ROOT = Path(__file__).resolve().parent.parent
D, N_MAX = 8, 8

# form → the symmetries derived in its docstring, written before measuring
EXPECTED = {
    ("zoo.mamba:Mamba", ()): {"orthogonal_knowledge"},
    ("zoo.mamba:Mamba", (("causal", False),)): {"orthogonal_knowledge"},
    ("zoo.hyena:HyenaOperator", ()): {"orthogonal_knowledge"},
    ("zoo.hyena:HyenaOperator", (("causal", False),)): {"orthogonal_knowledge"},
    ("zoo.hyena:HyenaOperator", (("order", 3),)): {"orthogonal_knowledge"},
    ("zoo.mlp_mixer:TokenMixingMLP", ()): set(),
    ("zoo.rwkv:RWKV", ()): set(),
    ("zoo.rwkv:RWKV", (("causal", False),)): set(),
}
FORMS = list(EXPECTED)


def _id(form) -> str:
    return form[0].split(":")[1] + "".join(f"[{k}={v}]" for k, v in form[1])


pytestmark = pytest.mark.usefixtures("zoo_examples_on_path")  # examples/ on sys.path (tests/conftest.py)


def build(form, seed: int = 0, d: int = D, n_max: int = N_MAX):
    target, kwargs = form
    return external.load_target(target)(d, n_max, torch.Generator().manual_seed(seed), **dict(kwargs))


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- (ii) declared = measured ------------------------------------------------------------

@pytest.mark.parametrize("form", FORMS, ids=_id)
def test_declared_symmetries_equal_the_measured_ones(form):
    model = build(form)
    declared = external.declared(model, form[0])
    assert declared == EXPECTED[form]
    errors, dtype = measure_redrawn(model, D, N_MAX)
    assert dtype is torch.float64
    table = symmetry_table(errors, dtype, declared)
    assert "not measured" not in " ".join(table.values())  # every zoo mixer has rotate_
    held = {name for name, state in table.items() if state.startswith("holds")}
    assert held == declared, table  # a refuted claim and a "found, not declared" both fail


# --- (iii) packing ------------------------------------------------------------------------

@pytest.mark.parametrize("form", FORMS, ids=_id)
def test_runs_packed(hydra_conf, form):
    overrides = [f"model.kwargs.{k}={str(v).lower()}" for k, v in form[1]]
    trial = compose_trial(["model=external", f"model.target={form[0]}", "task=nearest", *overrides], [])
    assert external.vmap_reason(trial.config) is None  # vmap runs forward and backward
    assert cannot_pack(trial.config) is None


def test_on_teacher_length_alone_for_its_lengths_not_its_code(hydra_conf):
    trial = compose_trial(["model=external", "model.target=zoo.mlp_mixer:TokenMixingMLP",
                           "task=teacher_length"], [])
    assert external.vmap_reason(trial.config) is None
    assert cannot_pack(trial.config) == "several training lengths (shapes change per step)"


# --- (iv) the generator only --------------------------------------------------------------

@pytest.mark.parametrize("form", FORMS, ids=_id)
def test_deterministic_given_the_generator_and_no_global_rng(form):
    state = torch.get_rng_state()
    a, b, c = build(form, seed=7), build(form, seed=7), build(form, seed=8)
    x = torch.randn(2, 5, D, generator=gen(1))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert torch.equal(a(x), b(x)) and not torch.allclose(a(x), c(x))
    assert a(x).shape == x.shape
    assert torch.equal(state, torch.get_rng_state()), "a zoo mixer touched the global RNG"


# --- (i) mechanisms -----------------------------------------------------------------------

def test_mamba_scan_by_hand():
    """n = 2, one channel, N = 1, A = −1: s₀ = Δ₀B₀u₀ = 2, y₀ = C₀s₀ = 2;
    s₁ = e^{−ln 2}·2 + (ln 2)·3·2 = 1 + 6 ln 2, y₁ = ½ s₁."""
    from zoo.mamba import selective_scan

    u = torch.tensor([[[1.0], [2.0]]], dtype=torch.float64)  # (B, n, h)
    delta = torch.tensor([[[1.0], [math.log(2)]]], dtype=torch.float64)
    B = torch.tensor([[[2.0], [3.0]]], dtype=torch.float64)  # (B, n, N)
    C = torch.tensor([[[1.0], [0.5]]], dtype=torch.float64)
    y = selective_scan(u, delta, torch.tensor([[-1.0]], dtype=torch.float64), B, C)
    torch.testing.assert_close(y.flatten(), torch.tensor([2.0, 0.5 + 3 * math.log(2)], dtype=torch.float64))


def test_mamba_delta_B_C_are_functions_of_the_input():
    """Selection: changing token 2 changes Δ, B and C at token 2 (and, through the short causal
    convolution, after it), never before it; and they vary from token to token."""
    model = build(("zoo.mamba:Mamba", ()), d=4).double()
    x = torch.randn(1, 6, 4, generator=gen(0), dtype=torch.float64)
    y = x.clone()
    y[:, 2] += 1.0
    for a, b in zip(model.selection(x), model.selection(y)):
        assert torch.equal(a[:, :2], b[:, :2])  # causal: earlier tokens' Δ, B, C unchanged
        assert (a[:, 2] - b[:, 2]).abs().min() > 0  # every entry at the changed token moves
        assert (a[:, 1:] - a[:, :-1]).abs().max() > 1e-3  # not time-invariant (an S4 would be)


def test_mamba_bidirectional_sees_the_future():
    x = torch.randn(1, 5, D, generator=gen(0))
    y = x.clone()
    y[:, -1] += 1.0
    causal, both = build(("zoo.mamba:Mamba", ())), build(("zoo.mamba:Mamba", (("causal", False),)))
    assert torch.equal(causal(x)[:, :-1], causal(y)[:, :-1])
    assert not torch.allclose(both(x)[:, 0], both(y)[:, 0])


def test_hyena_order_two_by_hand():
    """safari's order 2, n = 2, one channel: one causal filter at lags (−1, 0, 1), h = (0, 1, ½),
    bias b = 2; v = (1, 2), x¹ = (3, 2), x⁰ = (1, −1). Pre-gating: x¹ ⊙ v = (3, 4); the long
    convolution h * (3, 4) = (3, 4 + ½·3) = (3, 5.5), plus the bias 2·(3, 4): (9, 13.5); the last
    gate x⁰: (9, −13.5). Order 3 adds a second pre-gated step (gate (1, −1), filter (0, 2, 1),
    bias 0): (9, −13.5) → (2·9, 2·(−13.5) + 9) = (18, −18). The paper's literal order 2 (two
    filters, post-gating, no bias) gives other numbers: x¹ ⊙ (h * v) = (3, 5), not this."""
    from zoo.hyena import hyena_recurrence, long_conv

    def seq(*values: float) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.float64).view(1, -1, 1)

    filters = torch.tensor([[[0.0, 1.0, 0.5]], [[0.0, 2.0, 1.0]]], dtype=torch.float64)  # (N−1, h, 2n−1)
    bias = torch.tensor([[2.0], [0.0]], dtype=torch.float64)  # (N−1, h)
    v, x1, x0 = seq(1, 2), seq(3, 2), seq(1, -1)
    torch.testing.assert_close(hyena_recurrence(v, [x1], filters[:1], bias[:1]), seq(9, 13.5))
    torch.testing.assert_close(hyena_recurrence(v, [x1, x0], filters, bias), seq(18, -18))
    # the whole operator: W_in = identity rows (x⁰, x¹, v), short convolution the identity tap
    model = build(("zoo.hyena:HyenaOperator", ()), d=1, n_max=2).double()
    with torch.no_grad():
        model.h = 1
        model.W_in = torch.nn.Parameter(torch.ones(3, 1, dtype=torch.float64))
        model.w_short = torch.nn.Parameter(torch.tensor([[1.0, 0, 0]] * 3, dtype=torch.float64))
        model.W_out = torch.nn.Parameter(torch.ones(1, 1, dtype=torch.float64))
        model.bias = torch.nn.Parameter(torch.tensor([[2.0]], dtype=torch.float64))
    model.filters = lambda n: filters[:1]
    # x⁰ = x¹ = v = x = (1, 2): x ⊙ v = (1, 4); h * (1, 4) = (1, 4.5); + 2·(1, 4) = (3, 12.5); ⊙ x = (3, 25)
    torch.testing.assert_close(model(seq(1, 2)), seq(3, 25))
    # a non-causal filter reads the next token: (h * v)₀ = h₀v₀ + h₋₁v₁ = 1 + ¼·2
    both = torch.tensor([[0.25, 1.0, 0.5]], dtype=torch.float64)
    torch.testing.assert_close(long_conv(v, both), seq(1.5, 2.5))


def test_hyena_causal_form_ignores_the_future():
    causal = build(("zoo.hyena:HyenaOperator", ()))
    both = build(("zoo.hyena:HyenaOperator", (("causal", False),)))
    filt = causal.filters(5)  # (N − 1, h, 2n−1) at lags −4 … 4: order 2 has one long filter
    assert filt.shape == (1, 8, 9) and torch.all(filt[:, :, :4] == 0) and torch.all(filt[:, :, 4:] != 0)
    assert torch.all(both.filters(5) != 0)
    assert build(("zoo.hyena:HyenaOperator", (("order", 3),))).filters(5).shape == (2, 8, 9)
    x = torch.randn(1, 5, D, generator=gen(0))
    y = x.clone()
    y[:, -1] += 1.0
    assert torch.equal(causal(x)[:, :-1], causal(y)[:, :-1])
    assert not torch.allclose(both(x)[:, 0], both(y)[:, 0])
    with pytest.raises(ValueError, match="order >= 2"):
        build(("zoo.hyena:HyenaOperator", (("order", 1),)))


def test_token_mixing_mlp_by_hand_and_its_lengths():
    """d = 2, n = n_max = 2, D_S = 1, W₁ = (1, −1), W₂ = (1, 2)ᵀ, γ = 1, β = 0, no biases.
    Tokens (1, −1) and (3, 3): LayerNorm gives (c, −c) and (0, 0), c = 1/√(1 + 1e−5); channel 0's
    column (c, 0) → W₁· = c, channel 1's (−c, 0) → −c; U_{*,i} = X_{*,i} + W₂ GELU(±c)."""
    model = build(("zoo.mlp_mixer:TokenMixingMLP", (("D_S", 1),)), d=2, n_max=2).double()
    with torch.no_grad():
        model.W_1.copy_(torch.tensor([[1.0, -1.0]]))
        model.W_2.copy_(torch.tensor([[1.0], [2.0]]))
    x = torch.tensor([[[1.0, -1.0], [3.0, 3.0]]], dtype=torch.float64)
    c = torch.tensor(1 / math.sqrt(1 + 1e-5), dtype=torch.float64)
    g_pos, g_neg = F.gelu(c), F.gelu(-c)
    expected = torch.stack([torch.stack([1 + g_pos, -1 + g_neg]), torch.stack([3 + 2 * g_pos, 3 + 2 * g_neg])])
    torch.testing.assert_close(model(x)[0], expected)
    # n < n_max: the normalised tokens zero-padded to n_max, the first n outputs kept
    big = build(("zoo.mlp_mixer:TokenMixingMLP", ()), n_max=N_MAX).double()
    with torch.no_grad():
        big.b_1.normal_(generator=gen(5)), big.b_2.normal_(generator=gen(6)), big.beta.normal_(generator=gen(7))
    x = torch.randn(2, 3, D, generator=gen(0), dtype=torch.float64)
    y = F.pad(F.layer_norm(x, (D,), big.gamma, big.beta), (0, 0, 0, N_MAX - 3))  # (2, n_max, d)
    full = torch.einsum("ns,bsd->bnd", big.W_2, F.gelu(torch.einsum("sn,bnd->bsd", big.W_1, y) + big.b_1[:, None]))
    torch.testing.assert_close(big(x), x + (full + big.b_2[:, None])[:, :3])
    with pytest.raises(ValueError, match=f"n_max={N_MAX}"):
        big(torch.randn(1, N_MAX + 1, D, dtype=torch.float64))


def test_rwkv_w_and_u_by_hand():
    """n = 3, one channel, k = 0, v = (1, 2, 3), w = ln 2 (each step back halves a weight),
    u = ln 3 (the current token weighs 3): wkv = (1, (1 + 3·2)/(1 + 3), (½ + 2 + 3·3)/(½ + 1 + 3))
    = (1, 7/4, 23/9); Bi-WKV with (|t − i| − 1) w: ((3 + 2 + ½·3)/4.5, (1 + 6 + 3)/5, 23/9)."""
    from zoo.rwkv import wkv

    k = torch.zeros(1, 3, 1, dtype=torch.float64)
    v = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64).view(1, 3, 1)
    w, u = torch.tensor([math.log(2)], dtype=torch.float64), torch.tensor([math.log(3)], dtype=torch.float64)
    causal = torch.tensor([1, 7 / 4, 23 / 9], dtype=torch.float64)
    torch.testing.assert_close(wkv(k, v, w, u).flatten(), causal)
    torch.testing.assert_close(wkv(k, v, w, u, causal=False).flatten(),
                               torch.tensor([13 / 9, 2, 23 / 9], dtype=torch.float64))
    # stable: adding 800 to every k (e^800 overflows float64) changes nothing
    torch.testing.assert_close(wkv(k + 800, v, w, u).flatten(), causal)
    # w acts only on tokens two or more steps back; u only on the current token's weight
    w2 = torch.tensor([math.log(4)], dtype=torch.float64)
    assert torch.equal(wkv(k, v, w2, u)[0, :2], wkv(k, v, w, u)[0, :2])
    torch.testing.assert_close(wkv(k, v, w2, u)[0, 2, 0], torch.tensor((0.25 + 2 + 9) / 4.25, dtype=torch.float64))
    torch.testing.assert_close(wkv(k, v, w, torch.zeros(1, dtype=torch.float64))[0, 1, 0],
                               torch.tensor(1.5, dtype=torch.float64))  # (1 + 2)/(1 + 1)


def test_rwkv_causal_form_ignores_the_future():
    causal, both = build(("zoo.rwkv:RWKV", ())), build(("zoo.rwkv:RWKV", (("causal", False),)))
    x = torch.randn(1, 5, D, generator=gen(0))
    y = x.clone()
    y[:, -1] += 1.0
    assert torch.equal(causal(x)[:, :-1], causal(y)[:, :-1])
    assert not torch.allclose(both(x)[:, 0], both(y)[:, 0])
