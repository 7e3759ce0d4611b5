"""Stacked transformer blocks: multihead attention + token-wise FFN + norm + positional encoding
(paper.md §9 table, §11.1 M10).

Pre-norm blocks, rows are tokens ``x: (B, n, d)``::

    x = x + P[:n]                        (pos_encoding; P rows are embedding vectors)
    for each of n_layers blocks:
        x = x + MHA(norm(x))             (heads as in M7, no residual inside)
        x = x + W2 φ(W1 norm(x) + b1) + b2

``norm``: ``none``; ``layernorm`` (gain γ and bias β, breaks orthogonal equivariance even with
knowledge, paper.md §9); gain-free ``rmsnorm`` ``x / rms(x)`` (keeps it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor, nn

from harness.models.common import MLP, Sigma, normal, rotate_in_, rotate_out_, require_positive
from harness.models.multihead import MultiheadAttention, MultiheadConfig

__all__ = ["Norm", "PosEncoding", "Transformer", "TransformerConfig"]


class Norm(Enum):
    """Normalisation before each sublayer."""

    none = "none"
    layernorm = "layernorm"
    rmsnorm = "rmsnorm"


class PosEncoding(Enum):
    """Absolute positional encoding added to the input: ``learned`` has a maximum length."""

    none = "none"
    sinusoidal = "sinusoidal"
    learned = "learned"


@dataclass
class TransformerConfig:
    """Options of :class:`Transformer` (registry name ``transformer``)."""

    name: str = "transformer"
    n_layers: int = 2
    n_heads: int = 2
    d1: int = 8  # query/key dimension per head
    d2: int = 8  # value dimension per head
    d_ff: int = 64  # FFN hidden width
    sigma: Sigma = Sigma.softmax
    norm: Norm = Norm.rmsnorm
    pos_encoding: PosEncoding = PosEncoding.none
    causal: bool = False


def sinusoid(n: int, d: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """The standard sinusoidal table ``(n, d)``: row t = [sin(t ω_i), cos(t ω_i), ...]."""
    half = (d + 1) // 2
    freq = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=dtype, device=device) / half)
    ang = torch.arange(n, dtype=dtype, device=device)[:, None] * freq  # (n, half)
    return torch.stack([ang.sin(), ang.cos()], dim=-1).reshape(n, 2 * half)[:, :d]  # (n, d)


class Block(nn.Module):
    """One pre-norm block ``(B, n, d) → (B, n, d)``: attention then FFN, each with a residual."""

    def __init__(self, cfg: TransformerConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        self.cfg = cfg
        mha = MultiheadConfig(n_heads=cfg.n_heads, d1=cfg.d1, d2=cfg.d2, sigma=cfg.sigma,
                              residual=False, causal=cfg.causal)
        self.attn = MultiheadAttention(mha, d, generator)
        self.ffn = MLP([d, cfg.d_ff, d], generator)  # W1: (d_ff, d), W2: (d, d_ff), b2: (d,)
        if cfg.norm is Norm.layernorm:
            self.gains = nn.Parameter(torch.ones(2, d))  # γ of the two norms
            self.shifts = nn.Parameter(torch.zeros(2, d))  # β (embedding-space biases)

    def _norm(self, x: Tensor, i: int) -> Tensor:
        if self.cfg.norm is Norm.none:
            return x
        if self.cfg.norm is Norm.rmsnorm:
            return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
        xc = x - x.mean(dim=-1, keepdim=True)  # centring along the fixed vector 1_d
        xn = xc * torch.rsqrt(xc.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
        return self.gains[i] * xn + self.shifts[i]

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self._norm(x, 0))
        return x + self.ffn(self._norm(x, 1))

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        self.attn.rotate_(q)
        self.ffn.rotate_(q)
        if self.cfg.norm is Norm.layernorm:
            rotate_in_(self.shifts, q)  # each row β ↦ Qβ; the gains γ have no rule


class Transformer(nn.Module):
    """``n_layers`` blocks of M7 + FFN + norm, optional PE and causal mask (paper.md §11.1 M10).

    Claims ``orthogonal_knowledge`` unless ``norm=layernorm`` and ``permutation`` unless a
    positional encoding or the causal mask is used. The sinusoidal table is fixed but still
    embedding-space knowledge: it is stored as ``sinusoid(n) @ pe_basisᵀ`` with a buffer
    ``pe_basis: (d, d)`` (identity at build) that ``rotate_`` maps to ``Q pe_basis``.

    Args:
        cfg: options.
        d: embedding dimension.
        n_max: maximum length of the ``learned`` positional table ``P: (n_max, d)``.
        generator: the initialisation stream.

    Raises:
        ValueError: for a non-positive size; in ``forward``, for ``n > n_max`` with learned PE.
    """

    def __init__(self, cfg: TransformerConfig, d: int, n_max: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("transformer", d=d, n_max=n_max, n_layers=cfg.n_layers, d_ff=cfg.d_ff)
        self.cfg, self.d, self.n_max = cfg, d, n_max
        self.blocks = nn.ModuleList(Block(cfg, d, generator) for _ in range(cfg.n_layers))
        if cfg.pos_encoding is PosEncoding.learned:
            self.P = normal(generator, n_max, d, std=0.1 / math.sqrt(d))  # rows: embedding vectors
        if cfg.pos_encoding is PosEncoding.sinusoidal:
            self.register_buffer("pe_basis", torch.eye(d))
        sym = set() if cfg.norm is Norm.layernorm else {"orthogonal_knowledge"}
        if cfg.pos_encoding is PosEncoding.none and not cfg.causal:
            sym.add("permutation")
        self.symmetries = frozenset(sym)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        n = x.shape[-2]
        if self.cfg.pos_encoding is PosEncoding.learned:
            if n > self.n_max:
                raise ValueError(f"transformer with learned pos_encoding supports n <= n_max="
                                 f"{self.n_max}, got n={n}")
            x = x + self.P[:n]  # (B, n, d)
        elif self.cfg.pos_encoding is PosEncoding.sinusoidal:
            x = x + sinusoid(n, self.d, x.dtype, x.device) @ self.pe_basis.T  # (B, n, d)
        for block in self.blocks:
            x = block(x)
        return x

    def span_knowledge(self) -> Tensor:
        """Every embedding vector the output can contain besides the input tokens: the columns
        of each ``W_out`` and ``W2``, each ``b2``, and the positional vectors."""
        cols = []
        for b in self.blocks:
            cols += [b.attn.span_knowledge(), b.ffn.weights[-1].detach(), b.ffn.biases[-1].detach()[:, None]]
        if self.cfg.pos_encoding is PosEncoding.learned:
            cols.append(self.P.detach().T)
        if self.cfg.pos_encoding is PosEncoding.sinusoidal:
            cols.append(self.pe_basis)
        return torch.cat(cols, dim=1)  # (d, k)

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: every block (C4 rules), ``P ↦ P Qᵀ`` (rows), ``pe_basis ↦ Q pe_basis``."""
        for block in self.blocks:
            block.rotate_(q)
        if self.cfg.pos_encoding is PosEncoding.learned:
            rotate_in_(self.P, q)
        if self.cfg.pos_encoding is PosEncoding.sinusoidal:
            self.pe_basis.copy_(q @ self.pe_basis)
