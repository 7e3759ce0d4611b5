"""harness/symmetry.py on every preset (float32 and float64, cost), Haar sampling, span residual,
and the C6 enumeration of finite-information monomials (paper.md §7, §13)."""

from __future__ import annotations

import pytest
import torch

from harness.fip import ALTERNATING, enumerate_terms, word_shape
from harness.models import build_model, rotate
from harness.presets import preset_config, preset_names
from harness.symmetry import KEYS, haar_orthogonal, measure, span_residual

PRESETS = preset_names()


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("preset", PRESETS)
def test_measure_any_model_is_cheap(preset, dtype):
    """The trial-end call on a batch of 64 at d=16, n=8 leaves the model unchanged; what it costs
    (well under a second) is measured by ``python -m benchmarks.symmetry_cost``, not here."""
    model = build_model(preset_config(preset), 16, 8, gen(0)).to(dtype)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(64, 8, 16, generator=gen(1)).to(dtype)
    errs = measure(model, x, gen(2))
    assert set(errs) <= set(KEYS) and set(KEYS[:3]) <= set(errs)
    assert all(isinstance(v, float) and v == v for v in errs.values())
    tol = 1e-4 if dtype is torch.float32 else 1e-10
    if "orthogonal_knowledge" in model.symmetries:
        assert errs["symmetry/rotation_knowledge_err"] < tol
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), f"measure changed {k}"


def test_haar_orthogonal_includes_reflections():
    dets = []
    for seed in range(20):
        q = haar_orthogonal(6, gen(seed))
        torch.testing.assert_close(q @ q.T, torch.eye(6, dtype=torch.float64), rtol=0, atol=1e-12)
        dets.append(round(float(torch.linalg.det(q))))
    assert set(dets) == {-1, 1}


def test_rotate_returns_a_transformed_copy():
    model = build_model(preset_config("residual"), 16, 8, gen(0)).double()
    q = haar_orthogonal(16, gen(1))
    rotated = rotate(model, q)
    torch.testing.assert_close(rotated.W_Q, model.W_Q @ q.T)
    torch.testing.assert_close(rotated.W_V, q @ model.W_V @ q.T)
    assert not torch.equal(rotated.W_Q, model.W_Q)
    with pytest.raises(TypeError):
        rotate(torch.nn.Linear(3, 3), q)


def test_span_residual_detects_output_outside_the_span():
    x = torch.randn(2, 3, 16, generator=gen(0), dtype=torch.float64)
    z = torch.randn(16, 4, generator=gen(1), dtype=torch.float64)
    inside = torch.randn(2, 3, 3, generator=gen(2), dtype=torch.float64) @ x \
        + torch.randn(2, 3, 4, generator=gen(3), dtype=torch.float64) @ z.T
    assert span_residual(x, inside, z) < 1e-12
    assert span_residual(x, inside, z[:, :0]) > 0.1  # the Z part is not in span(X)
    with pytest.raises(ValueError, match="n \\+ k < d"):
        span_residual(x, inside, torch.zeros(16, 13, dtype=torch.float64))


# --- C6: enumeration of products of Y (k×n), Yᵀ (n×k), W (k×k) up to six factors ------------
def test_c6_every_length_free_nxn_product_is_an_even_alternating_monomial():
    result = enumerate_terms(6)
    found = result["y_counts"]
    for word in result["words"]:
        n_y = word.count("Y") + word.count("T")
        assert n_y >= 2 and n_y % 2 == 0, word
        assert ALTERNATING.match(word), word
    assert result["all_even_alternating"]
    assert found[0] == found[1] == 0
    assert word_shape("TWY") == ("n", "n") and word_shape("YW") is None  # no constant or linear term is n×n for every n
    assert found[2] > 0 and found[4] > 0 and found[6] > 0
    # the higher_order model's T_p are these words: T W (Y T W)^(p-1) Y
    for p in (1, 2, 3):
        assert ALTERNATING.match("TW" + "YTW" * (p - 1) + "Y")


def test_variants_table_prints_round_off_as_a_bound():
    """docs/variants.md is the same on every processor: round-off errors print as a bound."""
    from pathlib import Path

    from harness.variant_table import _err

    assert _err(3.3e-16) == _err(0.0) == "< 1e-12" and _err(0.21) == "2e-01"
    doc = (Path(__file__).resolve().parents[1] / "docs" / "variants.md").read_text()
    assert "e-16" not in doc and "e-15" not in doc and "0e+00" not in doc


def test_a_packs_span_residuals_in_one_batched_qr_are_each_trials_own():
    """:func:`span_residuals` (one QR for a pack's trials) gives each trial's
    :func:`span_residual` within 1e-10 in float64, whatever the items' batch sizes and inputs;
    items of another shape go in a QR of their own. Mutation-checked: one norm over the whole
    stack instead of each item's block fails it."""
    from harness.symmetry import span_residuals

    g = torch.Generator().manual_seed(3)
    items = []
    for b, n, d, k in [(5, 4, 16, 3), (7, 4, 16, 3), (3, 4, 16, 3), (4, 3, 12, 2)]:
        x = torch.randn(b, n, d, generator=g, dtype=torch.float64)
        z = torch.randn(d, k, generator=g, dtype=torch.float64)
        out = torch.randn(b, n, d, generator=g, dtype=torch.float64) * float(torch.rand(1, generator=g)) + x
        items.append((x, out, z))
    lone = [span_residual(*item) for item in items]
    assert len(set(lone)) == len(lone)
    assert span_residuals(items) == pytest.approx(lone, rel=1e-10, abs=0)
    with pytest.raises(ValueError, match="n \\+ k < d"):
        span_residuals([items[0], (items[0][0], items[0][1], torch.zeros(16, 13, dtype=torch.float64))])
