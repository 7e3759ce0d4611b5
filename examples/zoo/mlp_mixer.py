"""MLP-Mixer's token-mixing MLP (Tolstikhin et al. 2021, "MLP-Mixer: An all-MLP Architecture for
Vision", eq. (1), first line): ``U_{*,i} = X_{*,i} + W_2 σ(W_1 LayerNorm(X)_{*,i})`` for every
channel ``i = 1 … d``, with ``X`` the ``(n, d)`` table (rows are tokens, the paper's ``S × C``).

Rows are tokens, ``x: (B, n, d)``. ``LayerNorm`` normalises each token over its ``d`` channels
(gain ``γ``, bias ``β``, ``(d,)``); then each channel's column of ``n`` values goes through the same
MLP across tokens: ``W_1: (D_S, n_max)``, ``b_1: (D_S,)``, ``σ = GELU``, ``W_2: (n_max, D_S)``,
``b_2: (n_max,)`` (the paper's ``Dense`` layers carry biases); the input is added back.

Lengths: ``W_1`` and ``W_2`` are sized for ``n_max`` tokens (the longest training length). A
shorter sequence uses their first ``n`` columns and rows, ``W_1[:, :n]``, ``W_2[:n]``, ``b_2[:n]``:
exactly the zero-padding of the normalised tokens to ``n_max`` with the first ``n`` outputs kept
(padding after the LayerNorm: a zero token normalised would be ``β``, not nothing). This is the
registered bounded families' rule (``mixing``'s top-left block, ``mlp``'s zero padding), so
``teacher_length`` trains it on ``n ∈ {4, 8}`` with ``n_max = 8``; beyond ``n_max`` it raises
``ValueError`` naming ``n_max``, which the harness records as ``test/n_<n>/supported = 0``.

Symmetries (one form: it is already non-causal):

* ``permutation`` does not hold: ``W_1`` weighs each token by its position (``W_1 P ≠ P' W_1``
  for a generic ``W_1``).
* ``orthogonal`` (weights fixed) does not: σ acts on each channel's column separately, so mixing
  the channels (``X ↦ X Qᵀ``) before σ differs from mixing them after; and the LayerNorm's
  centring subtracts the mean along ``1_d``, a fixed direction, and its gain is per channel.
* ``orthogonal_knowledge`` does not either: the only embedding-space tensors are ``γ`` and ``β``;
  a rotated ``β`` (``Q β``, :meth:`TokenMixingMLP.rotate_`) keeps the bias's part, but no choice
  of ``γ, β`` (nor of the token-space ``W_1, W_2``) makes a per-channel σ commute with a
  rotation of the channels, nor makes the centring along ``1_d`` rotation equivariant.
  ``rotate_`` is given so that the harness measures this column instead of leaving it blank.

Packing: runs packed (``torch.func.vmap`` runs its forward and backward); on ``teacher_length``
it runs alone as every model does there (several training lengths).

Raises:
    ValueError: a non-positive ``D_S``; in ``forward``, ``n > n_max``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class TokenMixingMLP(nn.Module):
    """``(B, n, d) → (B, n, d)`` for ``n ≤ n_max``; ``D_S``: the token-mixing MLP's hidden width."""

    symmetries = frozenset()  # see the module docstring

    def __init__(self, d: int, n_max: int, generator: torch.Generator, D_S: int = 32) -> None:
        super().__init__()
        if D_S <= 0:
            raise ValueError(f"TokenMixingMLP needs D_S > 0, got D_S={D_S}")

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.n_max = n_max
        self.gamma, self.beta = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))  # LayerNorm on d
        self.W_1, self.b_1 = draw(D_S, n_max), nn.Parameter(torch.zeros(D_S))  # across tokens
        self.W_2, self.b_2 = draw(n_max, D_S), nn.Parameter(torch.zeros(n_max))

    def forward(self, x: Tensor) -> Tensor:
        n = x.shape[1]
        if n > self.n_max:
            raise ValueError(f"TokenMixingMLP supports sequences of length at most n_max={self.n_max}, got n={n}")
        y = F.layer_norm(x, x.shape[-1:], self.gamma, self.beta)  # (B, n, d), per token over d
        hidden = F.gelu(torch.einsum("sn,bnd->bsd", self.W_1[:, :n], y) + self.b_1[:, None])  # (B, D_S, d)
        return x + torch.einsum("ns,bsd->bnd", self.W_2[:n], hidden) + self.b_2[:n, None]  # (B, n, d)

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """``β ↦ Q β`` (``γ``, a per-channel gain, has no rotated counterpart); this does not make
        the model equivariant: the harness measures that it is not."""
        self.beta.copy_(Q @ self.beta)
