"""Every registered variant: shapes, gradients, length limits, determinism, exact symmetries
(paper.md §11, §13 C1-C4, C7), the arithmetic counterexample (C2), the block matrix and
torch.nn.MultiheadAttention equivalence (C4), higher-order scale (§7)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from harness.models import MODELS, count_parameters, rotate
from harness.models.common import SYMMETRIES
from harness.symmetry import haar_orthogonal, measure, redraw_
from harness.models import build_model
from harness.presets import preset_config as model_config
from harness.presets import preset_names

D = 16
PRESETS = preset_names()
EXTRA = [  # (preset, overrides): options that no preset names
    *[("quad_sigma", (f"model.sigma={s}",))
      for s in ("identity", "relu", "gelu", "sigmoid", "exp", "softplus", "softmax")],
    ("softmax", ("model.scale=false",)),
    ("value_lowrank", ("model.knowledge=free", "model.residual=true")),
    ("general", ("model.mix=mean",)),
    ("xg", ("model.mix=mean",)),
    ("xg_noknow", ("model.mix=mean",)),
    ("higher_order", ("model.order=3", "model.sigma=tanh", "model.alpha=true")),
    ("higher_order", ("model.inner_norm=false",)),
    ("multihead", ("model.causal=true",)),
    ("multihead", ("model.sigma=relu", "model.residual=false")),
    ("transformer", ("model.norm=none", "model.n_layers=1")),
    ("transformer_ln", ("model.pos_encoding=sinusoidal",)),
    ("gru", ("model.n_layers=2",)),
    ("mixing", ("model.sigma=relu",)),
    ("cnn", ("model.kernel_size=5",)),
]
VARIANTS = [(p, ()) for p in PRESETS] + EXTRA
IDS = [p + "".join(f"[{o.split('.', 1)[1]}]" for o in ov) for p, ov in VARIANTS]
BOUNDED = {"mlp", "mixing", "transformer_pe", "softmax_pos"}  # presets with a maximum length n_max


def make(preset: str, overrides: tuple[str, ...] = (), d: int = D, n_max: int = 17,
         seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """Build a variant from a seeded generator, in ``dtype``."""
    cfg = model_config(preset, tuple(overrides))
    return build_model(cfg, d, n_max, torch.Generator().manual_seed(seed)).to(dtype)


# What each preset must claim (paper.md §11.1-§11.2, §9): the tests below then check each claim
# to 1e-10 and each absence to > 1e-3.
OK, ORTH, PERM = "orthogonal_knowledge", "orthogonal", "permutation"
EXPECTED = {
    "general": {OK, PERM}, "general_nozg2": {OK, PERM}, "xg": {OK, PERM}, "xg_noknow": {OK, ORTH, PERM},
    "quad_sigma": {OK, PERM}, "quad_sigma_nonorm": {OK, PERM}, "relu_attention": {OK, PERM},
    "softmax": {OK, PERM}, "softmax_causal": {OK}, "softmax_pos": {OK}, "softmax_unscaled": {OK, PERM}, "softmax_narrow": {OK, PERM}, "softmax_free": {OK, PERM},
    "value": {OK, PERM},
    "value_lowrank": {OK, PERM}, "residual": {OK, PERM}, "multihead": {OK, PERM},
    "higher_order": {OK, PERM}, "higher_order_gram": {OK, PERM}, "higher_order_identity": {OK, PERM}, "zg2": {OK, PERM},
    "zg2_mixing": {OK, PERM}, "transformer": {OK, PERM}, "transformer_ln": {PERM},
    "transformer_pe": {OK}, "transformer_sin": {OK}, "transformer_causal": {OK},
    "mlp": {OK}, "mixing": {OK, ORTH}, "tokenwise": {OK, PERM}, "deepsets": {OK, PERM},
    "gru": {OK}, "cnn": {OK}, "coordwise": {PERM},
}


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_every_family_has_a_preset_and_expectation():
    families = {model_config(p).name for p in PRESETS}
    assert families == set(MODELS)
    assert set(EXPECTED) == set(PRESETS)
    for p in PRESETS:
        assert make(p).symmetries == EXPECTED[p], p
        assert make(p).symmetries <= SYMMETRIES


@pytest.mark.parametrize("preset,overrides", VARIANTS, ids=IDS)
def test_shapes_and_gradients(preset, overrides):
    model = redraw_(make(preset, overrides), gen(1))
    for n in (1, 3, 17):
        x = torch.randn(2, n, D, generator=gen(n), dtype=torch.float64)
        out = model(x)
        assert out.shape == (2, n, D) and torch.isfinite(out).all()
    for n in (3, 17):
        model.zero_grad(set_to_none=True)
        x = torch.randn(2, n, D, generator=gen(n), dtype=torch.float64)
        model(x).square().mean().backward()
        for name, p in model.named_parameters():
            assert p.grad is not None, f"{name} got no gradient at n={n}"
            assert torch.isfinite(p.grad).all(), f"{name} has a non-finite gradient at n={n}"
    assert any(p.grad.abs().sum() > 0 for p in model.parameters())


@pytest.mark.parametrize("preset,overrides", VARIANTS, ids=IDS)
def test_symmetry_claims(preset, overrides):
    model = redraw_(make(preset, overrides), gen(2))
    x = torch.randn(3, 5, D, generator=gen(3), dtype=torch.float64)
    for seed in (4, 5):
        errs = measure(model, x, gen(seed))
        for sym, key in [(OK, "rotation_knowledge_err"), (ORTH, "rotation_err"), (PERM, "permutation_err")]:
            err = errs[f"symmetry/{key}"]
            if sym in model.symmetries:
                assert err <= 1e-10, f"{preset}{overrides} claims {sym} but err={err:.2e}"
            else:
                assert err > 1e-3, f"{preset}{overrides} does not claim {sym} but err={err:.2e}"
        if OK in model.symmetries and "symmetry/span_residual" in errs:
            assert errs["symmetry/span_residual"] <= 1e-10
    # a reflection (det Q = -1) explicitly, with knowledge rotated
    q = torch.eye(D, dtype=torch.float64)
    q[0, 0] = -1.0
    q = haar_orthogonal(D, gen(6)) @ q
    err = (rotate(model, q)(x @ q.T) - model(x) @ q.T).norm() / model(x).norm()
    assert (err <= 1e-10) == (OK in model.symmetries)


def test_span_residual_is_reported_for_small_knowledge():
    x = torch.randn(2, 3, D, generator=gen(0), dtype=torch.float64)
    for preset in ("xg_noknow", "softmax", "general", "zg2", "value_lowrank", "mixing"):
        errs = measure(redraw_(make(preset), gen(1)), x, gen(2))
        assert errs["symmetry/span_residual"] <= 1e-10, preset
    for preset in ("value", "transformer", "mlp", "coordwise"):  # k + n >= d, or no knowledge
        assert "symmetry/span_residual" not in measure(make(preset), x, gen(2)), preset


@pytest.mark.parametrize("preset", PRESETS)
def test_length_limit(preset):
    model = make(preset, n_max=4)
    x = torch.randn(1, 6, D, generator=gen(0), dtype=torch.float64)
    if preset in BOUNDED:
        with pytest.raises(ValueError, match="n_max=4"):
            model(x)
    else:
        assert model(x).shape == (1, 6, D)


def test_deterministic_and_no_global_rng():
    state = torch.get_rng_state()
    for preset in PRESETS:
        a, b = make(preset, seed=7), make(preset, seed=7)
        for pa, pb in zip(a.parameters(), b.parameters()):
            assert torch.equal(pa, pb), preset
        assert count_parameters(a) > 0
    assert torch.equal(state, torch.get_rng_state()), "a model touched the global RNG"


def test_m2_fixed_weights_rotation_and_m4_not():
    """Issue 3: M2 keeps rotation without rotating parameters, M4 (fixed W_Q, W_K) does not
    (paper.md §14: error ~ O(1) vs ~1e-16)."""
    x = torch.randn(2, 5, D, generator=gen(0), dtype=torch.float64)
    assert measure(make("xg_noknow"), x, gen(1))["symmetry/rotation_err"] < 1e-12
    m4 = make("softmax")
    errs = measure(m4, x, gen(1))
    assert errs["symmetry/rotation_err"] > 1e-2 and errs["symmetry/rotation_knowledge_err"] < 1e-12


def test_arithmetic_counterexample():
    """C2 (paper.md §5): one-hot d=12 ('+'→e0, '−'→e1, digit j→e_{j+2}); M2 gives "2+1" and
    "2−1" identical mixing coefficients, f(Q12 X) = Q12 f(X), the same decoded digit, and never
    the absent answer "3"."""
    eye = torch.eye(12, dtype=torch.float64)
    plus = eye[[4, 0, 3]][None]  # "2+1": (1, 3, 12)
    minus = eye[[4, 1, 3]][None]  # "2−1"
    model = redraw_(make("xg_noknow", d=12), gen(0))
    assert torch.equal(model.coefficients(plus), model.coefficients(minus))
    f_plus, f_minus = model(plus), model(minus)
    q12 = eye[[1, 0] + list(range(2, 12))]  # swaps '+' and '−'
    torch.testing.assert_close(f_minus, f_plus @ q12.T, rtol=0, atol=1e-15)
    digits = slice(2, 12)
    assert torch.equal(f_plus[..., digits].argmax(-1), f_minus[..., digits].argmax(-1))
    assert (f_plus[..., 5] == 0).all() and (f_minus[..., 5] == 0).all()  # "3" is never produced


def test_block_matrix_identity():
    """C4: Yᵀ A Y = Xᵀ W_Qᵀ W_K X with Z = [W_Qᵀ, W_Kᵀ] and A = [[0, I], [0, 0]]."""
    model = redraw_(make("softmax"), gen(0))
    x = torch.randn(3, 7, D, generator=gen(1), dtype=torch.float64)
    z, a, scale = model.quadratic_form()
    yt = x @ z  # (B, n, 2 d1)
    direct = x @ model.W_Q.T @ model.W_K @ x.transpose(-1, -2)
    torch.testing.assert_close(yt @ a @ yt.transpose(-1, -2), direct, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(model.scores(x), torch.softmax(direct * scale, -1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_heads", [1, 2, 4])
def test_matches_torch_multihead_attention(n_heads, causal):
    """Standard single/multi-head attention equals nn.MultiheadAttention (no biases, 1/√head_dim)."""
    torch.manual_seed(0)  # nn.MultiheadAttention's own init; its weights are overwritten below
    hd = D // n_heads
    if n_heads == 1 and not causal:
        ours = make("value", (f"model.d1={D}",), dtype=torch.float32)
        w_q, w_k, w_v, w_out = ours.W_Q, ours.W_K, ours.W_V, torch.eye(D)
    else:
        ov = (f"model.n_heads={n_heads}", f"model.d1={hd}", f"model.d2={hd}",
              "model.residual=false", f"model.causal={str(causal).lower()}")
        ours = make("multihead", ov, dtype=torch.float32)
        w_q, w_k, w_v = (w.reshape(n_heads * hd, D) for w in (ours.W_Q, ours.W_K, ours.W_V))
        w_out = ours.W_out.permute(1, 0, 2).reshape(D, n_heads * hd)  # (d, H d2)
    ref = torch.nn.MultiheadAttention(D, n_heads, bias=False, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        ref.out_proj.weight.copy_(w_out)
    x = torch.randn(4, 9, D, generator=gen(1))
    mask = torch.ones(9, 9, dtype=torch.bool).triu(1) if causal else None
    expected, _ = ref(x, x, x, attn_mask=mask, need_weights=False)
    torch.testing.assert_close(ours(x), expected, rtol=1e-5, atol=1e-5)


def test_higher_order_scale():
    """§7: the length-normalised T_2, T_3 keep O(1) entries for n = 8, 64, 512 (within a factor
    of 3); unnormalised ones grow with n."""
    stds = {}
    for inner in (True, False):
        model = make("higher_order", ("model.order=3", "model.k=5", f"model.inner_norm={inner}"))
        redraw_(model, gen(0))
        for n in (8, 64, 512):
            x = torch.randn(2, n, D, generator=gen(n), dtype=torch.float64) / D**0.5
            with torch.no_grad():
                stds[inner, n] = [float(t.std()) for t in model.terms(x)]
    for p in (1, 2):  # T_2 and T_3
        norm = [stds[True, n][p] for n in (8, 64, 512)]
        raw = [stds[False, n][p] for n in (8, 64, 512)]
        assert max(norm) / min(norm) < 3, norm
        assert max(raw) / min(raw) > 3 and raw[0] < raw[1] < raw[2], raw


def test_every_preset_is_documented_and_swept():
    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "variants.md").read_text()
    grid = yaml.safe_load((root / "conf" / "ablation" / "variants.yaml").read_text())
    swept = grid["ablation"]["grid"]["model"].split(",")
    for preset in PRESETS:
        assert f"| `{preset}` |" in doc, f"{preset} missing from docs/variants.md"
    assert sorted(swept) == PRESETS


@pytest.mark.parametrize("preset, overrides", [
    ("transformer_causal", ("model.sigma=relu",)),
    ("transformer_causal", ("model.sigma=tanh",)),
    ("transformer_causal", ()),
    ("multihead", ("model.causal=true", "model.sigma=sigmoid")),
])
def test_causal_outputs_do_not_depend_on_later_tokens(preset, overrides):
    """A causal model's first m outputs on a 12-token input equal its outputs on the m-token
    prefix: an elementwise σ divides row i by the i + 1 keys it sees, not by n."""
    model = make(preset, overrides)
    x = torch.randn(3, 12, D, generator=gen(5), dtype=torch.float64)
    with torch.no_grad():
        full, prefix = model(x), model(x[:, :8])
    torch.testing.assert_close(full[:, :8], prefix, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n", [1, 3, 8, 15, 16, 23])
@pytest.mark.parametrize("causal", [False, True])
def test_row_softmax_is_torch_softmax(n, causal):
    """The padded short-row softmax has torch.softmax's values and gradients, also under vmap
    (as packed trials call it)."""
    from harness.models.common import causal_fill, row_softmax

    gen = torch.Generator().manual_seed(n)
    a = (torch.randn(3, 5, n, n, generator=gen, dtype=torch.float64) * 4).requires_grad_(True)
    def scores():
        return causal_fill(a) if causal else a

    g = torch.randn(3, 5, n, n, generator=gen, dtype=torch.float64)
    mine, ref = row_softmax(scores()), torch.softmax(scores(), dim=-1)
    assert mine.shape == ref.shape
    torch.testing.assert_close(mine, ref, rtol=1e-12, atol=1e-14)
    (grad_mine,) = torch.autograd.grad(mine, a, g)
    (grad_ref,) = torch.autograd.grad(ref, a, g)
    torch.testing.assert_close(grad_mine, grad_ref, rtol=1e-10, atol=1e-12)
    batched = torch.func.vmap(row_softmax)(scores().detach())
    torch.testing.assert_close(batched, ref.detach(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("preset, overrides", [("softmax", ()), ("higher_order", ("model.order=3", "model.alpha=true")),
                                               ("transformer_ln", ("model.pos_encoding=sinusoidal",)), ("cnn", ())])
def test_a_preset_composed_alone_is_the_model_a_run_composes(hydra_conf, preset, overrides):
    """:func:`harness.presets.preset_config` composes the model group alone (``conf/preset.yaml``):
    the same config dataclass as the ``model`` of a whole run's config with those overrides."""
    from hydra import compose
    from omegaconf import OmegaConf

    from harness.presets import PRESET_CONFIG

    run = compose(config_name="config", overrides=[f"model={preset}", *overrides])
    alone = compose(config_name=PRESET_CONFIG, overrides=[f"model={preset}", *overrides])
    assert list(alone) == ["model"]
    assert OmegaConf.to_object(alone.model) == OmegaConf.to_object(run.model) == model_config(preset, overrides)
