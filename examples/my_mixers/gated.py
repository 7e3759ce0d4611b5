"""Gated causal linear attention (GLA; Yang et al. 2023, "Gated Linear Attention Transformers
with Hardware-Efficient Training"), in its recurrent form.

Rows are tokens, ``(B, n, d)``. With ``q_t = x_t W_Qᵀ``, ``k_t = x_t W_Kᵀ``, ``v_t = x_t W_Vᵀ``
(``(k,)`` each) and a data-dependent forget gate ``α_t = sigmoid(x_t W_αᵀ)^(1/τ)`` in ``(0, 1)^k``,
the state ``S_t = diag(α_t) S_{t-1} + k_tᵀ v_t`` (``(k, k)``, ``S_0 = 0``) is read by the query:
``o_t = q_t S_t W_Oᵀ`` (``(d,)``). Token ``t`` sees only tokens ``≤ t``; the cost is linear in ``n``.

Symmetries: the causal recurrence makes the output depend on the order of the tokens, so
``permutation`` does not hold; every embedding-space weight reads through ``W_Q, W_K, W_V, W_α``
(``·Qᵀ``) and writes through ``W_O`` (``Q·``), so rotating them gives ``orthogonal_knowledge``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class GatedLinearAttention(nn.Module):
    """``(B, n, d) → (B, n, d)``; ``k``: the feature dimension; ``tau``: the gate's temperature
    (larger: gates nearer 1, longer memory)."""

    symmetries = frozenset({"orthogonal_knowledge"})
    causal = True  # output i reads tokens j ≤ i only; the zoo's pre-flight measures it

    def __init__(self, d: int, n_max: int, generator: torch.Generator, k: int = 8, tau: float = 16.0) -> None:
        super().__init__()
        if tau <= 0:
            raise ValueError(f"tau={tau} must be > 0")

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.tau = tau
        self.W_Q, self.W_K, self.W_V, self.W_alpha = draw(k, d), draw(k, d), draw(k, d), draw(k, d)  # (k, d)
        self.W_O = draw(d, k)  # (d, k)

    def forward(self, x: Tensor) -> Tensor:
        q, kk, v = x @ self.W_Q.T, x @ self.W_K.T, x @ self.W_V.T  # (B, n, k) each
        alpha = torch.sigmoid(x @ self.W_alpha.T) ** (1 / self.tau)  # (B, n, k), in (0, 1)
        state = x.new_zeros(x.shape[0], kk.shape[-1], v.shape[-1])  # (B, k, k)
        out = []
        for t in range(x.shape[1]):  # n is small here; the chunked form is what scales
            state = alpha[:, t, :, None] * state + kk[:, t, :, None] * v[:, t, None, :]
            out.append((q[:, t, None, :] @ state).squeeze(1))  # (B, k)
        return torch.stack(out, dim=1) @ self.W_O.T  # (B, n, d)

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """The weights for the embedding ``x ↦ Q x``: input weights ``W ↦ W Qᵀ``, ``W_O ↦ Q W_O``."""
        for w in (self.W_Q, self.W_K, self.W_V, self.W_alpha):
            w.copy_(w @ Q.T)
        self.W_O.copy_(Q @ self.W_O)
