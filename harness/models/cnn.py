"""1-D convolutional network over positions (paper.md §11.2 B6: translation structure only).

Rows are tokens, ``x: (B, n, d)``; convolutions run over n with zero "same" padding:
``d → hidden → … → hidden → d`` channels, GELU between layers. Not permutation equivariant (a
kernel sees neighbours in order; padding marks the ends). Orthogonal equivariant with knowledge
when the first kernel's taps rotate as ``W[:, :, t] ↦ W[:, :, t] Qᵀ`` and the last layer's as
``Q W[:, :, t]``, bias ``↦ Q b``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from harness.models.common import normal, rotate_out_

__all__ = ["CNN", "CNNConfig"]


@dataclass
class CNNConfig:
    """Options of :class:`CNN` (registry name ``cnn``)."""

    name: str = "cnn"
    hidden: int = 32  # channels of the hidden layers
    n_layers: int = 3  # convolutions (at least 2)
    kernel_size: int = 3  # odd


class CNN(nn.Module):
    """B6: ``(B, n, d) → (B, n, d)``. Weights ``(out, in, kernel_size)``, N(0, 1/(in·ks)).

    Raises:
        ValueError: for a non-positive size, fewer than 2 layers or an even kernel size.
    """

    symmetries = frozenset({"orthogonal_knowledge"})

    def __init__(self, cfg: CNNConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        if min(d, cfg.hidden, cfg.kernel_size) <= 0 or cfg.n_layers < 2 or cfg.kernel_size % 2 == 0:
            raise ValueError(f"cnn needs positive sizes, n_layers >= 2 and an odd kernel_size, got "
                             f"d={d}, hidden={cfg.hidden}, n_layers={cfg.n_layers}, "
                             f"kernel_size={cfg.kernel_size}")
        widths = [d] + [cfg.hidden] * (cfg.n_layers - 1) + [d]
        ks = cfg.kernel_size
        self.weights = nn.ParameterList(normal(generator, o, i, ks, std=1 / math.sqrt(i * ks))
                                        for i, o in zip(widths[:-1], widths[1:]))
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(o)) for o in widths[1:])

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        h = x.transpose(1, 2)  # (B, d, n): channels first
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = F.conv1d(h, w, b, padding=w.shape[-1] // 2)  # (B, out, n)
            if i < last:
                h = F.gelu(h)
        return h.transpose(1, 2)  # (B, n, d)

    def span_knowledge(self) -> Tensor:
        """Last layer's tap columns and bias: ``(d, hidden·ks + 1)``."""
        w = self.weights[-1].detach()
        return torch.cat([w.reshape(w.shape[0], -1), self.biases[-1].detach()[:, None]], dim=1)

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: first taps ``↦ W Qᵀ``, last taps and bias ``↦ Q ·``."""
        first = self.weights[0]
        first.copy_(torch.einsum("oit,ji->ojt", first, q))  # (hidden, d, ks): W[:, :, t] Qᵀ
        rotate_out_(self.weights[-1], q)
        rotate_out_(self.biases[-1], q)
