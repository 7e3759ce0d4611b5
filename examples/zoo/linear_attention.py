"""Linear attention with a feature-map kernel (Katharopoulos, Vyas, Pappas & Fleuret 2020,
"Transformers are RNNs: Fast Autoregressive Transformers with Linear Attention", ICML,
arXiv:2006.16236), causal (the paper's recurrent form) or bidirectional.

Rows are tokens, ``x: (B, n, d)``. With ``q_i = φ(x_i W_Qᵀ)``, ``k_i = φ(x_i W_Kᵀ)``,
``v_i = x_i W_Vᵀ`` (``(k,)`` each) and the feature map of the paper's §3.2.1,
``φ(z) = elu(z) + 1`` (positive, so every similarity ``q_i·k_j`` and the normaliser are > 0):

* bidirectional (§3.2, the generalised attention with ``sim(q, k) = φ(q)·φ(k)``, computed
  right-to-left by associativity)::

      o_i = q_i (Σ_j k_jᵀ v_j) / (q_i · Σ_j k_j)

* causal (§3.3, causal masking; §3.4, the same as an RNN with state ``S_i = S_{i-1} + k_iᵀ v_i``,
  ``z_i = z_{i-1} + k_i``, ``S_0 = 0``, ``z_0 = 0``)::

      o_i = q_i S_i / (q_i · z_i),  S_i = Σ_{j≤i} k_jᵀ v_j  (k, k),  z_i = Σ_{j≤i} k_j  (k,)

  computed here by prefix sums over the tokens (``cumsum``), which is the recurrence unrolled;

and the output ``y_i = o_i W_Oᵀ`` (``(d,)``). Shapes: ``W_Q, W_K, W_V: (k, d)``,
``W_O: (d, k)``; cost linear in ``n``. No positions: any ``n`` is taken (no ``n_max`` bound).

Errors: ``ValueError`` from the constructor for ``k < 1``.

Symmetries (``rotate(f, Q)`` maps ``W ↦ W Qᵀ`` for ``W_Q, W_K, W_V`` and ``W_O ↦ Q W_O``):

* ``orthogonal_knowledge`` holds in both forms: the input enters only through ``x W_Qᵀ``,
  ``x W_Kᵀ``, ``x W_Vᵀ`` and ``(x Qᵀ)(W Qᵀ)ᵀ = x W_ᵀ``, so ``q, k, v`` are unchanged, and the
  output leaves through ``W_O``, so ``o (Q W_O)ᵀ = (o W_Oᵀ) Qᵀ`` is the rotated output.
* ``orthogonal`` (weights not rotated) does not hold in either form: ``φ`` is applied
  coordinate-wise to ``x W_Qᵀ`` and ``x W_Kᵀ``, and generic ``W`` do not commute with ``Q``.
* ``permutation`` holds in the bidirectional form: ``Σ_j`` runs over all tokens, so
  permuting the tokens permutes only the outputs. It does not hold in the causal form: token
  ``i`` sees the prefix ``j ≤ i``, which a permutation changes.

Packing: ``torch.func.vmap`` runs its forward and backward (``tests/test_zoo_mixers_a.py``),
so it runs packed.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


def phi(z: Tensor) -> Tensor:
    """The paper's feature map ``elu(z) + 1`` (§3.2.1): positive, so normalisers are > 0."""
    return F.elu(z) + 1


class LinearAttention(nn.Module):
    """``(B, n, d) → (B, n, d)``; ``k``: the feature (query/key/value) dimension; ``causal``:
    token ``i`` sees tokens ``≤ i`` (the RNN form) or all tokens (bidirectional)."""

    def __init__(self, d: int, n_max: int, generator: torch.Generator, k: int = 8, causal: bool = True) -> None:
        super().__init__()
        if k < 1:
            raise ValueError(f"k={k} must be ≥ 1")

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.causal = causal
        self.W_Q, self.W_K, self.W_V = draw(k, d), draw(k, d), draw(k, d)  # (k, d) each
        self.W_O = draw(d, k)  # (d, k)
        # the derivation in the module docstring: the sum over all tokens commutes with a
        # permutation, the prefix sum does not
        self.symmetries = frozenset({"orthogonal_knowledge"} if causal else {"orthogonal_knowledge", "permutation"})

    def forward(self, x: Tensor) -> Tensor:
        q, kk = phi(x @ self.W_Q.T), phi(x @ self.W_K.T)  # (B, n, k), positive
        v = x @ self.W_V.T  # (B, n, k)
        if self.causal:
            S = torch.cumsum(kk[..., :, None] * v[..., None, :], dim=1)  # (B, n, k, k): S_i = Σ_{j≤i} k_jᵀ v_j
            z = torch.cumsum(kk, dim=1)  # (B, n, k): z_i = Σ_{j≤i} k_j
            o = (q[..., None, :] @ S).squeeze(-2) / (q * z).sum(-1, keepdim=True)  # (B, n, k)
        else:
            S = kk.transpose(-1, -2) @ v  # (B, k, k): Σ_j k_jᵀ v_j
            z = kk.sum(dim=1, keepdim=True)  # (B, 1, k): Σ_j k_j
            o = (q @ S) / (q * z).sum(-1, keepdim=True)  # (B, n, k)
        return o @ self.W_O.T  # (B, n, d)

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """The weights for the embedding ``x ↦ Q x``: input weights ``W ↦ W Qᵀ``, ``W_O ↦ Q W_O``."""
        for w in (self.W_Q, self.W_K, self.W_V):
            w.copy_(w @ Q.T)
        self.W_O.copy_(Q @ self.W_O)
