"""What every task provides: batches in embedding space, its loss and its metrics."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor


@dataclass
class Batch:
    """A batch of sequences in embedding space.

    Attributes:
        x: inputs, shape ``(B, n, d)`` (rows are tokens: the paper's ``Xᵀ``).
        y: targets, shape ``(B, n, d)`` for regression tasks.
    """

    x: Tensor
    y: Tensor

    def __len__(self) -> int:
        return self.x.shape[0]

    def index(self, idx: Tensor) -> "Batch":
        """The sub-batch at positions ``idx`` (a 1-D index tensor)."""
        return Batch(self.x[idx], self.y[idx])

    def to(self, device: torch.device | str) -> "Batch":
        """The batch moved to ``device``."""
        return Batch(self.x.to(device), self.y.to(device))


class Task(Protocol):
    """Interface of a task family (style.md Part 1).

    ``d`` is the embedding dimension the model sees and ``n_max`` the longest training length.
    """

    d: int
    n_max: int

    def train_set(self, seed: int) -> Batch: ...

    def val_set(self) -> Batch: ...

    def test_set(self) -> Batch: ...

    def loss(self, pred: Tensor, batch: Batch) -> Tensor: ...

    def metrics(self, pred: Tensor, batch: Batch) -> dict[str, float]: ...

    def reference_metrics(self, batch: Batch) -> dict[str, float]: ...


def derive_seed(*parts: object) -> int:
    """A 63-bit seed derived from ``parts`` (e.g. ``(seed, "data")``) by SHA-256.

    Distinct ``parts`` give independent streams, so the data and initialisation seeds of a trial
    never coincide, and validation/test streams never coincide with a training stream.
    """
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def generator(*parts: object) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`derive_seed` of ``parts``."""
    return torch.Generator().manual_seed(derive_seed(*parts))
