"""Coordinate-wise nonlinear control ``F = tanh(X) S_r(YᵀWY/sqrt(k))ᵀ`` (paper.md §11.2 B7).

Rows are tokens, ``x: (B, n, d)``, ``Yt = x @ Z: (B, n, k)``: ``F_rows = softmax(A) @ tanh(x)``
with ``A = Yt W Ytᵀ / sqrt(k)`` (query first). The tanh acts on embedding *coordinates*, so the
map depends on the basis: it is **not** orthogonal equivariant even when ``Z ↦ QZ`` — the
negative control of the rotation tests. Permutation equivariant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from harness.models.common import normal, rotate_out_, require_positive, row_softmax

__all__ = ["CoordWise", "CoordWiseConfig"]


@dataclass
class CoordWiseConfig:
    """Options of :class:`CoordWise` (registry name ``coordwise``)."""

    name: str = "coordwise"
    k: int = 8  # knowledge size, Z: (d, k), W: (k, k)


class CoordWise(nn.Module):
    """B7: ``(B, n, d) → (B, n, d)``. Claims ``permutation`` only.

    Raises:
        ValueError: for a non-positive size.
    """

    symmetries = frozenset({"permutation"})

    def __init__(self, cfg: CoordWiseConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("coordwise", d=d, k=cfg.k)
        self.cfg = cfg
        self.Z = normal(generator, d, cfg.k, std=1 / math.sqrt(d))
        self.W = normal(generator, cfg.k, cfg.k, std=1.0)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        yt = x @ self.Z  # (B, n, k)
        a = yt @ self.W @ yt.transpose(-1, -2) / math.sqrt(self.cfg.k)  # (B, n, n)
        return row_softmax(a) @ torch.tanh(x)

    def span_knowledge(self) -> None:
        """``None``: tanh(X) leaves span(X), and no finite knowledge set is claimed."""
        return None

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: ``Z ↦ QZ`` (this does not make the model equivariant)."""
        rotate_out_(self.Z, q)
