"""A regression task from outside the package, for ``task=external`` (README.md).

``RunningMean``: the target at position ``i`` is the mean of the first ``i`` input tokens,
``y_i = (1/i) Σ_{j ≤ i} x_j``. It needs positions (or a causal mask): a permutation-equivariant
mixer can only learn the full mean, and only at the last position is that right.

Example (d=1, n=3, rows are tokens)::

    x = [[3.0], [1.0], [2.0]]
    y = [[3.0], [2.0], [2.0]]
"""

from __future__ import annotations

import math

import torch

from tasks.base import Batch, RegressionTask


class RunningMean(RegressionTask):
    """``x, y: (B, n, d)``; inputs ``N(0, I_d/d)`` per token; ``d``, ``n``: sizes."""

    def __init__(self, cfg, dtype: torch.dtype = torch.float32, d: int = 16, n: int = 8) -> None:
        super().__init__(cfg, dtype)
        self.d = d
        self.set_lengths([n])

    def sample(self, g: torch.Generator, size: int, n: int) -> Batch:
        x = torch.randn(size, n, self.d, generator=g, dtype=self.dtype) / math.sqrt(self.d)
        steps = torch.arange(1, n + 1, dtype=self.dtype).view(1, n, 1)  # (1, n, 1)
        return Batch(x=x, y=x.cumsum(dim=1) / steps)
