"""Single attention layer in embedding space (paper.md §3, §7, §11.1 M3-M6).

Rows are tokens: ``X_rows`` has shape ``(B, n, d)`` and is the paper's ``Xᵀ``. The score matrix
``A = X_rows W_Qᵀ W_K X_rowsᵀ`` has query index first (paper.md §11.1), so the softmax normalises
over keys ``j`` for every query ``i`` and the output is ``F_rows = σ(A) @ V_rows``: the paper's
``F = W_V X σ(A)ᵀ``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor, nn


class Sigma(Enum):
    """Score map σ: ``softmax`` over keys, or an elementwise nonlinearity (paper.md §7, M3/M4)."""

    softmax = "softmax"
    relu = "relu"
    tanh = "tanh"
    sigmoid = "sigmoid"
    identity = "identity"


_ELEMENTWISE = {
    Sigma.relu: torch.relu,
    Sigma.tanh: torch.tanh,
    Sigma.sigmoid: torch.sigmoid,
    Sigma.identity: lambda a: a,
}


@dataclass
class AttentionConfig:
    """Options of :class:`Attention` (registry name ``attention``)."""

    name: str = "attention"
    sigma: Sigma = Sigma.softmax  # score map; elementwise ones are divided by n (length_norm)
    d1: int = 8  # query/key dimension: W_Q, W_K have shape (d1, d)
    scale: bool = True  # divide scores by sqrt(d1)
    length_norm: bool = True  # elementwise σ only: multiply σ(A) by 1/n (paper.md M3)
    value: bool = False  # learn W_V (d, d); off means V = X
    residual: bool = False  # F = X + attention(X)


class Attention(nn.Module):
    """One attention layer ``(B, n, d) → (B, n, d)``, no biases (paper.md §3 eq. 1, §11.1).

    ``F_rows = X_rows·[residual] + s(A) @ (X_rows W_Vᵀ)`` with ``A = (X_rows W_Qᵀ)(X_rows W_Kᵀ)ᵀ``
    (divided by ``sqrt(d1)`` if ``scale``), ``s = row softmax`` or ``s(A) = σ(A)/n`` for an
    elementwise σ. Parameters: ``W_Q, W_K: (d1, d)``, optional ``W_V: (d, d)``.

    Args:
        cfg: the layer's options.
        d: embedding dimension.
        generator: the initialisation stream; weights are N(0, 1/d).

    Raises:
        ValueError: if ``d`` or ``cfg.d1`` is not positive.
    """

    def __init__(self, cfg: AttentionConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        if d <= 0 or cfg.d1 <= 0:
            raise ValueError(f"attention needs d > 0 and d1 > 0, got d={d}, d1={cfg.d1}")
        self.cfg = cfg
        std = 1.0 / math.sqrt(d)
        self.W_Q = nn.Parameter(torch.randn(cfg.d1, d, generator=generator) * std)
        self.W_K = nn.Parameter(torch.randn(cfg.d1, d, generator=generator) * std)
        self.W_V = nn.Parameter(torch.randn(d, d, generator=generator) * std) if cfg.value else None

    def scores(self, x: Tensor) -> Tensor:
        """Mixing weights ``s(A)`` of shape ``(B, n, n)``, row i = query i, column j = key j."""
        q = x @ self.W_Q.T  # (B, n, d1)
        k = x @ self.W_K.T  # (B, n, d1)
        a = q @ k.transpose(-1, -2)  # (B, n, n): A_ij = q_i · k_j
        if self.cfg.scale:
            a = a / math.sqrt(self.cfg.d1)
        if self.cfg.sigma is Sigma.softmax:
            return torch.softmax(a, dim=-1)  # normalise over keys j
        s = _ELEMENTWISE[self.cfg.sigma](a)
        return s / x.shape[-2] if self.cfg.length_norm else s

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        v = x @ self.W_V.T if self.W_V is not None else x  # (B, n, d)
        out = self.scores(x) @ v  # (B, n, d): out_i = Σ_j s_ij v_j
        return x + out if self.cfg.residual else out
