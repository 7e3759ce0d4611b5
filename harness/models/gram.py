"""Knowledge-free form ``F = X g(XᵀX)`` (paper.md §4 Prop. 1, §5, §11.1 M2).

Rows are tokens, ``x: (B, n, d)``; ``G = x xᵀ: (B, n, n)`` is the Gram matrix ``XᵀX``::

    g_ji   = norm_j φ(G_ij, G_ii, G_jj)     (query i, key j)
    F_rows = weights @ x

No parameter lives in the embedding space, so ``f(QX) = Q f(X)`` with no transform at all. With
distinct one-hot tokens ``G = I`` and the mixing is the same for every input (paper.md §5): the
model cannot tell "2+1" from "2−1".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from harness.models.common import MLP, Mix, require_positive, row_softmax

__all__ = ["Gram", "GramConfig"]


@dataclass
class GramConfig:
    """Options of :class:`Gram` (registry name ``xg_noknow``)."""

    name: str = "xg_noknow"
    hidden: int = 32  # hidden width of φ
    mix: Mix = Mix.softmax


class Gram(nn.Module):
    """M2: ``(B, n, d) → (B, n, d)``, ``F = X g(G)``, ``g_ji = norm_j φ(G_ij, G_ii, G_jj)``.

    Parameters: the MLP ``φ: R³ → R`` only. Claims all three symmetries.

    Args:
        cfg: options.
        d: embedding dimension (only checked).
        generator: the initialisation stream.

    Raises:
        ValueError: for a non-positive size.
    """

    symmetries = frozenset({"orthogonal_knowledge", "orthogonal", "permutation"})

    def __init__(self, cfg: GramConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("xg_noknow", d=d, hidden=cfg.hidden)
        self.cfg, self.d = cfg, d
        self.phi = MLP([3, cfg.hidden, 1], generator)

    def coefficients(self, x: Tensor) -> Tensor:
        """Mixing weights ``(B, n, n)``, row i = query i; a function of ``G`` only."""
        b, n, _ = x.shape
        gram = x @ x.transpose(-1, -2)  # (B, n, n)
        diag = torch.diagonal(gram, dim1=-2, dim2=-1)  # (B, n)
        pair = torch.stack([gram, diag[:, :, None].expand(b, n, n),
                            diag[:, None, :].expand(b, n, n)], dim=-1)  # (B, n, n, 3)
        scores = self.phi(pair).squeeze(-1)  # (B, n, n)
        return row_softmax(scores) if self.cfg.mix is Mix.softmax else scores / n

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        return self.coefficients(x) @ x

    def span_knowledge(self) -> Tensor:
        """Empty ``(d, 0)``: the output lies in the span of the input tokens."""
        return self.phi.weights[0].new_zeros(self.d, 0)

    def rotate_(self, q: Tensor) -> None:
        """Nothing to transform: no parameter lives in the embedding space."""
