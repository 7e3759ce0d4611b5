"""An RWKV time mix (Peng et al. 2023, "RWKV: Reinventing RNNs for the Transformer Era", §3.1:
eqs. (11)-(13) token shift, (14) WKV, (15) output), with the WKV computed by the numerically
stable recurrence of §3.1 / Appendix; bidirectional form: Vision-RWKV's Bi-WKV (Duan et al.
2024, "Vision-RWKV", §3.2).

Rows are tokens, ``x: (B, n, d)``; ``h`` attention channels.

* Token shift: ``r_t = W_r (μ_r ⊙ x_t + (1 − μ_r) ⊙ x'_t)``, and ``k_t``, ``v_t`` likewise with
  ``μ_k, μ_v ∈ ℝ^d`` (``W_r, W_k, W_v: (h, d)``). Causal: ``x'_t = x_{t−1}`` (``x_{−1} = 0``).
  Bidirectional: the one-dimensional Q-shift of Vision-RWKV, ``x'_t`` takes its first ``⌈d/2⌉``
  channels from ``x_{t−1}`` and the others from ``x_{t+1}`` (zero beyond the ends).
* WKV, per channel, with decay ``w = exp(ŵ) > 0`` and bonus ``u`` (``(h,)``):
  ``wkv_t = (Σ_{i<t} e^{−(t−1−i)w + k_i} v_i + e^{u + k_t} v_t) / (Σ_{i<t} e^{−(t−1−i)w + k_i} + e^{u + k_t})``.
  Bi-WKV: the sums run over all ``i ≠ t`` with ``(|t − i| − 1) w``; Vision-RWKV divides
  ``|t − i| − 1`` by the length ``T``, which is not done here: a per-token decay that does not
  depend on ``n`` means the same at the lengths of ``teacher_length``'s test as in training.
  Computed as a recurrence over ``i < t`` (and over ``i > t`` on the reversed sequence) that
  carries ``(a, b, p)``: numerator and denominator scaled by ``e^{−p}``, ``p`` the largest
  exponent so far, so no ``exp`` overflows.
* Output: ``o_t = W_o (σ(r_t) ⊙ wkv_t)`` (``W_o: (d, h)``).

Symmetries, per form:

* ``permutation`` does not hold in either form: ``w`` decays a token's weight with its distance
  to ``t`` and the token shift reads the neighbours by offset.
* ``orthogonal`` (weights fixed) does not: ``x ↦ Q x`` changes ``r, k, v``, and σ, the exponentials
  and the per-channel ``μ`` are not rotation equivariant.
* ``orthogonal_knowledge`` does not either, in either form: the token shift acts on the
  embedding space channel by channel. ``W_r (μ ⊙ x_t + (1 − μ) ⊙ x'_t) = W_r diag(μ) x_t +
  W_r diag(1 − μ) x'_t``; for the input ``Q x`` one needs new ``W', μ'`` with ``W' diag(μ') =
  W_r diag(μ) Qᵀ`` and ``W' diag(1 − μ') = W_r diag(1 − μ) Qᵀ``: summed, ``W' = W_r Qᵀ``, hence
  ``W_r Qᵀ diag(μ') = W_r diag(μ) Qᵀ``, ``h d`` equations for the ``d`` unknowns ``μ'``: no
  solution for generic ``W_r, μ, Q`` once ``h ≥ 2`` (for ``h ≥ d`` it would need ``Q diag(μ) Qᵀ``
  diagonal). :meth:`RWKV.rotate_` does the rest (``W ↦ W Qᵀ``, ``W_o ↦ Q W_o``) so that the
  harness measures this column; the measurement agrees that it fails.

Lengths: any ``n``. Packing: runs packed (``torch.func.vmap`` runs its forward and backward).

Raises:
    ValueError: a non-positive ``h``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


def past_sums(k: Tensor, v: Tensor, w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """For each ``t`` the stable ``(a_t, b_t, p_t)`` of the sums over ``i < t``:
    ``a_t = Σ_{i<t} e^{−(t−1−i)w + k_i − p_t} v_i``, ``b_t`` the same without ``v_i``, ``p_t`` the
    largest exponent (``−∞`` at ``t = 0``, where both sums are empty).

    Args:
        k, v: ``(B, n, h)``; w: ``(h,)``, positive.

    Returns:
        three ``(B, n, h)`` tensors.
    """
    a = k.new_zeros(k.shape[0], k.shape[2])
    b = torch.zeros_like(a)
    p = torch.full_like(a, -math.inf)
    out = []
    for t in range(k.shape[1]):
        out.append((a, b, p))  # the sums over i < t, before token t joins them
        decayed = p - w  # every earlier term one step further back: × e^{−w}
        q = torch.maximum(decayed, k[:, t])
        old, new = torch.exp(decayed - q), torch.exp(k[:, t] - q)
        a, b, p = old * a + new * v[:, t], old * b + new, q
    return tuple(torch.stack(s, dim=1) for s in zip(*out))


def wkv(k: Tensor, v: Tensor, w: Tensor, u: Tensor, causal: bool = True) -> Tensor:
    """RWKV's ``wkv_t`` (causal) or Vision-RWKV's Bi-WKV (``causal=False``), per channel.

    Args:
        k, v: ``(B, n, h)``; w: ``(h,)`` positive decay; u: ``(h,)`` bonus.

    Returns:
        ``(B, n, h)``.
    """
    terms = [past_sums(k, v, w)]  # i < t
    if not causal:  # i > t: the same sums on the reversed sequence, (|t − i| − 1) w
        terms.append(tuple(s.flip(1) for s in past_sums(k.flip(1), v.flip(1), w)))
    now = u + k  # the current token's exponent, with the bonus
    q = now
    for _, _, p in terms:
        q = torch.maximum(q, p)
    num, den = torch.exp(now - q) * v, torch.exp(now - q)
    for a, b, p in terms:
        scale = torch.exp(p - q)
        num, den = num + scale * a, den + scale * b
    return num / den


class RWKV(nn.Module):
    """``(B, n, d) → (B, n, d)``; ``h``: attention channels; ``causal``: RWKV's WKV and token
    shift (True) or Vision-RWKV's Bi-WKV and Q-shift (False)."""

    symmetries = frozenset()  # both forms: see the module docstring

    def __init__(self, d: int, n_max: int, generator: torch.Generator, h: int = 8, causal: bool = True) -> None:
        super().__init__()
        if h <= 0:
            raise ValueError(f"RWKV needs h > 0, got h={h}")

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        self.causal = causal
        self.mu_r, self.mu_k, self.mu_v = (nn.Parameter(torch.rand(d, generator=generator)) for _ in range(3))
        self.W_r, self.W_k, self.W_v = draw(h, d), draw(h, d), draw(h, d)  # (h, d) each
        self.W_o = draw(d, h)  # (d, h)
        ratio = torch.arange(h) / max(h - 1, 1)
        self.w_hat = nn.Parameter(-5 + 8 * ratio ** 0.7)  # RWKV-4's decay speeds: w = e^ŵ ∈ [e^−5, e^3]
        self.u = nn.Parameter(math.log(0.3) + 0.5 * ((torch.arange(h) + 1) % 3 - 1))  # its "zigzag" bonus
        self.register_buffer("left", (torch.arange(d) < (d + 1) // 2).float())  # Q-shift: from x_{t−1}

    def shift(self, x: Tensor) -> Tensor:
        """``x'``: the previous token (causal) or the 1-D Q-shift (bidirectional), ``(B, n, d)``."""
        previous = F.pad(x[:, :-1], (0, 0, 1, 0))  # x_{t−1}, zero at t = 0
        if self.causal:
            return previous
        return self.left * previous + (1 - self.left) * F.pad(x[:, 1:], (0, 0, 0, 1))  # x_{t+1}

    def forward(self, x: Tensor) -> Tensor:
        xs = self.shift(x)

        def mix(mu: Tensor, W: Tensor) -> Tensor:
            return (mu * x + (1 - mu) * xs) @ W.T  # (B, n, h)

        r, k, v = mix(self.mu_r, self.W_r), mix(self.mu_k, self.W_k), mix(self.mu_v, self.W_v)
        return (torch.sigmoid(r) * wkv(k, v, torch.exp(self.w_hat), self.u, self.causal)) @ self.W_o.T

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """``W_r, W_k, W_v ↦ W Qᵀ``, ``W_o ↦ Q W_o``; ``μ`` (per embedding channel) has no rotated
        counterpart, so this does not make the model equivariant: the harness measures that."""
        for W in (self.W_r, self.W_k, self.W_v):
            W.copy_(W @ Q.T)
        self.W_o.copy_(Q @ self.W_o)
