"""A diagonal state-space layer, S4D (Gu, Gupta, Goel & Ré 2022, "On the Parameterization and
Initialization of Diagonal State Space Models", NeurIPS, arXiv:2206.11893), with the S4D-Lin
initialisation and zero-order-hold discretisation, causal (the paper's form) or bidirectional.

Rows are tokens, ``x: (B, n, d)``. The SSM runs per channel ``c`` of an inner space reached by
linear maps: ``u = x W_inᵀ`` (``(B, n, h)``), ``y_t = σ(SSM(u)_t) W_outᵀ`` (``(B, n, d)``, ``σ`` =
GELU, the S4 block's activation). Per channel, the continuous diagonal SSM
``x'(s) = A x(s) + B u(s)``, ``y(s) = C x(s) + D u(s)`` with ``A = diag(A_1 … A_N)``,
``Re A_m < 0``, is discretised by zero-order hold with step ``Δ_c`` (the paper's §2)::

    Ā = exp(ΔA),   B̄ = (ΔA)⁻¹ (exp(ΔA) − I) ΔB = (exp(ΔA) − 1)/A ⊙ B

giving the recurrence ``x_t = Ā x_{t−1} + B̄ u_t``, ``y_t = C x_t + D u_t`` and, unrolled, the
convolution with the kernel of the paper's Vandermonde form (§3)::

    y = K * u + D u,   K_l = C diag(Ā)^l B̄ = Σ_m C_m B̄_m Ā_m^l,   l = 0 … n−1

The state is complex and comes in conjugate pairs, so ``N/2`` modes are kept and
``K_l = 2 Re Σ_{m<N/2} C_m B̄_m Ā_m^l`` (real). S4D-Lin (§4): ``A_m = −1/2 + iπm``; ``Δ``
log-uniform in ``[10⁻³, 10⁻¹]``; ``C`` complex normal with variance 1/2 per part; ``B = 1``
(fixed: the kernel depends on ``C_m B_m`` only); ``D`` normal. ``Re A = −exp(log_A_re)`` stays
negative (stable) whatever the optimiser does. :meth:`forward` applies ``K`` as an ``(n, n)``
Toeplitz matrix (vectorised); :meth:`recurrence` is the scan, kept for the mechanism test.

Bidirectional (as S4's bidirectional option): a second kernel ``K←`` from the same ``A, Δ`` and
its own ``C←`` reads the tokens after ``t``: ``y_t = Σ_{j≤t} K_{t−j} u_j + Σ_{j>t} K←_{j−t−1} u_j + D u_t``.

Shapes: ``W_in: (h, d)``, ``W_out: (d, h)``, ``log_dt: (h,)``, ``log_A_re, A_im, C_re, C_im,
C_back_re, C_back_im: (h, N/2)``, ``D: (h,)``. The kernel is built for the ``n`` given: any ``n``
is taken (no ``n_max`` bound).

Errors: ``ValueError`` from the constructor for ``h < 1``, an odd or non-positive ``N``, or
``powers`` not ``pow`` or ``exp`` (:meth:`S4D.vandermonde`).

Symmetries (``rotate(f, Q)`` maps ``W_in ↦ W_in Qᵀ``, ``W_out ↦ Q W_out``; the SSM's parameters
live in the ``h`` channels: unchanged):

* ``orthogonal_knowledge`` holds in both forms: ``x`` enters only through ``u = x W_inᵀ``,
  unchanged by the rotation, the SSM and ``σ`` act on ``u``, and the output leaves through
  ``W_out``.
* ``orthogonal`` (weights not rotated) does not hold: generic ``W_in`` does not commute with ``Q``.
* ``permutation`` does not hold in either form: token ``j`` reaches ``t`` through ``K_{t−j}``
  (``K←_{j−t−1}``), a function of the distance, which a permutation changes; only a constant
  kernel (``Ā = 1``, excluded by ``Re A < 0``) would be permutation-invariant.

Packing: ``torch.func.vmap`` runs its forward and backward (``tests/test_zoo_mixers_a.py``),
so it runs packed.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


# How Ā^l is computed (S4D.vandermonde): "pow" as the zoo's first run, "exp" without log 0
POWERS = ("pow", "exp")


class S4D(nn.Module):
    """``(B, n, d) → (B, n, d)``; ``h``: the channels of the inner space; ``N``: the state size
    per channel (even: ``N/2`` conjugate pairs); ``causal``: one kernel, or forward plus backward."""

    def __init__(self, d: int, n_max: int, generator: torch.Generator, h: int = 8, N: int = 8,
                 causal: bool = True, powers: str = "pow") -> None:
        super().__init__()
        if h < 1:
            raise ValueError(f"h={h} must be ≥ 1")
        if powers not in POWERS:
            raise ValueError(f"powers={powers!r} must be one of {', '.join(POWERS)}")
        self.powers = powers
        if N < 2 or N % 2:
            raise ValueError(f"N={N} must be even and ≥ 2 (the state comes in conjugate pairs)")

        def draw(*shape: int) -> nn.Parameter:  # N(0, 1/fan_in), from the harness's stream
            return nn.Parameter(torch.randn(*shape, generator=generator) / math.sqrt(shape[-1]))

        half = N // 2
        self.causal = causal
        self.W_in, self.W_out = draw(h, d), draw(d, h)  # (h, d), (d, h)
        # S4D-Lin: A_m = −1/2 + iπm; Δ log-uniform in [1e-3, 1e-1]; C ~ CN(0, 1); D ~ N(0, 1)
        u01 = torch.rand(h, generator=generator)
        self.log_dt = nn.Parameter(math.log(1e-3) + u01 * (math.log(1e-1) - math.log(1e-3)))  # (h,)
        self.log_A_re = nn.Parameter(torch.full((h, half), math.log(0.5)))  # Re A = −exp(·) = −1/2
        self.A_im = nn.Parameter(math.pi * torch.arange(half, dtype=torch.float32).expand(h, half).clone())
        self.C_re = nn.Parameter(torch.randn(h, half, generator=generator) * math.sqrt(0.5))
        self.C_im = nn.Parameter(torch.randn(h, half, generator=generator) * math.sqrt(0.5))
        self.C_back_re = nn.Parameter(torch.randn(h, half, generator=generator) * math.sqrt(0.5))
        self.C_back_im = nn.Parameter(torch.randn(h, half, generator=generator) * math.sqrt(0.5))
        self.D = nn.Parameter(torch.randn(h, generator=generator))
        if causal:  # unused parameters would be trained and counted for nothing
            del self.C_back_re, self.C_back_im
        self.symmetries = frozenset({"orthogonal_knowledge"})  # both forms: the docstring's derivation

    def discrete(self) -> tuple[Tensor, Tensor]:
        """``Ā, B̄: (h, N/2)`` complex, by zero-order hold (``B = 1``)."""
        A = torch.complex(-torch.exp(self.log_A_re), self.A_im)  # (h, N/2)
        dtA = torch.exp(self.log_dt)[:, None] * A
        return torch.exp(dtA), (torch.exp(dtA) - 1) / A

    def vandermonde(self, n: int) -> Tensor:
        """``Ā_m^l: (h, N/2, n)``. ``pow``: ``Ā ** l``, which is NaN at ``l = 0`` once ``Ā``
        underflows to 0 (complex ``0 ** 0`` goes through ``log 0``; an lr ≥ 0.1 drives ``Re A``
        to −e^13 within a few hundred Adam steps, ``exp(ΔA)`` then underflows in float32: the
        zoo's S4D diverged on a seed at every lr). ``exp``: ``exp(l ΔA)``, the same values
        without the log (1 at l = 0, 0 past the underflow)."""
        A_bar, _ = self.discrete()
        l = torch.arange(n, device=A_bar.device, dtype=A_bar.real.dtype)
        if self.powers == "pow":
            return A_bar[..., None] ** l
        A = torch.complex(-torch.exp(self.log_A_re), self.A_im)
        return torch.exp((torch.exp(self.log_dt)[:, None] * A)[..., None] * l)

    def kernel(self, n: int, backward: bool = False) -> Tensor:
        """``K: (h, n)``, ``K_l = 2 Re Σ_m C_m B̄_m Ā_m^l`` (``C←`` for the backward kernel)."""
        A_bar, B_bar = self.discrete()
        C = torch.complex(self.C_back_re, self.C_back_im) if backward else torch.complex(self.C_re, self.C_im)
        powers = self.vandermonde(n)  # (h, N/2, n): Ā_m^l, the Vandermonde matrix
        return 2 * torch.einsum("cm,cml->cl", C * B_bar, powers).real

    def mix(self, u: Tensor) -> Tensor:
        """The SSM on ``u: (B, n, h)`` as a convolution: ``(B, n, h)``, ``K * u + D u``."""
        n = u.shape[1]
        pos = torch.arange(n, device=u.device)
        gap = pos[:, None] - pos[None, :]  # (n, n): t − j
        K = self.kernel(n).to(u.dtype)  # (h, n)
        T = torch.where(gap >= 0, K[:, gap.clamp_min(0)], 0.0)  # (h, n, n): K_{t−j}, j ≤ t
        if not self.causal:
            K_back = self.kernel(n, backward=True).to(u.dtype)
            T = T + torch.where(gap < 0, K_back[:, (-gap - 1).clamp_min(0)], 0.0)  # K←_{j−t−1}, j > t
        return torch.einsum("ctj,bjc->btc", T, u) + self.D * u

    def recurrence(self, u: Tensor) -> Tensor:
        """The same SSM as a scan over the tokens, ``x_t = Ā x_{t−1} + B̄ u_t``, ``y_t = 2 Re C x_t``
        (plus ``D u_t``); equal to :meth:`mix`."""
        A_bar, B_bar = self.discrete()
        n = u.shape[1]

        def scan(order: range, C: Tensor, read_first: bool) -> Tensor:
            state, out = torch.zeros(u.shape[0], *A_bar.shape, dtype=A_bar.dtype), {}
            for t in order:
                if read_first:  # backward: y←_t = 2 Re C← x←_{t+1}, the tokens after t only
                    out[t] = 2 * (C * state).sum(-1).real
                state = A_bar * state + B_bar * u[:, t, :, None]  # (B, h, N/2)
                if not read_first:  # forward: y_t = 2 Re C x_t, the tokens up to t
                    out[t] = 2 * (C * state).sum(-1).real
            return torch.stack([out[t] for t in range(n)], dim=1)  # (B, n, h)

        y = scan(range(n), torch.complex(self.C_re, self.C_im), read_first=False)
        if not self.causal:
            y = y + scan(range(n - 1, -1, -1), torch.complex(self.C_back_re, self.C_back_im), read_first=True)
        return y + self.D * u

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(self.mix(x @ self.W_in.T)) @ self.W_out.T  # (B, n, d)

    @torch.no_grad()
    def rotate_(self, Q: Tensor) -> None:
        """The weights for the embedding ``x ↦ Q x``: ``W_in ↦ W_in Qᵀ``, ``W_out ↦ Q W_out``;
        the SSM (``h``-space) unchanged."""
        self.W_in.copy_(self.W_in @ Q.T)
        self.W_out.copy_(Q @ self.W_out)
