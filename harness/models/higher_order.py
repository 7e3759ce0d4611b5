"""Higher-order alternating monomials (paper.md §7 "Strengthening", §11.1 M8).

Under the finite information principle every admissible ``n × n`` term alternates::

    T_1 = Yᵀ B_11 Y,   T_p = Yᵀ B_p1 (YYᵀ/n) B_p2 (YYᵀ/n) ··· B_pp Y

(``2p`` factors of Y, every ``B: (k, k)``). Rows are tokens: ``Yt = x @ Z: (B, n, k)`` is the
paper's ``Yᵀ``, ``YYᵀ = Ytᵀ Yt: (B, k, k)``, and ``T_p = Yt (B_p1 C B_p2 ··· C B_pp) Ytᵀ`` with
``C = Ytᵀ Yt / n`` (``inner_norm``; without it ``C = Ytᵀ Yt``, whose entries grow with n).
Scores ``A = (Σ_p T_p + α XᵀX) / sqrt(k)`` (query first; with ``alpha_term = identity`` the
control ``α I`` instead of ``α XᵀX``, equal to it for distinct one-hot tokens, claim C11) are mixed by the row softmax or an
elementwise σ with ``1/n``: ``F_rows = s(A) @ x``. The coefficients ``c_p`` of the paper are
absorbed into the ``B``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from harness.models.common import Sigma, mix_weights, normal, rotate_out_, require_positive

__all__ = ["ALPHA_TERMS", "HigherOrder", "HigherOrderConfig"]

ALPHA_TERMS = ("gram", "identity")


@dataclass
class HigherOrderConfig:
    """Options of :class:`HigherOrder` (registry name ``higher_order``)."""

    name: str = "higher_order"
    order: int = 2  # P: terms T_1 .. T_P (degree 2, 4, .., 2P in Y)
    k: int = 8  # knowledge size, Z: (d, k)
    sigma: Sigma = Sigma.softmax
    length_norm: bool = True  # elementwise σ only: divide by n
    inner_norm: bool = True  # divide each inner YYᵀ by n (O(1) entries for every n)
    alpha: bool = False  # add a learned α XᵀX (tests "XᵀX is uninformative", claim C11)
    alpha_term: str = "gram"  # what α multiplies: gram (XᵀX) | identity (I, the C11 control arm)
    scale: bool = True  # divide scores by sqrt(k)


class HigherOrder(nn.Module):
    """M8: ``(B, n, d) → (B, n, d)``, ``F = X s(Σ_p T_p [+ α XᵀX])ᵀ`` (paper.md §7, §11.1).

    Parameters: ``Z: (d, k)``; ``B[p-1]: (p, k, k)`` for ``p = 1..order``; optional scalar
    ``alpha``. Output in span(X).

    Args:
        cfg: options.
        d: embedding dimension.
        generator: the initialisation stream.

    Raises:
        ValueError: for a non-positive ``order``, ``k`` or ``d``, or an ``alpha_term`` not in
            ``ALPHA_TERMS``.
    """

    symmetries = frozenset({"orthogonal_knowledge", "permutation"})

    def __init__(self, cfg: HigherOrderConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("higher_order", d=d, order=cfg.order, k=cfg.k)
        if cfg.alpha_term not in ALPHA_TERMS:
            raise ValueError(f"higher_order: alpha_term={cfg.alpha_term!r}; allowed: {', '.join(ALPHA_TERMS)}")
        self.cfg, self.d = cfg, d
        self.Z = normal(generator, d, cfg.k, std=1 / math.sqrt(d))
        self.B = nn.ParameterList(normal(generator, p, cfg.k, cfg.k, std=1 / math.sqrt(cfg.k))
                                  for p in range(1, cfg.order + 1))
        self.alpha = nn.Parameter(torch.zeros(())) if cfg.alpha else None

    def terms(self, x: Tensor) -> list[Tensor]:
        """``[T_1, .., T_order]``, each ``(B, n, n)`` with ``T_ij = y_iᵀ M_p y_j`` (query first)."""
        n = x.shape[-2]
        yt = x @ self.Z  # (B, n, k): the paper's Yᵀ
        c = yt.transpose(-1, -2) @ yt  # (B, k, k): YYᵀ
        c = c / n if self.cfg.inner_norm else c
        out = []
        for bs in self.B:  # bs: (p, k, k)
            m = bs[0].expand_as(c)  # (B, k, k)
            for b in bs[1:]:
                m = m @ c @ b  # B_1 C B_2 ··· C B_p
            out.append(yt @ m @ yt.transpose(-1, -2))  # (B, n, n)
        return out

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        a = torch.stack(self.terms(x)).sum(dim=0)  # (B, n, n)
        if self.alpha is not None and self.cfg.alpha_term == "identity":
            a = a + self.alpha * torch.eye(x.shape[-2], dtype=x.dtype, device=x.device)  # α I
        elif self.alpha is not None:
            a = a + self.alpha * (x @ x.transpose(-1, -2))  # α XᵀX
        a = a / math.sqrt(self.cfg.k) if self.cfg.scale else a
        return mix_weights(a, self.cfg.sigma, self.cfg.length_norm) @ x

    def span_knowledge(self) -> Tensor:
        """Empty ``(d, 0)``: the output lies in the span of the input tokens."""
        return self.Z.detach()[:, :0]

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: ``Z ↦ QZ`` (the ``B``'s and α act on invariants)."""
        rotate_out_(self.Z, q)
