"""Fixed, input-independent token mixing ``F = X σ(M)`` (paper.md §11.2 B2, MLP-Mixer style).

Rows are tokens, ``x: (B, n, d)``; ``M: (n_max, n_max)`` is learned and its top-left ``n × n``
block is used: ``F_rows = s(M[:n, :n]) @ x`` (row i = query i; ``s`` = row softmax or an
elementwise σ with 1/n). A constant-``g`` Prop-1 form: orthogonal equivariant with no
transform at all, but ``M`` depends on positions (no permutation equivariance) and its size on
``n_max`` (violates the finite information principle).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from harness.models.common import Sigma, mix_weights, normal, require_positive

__all__ = ["Mixing", "MixingConfig"]


@dataclass
class MixingConfig:
    """Options of :class:`Mixing` (registry name ``mixing``)."""

    name: str = "mixing"
    sigma: Sigma = Sigma.softmax


class Mixing(nn.Module):
    """B2: ``(B, n, d) → (B, n, d)`` for ``n ≤ n_max``, ``F_rows = s(M[:n, :n]) @ x``.

    Args:
        cfg: options.
        d: embedding dimension.
        n_max: the longest sequence it accepts; ``M: (n_max, n_max)``, N(0, 1) entries.
        generator: the initialisation stream.

    Raises:
        ValueError: for a non-positive size; in ``forward``, for ``n > n_max``.
    """

    symmetries = frozenset({"orthogonal_knowledge", "orthogonal"})

    def __init__(self, cfg: MixingConfig, d: int, n_max: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("mixing", d=d, n_max=n_max)
        self.cfg, self.d, self.n_max = cfg, d, n_max
        self.M = normal(generator, n_max, n_max, std=1.0)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``; raises ``ValueError`` if ``n > n_max``."""
        n = x.shape[-2]
        if n > self.n_max:
            raise ValueError(f"mixing supports sequences of length at most n_max={self.n_max}, got n={n}")
        return mix_weights(self.M[:n, :n], self.cfg.sigma, True) @ x  # (n, n) @ (B, n, d)

    def span_knowledge(self) -> Tensor:
        """Empty ``(d, 0)``: the output lies in the span of the input tokens."""
        return self.M.detach().new_zeros(self.d, 0)

    def rotate_(self, q: Tensor) -> None:
        """Nothing to transform: ``M`` acts on positions, not on the embedding."""
