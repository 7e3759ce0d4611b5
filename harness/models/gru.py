"""GRU encoder–decoder (paper.md §11.2 B5, a generic sequential baseline).

Rows are tokens, ``x: (B, n, d)``. An encoder GRU reads the sequence; a decoder GRU, started
from the encoder's final state, reads it again and a linear readout maps its states to the
embedding: ``F_rows[t] = W_r h_dec[t] + b_r``. Order matters, so it is not permutation
equivariant; it becomes orthogonal equivariant with knowledge when both GRUs' input weights
rotate as ``W_ih ↦ W_ih Qᵀ`` and the readout as ``W_r ↦ Q W_r``, ``b_r ↦ Q b_r``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from harness.models.common import rotate_in_, rotate_out_, require_positive

__all__ = ["GRUSeq2Seq", "GRUConfig"]


@dataclass
class GRUConfig:
    """Options of :class:`GRUSeq2Seq` (registry name ``gru``)."""

    name: str = "gru"
    hidden: int = 64
    n_layers: int = 1


def _gru(d: int, cfg: GRUConfig, generator: torch.Generator) -> nn.GRU:
    # built on the meta device, so nn.GRU's own init never touches the global RNG
    gru = nn.GRU(d, cfg.hidden, num_layers=cfg.n_layers, batch_first=True, device="meta")
    gru = gru.to_empty(device="cpu")
    bound = 1 / math.sqrt(cfg.hidden)  # PyTorch's default U(±1/sqrt(hidden))
    with torch.no_grad():
        for p in gru.parameters():
            p.copy_((torch.rand(p.shape, generator=generator) * 2 - 1) * bound)
    return gru


class GRUSeq2Seq(nn.Module):
    """B5: ``(B, n, d) → (B, n, d)``. Claims ``orthogonal_knowledge`` only.

    Args:
        cfg: hidden size and number of layers.
        d: embedding dimension.
        generator: the initialisation stream.

    Raises:
        ValueError: for a non-positive size.
    """

    symmetries = frozenset({"orthogonal_knowledge"})

    def __init__(self, cfg: GRUConfig, d: int, generator: torch.Generator) -> None:
        super().__init__()
        require_positive("gru", d=d, hidden=cfg.hidden, n_layers=cfg.n_layers)
        self.encoder = _gru(d, cfg, generator)
        self.decoder = _gru(d, cfg, generator)
        bound = 1 / math.sqrt(cfg.hidden)
        self.W_r = nn.Parameter((torch.rand(d, cfg.hidden, generator=generator) * 2 - 1) * bound)
        self.b_r = nn.Parameter(torch.zeros(d))

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x: (B, n, d)`` to ``(B, n, d)``."""
        _, state = self.encoder(x)  # (n_layers, B, hidden)
        h, _ = self.decoder(x, state)  # (B, n, hidden)
        return h @ self.W_r.T + self.b_r  # (B, n, d)

    def span_knowledge(self) -> Tensor:
        """Readout columns and bias: ``(d, hidden + 1)``."""
        return torch.cat([self.W_r, self.b_r[:, None]], dim=1).detach()

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: first-layer input weights of both GRUs ``↦ W Qᵀ``; readout ``↦ Q ·``."""
        rotate_in_(self.encoder.weight_ih_l0, q)
        rotate_in_(self.decoder.weight_ih_l0, q)
        rotate_out_(self.W_r, q)
        rotate_out_(self.b_r, q)
