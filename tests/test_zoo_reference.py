"""Each zoo mixer family checked against a reference implementation on the same weights (issue 63,
item 4). ``tests/fixtures/zoo/<family>.pt`` holds weights in the zoo mixer's parameter names, an
input ``x: (B, n, d)`` and the reference's output ``y`` on them, written once by
``tests/fixtures/zoo/generate.py`` with the optional extra ``zoo-ref`` installed (fla-core,
mambapy, ``transformers``, timm); S4D and Hyena from independent float64 formulations written
there. Nothing here imports those packages: the zoo's mixer, built from ``examples/zoo/`` as a user
would name it, is loaded with the fixture's weights, run in float64 on ``x`` and compared with
``y`` at a relative error ``max|ŷ − y| / max|y|`` of at most 1e-6.

The negative controls: a wrong convention in the mapping of the weights (Mamba's convolution taps
reversed, the issue's example, and one per other family) must fail the same comparison, so the
fixtures can tell a convention apart."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import pytest
import torch

from harness.models import external

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "zoo"
TOLERANCE = 1e-6  # relative, max-norm; the references computing in float32 sit near 1e-7
WRONG = 1e-3  # a wrong convention is off by far more than this

# fixture → the zoo target it is for (a renamed class must be renamed here on purpose): the causal
# form of each of the eight families, and the bidirectional forms that have a reference
FAMILIES = {
    "linear_attention": "zoo.linear_attention:LinearAttention",
    "retnet": "zoo.retnet:Retention",
    "gla": "zoo.gla:GatedLinearAttention",
    "s4d": "zoo.s4d:S4D",
    "mamba": "zoo.mamba:Mamba",
    "hyena": "zoo.hyena:HyenaOperator",
    "rwkv": "zoo.rwkv:RWKV",
    "mlp_mixer": "zoo.mlp_mixer:TokenMixingMLP",
    "mamba_bidir": "zoo.mamba:Mamba",  # Vim's block (mambapy.vim)
    "s4d_bidir": "zoo.s4d:S4D",  # S4's bidirectional kernel, independent float64
    "hyena_bidir": "zoo.hyena:HyenaOperator",  # the two-sided filter, independent float64
}


pytestmark = pytest.mark.usefixtures("zoo_examples_on_path")  # examples/ on sys.path (tests/conftest.py)


def load(family: str) -> dict:
    return torch.load(FIXTURES / f"{family}.pt", weights_only=True)


def zoo_output(fixture: dict, state: dict[str, torch.Tensor] | None = None, **kwargs) -> torch.Tensor:
    """The zoo mixer of ``fixture["target"]`` with the fixture's weights (or ``state``), in float64,
    on the fixture's input. Every parameter must come from the fixture (buffers, the definitions'
    constants, stay the zoo's)."""
    cls = external.load_target(fixture["target"])
    model = cls(fixture["d"], fixture["n_max"], torch.Generator().manual_seed(0),
                **{**fixture["kwargs"], **kwargs}).double()
    result = model.load_state_dict(state if state is not None else fixture["state"], strict=False)
    assert not result.unexpected_keys, result.unexpected_keys
    buffers = {name for name, _ in model.named_buffers()}
    assert set(result.missing_keys) <= buffers, f"parameters not in the fixture: {result.missing_keys}"
    with torch.no_grad():
        return model(fixture["x"])


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).abs().max() / want.abs().max())


@pytest.mark.parametrize("family", FAMILIES)
def test_zoo_mixer_matches_its_reference(family):
    fixture = load(family)
    assert fixture["target"] == FAMILIES[family]
    assert fixture["kwargs"].get("causal", True) is not family.endswith("_bidir")
    y = zoo_output(fixture)
    assert y.dtype == torch.float64 and y.shape == fixture["y"].shape
    err = relative_error(y, fixture["y"])
    assert err <= TOLERANCE, f"{family}: relative error {err:.2e} against {fixture['reference']}"


def test_every_family_has_a_fixture_and_nothing_else_is_there():
    assert {p.stem for p in FIXTURES.glob("*.pt")} == set(FAMILIES)
    for family in FAMILIES:  # what produced it is said, with the version
        reference = load(family)["reference"]
        assert reference.startswith(("fla-core ", "mambapy ", "transformers ", "timm ", "independent float64")), reference


def _with(state: dict, **changes: Callable[[torch.Tensor], torch.Tensor]) -> dict:
    return {k: changes[k](v) if k in changes else v for k, v in state.items()}


# family → (what the wrong convention is, the fixture's weights mapped with it, or constructor kwargs)
WRONG_CONVENTIONS = {
    "mamba": ("convolution taps reversed (nn.Conv1d's order read as the zoo's)",
              lambda s: _with(s, w_conv=lambda w: w.flip(-1)), {}),
    "hyena": ("short-convolution taps reversed", lambda s: _with(s, w_short=lambda w: w.flip(-1)), {}),
    "rwkv": ("token-shift mix μ read as 1 − μ", lambda s: _with(s, mu_k=lambda m: 1 - m, mu_v=lambda m: 1 - m,
                                                                mu_r=lambda m: 1 - m), {}),
    "rwkv_decay": ("decay w = exp(−ŵ) instead of exp(ŵ)", lambda s: _with(s, w_hat=lambda w: -w), {}),
    "gla": ("q scaled by k^−1/2 (fla's default scale left in)", lambda s: _with(s, W_Q=lambda w: w / w.shape[0] ** 0.5), {}),
    "retnet": ("γ of fla's second head, 1 − 2^−6", lambda s: s, {"gamma": 1 - 2 ** -6}),
    "linear_attention": ("keys and values swapped", lambda s: _with(s, W_K=lambda _: s["W_V"], W_V=lambda _: s["W_K"]), {}),
    "s4d": ("C conjugated (the other mode of each pair)", lambda s: _with(s, C_im=lambda c: -c), {}),
    "mlp_mixer": ("token order of W₁ reversed", lambda s: _with(s, W_1=lambda w: w.flip(-1)), {}),
    "mamba_bidir": ("the two directions' weights swapped", lambda s: _with(
        s, **{k: (lambda w: w.flip(0)) for k in ("w_conv", "b_conv", "W_B", "W_C", "W_delta_down", "W_delta_up",
                                                  "b_delta", "A_log", "D")}), {}),
    "s4d_bidir": ("forward and backward kernels swapped", lambda s: _with(
        s, C_re=lambda _: s["C_back_re"], C_im=lambda _: s["C_back_im"], C_back_re=lambda _: s["C_re"],
        C_back_im=lambda _: s["C_im"]), {}),
    "hyena_bidir": ("the filter's lags mirrored (ℓ read as −ℓ)", lambda s: _with(
        s, W_f1=lambda w: w * torch.tensor([-1.0, 1, 1, -1, -1], dtype=w.dtype)), {}),
}


@pytest.mark.parametrize("case", WRONG_CONVENTIONS)
def test_a_wrong_convention_fails_the_comparison(case):
    """The negative controls: each fixture separates the right convention from a plausible
    wrong one by orders of magnitude more than the tolerance."""
    family = case.removesuffix("_decay")
    _, wrong, kwargs = WRONG_CONVENTIONS[case]
    fixture = load(family)
    err = relative_error(zoo_output(fixture, wrong(fixture["state"]), **kwargs), fixture["y"])
    assert err > WRONG, f"{case}: the wrong convention is within {err:.2e} of the reference"
