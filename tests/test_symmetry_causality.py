"""Causality as a measured property (issue 63 item 1): a change at position t changes no output
before t, measured in float64 on re-drawn weights (:func:`harness.symmetry.causality_leak`),
declared per mixer (its ``causal`` attribute) and refused when the declaration is false, as a
false symmetry is."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from harness.external_check import causality_refusal, check, declared_causal, measure_causality
from harness.models.external import ExternalConfig
from harness.symmetry import causality_leak

pytestmark = pytest.mark.usefixtures("zoo_examples_on_path")  # examples/zoo (tests/conftest.py)
D, N = 8, 6


class Prefix(nn.Module):
    """Running mean over tokens j ≤ i (causal) or over all tokens (``causal=False``), mixed by W."""

    def __init__(self, d: int, n_max: int, generator: torch.Generator, causal: bool = True) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.randn(d, d, generator=generator))
        self.causal = causal

    def forward(self, x):
        n = x.shape[1]
        mean = x.cumsum(1) / torch.arange(1, n + 1, dtype=x.dtype).view(1, n, 1) if self.causal \
            else x.mean(1, keepdim=True).expand_as(x)
        return torch.tanh(mean @ self.W.T)


class Liar(Prefix):
    """Declares causal and mixes every token."""

    def __init__(self, d, n_max, generator) -> None:
        super().__init__(d, n_max, generator, causal=False)
        self.causal = True

    def forward(self, x):
        return torch.tanh(x.mean(1, keepdim=True).expand_as(x) @ self.W.T)


class Modest(Prefix):
    """Causal, and does not say so."""

    def __init__(self, d, n_max, generator) -> None:
        super().__init__(d, n_max, generator)
        self.causal = False

    def forward(self, x):
        n = x.shape[1]
        return torch.tanh(x.cumsum(1) / torch.arange(1, n + 1, dtype=x.dtype).view(1, n, 1) @ self.W.T)


def _x() -> torch.Tensor:
    return torch.randn(3, N, D, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_a_causal_mixer_leaks_nothing_and_a_bidirectional_one_leaks():
    gen = torch.Generator().manual_seed(1)
    causal = Prefix(D, N, gen).double()
    both = Prefix(D, N, gen, causal=False).double()
    assert causality_leak(causal, _x(), torch.Generator().manual_seed(2)) < 1e-14
    assert causality_leak(both, _x(), torch.Generator().manual_seed(2)) > 1e-2
    with pytest.raises(ValueError, match="n >= 2.*n=1"):
        causality_leak(causal, _x()[:, :1], torch.Generator())


@pytest.mark.parametrize("target, causal", [("zoo.linear_attention:LinearAttention", True),
                                            ("zoo.linear_attention:LinearAttention", False),
                                            ("zoo.s4d:S4D", True), ("zoo.s4d:S4D", False),
                                            ("zoo.mlp_mixer:TokenMixingMLP", None)])
def test_the_zoos_mixers_declare_their_measured_causality(target, causal):
    from tasks.user_code import load_class

    kwargs = {} if causal is None else {"causal": causal}
    model = load_class(target, nn.Module, "model.target", "a class")(16, 8, torch.Generator().manual_seed(0), **kwargs)
    why, leak, dtype = causality_refusal(model, 16, 8)
    assert why is None and dtype == torch.float64
    assert declared_causal(model) is bool(causal) and (leak < 1e-12) is bool(causal)


def test_a_false_causal_declaration_is_refused_in_one_line():
    liar = Liar(D, N, torch.Generator().manual_seed(0))
    why, leak, _ = causality_refusal(liar, D, N)
    assert leak > 1e-2 and why.startswith("declares causal, but a change at position t moved outputs before t")
    undeclared = Modest(D, N, torch.Generator().manual_seed(0))
    assert causality_refusal(undeclared, D, N)[0].startswith("found causal, not declared")
    # the pre-flight of any external model refuses the false claim (not the modest one)
    cfg = ExternalConfig(target="tests.Liar")
    with pytest.raises(ValueError, match=r"^model.target='tests.Liar' declares causal") as err:
        check(cfg, liar, D, N)
    assert "\n" not in str(err.value)
    check(cfg, undeclared, D, N)
    with pytest.raises(ValueError, match="causal must be True or False, got 'yes'"):
        undeclared.causal = "yes"
        declared_causal(undeclared)


def test_the_measurement_is_on_redrawn_float64_weights_and_leaves_the_model():
    model = Prefix(D, N, torch.Generator().manual_seed(0), causal=False)
    before = model.W.detach().clone()
    leak, dtype = measure_causality(model, D, N)
    assert dtype == torch.float64 and leak > 1e-2
    assert torch.equal(model.W, before) and model.W.dtype == torch.float32
