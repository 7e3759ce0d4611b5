"""General Prop-2 form ``F = X g1 + Z g2`` (paper.md §6 Prop. 2, §11.1 M0).

The most general implementable subclass of the paper's "formulation 2": a pairwise kernel plus a
Deep-Sets context. Rows are tokens, ``x: (B, n, d)``; ``Yt = x @ Z: (B, n, k)`` (the paper's
``Yᵀ``), ``G = x xᵀ: (B, n, n)`` (the Gram matrix ``XᵀX``), ``c̄ = mean_l ψ(y_l): (B, p)``::

    [g1]_ji = norm_j φ1(G_ij, G_ii, G_jj, y_i, y_j, c̄)     (query i, key j; softmax or 1/n)
    [g2]_:i = φ2(y_i, G_ii, c̄) ∈ R^k
    F_rows  = g1ᵀ-weights @ x + φ2(...) @ Zᵀ                (the paper's X g1 + Z g2)

With ``zg2 = false`` (preset ``general_nozg2``) the ``Z g2`` term and its MLP φ2 are removed and
nothing else changes (φ1's inputs, ``Z``, ψ and the widths are the same): the minimal pair for
"is Z g2 the less important part" (paper.md §13 C8, minimal pairs).

Every input of φ1, φ2, ψ is an inner product of tokens and knowledge, so the model is exactly
orthogonal equivariant with knowledge (``Z ↦ QZ``) and permutation equivariant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from harness.models.common import MLP, Mix, normal, rotate_out_, require_positive, row_softmax

__all__ = ["General", "GeneralConfig"]


@dataclass
class GeneralConfig:
    """Options of :class:`General` (registry name ``general``)."""

    name: str = "general"
    k: int = 8  # knowledge size, Z: (d, k)
    hidden: int = 32  # hidden width of φ1, φ2, ψ
    p: int = 4  # width of the pooled context c̄
    mix: Mix = Mix.softmax  # normalisation of g1 over keys
    zg2: bool = True  # the Z g2 term (φ2); false: F = X g1 only, everything else equal (C8's minimal pair)


class General(nn.Module):
    """M0: ``(B, n, d) → (B, n, d)``, ``F = X g1(G, Y, c̄) + Z g2(Y, G, c̄)`` (paper.md §11.1).

    Parameters: ``Z: (d, k)``; MLPs ``φ1: R^{2k+3+p} → R``, ``φ2: R^{k+1+p} → R^k`` (only with
    ``cfg.zg2``), ``ψ: R^k → R^p`` (one hidden layer each; their biases live in invariant spaces).
    Memory grows as ``B n² hidden``.

    Args:
        cfg: options.
        d: embedding dimension.
        generator: the initialisation stream.

    Raises:
        ValueError: for a non-positive size.
    """

    symmetries = frozenset({"orthogonal_knowledge", "permutation"})

    def __init__(self, cfg: GeneralConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("general", d=d, k=cfg.k, hidden=cfg.hidden, p=cfg.p)
        self.cfg = cfg
        k = cfg.k
        self.Z = normal(generator, d, k, std=1 / math.sqrt(d))
        self.psi = MLP([k, cfg.hidden, cfg.p], generator)
        self.phi1 = MLP([2 * k + 3 + cfg.p, cfg.hidden, 1], generator)
        # drawn last, so that switching the term off leaves Z, ψ and φ1's initial weights unchanged
        self.phi2 = MLP([k + 1 + cfg.p, cfg.hidden, k], generator) if cfg.zg2 else None

    def coefficients(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(g1 weights (B, n, n) query first, g2ᵀ (B, n, k))`` for ``x: (B, n, d)``; g2ᵀ is zero
        without the Z g2 term."""
        b, n, _ = x.shape
        yt = x @ self.Z  # (B, n, k)
        gram = x @ x.transpose(-1, -2)  # (B, n, n): G_ij = x_i · x_j
        diag = torch.diagonal(gram, dim1=-2, dim2=-1)  # (B, n): G_ii
        ctx = self.psi(yt).mean(dim=1)  # (B, p): c̄
        pair = torch.cat([
            gram[..., None],  # G_ij
            diag[:, :, None, None].expand(b, n, n, 1),  # G_ii (query)
            diag[:, None, :, None].expand(b, n, n, 1),  # G_jj (key)
            yt[:, :, None, :].expand(b, n, n, -1),  # y_i
            yt[:, None, :, :].expand(b, n, n, -1),  # y_j
            ctx[:, None, None, :].expand(b, n, n, -1),  # c̄
        ], dim=-1)  # (B, n, n, 2k+3+p)
        scores = self.phi1(pair).squeeze(-1)  # (B, n, n)
        g1 = row_softmax(scores) if self.cfg.mix is Mix.softmax else scores / n
        if self.phi2 is None:
            return g1, yt.new_zeros(b, n, self.cfg.k)
        own = torch.cat([yt, diag[..., None], ctx[:, None, :].expand(b, n, -1)], dim=-1)  # (B, n, k+1+p)
        return g1, self.phi2(own)  # (B, n, n), (B, n, k)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        g1, g2t = self.coefficients(x)
        if self.phi2 is None:
            return g1 @ x  # (B, n, d): X g1 alone
        return g1 @ x + g2t @ self.Z.T  # (B, n, d)

    def span_knowledge(self) -> Tensor:
        """``Z: (d, k)``: the output lies in span(X, Z)."""
        return self.Z.detach()

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: ``Z ↦ QZ`` (the only embedding-space parameter)."""
        rotate_out_(self.Z, q)
