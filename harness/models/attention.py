"""Single attention layer in embedding space (paper.md §3, §6, §7, §11.1 M3-M6).

Rows are tokens: ``x`` has shape ``(B, n, d)`` and is the paper's ``Xᵀ``. Scores are the
quadratic form ``A = Yᵀ W Y`` with ``Yt = x @ Z: (B, n, k)`` (the paper's ``Yᵀ``), query index
first (paper.md §11.1). Two knowledge forms:

* ``qk`` (M4a): ``Z = [W_Qᵀ, W_Kᵀ]`` and ``W`` the fixed block matrix ``[[0, I], [0, 0]]``, so
  ``A = X_rows W_Qᵀ W_K X_rowsᵀ`` (paper.md §6); scale ``1/sqrt(d1)``;
* ``free`` (M3, M4b): ``Z: (d, k)`` and a full ``W: (k, k)`` are learned; scale ``1/sqrt(k)``.

The output is ``F_rows = x·[residual] + s(A) @ V_rows`` (the paper's ``F = X + W_V X s(A)ᵀ``),
``s`` = row softmax or an elementwise σ divided by n, ``V_rows = x W_Vᵀ`` with ``W_V`` absent,
square ``(d, d)``, or rank r (``W_V = Z_v Z_uᵀ``, paper.md §9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor, nn

from harness.models.common import Sigma, mix_weights, normal, rotate_in_, rotate_out_

__all__ = ["Attention", "AttentionConfig", "Knowledge", "Sigma"]


class Knowledge(Enum):
    """Where the scores' knowledge comes from: ``qk`` (W_Q, W_K, fixed block W) or ``free``
    (learned Z and W)."""

    qk = "qk"
    free = "free"


@dataclass
class AttentionConfig:
    """Options of :class:`Attention` (registry name ``attention``)."""

    name: str = "attention"
    sigma: Sigma = Sigma.softmax  # score map; elementwise ones are divided by n (length_norm)
    knowledge: Knowledge = Knowledge.qk  # qk: Z = [W_Qᵀ, W_Kᵀ], fixed block W; free: Z, W learned
    d1: int = 8  # qk only: query/key dimension, W_Q, W_K: (d1, d)
    k: int = 8  # free only: knowledge size, Z: (d, k), W: (k, k)
    scale: bool = True  # divide scores by sqrt(d1) (qk) or sqrt(k) (free)
    length_norm: bool = True  # elementwise σ only: multiply σ(A) by 1/n (paper.md M3)
    value: bool = False  # learn W_V; off means V = X
    value_rank: int = 0  # 0: square W_V (d, d); r > 0: W_V = Z_v Z_uᵀ with Z_v, Z_u: (d, r)
    residual: bool = False  # F = X + attention(X)
    # The zoo's fair references (issue 63); both default off and are left out of the trial id
    # there (harness.records.NEUTRAL_DEFAULTS), so every attention trial keeps its id.
    causal_mask: bool = False  # query i sees keys j ≤ i only: M4a against causal mixers
    learned_positions: bool = False  # X + P[:n], P: (n_max, d) learned: M4a off its permutation symmetry
    blocks: int = 0  # 0: this layer alone; L ≥ 1: L pre-norm residual blocks of it (harness/models/stack.py)


class Attention(nn.Module):
    """One attention layer ``(B, n, d) → (B, n, d)``, no biases (paper.md §3 eq. 1, §11.1 M3-M6).

    Parameters: ``qk``: ``W_Q, W_K: (d1, d)``; ``free``: ``Z: (d, k)``, ``W: (k, k)``; optional
    ``W_V: (d, d)`` or ``Z_v, Z_u: (d, r)``. Every symmetry it claims holds for any weights:
    ``symmetries = {orthogonal_knowledge, permutation}``.

    Args:
        cfg: the layer's options.
        d: embedding dimension.
        generator: the initialisation stream; matrices reading the embedding are N(0, 1/d).

    Raises:
        ValueError: if ``d``, ``d1``, ``k`` is not positive or ``value_rank`` is negative.
    """

    symmetries = frozenset({"orthogonal_knowledge", "permutation"})

    def __init__(self, cfg: AttentionConfig, d: int, generator: torch.Generator, n_max: int = 0) -> None:
        super().__init__()
        if min(d, cfg.d1, cfg.k) <= 0 or cfg.value_rank < 0:
            raise ValueError(f"attention needs d, d1, k > 0 and value_rank >= 0, got d={d}, "
                             f"d1={cfg.d1}, k={cfg.k}, value_rank={cfg.value_rank}")
        if cfg.learned_positions and n_max <= 0:
            raise ValueError(f"attention with learned_positions needs n_max > 0, got n_max={n_max}")
        self.cfg, self.d, self.n_max = cfg, d, n_max
        # a causal mask or positions tie the output to the tokens' order (theory.md, C7)
        self.symmetries = frozenset({"orthogonal_knowledge"}) if cfg.causal_mask or cfg.learned_positions \
            else type(self).symmetries
        self.causal = cfg.causal_mask  # declared, and measured (harness.external_check.causality_refusal)
        std = 1.0 / math.sqrt(d)
        if cfg.knowledge is Knowledge.qk:
            self.W_Q = normal(generator, cfg.d1, d, std=std)
            self.W_K = normal(generator, cfg.d1, d, std=std)
        else:
            self.Z = normal(generator, d, cfg.k, std=std)
            self.W = normal(generator, cfg.k, cfg.k, std=1.0)
        self.W_V = self.Z_v = self.Z_u = None
        if cfg.value and cfg.value_rank == 0:
            self.W_V = normal(generator, d, d, std=std)
        elif cfg.value:
            self.Z_v = normal(generator, d, cfg.value_rank, std=1 / math.sqrt(cfg.value_rank))
            self.Z_u = normal(generator, d, cfg.value_rank, std=std)
        # drawn last: without positions every other parameter is drawn as before
        self.P = normal(generator, n_max, d, std=0.1 / math.sqrt(d)) if cfg.learned_positions else None  # rows: embedding vectors

    def quadratic_form(self) -> tuple[Tensor, Tensor, float]:
        """``(Z, W, c)`` with scores ``A = c · Yt W Ytᵀ``, ``Yt = x @ Z`` (paper.md §6, C4).

        For ``qk``: ``Z = [W_Qᵀ, W_Kᵀ]: (d, 2 d1)`` and ``W = [[0, I], [0, 0]]`` (fixed).
        """
        if self.cfg.knowledge is Knowledge.free:
            return self.Z, self.W, (1 / math.sqrt(self.cfg.k) if self.cfg.scale else 1.0)
        d1 = self.cfg.d1
        block = torch.zeros(2 * d1, 2 * d1, dtype=self.W_Q.dtype, device=self.W_Q.device)
        block[:d1, d1:] = torch.eye(d1, dtype=self.W_Q.dtype, device=self.W_Q.device)
        z = torch.cat([self.W_Q.T, self.W_K.T], dim=1)  # (d, 2 d1)
        return z, block, (1 / math.sqrt(d1) if self.cfg.scale else 1.0)

    def scores(self, x: Tensor) -> Tensor:
        """Mixing weights ``s(A)`` of shape ``(B, n, n)``, row i = query i, column j = key j."""
        if self.cfg.knowledge is Knowledge.qk:
            q = x @ self.W_Q.T  # (B, n, d1)
            k = x @ self.W_K.T  # (B, n, d1)
            a = q @ k.transpose(-1, -2)  # (B, n, n): A_ij = q_i · k_j
            a = a / math.sqrt(self.cfg.d1) if self.cfg.scale else a
        else:
            yt = x @ self.Z  # (B, n, k): the paper's Yᵀ
            a = yt @ self.W @ yt.transpose(-1, -2)  # (B, n, n): A_ij = y_iᵀ W y_j
            a = a / math.sqrt(self.cfg.k) if self.cfg.scale else a
        return mix_weights(a, self.cfg.sigma, self.cfg.length_norm, self.cfg.causal_mask)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``.

        Raises:
            ValueError: with ``learned_positions``, ``n > n_max`` (no position row for it).
        """
        if self.P is not None:
            n = x.shape[1]
            if n > self.n_max:
                raise ValueError(f"attention with learned_positions supports n <= n_max={self.n_max}, got n={n}")
            x = x + self.P[:n]  # (B, n, d): every use of the tokens sees their positions
        if self.W_V is not None:
            v = x @ self.W_V.T  # (B, n, d)
        elif self.Z_v is not None:
            v = (x @ self.Z_u) @ self.Z_v.T  # (B, n, r) → (B, n, d)
        else:
            v = x
        out = self.scores(x) @ v  # (B, n, d): out_i = Σ_j s_ij v_j
        return x + out if self.cfg.residual else out

    def span_knowledge(self) -> Tensor:
        """Embedding vectors ``(d, k_out)`` whose span with the input tokens holds the output:
        none (``k_out = 0``) without W_V, ``Z_v`` for low rank, the columns of ``W_V`` if square."""
        if self.W_V is not None:
            return self.W_V.detach()
        if self.Z_v is not None:
            return self.Z_v.detach()
        if self.P is not None:  # V = X + P: the position rows join the tokens' span
            return self.P.detach().T  # (d, n_max)
        ref = self.W_Q if self.cfg.knowledge is Knowledge.qk else self.Z
        return ref.new_zeros(self.d, 0)

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: ``W_Q, W_K ↦ ·Qᵀ``, ``Z ↦ QZ``, ``W_V ↦ Q W_V Qᵀ``, ``Z_v, Z_u ↦ Q·``."""
        if self.cfg.knowledge is Knowledge.qk:
            rotate_in_(self.W_Q, q)
            rotate_in_(self.W_K, q)
        else:
            rotate_out_(self.Z, q)
        if self.W_V is not None:
            self.W_V.copy_(q @ self.W_V @ q.T)
        if self.Z_v is not None:
            rotate_out_(self.Z_v, q)
            rotate_out_(self.Z_u, q)
        if self.P is not None:
            rotate_in_(self.P, q)  # rows are embedding vectors: p ↦ Q p
