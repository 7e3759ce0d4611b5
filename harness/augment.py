"""Data augmentation by a task's exact symmetry group (``train.augment``; issue 51's
augmentation control, after EMLP's data-efficiency study, which trains an MLP with augmentation
beside the equivariant models).

The control asks whether an equivariant model's sample efficiency (C9: M1 against the flattened
MLP B1) comes from its structure or would come from data: the MLP is trained on minibatches
transformed, inputs and targets alike, by random elements of the group the task's target map
is exactly symmetric under (:meth:`tasks.base.TaskBase.symmetries`), so it sees the orbit the
equivariant model builds in. Validation and test sets are never transformed.

The draws come from their own stream ``(seed, "augment")`` (:func:`tasks.base.generator`), so an
augmented trial's minibatch order and initialisation equal the unaugmented one's.
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.config import Augment
from tasks.base import Batch, TaskBase, generator

GROUP = {Augment.permutation: "permutation"}  # train.augment → the symmetry the task must declare


def task_label(task_cfg) -> str:
    """The task's registry name with its kind where it has one (``selection (recall)``)."""
    kind = getattr(task_cfg, "kind", None)
    return f"{task_cfg.name} ({getattr(kind, 'value', kind)})" if kind is not None else str(task_cfg.name)


def check(augment: Augment, task: TaskBase, task_name: str) -> None:
    """Refuse an augmentation the task's target map is not exactly symmetric under.

    Raises:
        ValueError: ``train.augment`` names a group ``task`` does not declare, naming the task
            and the values allowed for it.
    """
    if augment is Augment.none or GROUP[augment] in task.symmetries():
        return
    allowed = ["none", *(a.value for a, g in GROUP.items() if g in task.symmetries())]
    raise ValueError(f"train.augment={augment.value}: the targets of task {task_name!r} are not exactly "
                     f"symmetric under it (its declared symmetries: {sorted(task.symmetries()) or 'none'}); "
                     f"allowed for this task: {', '.join(allowed)}")


def permute_positions(batch: Batch, g: torch.Generator) -> Batch:
    """``batch`` with each example's positions permuted by its own uniform random permutation
    (``argsort`` of ``B × n`` uniforms drawn from ``g`` on the CPU): ``x (B, n, d)``, ``y (B, n)``
    or ``(B, n, d)``, ``tokens (B, n)`` and ``mask (B, n)`` alike; the per-example ``groups``
    unchanged.

    Raises:
        ValueError: targets without a position axis (``y`` of shape ``(B,)``): the task reads
            its answer at a fixed position, so permuting would not preserve it.
    """
    if batch.y.dim() < 2:
        raise ValueError(f"permute_positions: targets of shape {tuple(batch.y.shape)} have no position axis")
    B, n = batch.y.shape[:2]
    perm = torch.rand(B, n, generator=g).argsort(-1).to(batch.y.device)  # (B, n): new position → old

    def move(t: Tensor | None) -> Tensor | None:
        if t is None:
            return None
        index = perm.reshape(B, n, *([1] * (t.dim() - 2))).expand_as(t)
        return t.gather(1, index)

    return Batch(move(batch.x), move(batch.y), move(batch.tokens), move(batch.mask), dict(batch.groups))


def transform(augment: Augment, batch: Batch, g: torch.Generator | None) -> Batch:
    """``batch`` under ``train.augment`` (itself for ``none``)."""
    if augment is Augment.none or g is None:
        return batch
    return permute_positions(batch, g)


def stream(augment: Augment, seed: int) -> torch.Generator | None:
    """The augmentation stream ``(seed, "augment")``, or ``None`` without augmentation."""
    return None if augment is Augment.none else generator(seed, "augment")


__all__ = ["GROUP", "check", "permute_positions", "transform", "stream"]
