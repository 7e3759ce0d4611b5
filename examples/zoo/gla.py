"""Gated linear attention with data-dependent gates (Yang, Wang, Shen, Panda & Kim 2023, "Gated
Linear Attention Transformers with Hardware-Efficient Training", arXiv:2312.06635, ICML 2024,
§4.1), one head, causal (the paper's form) or bidirectional.

Rows are tokens, ``x: (B, n, d)``. With ``q_t = x_t W_Qᵀ``, ``k_t = x_t W_Kᵀ``, ``v_t = x_t W_Vᵀ``
(``(k,)`` each) and the forget gate of §4.1, a function of the token itself,

    α_t = sigmoid(x_t W_αᵀ + b_α)^(1/τ)  ∈ (0, 1)^k

(``τ = 16`` in the paper, so that gates start near 1; its ``W_α`` is low-rank, here full), the
matrix-valued state decays per key feature and is read by the query (§4.1, the recurrent form)::

    S_t = diag(α_t) S_{t−1} + k_tᵀ v_t   (k, k),  S_0 = 0,        o_t = q_t S_t

Unrolled (§4.1's parallel form, with ``b_t = Σ_{s≤t} log α_s``, ``(k,)``)::

    o_t = Σ_{j≤t} (q_t ⊙ exp(b_t − b_j)) · k_j  v_j

which :meth:`forward` computes as one ``(B, n, n)`` score matrix (vectorised; the exponent is
masked before ``exp`` so that nothing overflows). The bidirectional form adds a backward scan
``S←_t = diag(α_t) S←_{t+1} + k_tᵀ v_t`` and reads ``o_t = q_t (S_t + S←_t − k_tᵀ v_t)`` (the
token's own term once): token ``j > t`` reaches ``t`` decayed by ``α_t ⊙ … ⊙ α_{j−1}``, i.e.
``exp(c_j − c_t)`` with ``c_t = Σ_{s<t} log α_s``. :meth:`recurrent` is the scan, kept for the
tests. The output is ``y_t = o_t W_Oᵀ`` (``(d,)``). Shapes: ``W_Q, W_K, W_V, W_α: (k, d)``,
``b_α: (k,)``, ``W_O: (d, k)``. No positions: any ``n`` is taken (no ``n_max`` bound).

Left out, and why: the paper's layer wraps the mixer in token-wise parts, an output gate
``swish(x W_r + b_r)`` and a LayerNorm of ``o_t`` before ``W_O``, and uses several heads. They act
on each token alone (in ``k``-space, read through ``x Wᵀ`` and written through ``W_O``), so they
change neither what is mixed nor the symmetries below; the zoo compares the mixing.

Errors: ``ValueError`` from the constructor for ``k < 1`` or ``τ ≤ 0``.

Symmetries (``rotate(f, Q)`` maps ``W ↦ W Qᵀ`` for ``W_Q, W_K, W_V, W_α`` and ``W_O ↦ Q W_O``;
``b_α`` lives in ``k``-space: unchanged):

* ``orthogonal_knowledge`` holds in both forms: ``x`` enters only through ``x Wᵀ``, unchanged
  by the rotation, so ``q, k, v, α`` are unchanged, and the output leaves through ``W_O``.
* ``orthogonal`` (weights not rotated) does not hold: generic ``W`` do not commute with ``Q``
  and the sigmoid is coordinate-wise.
* ``permutation`` does not hold in either form: the weight of token ``j`` at ``t`` is the
  product of the gates of the tokens *between* them, which a permutation changes (and the causal
  form sees only ``j ≤ t``). Gates equal to 1 would restore it bidirectionally, but
  ``sigmoid(·)^(1/τ) < 1`` for every finite input.

Packing: ``torch.func.vmap`` runs its forward and backward (``tests/test_zoo_mixers_a.py``),
so it runs packed.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class GatedLinearAttention(nn.Module):
    """``(B, n, d) → (B, n, d)``; ``k``: the feature dimension; ``tau``: the gate's temperature
    (larger: gates nearer 1, longer memory); ``causal``: one forward scan, or forward plus
    backward."""

    def __init__(self, d: int, n_max: int, generator: torch.Generator, k: int = 8, tau: float = 16.0,
                 causal: bool = True) -> None:
        super().__init__()
        if k < 1:
            raise ValueError(f"k={k} must be ≥ 1")
        if tau <= 0:
            raise ValueError(f"tau={tau} must be > 0")

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.tau, self.causal = float(tau), causal
        self.W_Q, self.W_K, self.W_V, self.W_alpha = draw(k, d), draw(k, d), draw(k, d), draw(k, d)  # (k, d)
        self.b_alpha = nn.Parameter(torch.zeros(k))  # (k,): the gate's bias (k-space)
        self.W_O = draw(d, k)  # (d, k)
        self.symmetries = frozenset({"orthogonal_knowledge"})  # both forms: the docstring's derivation

    def log_alpha(self, x: Tensor) -> Tensor:
        """``log α: (B, n, k)``, ``α_t = sigmoid(x_t W_αᵀ + b_α)^(1/τ)``: a function of token ``t``."""
        return F.logsigmoid(x @ self.W_alpha.T + self.b_alpha) / self.tau

    def forward(self, x: Tensor) -> Tensor:
        q, kk, v = x @ self.W_Q.T, x @ self.W_K.T, x @ self.W_V.T  # (B, n, k) each
        la = self.log_alpha(x)  # (B, n, k), ≤ 0
        b = torch.cumsum(la, dim=1)  # (B, n, k): b_t = Σ_{s≤t} log α_s
        n = x.shape[1]
        pos = torch.arange(n, device=x.device)
        past = (pos[None, :] <= pos[:, None])[None, :, :, None]  # (1, n, n, 1): j ≤ t
        # exponent of the decay from token j to token t (t first), masked to ≤ 0 before exp
        gap = b[:, :, None, :] - b[:, None, :, :]  # (B, n, n, k): b_t − b_j
        if self.causal:
            expo = torch.where(past, gap, -math.inf)
        else:
            c = b - la  # (B, n, k): c_t = Σ_{s<t} log α_s
            ahead = c[:, None, :, :] - c[:, :, None, :]  # (B, n, n, k): c_j − c_t
            expo = torch.where(past, gap, ahead)
        scores = (q[:, :, None, :] * torch.exp(expo) * kk[:, None, :, :]).sum(-1)  # (B, n, n)
        return scores @ v @ self.W_O.T  # (B, n, d)

    def recurrent(self, x: Tensor) -> Tensor:
        """The scan of the docstring (a loop over the tokens); equal to :meth:`forward`."""
        q, kk, v = x @ self.W_Q.T, x @ self.W_K.T, x @ self.W_V.T
        alpha = torch.exp(self.log_alpha(x))  # (B, n, k)
        kv = kk[..., :, None] * v[..., None, :]  # (B, n, k, k): k_tᵀ v_t
        n = x.shape[1]

        def scan(order: range) -> Tensor:
            S, out = torch.zeros_like(kv[:, 0]), {}
            for t in order:  # S_t = diag(α_t) S_prev + k_tᵀ v_t
                S = alpha[:, t, :, None] * S + kv[:, t]
                out[t] = S
            return torch.stack([out[t] for t in range(n)], dim=1)  # (B, n, k, k)

        states = scan(range(n))
        if not self.causal:
            states = states + scan(range(n - 1, -1, -1)) - kv
        return (q[..., None, :] @ states).squeeze(-2) @ self.W_O.T

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """The weights for the embedding ``x ↦ Q x``: input weights ``W ↦ W Qᵀ``, ``W_O ↦ Q W_O``;
        ``b_α`` (``k``-space) unchanged."""
        for w in (self.W_Q, self.W_K, self.W_V, self.W_alpha):
            w.copy_(w @ Q.T)
        self.W_O.copy_(Q @ self.W_O)
