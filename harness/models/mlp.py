"""Flattened-sequence MLP baseline (paper.md §11.2, B1).

The sequence ``(B, n, d)`` is zero-padded to ``n_max`` tokens, flattened to ``n_max·d`` numbers,
mapped by an MLP, and reshaped back; the first ``n`` output tokens are returned. Its parameter
count grows with ``n_max`` (it violates the finite information principle, paper.md §7) and it has
no permutation structure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from harness.models.common import rotate_in_, require_positive


@dataclass
class FlatMLPConfig:
    """Options of :class:`FlatMLP` (registry name ``mlp``)."""

    name: str = "mlp"
    hidden: int = 256  # width of every hidden layer
    depth: int = 2  # number of hidden layers
    blocks: int = 0  # 0: this MLP alone; L ≥ 1: L pre-norm residual blocks of it (harness/models/stack.py)


class FlatMLP(nn.Module):
    """MLP over the flattened, padded sequence ``(B, n, d) → (B, n, d)`` for ``n ≤ n_max`` (B1).

    Args:
        cfg: width and depth.
        d: embedding dimension.
        n_max: the longest sequence it accepts (its input layer has ``n_max·d`` inputs).
        generator: the initialisation stream (uniform ±1/sqrt(fan_in), like ``nn.Linear``).

    Claims ``orthogonal_knowledge`` only: rotating the input weight block of every position
    ``W1^(t) ↦ W1^(t) Qᵀ``, the output blocks ``W^(t) ↦ Q W^(t)`` and ``b^(t) ↦ Q b^(t)`` (paper.md
    §10.2, §11.2); its knowledge grows with ``n_max``.

    Raises:
        ValueError: for a non-positive size; in ``forward``, for ``n > n_max``.
    """

    symmetries = frozenset({"orthogonal_knowledge"})

    def __init__(self, cfg: FlatMLPConfig, d: int, n_max: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("mlp", d=d, n_max=n_max, hidden=cfg.hidden, depth=cfg.depth)
        self.d, self.n_max = d, n_max
        widths = [n_max * d] + [cfg.hidden] * cfg.depth + [n_max * d]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(widths[:-1], widths[1:]):
            bound = 1.0 / math.sqrt(fan_in)
            w = (torch.rand(fan_out, fan_in, generator=generator) * 2 - 1) * bound
            b = (torch.rand(fan_out, generator=generator) * 2 - 1) * bound
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(b))

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``; raises ``ValueError`` if ``n > n_max``."""
        b, n, d = x.shape
        if n > self.n_max:
            raise ValueError(f"mlp supports sequences of length at most n_max={self.n_max}, got n={n}")
        h = F.pad(x, (0, 0, 0, self.n_max - n)).reshape(b, self.n_max * d)  # (B, n_max·d)
        last = len(self.weights) - 1
        for i, (w, bias) in enumerate(zip(self.weights, self.biases)):
            h = F.linear(h, w, bias)
            if i < last:
                h = torch.relu(h)
        return h.reshape(b, self.n_max, d)[:, :n]  # (B, n, d)

    def span_knowledge(self) -> Tensor:
        """Output weight columns and biases of every position: ``(d, n_max (hidden + 1))``."""
        w = self.weights[-1].detach().reshape(self.n_max, self.d, -1)  # (n_max, d, hidden)
        b = self.biases[-1].detach().reshape(self.n_max, self.d, 1)  # (n_max, d, 1)
        return torch.cat([w, b], dim=-1).permute(1, 0, 2).reshape(self.d, -1)

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: per-position input blocks ``↦ W Qᵀ``, output blocks and biases ``↦ Q ·``."""
        first = self.weights[0].view(-1, self.n_max, self.d)  # (hidden, n_max, d)
        rotate_in_(first, q)
        last = self.weights[-1].view(self.n_max, self.d, -1)  # (n_max, d, hidden)
        last.copy_(q @ last)
        rotate_in_(self.biases[-1].view(self.n_max, self.d), q)  # rows b^(t) ↦ (Q b^(t))ᵀ
