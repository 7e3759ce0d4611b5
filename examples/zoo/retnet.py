"""Retention with a fixed decay γ (Sun, Dong, Huang, Ma, Xia, Xue, Wang & Wei 2023, "Retentive
Network: A Successor to Transformer for Large Language Models", arXiv:2307.08621, §2.1),
one head, causal (the paper's form) or bidirectional.

Rows are tokens, ``x: (B, n, d)``. With ``Q = X W_Qᵀ / √k``, ``K = X W_Kᵀ``, ``V = X W_Vᵀ``
(``(B, n, k)``; the paper scales ``QKᵀ`` by ``1/√k`` too):

* the parallel representation (§2.1)::

      Retention(X) = (Q Kᵀ ⊙ D) V,   D_nm = γ^(n−m) if n ≥ m else 0   (causal)
                                     D_nm = γ^|n−m|                    (bidirectional)

* the recurrent representation (§2.1), the same function::

      S_n = γ S_{n−1} + K_nᵀ V_n   (k, k),  S_0 = 0,   o_n = Q_n S_n

  and for the bidirectional form a backward scan ``S←_n = γ S←_{n+1} + K_nᵀ V_n`` beside it:
  ``o_n = Q_n (S_n + S←_n − K_nᵀ V_n)`` (the diagonal term is in both scans, counted once);

and the output ``y = Retention(X) W_Oᵀ`` (``(B, n, d)``). Shapes: ``W_Q, W_K, W_V: (k, d)``,
``W_O: (d, k)``; ``γ`` a fixed number (not learned), as each head of the paper's multi-scale
retention (where ``γ = 1 − 2^(−5−h)`` for head ``h``; the default ``γ = 1 − 2^−5`` is its first).
:meth:`forward` uses the parallel form (one ``(n, n)`` matrix, vectorised);
:meth:`recurrent` is the recurrence, kept for the mechanism test. Any ``n`` is taken: ``D`` is
built for the ``n`` given, so there is no ``n_max`` bound.

Left out, and why: the paper multiplies ``Q`` and ``K`` by ``e^{inθ}`` (xPos, a rotary
relative-position code, from diagonalising the state matrix ``A = Λ(γe^{iθ})Λ⁻¹``). It is a
positional code on top of the decay, not the retention mechanism; with it the layer would
still be position-dependent and rotation-covariant with knowledge (it acts on ``k``-space, after
``W_Q, W_K``), so the symmetries below would not change, and leaving it out keeps the layer
"retention with a fixed decay" as the issue names it. Also left out: the multi-scale heads, the
GroupNorm, the swish output gate and the score normalisations of §2.2 (token-wise or numerical
additions around the same mixing).

Errors: ``ValueError`` from the constructor for ``k < 1`` or ``γ`` outside ``(0, 1]``
(``γ = 0`` makes ``D`` the identity: no mixing at all).

Symmetries (``rotate(f, Q)`` maps ``W ↦ W Qᵀ`` for ``W_Q, W_K, W_V`` and ``W_O ↦ Q W_O``):

* ``orthogonal_knowledge`` holds in both forms: ``x`` enters only through ``x Wᵀ``, which the
  rotation leaves unchanged (``(x Qᵀ)(W Qᵀ)ᵀ = x Wᵀ``), ``D`` does not depend on ``x``, and the
  output leaves through ``W_O``.
* ``orthogonal`` (weights not rotated) does not hold: generic ``W`` do not commute with ``Q``,
  and ``(xQᵀ W_Qᵀ)(xQᵀ W_Kᵀ)ᵀ ≠ x W_Qᵀ W_K xᵀ``.
* ``permutation``: ``f(XP) = f(X)P`` needs ``D`` invariant under simultaneous row/column
  permutation, ``D_{π(n)π(m)} = D_nm``. The causal ``D`` is lower-triangular (never invariant for
  ``n ≥ 2``); the bidirectional ``γ^|n−m|`` is invariant only when ``γ = 1`` (all ones: linear
  attention without a normaliser and without a feature map). So ``permutation`` holds exactly
  for ``causal=False, gamma=1`` and is declared there only.

Packing: ``torch.func.vmap`` runs its forward and backward (``tests/test_zoo_mixers_a.py``),
so it runs packed.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class Retention(nn.Module):
    """``(B, n, d) → (B, n, d)``; ``k``: the query/key/value dimension; ``gamma``: the fixed decay
    ``γ ∈ (0, 1]``; ``causal``: the paper's lower-triangular ``D`` or the two-sided ``γ^|n−m|``."""

    def __init__(self, d: int, n_max: int, generator: torch.Generator, k: int = 8,
                 gamma: float = 1 - 2 ** -5, causal: bool = True) -> None:
        super().__init__()
        if k < 1:
            raise ValueError(f"k={k} must be ≥ 1")
        if not 0 < gamma <= 1:
            raise ValueError(f"gamma={gamma} must be in (0, 1]")

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.k, self.gamma, self.causal = k, float(gamma), causal
        self.W_Q, self.W_K, self.W_V = draw(k, d), draw(k, d), draw(k, d)  # (k, d) each
        self.W_O = draw(d, k)  # (d, k)
        # the module docstring's derivation: D is permutation-invariant only two-sided with γ = 1
        sym = {"orthogonal_knowledge"} | ({"permutation"} if not causal and gamma == 1 else set())
        self.symmetries = frozenset(sym)

    def decay(self, n: int, dtype: torch.dtype = torch.float64, device: torch.device | None = None) -> Tensor:
        """``D: (n, n)``, ``D_nm = γ^(n−m)`` for ``n ≥ m`` (else 0), or ``γ^|n−m|`` bidirectional."""
        pos = torch.arange(n, device=device)
        gap = pos[:, None] - pos[None, :]  # (n, n): n − m
        if not self.causal:
            return self.gamma ** gap.abs().to(dtype)
        # the exponent is clamped before the power so that γ^(negative) never overflows
        return torch.where(gap >= 0, self.gamma ** gap.clamp_min(0).to(dtype), 0.0).to(dtype)

    def qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``Q, K, V: (B, n, k)``, ``Q`` scaled by ``1/√k``."""
        return x @ self.W_Q.T / math.sqrt(self.k), x @ self.W_K.T, x @ self.W_V.T

    def forward(self, x: Tensor) -> Tensor:
        q, kk, v = self.qkv(x)
        scores = q @ kk.transpose(-1, -2) * self.decay(x.shape[1], x.dtype, x.device)  # (B, n, n), query first
        return scores @ v @ self.W_O.T  # (B, n, d)

    def recurrent(self, x: Tensor) -> Tensor:
        """The recurrent representation (a loop over the tokens); equal to :meth:`forward`."""
        q, kk, v = self.qkv(x)
        n = x.shape[1]
        kv = kk[..., :, None] * v[..., None, :]  # (B, n, k, k): K_nᵀ V_n
        fwd, S = [], torch.zeros_like(kv[:, 0])
        for t in range(n):  # S_n = γ S_{n−1} + K_nᵀ V_n
            S = self.gamma * S + kv[:, t]
            fwd.append(S)
        states = torch.stack(fwd, dim=1)  # (B, n, k, k)
        if not self.causal:
            bwd, S = [], torch.zeros_like(kv[:, 0])
            for t in reversed(range(n)):  # S←_n = γ S←_{n+1} + K_nᵀ V_n
                S = self.gamma * S + kv[:, t]
                bwd.append(S)
            states = states + torch.stack(bwd[::-1], dim=1) - kv  # K_nᵀ V_n once, not twice
        o = (q[..., None, :] @ states).squeeze(-2)  # (B, n, k): o_n = Q_n S_n
        return o @ self.W_O.T

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """The weights for the embedding ``x ↦ Q x``: input weights ``W ↦ W Qᵀ``, ``W_O ↦ Q W_O``
        (``γ`` and ``D`` live in position space: unchanged)."""
        for w in (self.W_Q, self.W_K, self.W_V):
            w.copy_(w @ Q.T)
        self.W_O.copy_(Q @ self.W_O)
