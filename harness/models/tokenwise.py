"""Token-wise MLP, no mixing: ``F_:,j = MLP(x_j)`` (paper.md §11.2 B3, a lower bound)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from harness.models.common import MLP, require_positive

__all__ = ["TokenMLP", "TokenMLPConfig"]


@dataclass
class TokenMLPConfig:
    """Options of :class:`TokenMLP` (registry name ``tokenwise``)."""

    name: str = "tokenwise"
    hidden: int = 64
    depth: int = 2  # number of hidden layers


class TokenMLP(nn.Module):
    """B3: ``(B, n, d) → (B, n, d)``, the same MLP ``d → hidden (× depth) → d`` on every token.

    Claims ``orthogonal_knowledge`` (``W1 ↦ W1 Qᵀ``, ``W_last ↦ Q W_last``, ``b_last ↦ Q b_last``)
    and ``permutation``.

    Raises:
        ValueError: for a non-positive size.
    """

    symmetries = frozenset({"orthogonal_knowledge", "permutation"})

    def __init__(self, cfg: TokenMLPConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("tokenwise", d=d, hidden=cfg.hidden, depth=cfg.depth)
        self.mlp = MLP([d] + [cfg.hidden] * cfg.depth + [d], generator)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        return self.mlp(x)

    def span_knowledge(self) -> Tensor:
        """Output weight columns and bias: ``(d, hidden + 1)``."""
        return torch.cat([self.mlp.weights[-1], self.mlp.biases[-1][:, None]], dim=1).detach()

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: input weight ``↦ W Qᵀ``, output weight and bias ``↦ Q ·``."""
        self.mlp.rotate_(q)
