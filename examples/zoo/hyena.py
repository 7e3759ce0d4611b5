"""The Hyena operator (Poli et al. 2023, "Hyena Hierarchy: Towards Larger Convolutional Language
Models", §3 and the implicit filters of §3.3) in the structure of its reference code, safari's
``HyenaOperator`` (the one Zoology uses too): of order ``N``, ``N − 1`` long convolutions, each
one *pre-gated* and with a per-channel *bias* (a skip term); its long convolutions computed
directly (a Toeplitz product, ``O(n² h)``: exact and cheap at the harness's lengths; the FFT is
what scales).

Rows are tokens, ``x: (B, n, d)``. With ``h`` inner channels:

* projections: ``(x⁰, x¹, …, x^{N−1}, v) = ShortConv(x W_inᵀ)``, ``N + 1`` streams ``(B, n, h)`` in
  this order (safari's ``*x, v = uc.split(d)``), the short convolution a depthwise one of width 3
  over tokens (causal: tap ``m`` weighs ``u_{t−m}``, ``m = 0, 1, 2``; bidirectional: offsets
  −1, 0, 1);
* the recurrence, one long filter ``h^o`` and one bias ``b^o`` (``(h,)``) per step
  ``o = 1 … N − 1``, the gates taken from ``x^{N−1}`` down to ``x¹``::

      z ← v;   for o = 1 … N − 1:   z ← x^{N−o} ⊙ z   (pre-gating),
                                   z ← (h^o * z) + b^o ⊙ z   (long convolution and bias);
      o_t = W_out (x⁰_t ⊙ z_t)

  with ``(h * z)_t = Σ_s h_{t−s} ⊙ z_s`` per inner channel. Order 2 is one long filter:
  ``o = W_out (x⁰ ⊙ (h * (x¹ ⊙ v) + b ⊙ x¹ ⊙ v))``, safari's and Zoology's default and the
  operator whose results the field reports;
* implicit filters (§3.3): ``h^o_ℓ = FFN(PE(ℓ))^o ⊙ exp(−α |ℓ| / n_max)``, ``PE(ℓ) = (ℓ/n_max,
  cos 2πfℓ/n_max, sin 2πfℓ/n_max)`` for ``f = 1 … bands``, the FFN ``e → w → w → (N − 1) h``
  with sine activations, and a fixed per-channel decay ``α`` spread from slow to fast (Hyena's
  ``ExponentialModulation``: ``|ln 0.01|/1.5 … |ln 0.01|/0.3``). Causal (``causal=True``): the
  filter is zero at lags ``ℓ < 0``, so ``o_t`` depends on tokens ``≤ t`` only; bidirectional
  (``causal=False``): the filter spans lags ``−(n−1) … (n−1)``. The filters are functions of
  the lag, not parameters per position: any ``n`` works (lags beyond ``n_max`` extrapolate the
  positional features).

Left out, and why: safari's projections and short convolution carry biases, its ``Sin``
activation has a trained frequency and its positional features are laid on ``[0, 1]``; they are
token-wise or filter-parameterisation details, not the operator's structure, and the biases of the
projections would live in the inner space (no symmetry below changes). Dropout is not used.

Before issue 63 this module's ``Hyena`` followed the paper's Definition 3.1 literally: order 2 was
two long filters, ``z² = x¹ ⊙ (h¹ * v)``, ``z³ = x² ⊙ (h² * z²)`` (post-gating, no bias), which is
not the operator the field measured; that class is gone (its results would otherwise be reused
under its old trial ids): this one is named ``HyenaOperator``.

Symmetries, per form:

* ``orthogonal_knowledge`` holds in both: the embedding space is read only by ``W_in``
  (``x W_inᵀ``) and written only by ``W_out``; the short and long convolutions, the gates, the
  biases and the filter FFN act on the inner channels and on positions. ``W_in ↦ W_in Qᵀ``,
  ``W_out ↦ Q W_out`` (:meth:`HyenaOperator.rotate_`) leave every inner stream unchanged for the
  input ``Q x``, so the output is ``Q o``.
* ``orthogonal`` (weights fixed) does not: the gates multiply projections of ``x`` (the
  operator is a polynomial of degree ``N + 1`` in ``x``), and ``W_in`` fixes a basis.
* ``permutation`` does not, in either form: a convolution weighs token ``s`` in output ``t`` by
  ``h_{t−s}``, a function of the offset; only a constant filter over all lags would be
  permutation equivariant, and the decay window alone forbids that.

Packing: runs packed (``torch.func.vmap`` runs its forward and backward).

Raises:
    ValueError: ``order < 2`` (order 1 has no long convolution) or a non-positive ``h``, ``w`` or
        ``bands``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


def long_conv(z: Tensor, filt: Tensor) -> Tensor:
    """``(h * z)_t = Σ_s h_{t−s} ⊙ z_s`` per channel, directly.

    Args:
        z: ``(B, n, h)``; filt: ``(h, 2n − 1)``, the filter at lags ``−(n−1) … (n−1)``.

    Returns:
        ``(B, n, h)``.
    """
    n = z.shape[1]
    pos = torch.arange(n, device=z.device)
    lag = pos[:, None] - pos[None, :] + n - 1  # (n, n): index of lag t − s
    return torch.einsum("cts,bsc->btc", filt[:, lag], z)  # the Toeplitz matrix of each channel


def hyena_recurrence(v: Tensor, gates: list[Tensor], filters: Tensor, bias: Tensor) -> Tensor:
    """safari's recurrence: ``z ← v``; per step ``o``: ``z ← gates[o] ⊙ z``, then
    ``z ← h^o * z + b^o ⊙ z``; returns ``z`` (before the last gate ``x⁰``).

    Args:
        v: ``(B, n, h)``; gates: ``N − 1`` tensors ``(B, n, h)``, in the order they are applied
            (``x^{N−1}`` first, ``x¹`` last); filters: ``(N − 1, h, 2n − 1)``; bias: ``(N − 1, h)``.
    """
    z = v
    for gate, h_o, b_o in zip(gates, filters, bias):
        z = gate * z  # pre-gating
        z = long_conv(z, h_o) + b_o * z  # the long convolution and its bias (a per-channel skip)
    return z


class HyenaOperator(nn.Module):
    """``(B, n, d) → (B, n, d)``; ``h``: inner channels; ``order``: ``N`` (``N − 1`` long
    filters); ``w``: the filter FFN's width; ``bands``: positional frequencies; ``causal``: filters
    on lags ``≥ 0`` only (True) or on both sides (False)."""

    symmetries = frozenset({"orthogonal_knowledge"})  # both forms: see the module docstring

    def __init__(self, d: int, n_max: int, generator: torch.Generator, h: int = 8, order: int = 2,
                 w: int = 16, bands: int = 2, causal: bool = True) -> None:
        super().__init__()
        if order < 2 or min(h, w, bands) <= 0:
            raise ValueError(f"HyenaOperator needs order >= 2 and positive sizes, got order={order}, "
                             f"h={h}, w={w}, bands={bands}")

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.h, self.order, self.bands, self.causal, self.n_max = h, order, bands, causal, n_max
        e = 1 + 2 * bands  # positional features
        self.W_in = draw((order + 1) * h, d)  # ((N+1) h, d): x⁰, x¹ … x^{N−1}, v
        self.W_out = draw(d, h)  # (d, h)
        self.w_short = draw((order + 1) * h, 3)  # taps of the short convolution, per stream channel
        self.W_f1, self.b_f1 = draw(w, e), nn.Parameter(torch.zeros(w))  # the filter FFN
        self.W_f2, self.b_f2 = draw(w, w), nn.Parameter(torch.zeros(w))
        self.W_f3 = draw((order - 1) * h, w)
        # the long convolutions' biases, N(0, 1) as safari's HyenaFilter draws them: ((N−1), h)
        self.bias = nn.Parameter(torch.randn(order - 1, h, generator=generator))
        # the window's decay rates: fixed (Hyena's modulation is not trained), slow to fast
        self.register_buffer("alpha", torch.linspace(math.log(100) / 1.5, math.log(100) / 0.3, h))

    def filters(self, n: int) -> Tensor:
        """The implicit filters at lags ``−(n−1) … (n−1)``: ``(N − 1, h, 2n − 1)`` (zero at
        negative lags in the causal form)."""
        lags = torch.arange(-(n - 1), n, dtype=self.W_f1.dtype, device=self.W_f1.device)  # (2n−1,)
        angle = 2 * math.pi * torch.arange(1, self.bands + 1).to(lags) * lags[:, None] / self.n_max
        pe = torch.cat([lags[:, None] / self.n_max, angle.cos(), angle.sin()], dim=1)  # (2n−1, e)
        hidden = torch.sin(pe @ self.W_f1.T + self.b_f1)
        hidden = torch.sin(hidden @ self.W_f2.T + self.b_f2)
        filt = (hidden @ self.W_f3.T).view(-1, self.order - 1, self.h)  # (2n−1, N−1, h)
        window = torch.exp(-self.alpha * lags.abs()[:, None] / self.n_max)  # (2n−1, h)
        if self.causal:
            window = window * (lags >= 0)[:, None]  # h_ℓ = 0 for ℓ < 0: no future token
        return (filt * window[:, None, :]).permute(1, 2, 0)

    def _short_conv(self, u: Tensor) -> Tensor:
        """Width-3 depthwise convolution over tokens: offsets 0, 1, 2 back (causal) or −1, 0, 1."""
        offsets = (0, 1, 2) if self.causal else (-1, 0, 1)
        out = 0
        for tap, m in enumerate(offsets):  # u_{t−m}, zero outside the sequence
            shifted = F.pad(u, (0, 0, m, 0))[:, :u.shape[1]] if m >= 0 else F.pad(u, (0, 0, 0, -m))[:, -m:]
            out = out + self.w_short[:, tap] * shifted
        return out

    def forward(self, x: Tensor) -> Tensor:
        *gates, v = self._short_conv(x @ self.W_in.T).split(self.h, dim=-1)  # N + 1 of (B, n, h)
        z = hyena_recurrence(v, gates[:0:-1], self.filters(x.shape[1]), self.bias)  # x^{N−1} … x¹
        return (gates[0] * z) @ self.W_out.T  # (B, n, d)

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """The weights for the embedding ``x ↦ Q x``: ``W_in ↦ W_in Qᵀ``, ``W_out ↦ Q W_out``."""
        self.W_in.copy_(self.W_in @ Q.T)
        self.W_out.copy_(Q @ self.W_out)
