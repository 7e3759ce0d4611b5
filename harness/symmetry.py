"""Equivariance measurements that work for any model, registered or external (paper.md §4, §6, §8, §13
claims C1, C3, C4, C7).

Rows are tokens: ``x: (B, n, d)`` is the paper's ``Xᵀ``, so the paper's ``QX`` is ``x @ Qᵀ`` and
``XP`` (a permutation of tokens) is ``x[:, perm]``. All errors are relative:
``‖a − b‖ / ‖f(X)‖`` with Frobenius norms over the whole batch.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

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


def _rel_each(a: Tensor, b: Tensor, ref: Tensor) -> Tensor:
    """:func:`_rel` of each trial of stacked ``(P, …)`` tensors, as a ``(P,)`` tensor (not read)."""
    dims = tuple(range(1, a.dim()))
    return torch.linalg.vector_norm(a - b, dim=dims) / torch.linalg.vector_norm(ref, dim=dims).clamp_min(1e-300)


CAUSAL_KEY = "causality/leak_err"


@torch.no_grad()
def causality_leak(model: nn.Module, x: Tensor, generator: torch.Generator) -> float:
    """How far a change at position ``t`` moves the outputs before ``t``: for every ``t`` in
    ``1 … n−1``, the tokens ``t … n−1`` of ``x`` re-drawn (``generator``), the relative error
    ``‖f(X')[:, :t] − f(X)[:, :t]‖ / ‖f(X)[:, :t]‖``; the largest over ``t``. 0 (to round-off)
    for a causal mixer, O(1) for one whose outputs see later tokens.

    Args:
        model: any ``(B, n, d) → (B, n, d)`` module, any float dtype.
        x: one batch ``(B, n, d)``, ``n ≥ 2``, of the model's dtype and device.
        generator: a CPU generator for the re-drawn tokens.

    Returns:
        The largest relative error (a float ≥ 0); the model is left unchanged.

    Raises:
        ValueError: ``n < 2`` (no position has one before it).
    """
    n = x.shape[1]
    if n < 2:
        raise ValueError(f"causality needs n >= 2 tokens to change one after another, got n={n}")
    out = model(x)  # (B, n, d)
    worst = 0.0
    for t in range(1, n):
        changed = x.clone()
        fresh = torch.randn(x.shape[0], n - t, x.shape[2], generator=generator, dtype=torch.float64)
        changed[:, t:] = fresh.to(dtype=x.dtype, device=x.device)
        worst = max(worst, _rel(model(changed)[:, :t], out[:, :t], out[:, :t]))
    return worst


def span_residual(x: Tensor, out: Tensor, knowledge: Tensor) -> float:
    """``‖(I − P) f(X)‖ / ‖f(X)‖`` with ``P`` the projector onto span of the input tokens and
    the knowledge columns, per sequence (paper.md C1, C3).

    Args:
        x: inputs ``(B, n, d)``; out: outputs ``(B, n, d)``; knowledge: ``(d, k)``.

    Raises:
        ValueError: unless ``n + k < d`` (otherwise the span is generically everything).
    """
    return span_residuals([(x, out, knowledge)])[0]


def span_residuals(items: Sequence[tuple[Tensor, Tensor, Tensor]]) -> list[float]:
    """:func:`span_residual` of each ``(x, out, knowledge)`` of ``items`` (a pack's trials), with
    one batched QR per shape on the CPU instead of one per trial: the items' sequences are
    stacked ``(ΣB, d, n+k)``, each item's residual is then its own block's.

    Raises:
        ValueError: for an item without ``n + k < d``.
    """
    out_values: list[float] = [0.0] * len(items)
    groups: dict[tuple, list[int]] = {}
    for i, (x, out, knowledge) in enumerate(items):
        b, n, d = x.shape
        if n + knowledge.shape[1] >= d:
            raise ValueError(f"span residual needs n + k < d, got n={n}, k={knowledge.shape[1]}, d={d}")
        groups.setdefault((n, d, knowledge.shape[1], x.dtype), []).append(i)
    for (n, d, k, _), members in groups.items():
        # on the CPU: a batched QR of a probe's small matrices took ~4 ms on an H200 (cuSOLVER, a
        # synchronisation each), a third of a packed 20-step trial there (benchmarks/RESULTS.md)
        xs = [items[i][0].cpu() for i in members]
        basis = torch.cat([torch.cat([x.transpose(1, 2), items[i][2].cpu().to(x).expand(len(x), d, k)], dim=2)
                           for i, x in zip(members, xs)])  # (ΣB, d, n+k)
        q, _ = torch.linalg.qr(basis)  # (ΣB, d, n+k): orthonormal columns spanning [X, Z] per sequence
        ft = torch.cat([items[i][1].cpu().transpose(1, 2) for i in members])  # (ΣB, d, n): the paper's F
        resid = ft - q @ (q.transpose(1, 2) @ ft)  # (ΣB, d, n)
        for i, r, f in zip(members, resid.split([len(x) for x in xs]), ft.split([len(x) for x in xs])):
            out_values[i] = float(torch.linalg.vector_norm(r) / torch.linalg.vector_norm(f).clamp_min(1e-300))
    return out_values


@torch.no_grad()
def measure(model: nn.Module, x: Tensor, generator: torch.Generator,
            span_later: list | None = None) -> dict[str, float]:
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
        span_later: if given, the span residual is not computed here: ``(x, out, knowledge)``
            is appended to it (for :func:`span_residuals` over a pack's trials at once) and
            its key left out of the answer.

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
        if span_later is not None:
            span_later.append((x, out, knowledge))
        else:
            result[KEYS[3]] = span_residual(x, out, knowledge)
    return result


def draws(d: int, n: int, generators: Sequence[torch.Generator]) -> tuple[Tensor, Tensor]:
    """Each trial's ``Q`` and permutation as :func:`measure` draws them from its generator (the
    same numbers: a ``(d, d)`` Gaussian, then a permutation of ``n``), the QRs in one batched
    call: ``Q: (P, d, d)`` float64 (:func:`haar_orthogonal`'s, column signs fixed) and the
    permutations ``(P, n)``, on the CPU."""
    gaussians, perms = [], []
    for g in generators:
        gaussians.append(torch.randn(d, d, generator=g, dtype=torch.float64))
        perms.append(torch.randperm(n, generator=g))
    q, r = torch.linalg.qr(torch.stack(gaussians))
    return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2), torch.stack(perms)


def _fill_spans(results: list[dict[str, float]], items: list[tuple], owners: list[int]) -> None:
    """``symmetry/span_residual`` of ``results[owners[j]]`` from ``items[j]``, one batched QR."""
    for i, value in zip(owners, span_residuals(items)):
        results[i][KEYS[3]] = value


def measure_each(models: Sequence[nn.Module], xs: Sequence[Tensor],
                 generators: Sequence[torch.Generator]) -> list[dict[str, float]]:
    """:func:`measure` of each trial (``models[i]`` on ``xs[i]`` with ``generators[i]``), the
    span residuals in one batched QR (:func:`span_residuals`): the per-trial form of a pack's
    wrap-up, and the reference that :func:`measure_stacked` is tested against."""
    results, items, owners = [], [], []
    for i, (model, x, g) in enumerate(zip(models, xs, generators)):
        before = len(items)
        results.append(measure(model, x, g, items))
        owners += [i] * (len(items) - before)
    _fill_spans(results, items, owners)
    return results


@torch.no_grad()
def measure_stacked(f: Callable[[Tensor], Tensor], x: Tensor, generators: Sequence[torch.Generator],
                    rotated: Callable[[Tensor], Callable[[Tensor], Tensor]] | None = None,
                    knowledge: Sequence[Tensor | None] | None = None) -> list[dict[str, float]]:
    """:func:`measure_each` of ``P`` trials in batched passes: each model evaluated once per
    transformation for the whole pack, on the pack's device, with each trial's own ``Q`` and
    permutation (:func:`draws`), every value read from the device at once.

    Args:
        f: ``(P, B, n, d) → (P, B, n, d)``: trial ``i``'s model on ``x[i]`` (e.g. ``vmap``
            over the pack's stacked parameters).
        x: the trials' batches stacked ``(P, B, n, d)``.
        generators: one CPU generator per trial (``measure``'s).
        rotated: ``qs (P, d, d) → f_rot``, ``f_rot(x)[i]`` = ``rotate(model_i, qs[i])(x[i])``;
            ``None`` when the models have no ``rotate_`` (no ``rotation_knowledge_err``).
        knowledge: each trial's ``span_knowledge()`` or ``None`` (no span residual).

    Returns:
        One ``{key: value}`` per trial, the keys and order of :func:`measure`'s.
    """
    P, _, n, d = x.shape
    qs, perms = draws(d, n, generators)
    qs, perms = qs.to(dtype=x.dtype, device=x.device), perms.to(x.device)
    out = f(x)  # (P, B, n, d)
    qt = qs.transpose(1, 2).unsqueeze(1)  # (P, 1, d, d): each trial's Qᵀ
    qx, q_out = x @ qt, out @ qt  # the paper's QX and Q f(X), per trial
    index = perms[:, None, :, None].expand_as(x)  # XP: trial i's tokens in its order perms[i]
    errs = {KEYS[0]: _rel_each(rotated(qs)(qx), q_out, out)} if rotated is not None else {}
    errs[KEYS[1]] = _rel_each(f(qx), q_out, out)
    errs[KEYS[2]] = _rel_each(f(x.gather(2, index)), out.gather(2, index), out)
    values = torch.stack(list(errs.values())).tolist()  # (keys, P): one read of the device
    results = [dict(zip(errs, column)) for column in zip(*values)]
    items, owners = [], []
    for i, z in enumerate(knowledge or []):
        if z is not None and n + z.shape[1] < d:
            items.append((x[i], out[i], z))
            owners.append(i)
    _fill_spans(results, items, owners)
    return results


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
