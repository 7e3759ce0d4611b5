"""What every task provides (paper.md §11 data interface, §12 tasks): batches, the embedding and
readout, the loss and the metrics. Also the seed streams and the options every task shares."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Dict, List, Optional, Sequence

import torch
from torch import Tensor, nn


@dataclass
class Batch:
    """A batch of ``B`` sequences of one length ``n`` (rows are tokens: the paper's ``Xᵀ``).

    Attributes:
        x: real inputs ``(B, n, d)`` (regression tasks), or ``None`` for token tasks, whose
            inputs the task embeds from ``tokens`` (see :meth:`TaskBase.inputs`).
        y: targets: ``(B, n, d)`` floats (regression) or ``(B, n)`` token ids (token tasks).
        tokens: input token ids ``(B, n)`` (token tasks), else ``None``.
        mask: ``(B, n)`` bool, the positions that count in loss and metrics; ``None`` = all.
        groups: named ``(B,)`` bool tags of examples (e.g. ``answer_in_input``); metrics are
            also reported per group.
    """

    x: Optional[Tensor]
    y: Tensor
    tokens: Optional[Tensor] = None
    mask: Optional[Tensor] = None
    groups: Dict[str, Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.y.shape[0]

    @property
    def n(self) -> int:
        """Sequence length."""
        return self.y.shape[1]

    def index(self, idx: Tensor) -> "Batch":
        """The sub-batch at positions ``idx`` (a 1-D integer index tensor). ``index_select``
        gives what ``t[idx]`` gives, about 5× faster on a CPU (benchmarks/RESULTS.md)."""
        pick = lambda t: None if t is None else t.index_select(0, idx)  # noqa: E731
        return Batch(pick(self.x), pick(self.y), pick(self.tokens), pick(self.mask),
                     {k: pick(v) for k, v in self.groups.items()})

    def to(self, device: torch.device | str) -> "Batch":
        """The batch moved to ``device``."""
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Batch(move(self.x), self.y.to(device), move(self.tokens), move(self.mask),
                     {k: v.to(device) for k, v in self.groups.items()})


class Rotation(Enum):
    """T2 (paper.md §12, claim C5/C5b): ``none``; ``eval`` also evaluates the trained model in a
    rotated embedding ``Q E``; ``retrain`` trains from the rotated initialisation in ``Q E``."""

    none = "none"
    eval = "eval"
    retrain = "retrain"


@dataclass
class CommonConfig:
    """Options every task family shares (its schema inherits them).

    ``train_lengths``/``test_lengths`` are T5's sets of lengths (paper.md §12); an empty list
    means the family's default. ``test/<metric>`` is measured on the in-distribution test set
    (the training lengths); ``test/n_<n>/<metric>`` on each test length.
    """

    n_train: int = 256  # training examples (split evenly over the training lengths)
    n_val: int = 512  # validation examples (checkpoint selection), split likewise
    n_test: int = 2048  # test examples: in-distribution, and again per extra test length
    train_lengths: List[int] = field(default_factory=list)
    test_lengths: List[int] = field(default_factory=list)
    rotation: Rotation = Rotation.none
    rotation_seed: int = 0  # draws T2's orthogonal Q
    # re-seeds the validation and test streams (fresh evaluation sets, paper.md §13 "Confirmation
    # block"). None (the default): the trial's own seed, so the exploratory seeds are evaluated
    # on sets of their own too, and an lr that blows up on one evaluation set is seen before it
    # is chosen (set to the seed when the trial is composed, harness.expansion, so the trial id
    # names the sets; resolve_eval_seed for a config built otherwise); 0: the task's own streams,
    # shared by every seed, as every trial recorded before the default became None (left out of
    # the trial identity at 0, harness.records.NEUTRAL_DEFAULTS, so those trials keep their
    # ids). The training set never depends on it.
    eval_seed: Optional[int] = None


def resolve_eval_seed(cfg, seed: int):
    """``cfg`` (a task config) with ``eval_seed`` = ``seed`` where it is None (the default:
    the trial's own evaluation sets); unchanged otherwise, and for configs without the key."""
    return replace(cfg, eval_seed=seed) if getattr(cfg, "eval_seed", 0) is None else cfg


def derive_seed(*parts: object) -> int:
    """A 63-bit seed derived from ``parts`` (e.g. ``(seed, "data")``) by SHA-256.

    Distinct ``parts`` give independent streams, so the data and initialisation seeds of a trial
    never coincide, and validation/test streams never coincide with a training stream.
    """
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def generator(*parts: object) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`derive_seed` of ``parts``."""
    return torch.Generator().manual_seed(derive_seed(*parts))


def haar_orthogonal(d: int, g: torch.Generator, dtype: torch.dtype = torch.float64) -> Tensor:
    """A Haar-random ``Q ∈ O(d)`` (QR of a Gaussian, signs fixed by ``diag(R) > 0``), ``(d, d)``."""
    q, r = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return (q * torch.sign(torch.diagonal(r))).to(dtype)


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal counts, the remainder going to the first ones."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def check_positive(task: str, **sizes: int) -> None:
    """Raises ``ValueError`` naming every size that is not positive (allowed: ≥ 1)."""
    bad = {key: v for key, v in sizes.items() if v <= 0}
    if bad:
        raise ValueError(f"task {task!r} needs sizes ≥ 1, got {bad}")


Sums = Dict[str, tuple]


def combine(sums: Sequence[Sums]) -> dict[str, float]:
    """Metric values ``Σ numerator / Σ denominator`` over chunks or lengths; a metric whose
    denominator is 0 (an empty group) is left out."""
    total: dict[str, list[float]] = {}
    for part in sums:
        for key, (num, den) in part.items():
            acc = total.setdefault(key, [0.0, 0.0])
            acc[0] += float(num)
            acc[1] += float(den)
    return {key: num / den for key, (num, den) in total.items() if den > 0}


class TaskBase(nn.Module):
    """Base of every task family. A task is an ``nn.Module`` so that a learned embedding ``E``
    or unembedding ``U`` (paper.md §11) is trained, checkpointed and moved with the model.

    Attributes:
        d: embedding dimension the model sees.
        n_max: the longest training length (what a model with a maximum length is built for).
        lengths: the training lengths.
        test_ns: the extra test lengths (T5).

    Subclasses implement :meth:`sample_split` (and usually :meth:`inputs`, :meth:`loss`,
    :meth:`metric_sums`). Sets are lists of :class:`Batch`, one per length. A regression task
    starts from :class:`RegressionTask` (it then writes only ``__init__`` and ``sample``), a
    token task from :class:`tasks.tokens.TokenTask`.

    The metric contract (what the harness and the analysis read):

    * :meth:`metric_sums` reports ``rel_mse`` (regression: ``Σ‖ŷ − y‖² / Σ‖y‖²``) or ``acc``
      (token tasks: the fraction of sequences right); checkpoints and learning rates are selected
      on it (``harness.trial.selection_error``: ``rel_mse``, else ``1 − acc``), and the analysis
      reads ``test/rel_mse`` or ``test/acc`` as the trial's error (``analysis/stats.py``).
    * :meth:`reference_sums` reports the trivial predictor the analysis compares with:
      ``uniform_rel_mse`` (regression: every output the token mean) or ``majority_acc`` (token
      tasks), logged as ``test/uniform_rel_mse`` / ``test/majority_acc``.
    * :meth:`loss_dense` runs under ``torch.func.vmap`` (no boolean indexing), or packed trials
      of the task fail and fall back to running alone.
    * Every set is deterministic: training data from ``(seed, "train", …)``, validation and test
      from the task's own streams (the same for every seed and ``n_train``).
    """

    d: int
    n_max: int
    lengths: list[int]
    test_ns: list[int]

    def __init__(self, cfg, dtype: torch.dtype) -> None:
        super().__init__()
        self.cfg, self.dtype = cfg, dtype

    def set_lengths(self, default: list[int], minimum: int = 1) -> None:
        """Training lengths (``cfg.train_lengths`` or ``default``), test lengths and ``n_max``.

        Raises:
            ValueError: a length below ``minimum``, naming it and the allowed range.
        """
        self.lengths = sorted(set(self.cfg.train_lengths)) or list(default)
        self.test_ns = list(self.cfg.test_lengths)
        bad = [n for n in [*self.lengths, *self.test_ns] if n < minimum]
        if bad:
            raise ValueError(f"task {self.cfg.name!r}: lengths {bad} not allowed; allowed: n ≥ {minimum}")
        self.n_max = max(self.lengths)

    def symmetries(self) -> frozenset[str]:
        """The groups the task's target map is exactly symmetric under, the ones
        ``train.augment`` may draw from (issue 51's augmentation control): ``permutation`` when
        permuting an example's positions permutes its targets and mask alike,
        ``y(X P) = y(X) P`` for every permutation ``P``. None declared by default; a task that
        declares one is tested for it (tests/test_augment.py)."""
        return frozenset()

    # --- data -------------------------------------------------------------------------
    def sample_split(self, split: str, n: int, size: int, seed: int) -> Batch:
        """``size`` examples of length ``n`` of ``split`` (train/val/test); ``seed`` is the
        trial seed for ``train`` and ignored otherwise."""
        raise NotImplementedError

    def eval_seed(self) -> int:
        """``task.eval_seed`` as the trial resolved it (:func:`resolve_eval_seed`; composed
        trials are resolved by :mod:`harness.expansion`); 0, the task's own shared streams, for
        a config without the key or one built outside a trial and left at None (no seed to
        take)."""
        eval_seed = getattr(self.cfg, "eval_seed", 0)
        return 0 if eval_seed is None else int(eval_seed)

    def eval_generator(self, owner: int, split: str, n: int) -> torch.Generator:
        """The stream of validation/test split ``split`` at length ``n`` of a task whose own
        evaluation streams belong to ``owner`` (its ``task_seed``, ``teacher_seed``, …):
        ``(owner, split, n)`` at ``task.eval_seed`` 0 (so every existing set is unchanged), else
        ``(owner, "eval", eval_seed, split, n)``, a fresh set per evaluation seed."""
        eval_seed = self.eval_seed()
        return generator(owner, split, n) if eval_seed == 0 else generator(owner, "eval", eval_seed, split, n)

    def train_set(self, seed: int) -> list[Batch]:
        """Exactly ``n_train`` examples from the trial's data stream ``(seed, "train")``."""
        sizes = split_evenly(self.cfg.n_train, len(self.lengths))
        return [self.sample_split("train", n, s, seed) for n, s in zip(self.lengths, sizes) if s]

    def val_set(self) -> list[Batch]:
        """``n_val`` validation examples at the training lengths (the task's own stream, the
        same for every seed and ``n_train``); built once per task object (never modify it)."""
        if getattr(self, "_val_set", None) is None:
            sizes = split_evenly(self.cfg.n_val, len(self.lengths))
            self._val_set = [self.sample_split("val", n, s, 0) for n, s in zip(self.lengths, sizes) if s]
        return self._val_set

    def test_sets(self) -> dict[str, list[Batch]]:
        """``{"": in-distribution set, "n_<n>": set at length n for each test length}``.

        The in-distribution set has ``n_test`` examples at the training lengths; each test
        length gets ``n_test`` more (the in-distribution examples, when it is a training length
        with a single training length). The task's own streams: the same for every seed and
        ``n_train``; built once per task object (never modify them).
        """
        if getattr(self, "_test_sets", None) is not None:
            return self._test_sets
        sets = {"": [self.sample_split("test", n, s, 0) for n, s in
                     zip(self.lengths, split_evenly(self.cfg.n_test, len(self.lengths))) if s]}
        for n in self.test_ns:
            same = self.lengths == [n]
            sets[f"n_{n}"] = sets[""] if same else [self.sample_split("test", n, self.cfg.n_test, 0)]
        self._test_sets = sets
        return sets

    def share_data(self, other: "TaskBase") -> None:
        """Take ``other``'s validation and test sets instead of building them again (a pack's
        trials share one task config, :mod:`harness.pack`; these sets are its function alone).

        Raises:
            ValueError: the two tasks' configs differ in more than ``n_train``.
        """
        if replace(self.cfg, n_train=0) != replace(other.cfg, n_train=0):
            raise ValueError(f"cannot share data between task configs {self.cfg} and {other.cfg}")
        self._val_set, self._test_sets = other.val_set(), other.test_sets()

    # --- embedding, readout, loss, metrics ----------------------------------------------
    def init_parameters(self, g: torch.Generator) -> None:
        """Initialise learned embedding/readout parameters (if any) from stream ``g``."""

    def inputs(self, batch: Batch) -> Tensor:
        """Model inputs ``(B, n, d)`` of ``batch``."""
        return batch.x

    def loss(self, out: Tensor, batch: Batch) -> Tensor:
        """Scalar training loss of the model output ``out: (B, n, d)``."""
        raise NotImplementedError

    def loss_dense(self, out: Tensor, batch: Batch) -> Tensor:
        """:meth:`loss` without data-dependent shapes (no boolean indexing), so that it runs
        under ``torch.func.vmap`` (packed trials, :mod:`harness.pack`); equal to :meth:`loss` up
        to summation order. Default: :meth:`loss` itself."""
        return self.loss(out, batch)

    def metric_sums(self, out: Tensor, batch: Batch) -> Sums:
        """``{name: (numerator, denominator)}``; :func:`combine` turns them into metrics."""
        raise NotImplementedError

    def metric_sums_dense(self, out: Tensor, batch: Batch) -> Sums:
        """:meth:`metric_sums` without data-dependent shapes (no boolean indexing), so that it
        runs under ``torch.func.vmap`` with the batch itself mapped (a pack validating each
        trial on its own set, :mod:`harness.pack`); the same sums up to summation order.
        Default: :meth:`metric_sums` itself."""
        return self.metric_sums(out, batch)

    def reference_sums(self, batch: Batch) -> Sums:
        """Sums of trivial reference predictors (e.g. ``uniform_rel_mse``); default none."""
        return {}

    def causal_reference_sums(self, batch: Batch) -> Sums:
        """:meth:`reference_sums` under the same names for a causal model, which at position t
        sees positions ≤ t only: uniform mixing over the prefix (the flat-score causal mixer)
        instead of over the whole sequence; default none."""
        return {}

    def order_blind_reference_sums(self, batch: Batch) -> Sums:
        """A trivial reference the logged ones omit, for any model: the best guess that reads the
        inputs' contents but binds no position to another (``recall``: the most frequent value,
        :meth:`tasks.selection.SelectionTask.order_blind_reference_sums`); default none (uniform
        mixing is that guess already)."""
        return {}

    def trivial_references(self, causal: bool) -> dict[str, float]:
        """The trivial references over the in-distribution test set (the same for every seed,
        ``n_train`` and model), combined as the harness combines the logged ones: those a causal
        model can express (:meth:`causal_reference_sums`) or any model (:meth:`reference_sums`),
        with :meth:`order_blind_reference_sums`."""
        mine = self.causal_reference_sums if causal else self.reference_sums
        return combine([{**mine(b), **self.order_blind_reference_sums(b)} for b in self.test_sets()[""]])

    def metrics(self, out: Tensor, batch: Batch) -> dict[str, float]:
        """Metrics of one output ``(B, n, d)`` on one batch."""
        return combine([self.metric_sums(out, batch)])

    def rotated(self, Q: Tensor) -> "TaskBase":
        """The same task in the rotated embedding ``x ↦ Q x`` (paper.md §12 T2): a copy."""
        raise NotImplementedError(f"task {self.cfg.name!r} has no rotated embedding")

    def _copy(self) -> "TaskBase":
        return copy.deepcopy(self)


class RegressionTask(TaskBase):
    """Base of a regression task: real inputs and targets ``x, y: (B, n, d)``, mean squared error
    loss, the metrics ``rel_mse`` and ``mse``, the references ``uniform_rel_mse`` (token mean),
    ``identity_rel_mse`` (``ŷ = x``) and ``zero_rel_mse`` (``ŷ = 0``), T2's rotated embedding,
    and the streams: training data ``(seed, "train", n)``, validation/test ``(stream_seed,
    split, n)`` (:class:`tasks.teacher.TeacherTask`, T3, is one, with ``stream_seed = teacher_seed``).

    A subclass sets ``self.d`` and calls :meth:`set_lengths` in ``__init__``, and implements
    :meth:`sample`. Example (the target is each token's running mean)::

        class RunningMean(RegressionTask):
            def __init__(self, cfg, dtype=torch.float32, d=16, n=8):
                super().__init__(cfg, dtype)
                self.d = d
                self.set_lengths([n])

            def sample(self, g, size, n):
                x = torch.randn(size, n, self.d, generator=g, dtype=self.dtype)
                steps = torch.arange(1, n + 1, dtype=self.dtype).view(1, n, 1)
                return Batch(x=x, y=x.cumsum(1) / steps)
    """

    stream_seed: int = 0  # seeds the validation and test streams (e.g. a teacher's seed)

    def __init__(self, cfg, dtype: torch.dtype) -> None:
        super().__init__(cfg, dtype)
        self.Q: Optional[Tensor] = None  # T2: data seen in the rotated embedding x ↦ Q x

    def sample(self, g: torch.Generator, size: int, n: int) -> Batch:
        """``size`` fresh sequences of length ``n`` from stream ``g``: ``Batch(x=..., y=...)``."""
        raise NotImplementedError

    def sample_split(self, split: str, n: int, size: int, seed: int) -> Batch:
        """Training data from ``(seed, "train", n)``; validation/test from ``(stream_seed, split, n)``
        (re-seeded by ``task.eval_seed``, :meth:`eval_generator`)."""
        if split == "train":
            return self.sample(generator(seed, split, n), size, n)
        return self.sample(self.eval_generator(self.stream_seed, split, n), size, n)

    def _target(self, batch: Batch) -> Tensor:
        return batch.y if self.Q is None else batch.y @ self.Q.to(batch.y).T

    def inputs(self, batch: Batch) -> Tensor:
        """``x`` (or ``x Qᵀ`` in a rotated task): ``(B, n, d)``."""
        return batch.x if self.Q is None else batch.x @ self.Q.to(batch.x).T

    def loss(self, out: Tensor, batch: Batch) -> Tensor:
        """Mean squared error (a scalar tensor)."""
        return torch.mean((out - self._target(batch)) ** 2)

    def metric_sums(self, out: Tensor, batch: Batch) -> Sums:
        """``rel_mse`` and ``mse`` of an output ``(B, n, d)``, as sums."""
        y = self._target(batch)
        err = ((out - y) ** 2).sum()
        return {"rel_mse": (err, (y**2).sum()), "mse": (err, y.numel())}

    def reference_sums(self, batch: Batch) -> Sums:
        """``uniform_rel_mse`` of the token-mean predictor, ``identity_rel_mse`` of ``ŷ = x`` (the
        trivial predictor of a target with a residual path) and ``zero_rel_mse`` (= 1), as sums
        over ``batch`` (``x, y: (B, n, d)``; the unrotated data)."""
        uniform = batch.x.mean(dim=1, keepdim=True).expand_as(batch.x)
        norm = (batch.y**2).sum()
        return {"uniform_rel_mse": (((uniform - batch.y) ** 2).sum(), norm),
                "identity_rel_mse": (((batch.x - batch.y) ** 2).sum(), norm), "zero_rel_mse": (norm, norm)}

    def causal_reference_sums(self, batch: Batch) -> Sums:
        """``uniform_rel_mse`` of the prefix mean ``ŷ_t = mean_{j ≤ t} x_j`` (the flat-score
        causal mixer); ``identity_rel_mse`` and ``zero_rel_mse`` are causal already."""
        counts = torch.arange(1, batch.x.shape[1] + 1, device=batch.x.device, dtype=batch.x.dtype)
        prefix = batch.x.cumsum(dim=1) / counts[None, :, None]  # (B, n, d)
        norm = (batch.y**2).sum()
        return {"uniform_rel_mse": (((prefix - batch.y) ** 2).sum(), norm),
                "identity_rel_mse": (((batch.x - batch.y) ** 2).sum(), norm), "zero_rel_mse": (norm, norm)}

    def rotated(self, Q: Tensor) -> "RegressionTask":
        """A copy that feeds ``x Qᵀ`` and expects ``y Qᵀ`` (the data in the embedding ``Q E``)."""
        task = self._copy()
        task.Q = Q.detach().clone()
        return task


def config_fields(schema: type) -> set[str]:
    """Names of a config dataclass's fields (used by tests and docs)."""
    return {f.name for f in fields(schema)}
