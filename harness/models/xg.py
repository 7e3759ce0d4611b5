"""The paper's simplified form ``F = X g(Zᵀ X)`` with a learned pairwise kernel (paper.md §6,
§11.1 M1).

Rows are tokens, ``x: (B, n, d)``; ``Yt = x @ Z: (B, n, k)`` (the paper's ``Yᵀ``)::

    g_ji   = norm_j φ(y_i, y_j)       (query i, key j; softmax over keys or 1/n)
    F_rows = weights @ x              (the paper's X g)

It drops ``XᵀX``, ``ZᵀZ`` and the ``Z g2`` term of Prop. 2 (M0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from harness.models.common import MLP, Mix, normal, rotate_out_, require_positive, row_softmax

__all__ = ["XG", "XGConfig"]


@dataclass
class XGConfig:
    """Options of :class:`XG` (registry name ``xg``)."""

    name: str = "xg"
    k: int = 8  # knowledge size, Z: (d, k)
    hidden: int = 32  # hidden width of φ
    mix: Mix = Mix.softmax


class XG(nn.Module):
    """M1: ``(B, n, d) → (B, n, d)``, ``F = X g(Y)``, ``g_ji = norm_j φ(y_i, y_j)``.

    Parameters: ``Z: (d, k)``, MLP ``φ: R^{2k} → R`` (one hidden layer). Output in span(X).

    Args:
        cfg: options.
        d: embedding dimension.
        generator: the initialisation stream.

    Raises:
        ValueError: for a non-positive size.
    """

    symmetries = frozenset({"orthogonal_knowledge", "permutation"})

    def __init__(self, cfg: XGConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("xg", d=d, k=cfg.k, hidden=cfg.hidden)
        self.cfg, self.d = cfg, d
        self.Z = normal(generator, d, cfg.k, std=1 / math.sqrt(d))
        self.phi = MLP([2 * cfg.k, cfg.hidden, 1], generator)

    def coefficients(self, x: Tensor) -> Tensor:
        """Mixing weights ``(B, n, n)``, row i = query i."""
        b, n, _ = x.shape
        yt = x @ self.Z  # (B, n, k)
        pair = torch.cat([yt[:, :, None, :].expand(b, n, n, -1),  # y_i
                          yt[:, None, :, :].expand(b, n, n, -1)], dim=-1)  # y_j → (B, n, n, 2k)
        scores = self.phi(pair).squeeze(-1)  # (B, n, n)
        return row_softmax(scores) if self.cfg.mix is Mix.softmax else scores / n

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        return self.coefficients(x) @ x

    def span_knowledge(self) -> Tensor:
        """Empty ``(d, 0)``: the output lies in the span of the input tokens."""
        return self.Z.detach()[:, :0]

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: ``Z ↦ QZ``."""
        rotate_out_(self.Z, q)
