"""Softmax attention with a learned positional score table: deliberately not permutation
equivariant.

``F_rows = softmax(X W_Qᵀ W_K Xᵀ / √k + P[:n, :n]) X W_Vᵀ W_Oᵀ`` with ``P: (n_max, n_max)`` a
learned bias per (query position, key position), initialised at zero as is usual. At
initialisation the model is therefore exactly permutation equivariant; the harness measures on
re-drawn weights, where ``P ≠ 0`` shows that it is not. Lengths above ``n_max`` are refused
(``ValueError``), as the harness's own bounded families do.

It declares only ``orthogonal_knowledge`` (with ``rotate_``); ``symmetries`` may be edited to
include ``permutation`` to see the harness refuse the false declaration (exit 2).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class PositionalAttention(nn.Module):
    """``(B, n, d) → (B, n, d)`` for ``n ≤ n_max``; ``k``: query/key/value dimension."""

    symmetries = frozenset({"orthogonal_knowledge"})

    def __init__(self, d: int, n_max: int, generator: torch.Generator, k: int = 8) -> None:
        super().__init__()

        def draw(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.W_Q, self.W_K, self.W_V = draw(k, d), draw(k, d), draw(k, d)  # (k, d) each
        self.W_O = draw(d, k)  # (d, k)
        self.P = nn.Parameter(torch.zeros(n_max, n_max))  # (query position, key position)
        self.k, self.n_max = k, n_max

    def forward(self, x: Tensor) -> Tensor:
        n = x.shape[1]
        if n > self.n_max:
            raise ValueError(f"PositionalAttention: n={n} is beyond n_max={self.n_max}")
        q, kk, v = x @ self.W_Q.T, x @ self.W_K.T, x @ self.W_V.T  # (B, n, k) each
        scores = q @ kk.transpose(-1, -2) / math.sqrt(self.k) + self.P[:n, :n]  # (B, n, n), query first
        return torch.softmax(scores, dim=-1) @ v @ self.W_O.T  # (B, n, d)

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """Input weights ``W ↦ W Qᵀ``, ``W_O ↦ Q W_O``; ``P`` lives in position space: unchanged."""
        for w in (self.W_Q, self.W_K, self.W_V):
            w.copy_(w @ Q.T)
        self.W_O.copy_(Q @ self.W_O)


class FalselyEquivariant(PositionalAttention):
    """The same model declaring ``permutation``: the harness measures it and exits 2."""

    symmetries = frozenset({"orthogonal_knowledge", "permutation"})
