"""The Hyena operator (Poli et al. 2023, "Hyena Hierarchy: Towards Larger Convolutional Language
Models", §3: Definition 3.1, the recurrence (3) and the implicit filters of §3.3), of order ``N``,
with its long convolutions computed directly (a Toeplitz product, ``O(n² h)``: exact and cheap at
the harness's lengths; the FFT is what scales).

Rows are tokens, ``x: (B, n, d)``. With ``h`` inner channels:

* projections: ``(v, x¹, …, x^N) = ShortConv(x W_inᵀ)``, ``N + 1`` streams ``(B, n, h)``, the
  short convolution a depthwise one of width 3 over tokens (causal: offsets 0, 1, 2 back;
  bidirectional: −1, 0, 1);
* the recurrence (3): ``z¹ = v``, ``z^{m+1}_t = x^m_t ⊙ (h^m * z^m)_t`` for ``m = 1 … N``, with
  ``(h * z)_t = Σ_s h_{t−s} ⊙ z_s`` per inner channel, and the output ``o_t = W_out z^{N+1}_t``;
* implicit filters (§3.3): ``h^m_ℓ = FFN(PE(ℓ))^m ⊙ exp(−α |ℓ| / n_max)``, ``PE(ℓ) = (ℓ/n_max,
  cos 2πfℓ/n_max, sin 2πfℓ/n_max)`` for ``f = 1 … bands``, the FFN ``e → w → w → N h`` with sine
  activations, and a fixed per-channel decay ``α`` spread from slow to fast (Hyena's
  ``ExponentialModulation``: ``|ln 0.01|/1.5 … |ln 0.01|/0.3``). Causal (``causal=True``): the
  filter is zero at lags ``ℓ < 0``, so ``o_t`` depends on tokens ``≤ t`` only; bidirectional
  (``causal=False``): the filter spans lags ``−(n−1) … (n−1)``. The filters are functions of
  the lag, not parameters per position: any ``n`` works (lags beyond ``n_max`` extrapolate the
  positional features). Hyena's per-channel skip ``D ⊙ z`` is not added: the filter's value at
  lag 0 is already free.

Symmetries, per form:

* ``orthogonal_knowledge`` holds in both: the embedding space is read only by ``W_in``
  (``x W_inᵀ``) and written only by ``W_out``; the short and long convolutions, the gates and the
  filter FFN act on the inner channels and on positions. ``W_in ↦ W_in Qᵀ``, ``W_out ↦ Q W_out``
  (:meth:`Hyena.rotate_`) leave every inner stream unchanged for the input ``Q x``, so the
  output is ``Q o``.
* ``orthogonal`` (weights fixed) does not: the gates multiply two projections of ``x`` (the
  operator is a polynomial of degree ``N + 1`` in ``x``), and ``W_in`` fixes a basis.
* ``permutation`` does not, in either form: a convolution weighs token ``s`` in output ``t`` by
  ``h_{t−s}``, a function of the offset; only a constant filter over all lags would be
  permutation equivariant, and the decay window alone forbids that.

Packing: runs packed (``torch.func.vmap`` runs its forward and backward).

Raises:
    ValueError: ``order < 2`` (order 1 is a single gated convolution, not Hyena's hierarchy) or a
        non-positive ``h``, ``w`` or ``bands``.
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


def hyena_recurrence(v: Tensor, xs: list[Tensor], filters: Tensor) -> Tensor:
    """The recurrence (3): ``z¹ = v``, ``z^{m+1} = x^m ⊙ (h^m * z^m)``; returns ``z^{N+1}``.

    Args:
        v: ``(B, n, h)``; xs: ``N`` gates ``(B, n, h)``; filters: ``(N, h, 2n − 1)``.
    """
    z = v
    for x_m, h_m in zip(xs, filters):
        z = x_m * long_conv(z, h_m)
    return z


class Hyena(nn.Module):
    """``(B, n, d) → (B, n, d)``; ``h``: inner channels; ``order``: the recurrence's depth ``N``;
    ``w``: the filter FFN's width; ``bands``: positional frequencies; ``causal``: filters on lags
    ``≥ 0`` only (True) or on both sides (False)."""

    symmetries = frozenset({"orthogonal_knowledge"})  # both forms: see the module docstring

    def __init__(self, d: int, n_max: int, generator: torch.Generator, h: int = 8, order: int = 2,
                 w: int = 16, bands: int = 2, causal: bool = True) -> None:
        super().__init__()
        if order < 2 or min(h, w, bands) <= 0:
            raise ValueError(f"Hyena needs order >= 2 and positive sizes, got order={order}, h={h}, "
                             f"w={w}, bands={bands}")

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.h, self.order, self.bands, self.causal, self.n_max = h, order, bands, causal, n_max
        e = 1 + 2 * bands  # positional features
        self.W_in = draw((order + 1) * h, d)  # ((N+1) h, d): v, x¹ … x^N
        self.W_out = draw(d, h)  # (d, h)
        self.w_short = draw((order + 1) * h, 3)  # taps of the short convolution, per stream channel
        self.W_f1, self.b_f1 = draw(w, e), nn.Parameter(torch.zeros(w))  # the filter FFN
        self.W_f2, self.b_f2 = draw(w, w), nn.Parameter(torch.zeros(w))
        self.W_f3 = draw(order * h, w)
        # the window's decay rates: fixed (Hyena's modulation is not trained), slow to fast
        self.register_buffer("alpha", torch.linspace(math.log(100) / 1.5, math.log(100) / 0.3, h))

    def filters(self, n: int) -> Tensor:
        """The implicit filters at lags ``−(n−1) … (n−1)``: ``(N, h, 2n − 1)`` (zero at negative
        lags in the causal form)."""
        lags = torch.arange(-(n - 1), n, dtype=self.W_f1.dtype, device=self.W_f1.device)  # (2n−1,)
        angle = 2 * math.pi * torch.arange(1, self.bands + 1).to(lags) * lags[:, None] / self.n_max
        pe = torch.cat([lags[:, None] / self.n_max, angle.cos(), angle.sin()], dim=1)  # (2n−1, e)
        hidden = torch.sin(pe @ self.W_f1.T + self.b_f1)
        hidden = torch.sin(hidden @ self.W_f2.T + self.b_f2)
        filt = (hidden @ self.W_f3.T).view(-1, self.order, self.h)  # (2n−1, N, h)
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
        streams = self._short_conv(x @ self.W_in.T).split(self.h, dim=-1)  # N + 1 of (B, n, h)
        z = hyena_recurrence(streams[0], list(streams[1:]), self.filters(x.shape[1]))
        return z @ self.W_out.T  # (B, n, d)

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """The weights for the embedding ``x ↦ Q x``: ``W_in ↦ W_in Qᵀ``, ``W_out ↦ Q W_out``."""
        self.W_in.copy_(self.W_in @ Q.T)
        self.W_out.copy_(Q @ self.W_out)
