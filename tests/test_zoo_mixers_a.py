"""The zoo's first four mixers (examples/zoo/, issue 50): linear attention, retention (RetNet),
gated linear attention and S4D. Per mixer: its defining mechanism on a hand-computed example;
per form (causal, bidirectional) the declared symmetries equal to the measured ones on re-drawn
weights (a symmetry found but not declared fails too); that it runs packed (``vmap_reason`` is
``None``); determinism given the generator, the global RNG untouched; any length taken."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest
import torch

from harness.external_check import KEY_OF, TOLERANCE, measure_redrawn, symmetry_table

ROOT = Path(__file__).resolve().parent.parent
D, N_MAX = 6, 8

# (module, class) of each mixer, and the kwargs of each form it is scored in
MIXERS = {"linear_attention": "LinearAttention", "retnet": "Retention", "gla": "GatedLinearAttention", "s4d": "S4D"}
FORMS = [(m, {"causal": c}) for m in MIXERS for c in (True, False)] + [("retnet", {"causal": False, "gamma": 1.0}),
                                                                         ("retnet", {"causal": True, "gamma": 1.0})]
# what each form is expected to declare (the docstrings' derivations), written before measuring
EXPECTED = {("linear_attention", True): {"orthogonal_knowledge"},
            ("linear_attention", False): {"orthogonal_knowledge", "permutation"}}


@pytest.fixture(scope="module")
def zoo():
    """``{module name: class}``, imported from examples/ as ``zoo.<module>`` (the user's route)."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        yield {m: getattr(importlib.import_module(f"zoo.{m}"), c) for m, c in MIXERS.items()}
    finally:
        sys.path.remove(str(ROOT / "examples"))


def build(cls, seed: int = 0, d: int = D, n_max: int = N_MAX, **kwargs):
    return cls(d, n_max, torch.Generator().manual_seed(seed), **kwargs)


@torch.no_grad()
def set_(param: torch.nn.Parameter, value) -> None:
    param.copy_(torch.as_tensor(value, dtype=param.dtype).reshape(param.shape))


# ----------------------------------------------------------------------------- mechanisms
def test_linear_attention_feature_map_and_forms_by_hand(zoo):
    """d = k = 2, every weight the identity, tokens x₁ = (0, 0), x₂ = (1, 0): φ = elu + 1 gives
    φ(x₁) = (1, 1), φ(x₂) = (2, 1); v = x. Causal: o₁ = v₁ = 0, o₂ = (3·v₁ + 5·v₂)/(3 + 5) =
    (5/8, 0). Bidirectional: o₁ = (2·v₁ + 3·v₂)/(2 + 3) = (3/5, 0), o₂ as causal. And
    φ(−ln 2) = 1/2 (the elu branch)."""
    mod = sys.modules[zoo["linear_attention"].__module__]
    assert float(mod.phi(torch.tensor(-math.log(2.0)))) == pytest.approx(0.5)
    x = torch.tensor([[[0.0, 0.0], [1.0, 0.0]]], dtype=torch.float64)
    want = {True: [[0, 0], [5 / 8, 0]], False: [[3 / 5, 0], [5 / 8, 0]]}
    for causal, out in want.items():
        model = build(zoo["linear_attention"], d=2, k=2, causal=causal).double()
        for w in (model.W_Q, model.W_K, model.W_V, model.W_O):
            set_(w, torch.eye(2))
        torch.testing.assert_close(model(x), torch.tensor([out], dtype=torch.float64))


def test_linear_attention_prefix_sums_equal_the_masked_quadratic_form(zoo):
    """The causal prefix-sum (RNN) form equals Σ_{j≤i} φ(q_i)·φ(k_j) v_j / Σ_{j≤i} φ(q_i)·φ(k_j)."""
    model = build(zoo["linear_attention"], causal=True).double()
    x = torch.randn(2, 7, D, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    mod = sys.modules[type(model).__module__]
    q, k, v = mod.phi(x @ model.W_Q.T), mod.phi(x @ model.W_K.T), x @ model.W_V.T
    a = torch.tril(q @ k.transpose(1, 2))  # (B, n, n), query first, j ≤ i
    torch.testing.assert_close(model(x), (a @ v / a.sum(-1, keepdim=True)) @ model.W_O.T)


def test_retention_parallel_equals_recurrent_by_hand(zoo):
    """d = k = 1, weights 1, γ = 1/2, x = (1, 2): q = k = v = x. Causal: o₁ = 1·1·1 = 1,
    o₂ = 2·(γ·1·1 + 2·2) = 9. Bidirectional: o₁ = 1·(1 + γ·4) = 3, o₂ = 9. The parallel form
    (Q Kᵀ ⊙ D) V and the recurrence S_n = γ S_{n−1} + K_nᵀ V_n give both."""
    x = torch.tensor([[[1.0], [2.0]]], dtype=torch.float64)
    for causal, out in {True: [1.0, 9.0], False: [3.0, 9.0]}.items():
        model = build(zoo["retnet"], d=1, k=1, gamma=0.5, causal=causal).double()
        for w in (model.W_Q, model.W_K, model.W_V, model.W_O):
            set_(w, 1.0)
        want = torch.tensor(out, dtype=torch.float64).reshape(1, 2, 1)
        torch.testing.assert_close(model(x), want)
        torch.testing.assert_close(model.recurrent(x), want)
    # and on a random example, both forms, the default γ
    x = torch.randn(2, 9, D, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for causal in (True, False):
        model = build(zoo["retnet"], causal=causal).double()
        torch.testing.assert_close(model(x), model.recurrent(x))


def test_gla_gates_depend_on_the_data_by_hand(zoo):
    """d = k = 1, weights 1, b_α = 0, τ = 1, x = (1, 2): α_t = sigmoid(x_t), so α = (σ(1), σ(2));
    changing token 2 to 0 changes α₂ to 1/2 and leaves α₁. Causal: o₁ = 1, o₂ = 2·(α₂·1 + 2·2);
    bidirectional: o₁ = 1·(1 + α₁·4), o₂ as causal. The scan gives the same as the parallel form."""
    def sig(z: float) -> float:
        return 1 / (1 + math.exp(-z))

    model = build(zoo["gla"], d=1, k=1, tau=1.0).double()
    for w in (model.W_Q, model.W_K, model.W_V, model.W_alpha, model.W_O):
        set_(w, 1.0)
    x = torch.tensor([[[1.0], [2.0]]], dtype=torch.float64)
    alpha = torch.exp(model.log_alpha(x)).flatten()
    torch.testing.assert_close(alpha, torch.tensor([sig(1), sig(2)], dtype=torch.float64))
    changed = torch.exp(model.log_alpha(torch.tensor([[[1.0], [0.0]]], dtype=torch.float64))).flatten()
    torch.testing.assert_close(changed, torch.tensor([sig(1), 0.5], dtype=torch.float64))
    a1, a2 = sig(1), sig(2)
    for causal, out in {True: [1.0, 2 * (a2 + 4)], False: [1 + 4 * a1, 2 * (a2 + 4)]}.items():
        model.causal = causal
        want = torch.tensor(out, dtype=torch.float64).reshape(1, 2, 1)
        torch.testing.assert_close(model(x), want)
        torch.testing.assert_close(model.recurrent(x), want)
    x = torch.randn(2, 9, D, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for causal in (True, False):
        model = build(zoo["gla"], causal=causal, tau=2.0).double()
        torch.testing.assert_close(model(x), model.recurrent(x))


def test_s4d_kernel_equals_recurrence_by_hand(zoo):
    """One channel, one conjugate pair: A = −1/2 (S4D-Lin's first mode), Δ = 2 ln 2, so
    ΔA = −ln 2, Ā = 1/2, B̄ = (Ā − 1)/A = 1; C = C← = 1/2 and D = 0, so K_l = 2·(1/2)·(1/2)^l =
    (1, 1/2, 1/4). u = (1, 0, 2): causal y = K * u = (1, 1/2, 1/4 + 2); bidirectional adds
    Σ_{j>t} K←_{j−t−1} u_j = (0 + 1/2·2, 2, 0), so y = (2, 5/2, 9/4). The Toeplitz (kernel) form
    and the scan give both."""
    u = torch.tensor([1.0, 0.0, 2.0], dtype=torch.float64).reshape(1, 3, 1)
    for causal, out in {True: [1.0, 0.5, 2.25], False: [2.0, 2.5, 2.25]}.items():
        model = build(zoo["s4d"], h=1, N=2, causal=causal).double()
        assert float(model.A_im.detach()) == 0.0 and float(model.log_A_re.detach().exp()) == pytest.approx(0.5)  # S4D-Lin
        set_(model.log_dt, math.log(2 * math.log(2)))
        for name, value in (("C_re", 0.5), ("C_im", 0.0), ("D", 0.0), ("C_back_re", 0.5), ("C_back_im", 0.0)):
            if hasattr(model, name):  # the causal form has no backward kernel
                set_(getattr(model, name), value)
        torch.testing.assert_close(model.kernel(3), torch.tensor([[1.0, 0.5, 0.25]], dtype=torch.float64))
        want = torch.tensor(out, dtype=torch.float64).reshape(1, 3, 1)
        torch.testing.assert_close(model.mix(u), want)
        torch.testing.assert_close(model.recurrence(u), want)
    u = torch.randn(2, 9, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for causal in (True, False):
        model = build(zoo["s4d"], causal=causal).double()
        torch.testing.assert_close(model.mix(u), model.recurrence(u))


# ----------------------------------------------------------------------------- symmetries
@pytest.mark.parametrize(("module", "kwargs"), FORMS, ids=lambda v: v if isinstance(v, str) else
                         ",".join(f"{k}={w}" for k, w in v.items()))
def test_declared_symmetries_equal_measured(zoo, module, kwargs):
    """What the pre-flight measures (re-drawn float64 weights): each declared symmetry holds,
    each undeclared one fails by a wide margin (> 1e-3), none is "found, not declared"."""
    model = build(zoo[module], **kwargs)
    errors, dtype = measure_redrawn(model, D, N_MAX)
    assert dtype == torch.float64
    measured = {s for s, key in KEY_OF.items() if errors[key] <= TOLERANCE[dtype]}
    assert measured == set(model.symmetries), (module, kwargs, errors)
    assert all(errors[KEY_OF[s]] > 1e-3 for s in set(KEY_OF) - measured), (module, kwargs, errors)
    assert not any("found" in v for v in symmetry_table(errors, dtype, model.symmetries).values())
    if (module, kwargs.get("causal")) in EXPECTED:
        assert set(model.symmetries) == EXPECTED[module, kwargs["causal"]]
    if module != "linear_attention":  # position-dependent in both forms, except RetNet's γ = 1
        two_sided_flat = module == "retnet" and kwargs == {"causal": False, "gamma": 1.0}
        assert ("permutation" in model.symmetries) == two_sided_flat


# ----------------------------------------------------------------------------- packing
def test_every_form_runs_packed(zoo, hydra_conf):
    """``vmap_reason`` (the probe harness/pack.py asks) is ``None``: each form runs packed."""
    from harness.expansion import compose_trial
    from harness.models.external import vmap_reason

    for module, cls in MIXERS.items():
        for causal in ("true", "false"):
            trial = compose_trial(["model=external", f"model.target=zoo.{module}:{cls}",
                                   f"model.kwargs.causal={causal}", "task=nearest"], [])
            assert trial.config.model.kwargs["causal"] is (causal == "true")
            assert vmap_reason(trial.config) is None, (module, causal)


# ----------------------------------------------------------------------------- contract
def test_deterministic_no_global_rng_any_length(zoo):
    """The same generator seed gives the same parameters, another seed others; the global RNG
    is untouched; every form takes n > n_max (none is bounded) and returns (B, n, d), finite."""
    state = torch.get_rng_state()
    x = torch.randn(2, 3 * N_MAX, D, generator=torch.Generator().manual_seed(5))
    for module, kwargs in FORMS:
        a, b, c = (build(zoo[module], seed=s, **kwargs) for s in (7, 7, 8))
        pa, pb, pc = (list(m.parameters()) for m in (a, b, c))
        assert all(torch.equal(p, q) for p, q in zip(pa, pb)), module
        assert any(not torch.equal(p, q) for p, q in zip(pa, pc)), module
        y = a(x)
        assert y.shape == x.shape and torch.isfinite(y).all(), (module, kwargs)
    assert torch.equal(state, torch.get_rng_state()), "a zoo mixer touched the global RNG"


def test_bad_options_raise(zoo):
    for module, kwargs in [("linear_attention", {"k": 0}), ("retnet", {"gamma": 0.0}), ("retnet", {"gamma": 1.5}),
                           ("gla", {"tau": 0.0}), ("s4d", {"N": 3}), ("s4d", {"h": 0})]:
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            build(zoo[module], **kwargs)


def test_s4d_powers_by_exp_stay_finite_where_the_state_matrix_underflows(zoo):
    """The zoo's S4D diverged on a seed at every lr (issue 63): once Adam drove Re A to about
    −e^13, Ā = exp(ΔA) underflowed to 0 in float32 and ``Ā ** 0`` (through log 0) was NaN.
    ``powers="exp"`` computes exp(l ΔA): the same kernel where both are finite, finite where
    ``pow`` is not."""
    import torch

    pow_, exp_ = build(zoo["s4d"]), build(zoo["s4d"], powers="exp")
    exp_.load_state_dict(pow_.state_dict())
    x = torch.randn(2, N_MAX, D, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(pow_(x), exp_(x), atol=1e-5)
    with torch.no_grad():
        for m in (pow_, exp_):
            m.log_A_re[0, 0] = 13.0  # Re A = −e^13: exp(ΔA) underflows
    assert not torch.isfinite(pow_(x)).all()
    out = exp_(x)
    out.sum().backward()
    assert torch.isfinite(out).all() and all(torch.isfinite(p.grad).all() for p in exp_.parameters() if p.grad is not None)
    with pytest.raises(ValueError, match="powers='log' must be one of pow, exp"):
        build(zoo["s4d"], powers="log")
