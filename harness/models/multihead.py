"""Multihead attention with W_out (paper.md §3 "Multihead", §9, §11.1 M7).

Paper: ``MHA(X) = X + Σ_h W_out^(h) W_V^(h) X S_r(X W_Q^(h)ᵀ W_K^(h) X / sqrt(d1))ᵀ``. Rows are
tokens: ``x: (B, n, d)``; per head ``A_h = (x W_Q^(h)ᵀ)(x W_K^(h)ᵀ)ᵀ`` (query first) and
``out = Σ_h s(A_h) @ (x W_V^(h)ᵀ) @ W_out^(h)ᵀ``. Parameters are stacked over heads:
``W_Q, W_K: (n_heads, d1, d)``, ``W_V: (n_heads, d2, d)``, ``W_out: (n_heads, d, d2)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from harness.models.common import Sigma, mix_weights, normal, rotate_in_, require_positive

__all__ = ["MultiheadAttention", "MultiheadConfig"]


@dataclass
class MultiheadConfig:
    """Options of :class:`MultiheadAttention` (registry name ``multihead``).

    The defaults (2 heads of d1 = d2 = 4) match the parameter count of a single head with
    d1 = 8 and a square W_V at d = 16 (paper.md §11.1 M7: 512 parameters).
    """

    name: str = "multihead"
    n_heads: int = 2
    d1: int = 4  # query/key dimension per head
    d2: int = 4  # value dimension per head
    sigma: Sigma = Sigma.softmax  # score map per head
    scale: bool = True  # divide scores by sqrt(d1)
    length_norm: bool = True  # elementwise σ only: divide by n
    residual: bool = True  # F = X + Σ_h H_h(X)
    causal: bool = False  # query i sees keys j ≤ i only (breaks permutation equivariance)


class MultiheadAttention(nn.Module):
    """``(B, n, d) → (B, n, d)`` multihead attention, no biases (paper.md §3, §11.1 M7).

    Claims ``orthogonal_knowledge`` (rotating ``W_Q, W_K, W_V ↦ ·Qᵀ``, ``W_out ↦ Q W_out``) and,
    unless ``causal``, ``permutation``.

    Args:
        cfg: options.
        d: embedding dimension.
        generator: the initialisation stream; input weights N(0, 1/d), W_out N(0, 1/(n_heads d2)).

    Raises:
        ValueError: for a non-positive size.
    """

    def __init__(self, cfg: MultiheadConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("multihead", d=d, n_heads=cfg.n_heads, d1=cfg.d1, d2=cfg.d2)
        self.cfg, self.d = cfg, d
        h, std = cfg.n_heads, 1 / math.sqrt(d)
        self.W_Q = normal(generator, h, cfg.d1, d, std=std)
        self.W_K = normal(generator, h, cfg.d1, d, std=std)
        self.W_V = normal(generator, h, cfg.d2, d, std=std)
        self.W_out = normal(generator, h, d, cfg.d2, std=1 / math.sqrt(h * cfg.d2))
        self.symmetries = frozenset({"orthogonal_knowledge"} | (set() if cfg.causal else {"permutation"}))

    def scores(self, x: Tensor) -> Tensor:
        """Mixing weights ``(B, n_heads, n, n)``, query first."""
        xh = x.unsqueeze(1)  # (B, 1, n, d)
        q = xh @ self.W_Q.transpose(-1, -2)  # (B, H, n, d1)
        k = xh @ self.W_K.transpose(-1, -2)  # (B, H, n, d1)
        a = q @ k.transpose(-1, -2)  # (B, H, n, n)
        a = a / math.sqrt(self.cfg.d1) if self.cfg.scale else a
        return mix_weights(a, self.cfg.sigma, self.cfg.length_norm, self.cfg.causal)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        v = x.unsqueeze(1) @ self.W_V.transpose(-1, -2)  # (B, H, n, d2)
        heads = (self.scores(x) @ v) @ self.W_out.transpose(-1, -2)  # (B, H, n, d)
        out = heads.sum(dim=1)  # (B, n, d)
        return x + out if self.cfg.residual else out

    def span_knowledge(self) -> Tensor:
        """The columns of every ``W_out^(h)``: ``(d, n_heads d2)``."""
        return self.W_out.detach().permute(1, 0, 2).reshape(self.d, -1)  # (d, H d2)

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: ``W_Q, W_K, W_V ↦ ·Qᵀ`` (W_out follows W_V), ``W_out ↦ Q W_out``."""
        for w in (self.W_Q, self.W_K, self.W_V):
            rotate_in_(w, q)
        self.W_out.copy_(q @ self.W_out)  # (H, d, d2): Q broadcast over heads
