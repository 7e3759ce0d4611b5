"""T3a: student-teacher regression with a softmax-attention teacher (paper.md §12, T3(a)).

Inputs have ``n`` tokens with i.i.d. ``N(0, I_d/d)`` entries (columns of the paper's ``X``).
The teacher is ``F* = X S_r(β Y*ᵀ W* Y*)ᵀ`` with ``Y* = Z*ᵀ X``, knowledge ``Z*: (d, k)`` and
``W*: (k, k)`` drawn from ``teacher_seed``; every variant and seed learns the same function.
The temperature ``β`` is calibrated once (on a calibration set from the teacher's own stream) so
that the uniform-mixing predictor ``x̄ = mean_j x_j`` has relative MSE ``uniform_rel_mse``
(paper.md §12 "Teacher scale": ≥ 0.5), i.e. the teacher attends sharply.

Example (d=2, n=2, shapes only; rows are tokens)::

    x = [[0.3, -0.7], [1.1, 0.2]]          # (n, d): two tokens
    y = s_11·x_1 + s_12·x_2, s_21·x_1 + s_22·x_2   # each output row is a convex mix of the inputs

Relative MSE is ``Σ‖ŷ − y‖² / Σ‖y‖²`` over the whole set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from scipy.optimize import brentq
from torch import Tensor

from tasks.base import Batch, generator


@dataclass
class TeacherConfig:
    """Options of :class:`TeacherTask` (registry name ``teacher``)."""

    name: str = "teacher"
    d: int = 16  # embedding dimension
    n: int = 8  # training sequence length
    k: int = 4  # teacher knowledge size k*
    teacher_seed: int = 0  # fixes Z*, W*, β and the validation/test sets
    n_train: int = 256  # training examples
    n_val: int = 512  # validation examples (model selection)
    n_test: int = 2048  # test examples
    uniform_rel_mse: float = 0.6  # calibrated relative MSE of the uniform-mixing predictor


def relative_mse(pred: Tensor, target: Tensor) -> float:
    """``Σ‖pred − target‖² / Σ‖target‖²`` over all entries (a float)."""
    return float(((pred - target) ** 2).sum() / (target**2).sum())


class TeacherTask:
    """Student-teacher regression, softmax teacher (T3a). Shapes: ``x, y: (B, n, d)``.

    Args:
        cfg: task options.
        dtype: floating dtype of every tensor it yields.

    Raises:
        ValueError: for non-positive sizes, or a ``uniform_rel_mse`` outside (0, 1 − 1/n)
            that no temperature reaches.
    """

    def __init__(self, cfg: TeacherConfig, dtype: torch.dtype = torch.float32) -> None:
        sizes = {"d": cfg.d, "n": cfg.n, "k": cfg.k, "n_train": cfg.n_train,
                 "n_val": cfg.n_val, "n_test": cfg.n_test}
        bad = {key: v for key, v in sizes.items() if v <= 0}
        if bad:
            raise ValueError(f"task 'teacher' needs positive sizes, got {bad}")
        self.cfg, self.dtype = cfg, dtype
        self.d, self.n_max = cfg.d, cfg.n
        g = generator(cfg.teacher_seed, "teacher")
        self.Z = torch.randn(cfg.d, cfg.k, generator=g, dtype=torch.float64)  # (d, k): Y* = Zᵀ X
        self.W = torch.randn(cfg.k, cfg.k, generator=g, dtype=torch.float64) / math.sqrt(cfg.k)
        self.beta = self._calibrate(self._inputs(g, 1024, cfg.n, torch.float64))

    def _inputs(self, g: torch.Generator, size: int, n: int, dtype: torch.dtype) -> Tensor:
        return torch.randn(size, n, self.d, generator=g, dtype=dtype) / math.sqrt(self.d)

    def _teacher(self, x: Tensor, beta: float) -> Tensor:
        yt = x @ self.Z.to(x.dtype)  # (B, n, k): the paper's Y*ᵀ
        a = beta * yt @ self.W.to(x.dtype) @ yt.transpose(-1, -2)  # (B, n, n), query first
        return torch.softmax(a, dim=-1) @ x  # (B, n, d)

    def _calibrate(self, x: Tensor) -> float:
        target = self.cfg.uniform_rel_mse
        uniform = x.mean(dim=1, keepdim=True).expand_as(x)

        def gap(log_beta: float) -> float:
            return relative_mse(uniform, self._teacher(x, math.exp(log_beta))) - target

        lo, hi = math.log(1e-3), math.log(1e4)
        if not gap(lo) < 0 < gap(hi):
            raise ValueError(
                f"task.uniform_rel_mse={target} is not reachable for n={self.cfg.n}; "
                f"allowed: between {gap(lo) + target:.3f} and {gap(hi) + target:.3f}"
            )
        return math.exp(brentq(gap, lo, hi, xtol=1e-6))

    def sample(self, g: torch.Generator, size: int, n: int) -> Batch:
        """``size`` fresh sequences of length ``n`` from stream ``g``."""
        x = self._inputs(g, size, n, self.dtype)
        return Batch(x=x, y=self._teacher(x, self.beta))

    def train_set(self, seed: int) -> Batch:
        """Exactly ``n_train`` training examples from the trial's data stream ``(seed, "train")``."""
        return self.sample(generator(seed, "train"), self.cfg.n_train, self.cfg.n)

    def val_set(self) -> Batch:
        """The validation set, from the teacher's own stream (disjoint from every training one)."""
        return self.sample(generator(self.cfg.teacher_seed, "val"), self.cfg.n_val, self.cfg.n)

    def test_set(self) -> Batch:
        """The test set, shared by every variant and seed (paired comparisons)."""
        return self.sample(generator(self.cfg.teacher_seed, "test"), self.cfg.n_test, self.cfg.n)

    def loss(self, pred: Tensor, batch: Batch) -> Tensor:
        """Mean squared error (a scalar tensor)."""
        return torch.mean((pred - batch.y) ** 2)

    def metrics(self, pred: Tensor, batch: Batch) -> dict[str, float]:
        """``{"rel_mse": ..., "mse": ...}`` of a prediction ``(B, n, d)``."""
        return {"rel_mse": relative_mse(pred, batch.y), "mse": float(self.loss(pred, batch))}

    def reference_metrics(self, batch: Batch) -> dict[str, float]:
        """Relative MSE of the trivial predictors: ``uniform_rel_mse`` (token mean), ``zero_rel_mse``."""
        uniform = batch.x.mean(dim=1, keepdim=True).expand_as(batch.x)
        return {"uniform_rel_mse": relative_mse(uniform, batch.y), "zero_rel_mse": 1.0}
