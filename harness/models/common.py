"""Pieces shared by the model families: score maps, generator-initialised layers, and the
rotation rules of paper.md §9 / C4.

Conventions (paper.md §11.1): rows are tokens, ``x: (B, n, d)`` is the paper's ``Xᵀ``. A score
matrix ``A: (B, n, n)`` has the query index first, so row ``i`` holds the weights of output ``i``
over keys ``j`` and the mixed output is ``mix(A) @ x`` (the paper's ``X mix(A)ᵀ``).

Rotation rules, for an orthogonal ``Q: (d, d)`` acting on the embedding as ``X ↦ QX`` (rows:
``x ↦ x Qᵀ``): an input weight ``W: (·, d)`` becomes ``W Qᵀ``; an output weight ``W: (d, ·)``
becomes ``Q W``; knowledge ``Z: (d, k)`` becomes ``Q Z``; an embedding-space bias ``b: (d,)``
becomes ``Q b``; a square embedding-to-embedding map becomes ``Q W Qᵀ``; a table of embedding
vectors stored as rows ``P: (m, d)`` becomes ``P Qᵀ``.
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

SYMMETRIES = frozenset({"orthogonal_knowledge", "orthogonal", "permutation"})


class Sigma(Enum):
    """Score map σ: ``softmax`` over keys, or an elementwise nonlinearity (paper.md §7, M3/M4)."""

    softmax = "softmax"
    relu = "relu"
    gelu = "gelu"
    tanh = "tanh"
    sigmoid = "sigmoid"
    exp = "exp"
    softplus = "softplus"
    identity = "identity"


ELEMENTWISE = {
    Sigma.relu: torch.relu,
    Sigma.gelu: F.gelu,
    Sigma.tanh: torch.tanh,
    Sigma.sigmoid: torch.sigmoid,
    Sigma.exp: torch.exp,
    Sigma.softplus: F.softplus,
    Sigma.identity: lambda a: a,
}


SOFTMAX_MIN_ROW = 16  # CPU rows shorter than this are padded (see row_softmax)


def row_softmax(a: Tensor) -> Tensor:
    """``torch.softmax(a, dim=-1)`` for scores ``a: (..., n, n)`` (any ``(..., m)``), the same
    values up to rounding.

    On a CPU, rows shorter than :data:`SOFTMAX_MIN_ROW` are padded with ``-inf`` to that length
    and the padding is cut off again: PyTorch's CPU softmax (2.13) leaves its vectorised path for
    short rows and is then several times slower per element (``python -m benchmarks``, section
    "Short-row softmax": forward + backward at n = 8, about 3.8× faster padded). Exact zeros are
    added (``exp(-inf) = 0``), so a row's values change only by the reduction's order.
    """
    m = a.shape[-1]
    if a.device.type != "cpu" or m >= SOFTMAX_MIN_ROW:
        return torch.softmax(a, dim=-1)
    return torch.softmax(F.pad(a, (0, SOFTMAX_MIN_ROW - m), value=float("-inf")), dim=-1)[..., :m]


class Mix(Enum):
    """How pairwise scores become mixing weights: row ``softmax`` over keys, or ``mean``
    (divide by n) (paper.md §11 ``norm``)."""

    softmax = "softmax"
    mean = "mean"


def causal_fill(a: Tensor) -> Tensor:
    """Scores ``a: (..., n, n)`` with ``a_ij = -inf`` for keys after the query (``j > i``)."""
    n = a.shape[-1]
    future = torch.ones(n, n, dtype=torch.bool, device=a.device).triu(1)  # (n, n)
    return a.masked_fill(future, float("-inf"))


def mix_weights(a: Tensor, sigma: Sigma, length_norm: bool, causal: bool = False) -> Tensor:
    """Mixing weights ``(B, n, n)`` from scores ``a`` (query first; paper.md §7, §9, M3/M4).

    ``softmax`` normalises each row over keys (the causal mask sets future scores to -inf);
    an elementwise σ is applied entrywise and, if ``length_norm``, divided by the number of keys
    a query sees: n, or with ``causal`` (future entries zeroed) ``i + 1`` for query ``i``, so
    that the first m outputs of a causal model do not depend on what follows them.
    """
    if sigma is Sigma.softmax:
        return row_softmax(causal_fill(a) if causal else a)
    s = ELEMENTWISE[sigma](a)
    n = a.shape[-1]
    if causal:
        s = s.tril()
        if length_norm:  # row i sees keys 0..i
            keys = torch.arange(1, n + 1, dtype=s.dtype, device=s.device).unsqueeze(-1)  # (n, 1)
            return s / keys
    return s / n if length_norm else s


def normal(generator: torch.Generator, *shape: int, std: float) -> nn.Parameter:
    """A parameter with i.i.d. ``N(0, std²)`` entries drawn from ``generator``."""
    return nn.Parameter(torch.randn(*shape, generator=generator) * std)


class MLP(nn.Module):
    """Fully connected network ``(..., widths[0]) → (..., widths[-1])`` with GELU between
    layers and biases. Weights ``N(0, 1/fan_in)``, biases zero, from ``generator``.

    ``weights[0]`` is the input weight and ``weights[-1]``/``biases[-1]`` the output layer, so
    a model whose MLP reads or writes embedding vectors can rotate them (see module docstring).

    Raises:
        ValueError: for fewer than two widths or a non-positive width.
    """

    def __init__(self, widths: Sequence[int], generator: torch.Generator) -> None:
        super().__init__()
        if len(widths) < 2 or min(widths) <= 0:
            raise ValueError(f"an MLP needs at least two positive widths, got {list(widths)}")
        self.weights = nn.ParameterList(
            normal(generator, fan_out, fan_in, std=1 / math.sqrt(fan_in))
            for fan_in, fan_out in zip(widths[:-1], widths[1:])
        )
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(w)) for w in widths[1:])

    def forward(self, h: Tensor) -> Tensor:
        """Apply the layers to the last axis of ``h``."""
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = F.linear(h, w, b)
            if i < last:
                h = F.gelu(h)
        return h

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place, for an MLP that reads and writes embedding vectors (``d → … → d``): the input
        weight ``W₁ ↦ W₁ Qᵀ``, the output weight and bias ``W ↦ Q W``, ``b ↦ Q b``; the hidden
        layers are untouched, so ``f(Qx) = Q f(x)`` after it. ``q``: ``(d, d)`` orthogonal."""
        rotate_in_(self.weights[0], q)
        rotate_out_(self.weights[-1], q)
        rotate_out_(self.biases[-1], q)


@torch.no_grad()
def rotate_in_(w: Tensor, q: Tensor) -> None:
    """``W ↦ W Qᵀ`` for an input weight ``W: (..., d)`` (also a row table ``P ↦ P Qᵀ``)."""
    w.copy_(w @ q.T)


@torch.no_grad()
def rotate_out_(w: Tensor, q: Tensor) -> None:
    """``W ↦ Q W`` for an output weight ``W: (d, ...)`` (also knowledge ``Z`` and a bias ``b``)."""
    w.copy_(torch.tensordot(q, w, dims=([1], [0])))


def require_positive(family: str, **sizes: int) -> None:
    """Raise ``ValueError`` naming ``family`` and every size if any size is not positive."""
    if min(sizes.values()) <= 0:
        shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
        raise ValueError(f"{family} needs positive sizes, got {shown}")
