"""Equivariance measurements that work for any model, registered or external (paper.md §4, §6, §8, §13
claims C1, C3, C4, C7).

Rows are tokens: ``x: (B, n, d)`` is the paper's ``Xᵀ``, so the paper's ``QX`` is ``x @ Qᵀ`` and
``XP`` (a permutation of tokens) is ``x[:, perm]``. All errors are relative:
``‖a − b‖ / ‖f(X)‖`` with Frobenius norms over the whole batch.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from harness.models import rotate

KEYS = ("symmetry/rotation_knowledge_err", "symmetry/rotation_err", "symmetry/permutation_err",
        "symmetry/span_residual")


def haar_orthogonal(d: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> Tensor:
    """A Haar-random ``Q ∈ O(d)``, ``(d, d)``: QR of a Gaussian with the signs of ``diag(R)``
    fixed, so reflections (``det Q = −1``) occur half the time. Drawn on the CPU from ``generator``."""
    g = torch.randn(d, d, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(g)
    return (q * torch.sign(torch.diagonal(r))).to(dtype)  # scale column j by sign(R_jj)


def _rel(a: Tensor, b: Tensor, ref: Tensor) -> float:
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(ref).clamp_min(1e-300))


def span_residual(x: Tensor, out: Tensor, knowledge: Tensor) -> float:
    """``‖(I − P) f(X)‖ / ‖f(X)‖`` with ``P`` the projector onto span of the input tokens and
    the knowledge columns, per sequence (paper.md C1, C3).

    Args:
        x: inputs ``(B, n, d)``; out: outputs ``(B, n, d)``; knowledge: ``(d, k)``.

    Raises:
        ValueError: unless ``n + k < d`` (otherwise the span is generically everything).
    """
    b, n, d = x.shape
    k = knowledge.shape[1]
    if n + k >= d:
        raise ValueError(f"span residual needs n + k < d, got n={n}, k={k}, d={d}")
    # on the CPU: a batched QR of a probe's small matrices took ~4 ms on an H200 (cuSOLVER, a
    # synchronisation each), a third of a packed 20-step trial there (benchmarks/RESULTS.md)
    x, out, knowledge = x.cpu(), out.cpu(), knowledge.cpu()
    basis = torch.cat([x.transpose(1, 2), knowledge.to(x).expand(b, d, k)], dim=2)  # (B, d, n+k)
    q, _ = torch.linalg.qr(basis)  # (B, d, n+k): orthonormal columns spanning [X, Z]
    ft = out.transpose(1, 2)  # (B, d, n): the paper's F
    resid = ft - q @ (q.transpose(1, 2) @ ft)  # (B, d, n)
    return float(torch.linalg.vector_norm(resid) / torch.linalg.vector_norm(ft).clamp_min(1e-300))


@torch.no_grad()
def measure(model: nn.Module, x: Tensor, generator: torch.Generator) -> dict[str, float]:
    """Cheap symmetry measurements of a (trained) model on one batch.

    With one Haar-random ``Q`` (reflections included) and one random permutation ``P`` from
    ``generator``:

    * ``symmetry/rotation_knowledge_err``: ``‖f_{rotate(θ,Q)}(QX) − Q f_θ(X)‖ / ‖f_θ(X)‖`` (C3/C4),
      only for a model with ``rotate_`` (every registered one; an external one may lack it);
    * ``symmetry/rotation_err``: ``‖f_θ(QX) − Q f_θ(X)‖ / ‖f_θ(X)‖``, parameters not rotated (C1);
    * ``symmetry/permutation_err``: ``‖f(XP) − f(X)P‖ / ‖f(X)‖`` (C7);
    * ``symmetry/span_residual``: the part of ``f(X)`` outside span(tokens, knowledge), only when
      the model reports knowledge (``model.span_knowledge()`` exists and is not ``None``) and
      ``n + k < d``.

    Args:
        model: any ``(B, n, d) → (B, n, d)`` module (a registered one has ``rotate_`` and
            ``span_knowledge``; an external one may have neither), any float dtype.
        x: one batch ``(B, n, d)`` of the model's dtype and device.
        generator: a CPU generator for ``Q`` and ``P``.

    Returns:
        ``{key: value}`` with the keys above (``KEYS``, those that apply); the model is left
        unchanged.
    """
    q = haar_orthogonal(x.shape[-1], generator).to(dtype=x.dtype, device=x.device)
    perm = torch.randperm(x.shape[1], generator=generator).to(x.device)
    out = model(x)  # (B, n, d)
    qx, q_out = x @ q.T, out @ q.T  # the paper's QX and Q f(X)
    result = {KEYS[0]: _rel(rotate(model, q)(qx), q_out, out)} if hasattr(model, "rotate_") else {}
    result[KEYS[1]] = _rel(model(qx), q_out, out)
    result[KEYS[2]] = _rel(model(x[:, perm]), out[:, perm], out)
    knowledge = model.span_knowledge() if hasattr(model, "span_knowledge") else None
    if knowledge is not None and x.shape[1] + knowledge.shape[1] < x.shape[2]:
        result[KEYS[3]] = span_residual(x, out, knowledge)
    return result


@torch.no_grad()
def redraw_(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Re-draw every parameter at O(1) scale, in place, for the exact tests: a matrix or stack
    of matrices gets ``N(0, 1/m)`` entries (``m`` = its last axis, so each map has unit gain on
    average), a vector or scalar (biases, gains, α) ``N(0, 1)``. A small initialisation or a
    residual connection can then not hide a broken symmetry. Returns ``model``."""
    for p in model.parameters():
        std = 1 / math.sqrt(p.shape[-1]) if p.dim() >= 2 else 1.0
        p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64).to(p) * std)
    return model
