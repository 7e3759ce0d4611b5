"""The teachers of T3 (paper.md §12 T3 (a)-(g)), as one class holding the teacher's knowledge.

Rows are tokens: ``x: (B, n, d)`` is the paper's ``Xᵀ``, ``yt = x @ Z*: (B, n, k*)`` its
``Y*ᵀ``, scores ``A = yt W* ytᵀ: (B, n, n)`` with the query first (paper.md §11.1), and every
teacher returns ``F_rows: (B, n, d)``. ``β`` is the temperature (see :mod:`tasks.teacher`).

=============  =====================================================================
kind           F (paper's notation, columns are tokens)
=============  =====================================================================
softmax        (a) ``X S_r(β Y*ᵀ W* Y*)ᵀ``
elementwise    (b) ``(1/n) X tanh(β Y*ᵀ W* Y*)ᵀ``
quartic        (c) ``X S_r(β Y*ᵀ B1 (Y* Y*ᵀ/n) B2 Y*)ᵀ``
general        (d) ``X S_r(β Y*ᵀ W* Y*)ᵀ + c Z* tanh(W' Y*)``, ``c = 1/(2 sqrt(k* d))``
noknow         (e) ``X S_r(β XᵀX)ᵀ`` (knowledge-free, Prop. 1)
control        (f) ``φ(X) S_r(β XᵀX)ᵀ``, ``φ(x) = tanh(√d x)/√d`` coordinate-wise (not equivariant)
squashed       (f′) ``ψ(X S_r(β XᵀX)ᵀ)``, ``ψ(u) = tanh(2√d u)/(2√d)`` *after* the mixing (not equivariant)
positional     (g) ``X S_r(β (Y*ᵀ W* Y* + B_rel))ᵀ``, ``B_rel[i, j] = b[clip(j − i, −R, R)]``
residual       ``X + W_V* X S_r(β Y*ᵀ W* Y*)ᵀ``, ``W_V*: (d, d)`` with N(0, 1/d) entries
=============  =====================================================================

(c) mixes with the row softmax, the ``σ`` of paper.md §12 T3(c) chosen so that the quartic
student M8 (``higher_order``, softmax) represents it exactly and the uniform-mixing calibration
applies; with ``tanh`` and ``1/n`` its outputs were so small that every softmax student scored
worse than predicting zero. ``residual`` is the single head with a residual path that the
M4 → M7 ladder needs (paper.md §13 C12): M6 (``residual``) and M7 (``multihead``) represent it,
M4 and M5 lack the identity path.

``squashed`` (f′) is C9's control teacher (paper.md §13 C9: a control that favours a
non-equivariant baseline *without being that baseline's own form*). (f) ``φ(X) S_r(·)ᵀ`` is
exactly B7's form (``coordwise``: ``S_r(YᵀWY/√k) tanh(X)`` as rows, φ on the values *before*
mixing), so B7 beating M4 on (f) is a student of the teacher's form winning. (f′) squashes the
*mixed* output, ``F_rows = ψ(S_r(β X Xᵀ) X_rows): (B, n, d)`` (ψ: φ at twice the gain, see
``SQUASH_GAIN``): since ψ is nonlinear, ``ψ(Σ_j s_ij x_j) ≠ Σ_j s_ij ψ(x_j)`` whenever a
row of ``S`` is not one-hot, so B7 represents it only approximately (exactly only in the hardmax limit), and no registered family has its
form: M4 (``softmax``) and every output in span(X) miss the coordinate-wise squashing. Its
form is a softmax head followed by a coordinate-wise ψ (an M4 head with a B7-style ψ on its
output): a basis-dependent map, not orthogonal equivariant even with knowledge ``k < d``,
like (f). The flattened MLP B1 can approximate it, as it can any continuous map.
"""

from __future__ import annotations

import math
from enum import Enum

import torch
from torch import Tensor

from tasks.base import generator

MAX_REL = 4  # R: relative offsets beyond ±R share one bias (keeps (g) length-generic)
# (f′)'s ψ(u) = tanh(c√d u)/(c√d): mixing averages tokens and shrinks them, so at (f)'s gain
# c = 1 the squashing barely bites (pilot seed 100, n_train = 1024: B7 led M4 by 0.11 in log
# test error); c = 2 gives 0.19; at c = 4 no β reaches uniform_rel_mse = 0.6
SQUASH_GAIN = 2.0


class TeacherKind(Enum):
    """The teachers (a)-(g) of paper.md §12 T3, and (f′) ``squashed`` (C9's control)."""

    softmax = "softmax"
    elementwise = "elementwise"
    quartic = "quartic"
    general = "general"
    noknow = "noknow"
    control = "control"
    squashed = "squashed"  # (f′): C9's control, ψ after the mixing (not B7's form)
    positional = "positional"
    residual = "residual"


class Teacher:
    """Teacher knowledge ``Z*: (d, k)``, ``W*: (k, k)`` (from stream ``g``) and, per kind, the
    extra tensors ``B1, B2`` (quartic), ``W'`` (general), ``b`` (positional) or ``V = W_V*``
    (residual) from the stream ``(teacher_seed, "teacher", kind)``. All float64; :meth:`__call__`
    casts to ``x``'s dtype.
    """

    def __init__(self, kind: TeacherKind, d: int, k: int, g: torch.Generator, teacher_seed: int) -> None:
        self.kind, self.d, self.k = kind, d, k
        self.Z = torch.randn(d, k, generator=g, dtype=torch.float64)  # (d, k): Y* = Zᵀ X
        self.W = torch.randn(k, k, generator=g, dtype=torch.float64) / math.sqrt(k)
        extra = generator(teacher_seed, "teacher", kind.value)
        self.B1 = torch.randn(k, k, generator=extra, dtype=torch.float64) / math.sqrt(k)
        self.B2 = torch.randn(k, k, generator=extra, dtype=torch.float64) / math.sqrt(k)
        self.Wp = torch.randn(k, k, generator=extra, dtype=torch.float64) / math.sqrt(k)
        self.b = 2.0 * torch.randn(2 * MAX_REL + 1, generator=extra, dtype=torch.float64)
        self.V = torch.randn(d, d, generator=extra, dtype=torch.float64) / math.sqrt(d)  # W_V*

    def scores(self, x: Tensor) -> Tensor:
        """Unscaled scores ``A: (B, n, n)`` (query first) of this teacher."""
        c = lambda t: t.to(x.dtype)  # noqa: E731
        if self.kind in (TeacherKind.noknow, TeacherKind.control, TeacherKind.squashed):
            return x @ x.transpose(-1, -2)  # (B, n, n): XᵀX
        yt = x @ c(self.Z)  # (B, n, k)
        if self.kind is TeacherKind.quartic:
            cov = yt.transpose(-1, -2) @ yt / x.shape[-2]  # (B, k, k): Y*Y*ᵀ/n
            return yt @ c(self.B1) @ cov @ c(self.B2) @ yt.transpose(-1, -2)
        a = yt @ c(self.W) @ yt.transpose(-1, -2)  # (B, n, n)
        if self.kind is TeacherKind.positional:
            n = x.shape[-2]
            pos = torch.arange(n, device=x.device)
            rel = (pos[None, :] - pos[:, None]).clamp(-MAX_REL, MAX_REL) + MAX_REL  # (n, n): j − i
            a = a + c(self.b).to(x.device)[rel]
        return a

    def head(self, x: Tensor, beta: float) -> Tensor:
        """The residual teacher's attention ``X S_r(β Y*ᵀ W* Y*)ᵀ`` as rows, ``(B, n, d)``: the
        part its temperature is calibrated on (:class:`tasks.teacher.TeacherTask`)."""
        return torch.softmax(beta * self.scores(x), dim=-1) @ x

    def __call__(self, x: Tensor, beta: float) -> Tensor:
        """``F_rows: (B, n, d)`` of inputs ``x: (B, n, d)`` at temperature ``beta``."""
        a = beta * self.scores(x)  # (B, n, n)
        n = x.shape[-2]
        if self.kind is TeacherKind.elementwise:
            return torch.tanh(a) @ x / n
        if self.kind is TeacherKind.residual:  # rows: x + (S x) W_V*ᵀ
            return x + self.head(x, beta) @ self.V.to(x.dtype).T
        mix = torch.softmax(a, dim=-1)  # (B, n, n): normalised over keys j
        if self.kind is TeacherKind.control:
            root = math.sqrt(self.d)
            return mix @ (torch.tanh(root * x) / root)  # coordinate-wise: basis-dependent
        out = mix @ x  # (B, n, d)
        if self.kind is TeacherKind.squashed:  # ψ after the mixing: not B7's φ-then-mix
            gain = SQUASH_GAIN * math.sqrt(self.d)
            return torch.tanh(gain * out) / gain
        if self.kind is TeacherKind.general:
            zt = self.Z.to(x.dtype) / (2 * math.sqrt(self.k * self.d))  # (d, k)
            out = out + torch.tanh(x @ self.Z.to(x.dtype) @ self.Wp.to(x.dtype).T) @ zt.T  # Z g2
        return out

    def rotated(self, Q: Tensor) -> "Teacher":
        """The teacher with its knowledge rotated, ``Z* ↦ Q Z*`` and ``W_V* ↦ Q W_V* Qᵀ`` (exact
        for every kind but the controls (f) and (f′))."""
        other = object.__new__(Teacher)
        other.__dict__.update(self.__dict__)
        q = Q.to(torch.float64)
        other.Z = q @ self.Z
        other.V = q @ self.V @ q.T
        return other
