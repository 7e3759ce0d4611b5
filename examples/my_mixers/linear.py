"""Linear attention (Katharopoulos et al. 2020): softmax replaced by a feature map.

``F_rows = (φ(Q) (φ(K)ᵀ V)) / (φ(Q) Σ_j φ(k_j)) W_Oᵀ`` with ``Q = X W_Qᵀ``, ``K = X W_Kᵀ``,
``V = X W_Vᵀ`` (rows are tokens, ``(B, n, k)``) and ``φ = elu + 1`` (positive, so the
normaliser is positive). Cost is linear in ``n``.

Symmetries: no positions and no causal mask, so permuting the tokens permutes the output
(``permutation``); every embedding-space weight reads or writes through ``W_Q, W_K, W_V``
(``·Qᵀ``) and ``W_O`` (``Q·``), so rotating them gives ``orthogonal_knowledge``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class LinearAttention(nn.Module):
    """``(B, n, d) → (B, n, d)``; ``k``: the feature (query/key/value) dimension."""

    symmetries = frozenset({"orthogonal_knowledge", "permutation"})

    def __init__(self, d: int, n_max: int, generator: torch.Generator, k: int = 8) -> None:
        super().__init__()

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.W_Q, self.W_K, self.W_V = draw(k, d), draw(k, d), draw(k, d)  # (k, d) each
        self.W_O = draw(d, k)  # (d, k)

    def forward(self, x: Tensor) -> Tensor:
        q, kk = F.elu(x @ self.W_Q.T) + 1, F.elu(x @ self.W_K.T) + 1  # (B, n, k), positive
        v = x @ self.W_V.T  # (B, n, k)
        kv = kk.transpose(-1, -2) @ v  # (B, k, k): Σ_j φ(k_j) v_jᵀ
        norm = q @ kk.sum(dim=1, keepdim=True).transpose(-1, -2)  # (B, n, 1): φ(q_i)·Σ_j φ(k_j)
        return (q @ kv / norm) @ self.W_O.T  # (B, n, d)

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """The weights for the embedding ``x ↦ Q x``: input weights ``W ↦ W Qᵀ``, ``W_O ↦ Q W_O``."""
        for w in (self.W_Q, self.W_K, self.W_V):
            w.copy_(w @ Q.T)
        self.W_O.copy_(Q @ self.W_O)
