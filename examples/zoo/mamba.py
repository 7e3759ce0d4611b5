"""A selective state-space layer (Mamba; Gu & Dao 2023, "Mamba: Linear-Time Sequence Modeling
with Selective State Spaces", §3.2 Algorithm 2 and the Mamba block of Fig. 3), with a sequential
scan; bidirectional form as in Vision Mamba (Zhu et al. 2024, "Vim", Algorithm 1).

Rows are tokens, ``x: (B, n, d)``. The block:

* input projection and gate branch: ``u = x W_inᵀ``, ``z = x W_zᵀ`` (``(B, n, h)``, ``h`` inner
  channels);
* the block's short causal depthwise convolution over tokens, per inner channel (kept: it is part
  of the Mamba block, costs ``K h`` weights and, living in the inner space, changes no symmetry),
  then SiLU: ``u'_t = SiLU(Σ_{m<K} w_m ⊙ u_{t−m} + b_conv)``;
* selection (Algorithm 2): ``Δ_t = softplus(u'_t W_Δ↓ᵀ W_Δ↑ᵀ + b_Δ)`` (``(h,)``, rank ``r``),
  ``B_t = u'_t W_Bᵀ`` and ``C_t = u'_t W_Cᵀ`` (``(N,)``): functions of the input;
* discretisation, ZOH for ``A`` and Euler for ``B`` (Mamba's choice): ``Ā_t = exp(Δ_t A)``,
  ``B̄_t = Δ_t B_t``, with ``A = −exp(A_log)`` diagonal ``(h, N)`` (S4D-real init ``−(1…N)``);
* the scan, per inner channel ``c`` with state ``s_{t,c} ∈ ℝ^N`` (``s_{−1} = 0``):
  ``s_{t,c} = Ā_{t,c} ⊙ s_{t−1,c} + B̄_{t,c} u'_{t,c}``, ``y_{t,c} = C_t · s_{t,c} + D_c u'_{t,c}``;
* gate and output projection: ``o_t = W_out (y_t ⊙ SiLU(z_t))`` (``(d,)``).

``causal=False`` (Vim): a second direction with its own convolution, ``W_Δ, b_Δ, W_B, W_C, A, D``
runs the same scan over the reversed sequence; the two ``y`` are summed before the shared gate
and ``W_out``. Cost ``O(n h N)`` (a loop over the ``n`` tokens).

Symmetries, per form:

* ``orthogonal_knowledge`` holds in both: the only tensors in the embedding space are ``W_in``,
  ``W_z`` (read ``x`` as ``x W ᵀ``) and ``W_out`` (writes ``W_out y``); everything else (the
  convolution, Δ, B, C, A, D, the gate) acts on the inner channels. With ``W ↦ W Qᵀ`` for the
  readers and ``W_out ↦ Q W_out`` (:meth:`Mamba.rotate_`), ``u`` and ``z`` are unchanged for the
  input ``Q x``, hence so is ``y``, and the output is ``Q o_t``.
* ``orthogonal`` (weights fixed) does not: ``u = x W_inᵀ`` changes under ``x ↦ Q x``, and the
  SiLU gate, the softplus and the product ``Δ_t B_t u'_t`` are not linear in it.
* ``permutation`` does not, in either form: the state decays by ``Ā`` per step, so a token's
  weight in ``y_t`` depends on its distance to ``t`` (and the convolution weighs neighbours by
  offset); summing a forward and a backward scan with their own weights does not remove the
  dependence on positions.

Lengths: any ``n`` (a recurrence has no maximum length). Packing: runs packed (``torch.func.vmap``
runs its forward and backward: the scan is a Python loop of batched tensor operations).

Raises:
    ValueError: a non-positive ``h``, ``N``, ``r`` or ``K``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


def selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """The selective scan (Algorithm 2 without ``D``): ``y_{t,c} = C_t · s_{t,c}`` with
    ``s_{t,c} = exp(Δ_{t,c} A_c) ⊙ s_{t−1,c} + Δ_{t,c} B_t u_{t,c}``, ``s_{−1} = 0``.

    Args:
        u, delta: ``(B, n, h)``; A: ``(h, N)``; B, C: ``(B, n, N)``.

    Returns:
        y: ``(B, n, h)``.
    """
    state = u.new_zeros(u.shape[0], u.shape[2], A.shape[1])  # (B, h, N)
    out = []
    for t in range(u.shape[1]):  # sequential: n is small here; the parallel scan is what scales
        dt = delta[:, t, :, None]  # (B, h, 1)
        state = torch.exp(dt * A) * state + dt * B[:, t, None, :] * u[:, t, :, None]  # Ā s + B̄ u
        out.append((state * C[:, t, None, :]).sum(-1))  # (B, h): C_t · s_t per channel
    return torch.stack(out, dim=1)


class Mamba(nn.Module):
    """``(B, n, d) → (B, n, d)``; ``h``: inner channels; ``N``: state size per channel; ``r``: rank
    of Δ's projection; ``K``: width of the short convolution; ``causal``: one forward scan (True)
    or a forward plus a backward scan (False, Vim)."""

    symmetries = frozenset({"orthogonal_knowledge"})  # both forms: see the module docstring

    def __init__(self, d: int, n_max: int, generator: torch.Generator, h: int = 16, N: int = 8,
                 r: int = 1, K: int = 4, causal: bool = True) -> None:
        super().__init__()
        if min(h, N, r, K) <= 0:
            raise ValueError(f"Mamba needs positive sizes, got h={h}, N={N}, r={r}, K={K}")

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.causal, self.K = causal, K
        dirs = 1 if causal else 2  # a leading axis: one set of SSM weights per scan direction
        self.W_in, self.W_z = draw(h, d), draw(h, d)  # (h, d): the SSM branch and the gate branch
        self.W_out = draw(d, h)  # (d, h)
        self.w_conv = draw(dirs, h, K)  # (dirs, h, K): tap m weighs u_{t−m}
        self.b_conv = nn.Parameter(torch.zeros(dirs, h))
        self.W_B, self.W_C = draw(dirs, N, h), draw(dirs, N, h)  # (dirs, N, h)
        self.W_delta_down, self.W_delta_up = draw(dirs, r, h), draw(dirs, h, r)
        # Δ's bias: softplus(b_Δ) log-uniform in [1e-3, 1e-1] (Mamba's initialisation)
        dt = torch.exp(torch.rand(dirs, h, generator=generator) * math.log(100) + math.log(1e-3))
        self.b_delta = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(dirs, h, 1))
        self.D = nn.Parameter(torch.ones(dirs, h))

    def _conv(self, u: Tensor, j: int) -> Tensor:
        """Causal depthwise convolution of ``u: (B, n, h)`` with direction ``j``'s taps, then SiLU."""
        out = self.b_conv[j] + self.w_conv[j, :, 0] * u
        for m in range(1, min(self.K, u.shape[1])):  # u_{t−m}: shift down by m, zeros in front
            out = out + self.w_conv[j, :, m] * F.pad(u[:, :-m], (0, 0, m, 0))
        return F.silu(out)

    def _select(self, u: Tensor, j: int) -> tuple[Tensor, Tensor, Tensor]:
        """``(Δ, B, C)`` of direction ``j`` from the convolved inner stream ``u: (B, n, h)``."""
        delta = F.softplus(u @ self.W_delta_down[j].T @ self.W_delta_up[j].T + self.b_delta[j])  # (B, n, h)
        return delta, u @ self.W_B[j].T, u @ self.W_C[j].T  # (B, n, h), (B, n, N), (B, n, N)

    def selection(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The forward direction's ``(Δ, B, C)`` for the input ``x: (B, n, d)``: what Mamba makes
        a function of the input (for the mechanism test)."""
        return self._select(self._conv(x @ self.W_in.T, 0), 0)

    def _ssm(self, u: Tensor, j: int) -> Tensor:
        u = self._conv(u, j)
        delta, B, C = self._select(u, j)
        return selective_scan(u, delta, -torch.exp(self.A_log[j]), B, C) + self.D[j] * u

    def forward(self, x: Tensor) -> Tensor:
        u, z = x @ self.W_in.T, x @ self.W_z.T  # (B, n, h) each
        y = self._ssm(u, 0)
        if not self.causal:  # Vim: the backward scan runs over the reversed tokens
            y = y + self._ssm(u.flip(1), 1).flip(1)
        return (y * F.silu(z)) @ self.W_out.T  # (B, n, d)

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """The weights for the embedding ``x ↦ Q x``: ``W_in, W_z ↦ W Qᵀ``, ``W_out ↦ Q W_out``."""
        for w in (self.W_in, self.W_z):
            w.copy_(w @ Q.T)
        self.W_out.copy_(Q @ self.W_out)
