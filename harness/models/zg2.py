"""The ``Z g2`` term alone: output confined to span(Z) (paper.md §6 "Simplification argument",
§11.1 M9).

Rows are tokens, ``x: (B, n, d)``, ``Yt = x @ Z: (B, n, k)`` (the paper's ``Yᵀ``):

* ``tokenwise`` (M9a): ``F = Z φ(Y)`` with an MLP ``φ: R^k → R^k`` on each token:
  ``F_rows = φ(Yt) @ Zᵀ``;
* ``mixing`` (M9b): ``F = Z (Y S_r(YᵀWY/sqrt(k))ᵀ)``: ``F_rows = softmax(A) @ Yt @ Zᵀ``.

It isolates the term that the paper calls "less important" (claim C8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor, nn

from harness.models.common import MLP, normal, rotate_out_, require_positive, row_softmax

__all__ = ["ZG2", "ZG2Config", "ZG2Mode"]


class ZG2Mode(Enum):
    """``tokenwise`` (no token mixing) or ``mixing`` (softmax-mixed coordinates Y)."""

    tokenwise = "tokenwise"
    mixing = "mixing"


@dataclass
class ZG2Config:
    """Options of :class:`ZG2` (registry name ``zg2``)."""

    name: str = "zg2"
    mode: ZG2Mode = ZG2Mode.tokenwise
    k: int = 8  # knowledge size, Z: (d, k)
    hidden: int = 32  # tokenwise only: hidden width of φ


class ZG2(nn.Module):
    """M9: ``(B, n, d) → (B, n, d)`` with output in span(Z) (paper.md §11.1).

    Parameters: ``Z: (d, k)``; ``tokenwise``: MLP ``φ: R^k → R^k``; ``mixing``: ``W: (k, k)``.

    Args:
        cfg: options.
        d: embedding dimension.
        generator: the initialisation stream.

    Raises:
        ValueError: for a non-positive size.
    """

    symmetries = frozenset({"orthogonal_knowledge", "permutation"})

    def __init__(self, cfg: ZG2Config, d: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("zg2", d=d, k=cfg.k, hidden=cfg.hidden)
        self.cfg = cfg
        self.Z = normal(generator, d, cfg.k, std=1 / math.sqrt(d))
        if cfg.mode is ZG2Mode.tokenwise:
            self.phi = MLP([cfg.k, cfg.hidden, cfg.k], generator)
        else:
            self.W = normal(generator, cfg.k, cfg.k, std=1.0)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        yt = x @ self.Z  # (B, n, k)
        if self.cfg.mode is ZG2Mode.tokenwise:
            g2t = self.phi(yt)  # (B, n, k): column i of g2 is φ(y_i)
        else:
            a = yt @ self.W @ yt.transpose(-1, -2) / math.sqrt(self.cfg.k)  # (B, n, n)
            g2t = row_softmax(a) @ yt  # (B, n, k)
        return g2t @ self.Z.T  # (B, n, d)

    def span_knowledge(self) -> Tensor:
        """``Z: (d, k)``."""
        return self.Z.detach()

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: ``Z ↦ QZ``."""
        rotate_out_(self.Z, q)
