"""Deep Sets layer ``x'_i = φ(x_i, (1/n) Σ_l ψ(x_l))`` (paper.md §8, §11.2 B4).

Permutation equivariant with pooled context but no pairwise term. Rows are tokens,
``x: (B, n, d)``; ``c̄ = mean_l ψ(x_l): (B, p)``; ``F_rows[i] = φ([x_i, c̄])``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from harness.models.common import MLP, rotate_in_, rotate_out_, require_positive

__all__ = ["DeepSets", "DeepSetsConfig"]


@dataclass
class DeepSetsConfig:
    """Options of :class:`DeepSets` (registry name ``deepsets``)."""

    name: str = "deepsets"
    hidden: int = 64  # hidden width of φ and ψ
    p: int = 16  # width of the pooled context c̄


class DeepSets(nn.Module):
    """B4: ``(B, n, d) → (B, n, d)``. MLPs ``ψ: R^d → R^p``, ``φ: R^{d+p} → R^d``.

    Claims ``orthogonal_knowledge`` (the embedding-reading columns of ψ's and φ's first layers
    ``↦ W Qᵀ``, φ's output weight and bias ``↦ Q ·``) and ``permutation``.

    Raises:
        ValueError: for a non-positive size.
    """

    symmetries = frozenset({"orthogonal_knowledge", "permutation"})

    def __init__(self, cfg: DeepSetsConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("deepsets", d=d, hidden=cfg.hidden, p=cfg.p)
        self.d = d
        self.psi = MLP([d, cfg.hidden, cfg.p], generator)
        self.phi = MLP([d + cfg.p, cfg.hidden, d], generator)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        ctx = self.psi(x).mean(dim=1, keepdim=True).expand(-1, x.shape[1], -1)  # (B, n, p)
        return self.phi(torch.cat([x, ctx], dim=-1))  # (B, n, d+p) → (B, n, d)

    def span_knowledge(self) -> Tensor:
        """φ's output weight columns and bias: ``(d, hidden + 1)``."""
        return torch.cat([self.phi.weights[-1], self.phi.biases[-1][:, None]], dim=1).detach()

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place, by the rules of paper.md §10.2 / C4."""
        rotate_in_(self.psi.weights[0], q)
        rotate_in_(self.phi.weights[0][:, : self.d], q)  # the x_i columns; c̄ is invariant
        rotate_out_(self.phi.weights[-1], q)
        rotate_out_(self.phi.biases[-1], q)
