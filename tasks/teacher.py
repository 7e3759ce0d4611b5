"""T3: student-teacher regression with the teachers (a)-(g) of paper.md §12 T3.

Inputs have ``n`` tokens with i.i.d. ``N(0, I_d/d)`` entries (columns of the paper's ``X``);
for the quartic teacher each sequence has its own random diagonal covariance (paper.md §12:
otherwise ``YYᵀ/n`` tends to a constant and the quartic term collapses to a quadratic one).
The teacher (:mod:`tasks.teachers`) and its knowledge ``Z*: (d, k)``, ``W*: (k, k)`` come from
``teacher_seed``: every variant and seed learns the same function. ``k`` is the *teacher's*
knowledge size ``k*``; the student's (``model.d1``, …) is a model option.

Teacher scale (paper.md §12): the temperature ``β`` is calibrated once, at length ``n`` on a
calibration set from the teacher's stream, so that the uniform-mixing predictor
``x̄ = mean_j x_j`` has relative MSE ``uniform_rel_mse``. Teacher (b) is far from uniform
mixing at every ``β`` (its ``1/n`` output is small); for it ``β`` standardises the scores
(std 1) instead, and ``test/uniform_rel_mse`` records the (larger) value. The residual teacher
``X + W_V* X S_r(·)ᵀ`` is calibrated on its attention ``X S_r(·)ᵀ`` (the residual ``X`` alone
keeps the uniform-mixing predictor near 1 at every ``β``).

Example (softmax teacher, d=2, n=2, rows are tokens)::

    x = [[0.3, -0.7], [1.1, 0.2]]                # (n, d): two tokens
    y = [s_11·x_1 + s_12·x_2, s_21·x_1 + s_22·x_2]  # each output row a convex mix of the inputs

Metrics: ``rel_mse = Σ‖ŷ − y‖² / Σ‖y‖²`` over the whole set, ``mse``, and the references
``uniform_rel_mse`` (uniform mixing), ``identity_rel_mse`` (``ŷ = x``) and ``zero_rel_mse``
(``ŷ = 0``, exactly 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from scipy.optimize import brentq
from torch import Tensor

from tasks.base import Batch, CommonConfig, RegressionTask, check_positive, generator
from tasks.teachers import Teacher, TeacherKind


@dataclass
class TeacherConfig(CommonConfig):
    """Options of :class:`TeacherTask` (registry name ``teacher``)."""

    name: str = "teacher"
    teacher: TeacherKind = TeacherKind.softmax  # which teacher, (a)-(g) or residual
    d: int = 16  # embedding dimension
    n: int = 8  # training length (when train_lengths is empty) and calibration length
    k: int = 4  # teacher knowledge size k*
    teacher_seed: int = 0  # fixes Z*, W*, β and the validation/test sets
    uniform_rel_mse: float = 0.6  # calibrated relative MSE of the uniform-mixing predictor
    # std of Gaussian noise added to the training targets only, relative to their RMS (stream
    # (seed, "label_noise", n)); validation and test targets stay the teacher's own, so the
    # error floor stays 0 and a student's error is its distance from the teacher. Makes a
    # teacher every student of its form fits exactly (T3a) one that finite data cannot
    # (issue 51's pilots; conf/ablation/residual_value.yaml)
    label_noise: float = 0.0


_BETA: dict[tuple, float] = {}  # calibrated β per (teacher, d, n, k, teacher_seed, uniform_rel_mse)


def relative_mse(pred: Tensor, target: Tensor) -> float:
    """``Σ‖pred − target‖² / Σ‖target‖²`` over all entries (a float)."""
    return float(((pred - target) ** 2).sum() / (target**2).sum())


class TeacherTask(RegressionTask):
    """Student-teacher regression (T3). Shapes: ``x, y: (B, n, d)``.

    What is its own: the teacher, its calibrated temperature ``β`` and the inputs; the loss, the
    metrics, the references, T2's rotation and the streams are :class:`tasks.base.RegressionTask`'s,
    with the validation/test streams ``(teacher_seed, split, n)``, shared by every variant and seed.

    Args:
        cfg: task options.
        dtype: floating dtype of every tensor it yields.

    Raises:
        ValueError: for sizes < 1, a negative ``label_noise``, or a ``uniform_rel_mse`` that no temperature reaches
            (naming the reachable range).
    """

    def __init__(self, cfg: TeacherConfig, dtype: torch.dtype = torch.float32) -> None:
        super().__init__(cfg, dtype)
        check_positive("teacher", d=cfg.d, n=cfg.n, k=cfg.k, n_train=cfg.n_train,
                       n_val=cfg.n_val, n_test=cfg.n_test)
        if cfg.label_noise < 0:
            raise ValueError(f"task.label_noise must be >= 0 (a std relative to the targets' RMS), got {cfg.label_noise}")
        self.d = cfg.d
        self.set_lengths([cfg.n])
        self.stream_seed = cfg.teacher_seed  # every variant and seed is tested on the same sets
        g = generator(cfg.teacher_seed, "teacher")
        self.teacher = Teacher(cfg.teacher, cfg.d, cfg.k, g, cfg.teacher_seed)
        key = (cfg.teacher, cfg.d, cfg.n, cfg.k, cfg.teacher_seed, cfg.uniform_rel_mse)
        if key not in _BETA:  # the calibration is the costly part of building a task: once
            _BETA[key] = self._calibrate(self._inputs(g, 1024, cfg.n, torch.float64))
        self.beta = _BETA[key]

    def _inputs(self, g: torch.Generator, size: int, n: int, dtype: torch.dtype) -> Tensor:
        x = torch.randn(size, n, self.d, generator=g, dtype=dtype) / math.sqrt(self.d)
        if self.cfg.teacher is TeacherKind.quartic:  # per-sequence covariance diag(s)²
            s = torch.exp(0.75 * torch.randn(size, 1, self.d, generator=g, dtype=dtype))
            x = x * s / s.pow(2).mean(-1, keepdim=True).sqrt()  # (B, n, d), E‖x_j‖² = 1
        return x

    def _calibrate(self, x: Tensor) -> float:
        target = self.cfg.uniform_rel_mse
        uniform = x.mean(dim=1, keepdim=True).expand_as(x)
        part = self.teacher.head if self.cfg.teacher is TeacherKind.residual else self.teacher

        def gap(log_beta: float) -> float:
            return relative_mse(uniform, part(x, math.exp(log_beta))) - target

        lo, hi = math.log(1e-3), math.log(1e4)
        g_lo, g_hi = gap(lo), gap(hi)
        if g_lo < 0 < g_hi:
            return math.exp(brentq(gap, lo, hi, xtol=1e-6))
        if g_lo >= 0 and g_hi >= 0 and self.cfg.teacher is TeacherKind.elementwise:
            return 1.0 / float(self.teacher.scores(x).std())  # scores of std 1: tanh is nonlinear
        raise ValueError(
            f"task.uniform_rel_mse={target} is not reachable for teacher={self.cfg.teacher.value}, "
            f"n={self.cfg.n}; allowed: between {g_lo + target:.3f} and {g_hi + target:.3f}")

    def sample(self, g: torch.Generator, size: int, n: int) -> Batch:
        """``size`` fresh sequences of length ``n`` from stream ``g``."""
        x = self._inputs(g, size, n, self.dtype)
        return Batch(x=x, y=self.teacher(x, self.beta))

    def sample_split(self, split: str, n: int, size: int, seed: int) -> Batch:
        """As :meth:`tasks.base.RegressionTask.sample_split`; the training targets get
        ``label_noise × RMS(y)`` Gaussian noise from the stream ``(seed, "label_noise", n)``."""
        batch = super().sample_split(split, n, size, seed)
        if split != "train" or self.cfg.label_noise == 0:
            return batch
        y = batch.y
        noise = torch.randn(y.shape, generator=generator(seed, "label_noise", n), dtype=y.dtype)
        return replace(batch, y=y + self.cfg.label_noise * y.pow(2).mean().sqrt() * noise)
