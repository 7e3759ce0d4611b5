"""One trial: data, model, training with a fixed step budget, checkpoint selection on
validation, test evaluation (per length). Pure PyTorch: no Ray, Hydra or MLflow here."""

from __future__ import annotations

import copy
import functools
import io
import math
import platform
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch import Tensor, nn

from harness import augment
from harness.config import Config, DType, Optimizer
from harness.models import build_model, count_parameters, rotate
from harness.symmetry import measure
from tasks import Batch, TaskBase, build_task, combine
from tasks.base import Rotation, Sums, generator, haar_orthogonal, resolve_eval_seed

DTYPES = {DType.float32: torch.float32, DType.float64: torch.float64}


@dataclass
class TrialResult:
    """What a trial returns.

    Attributes:
        metrics: final metrics, keys ``{split}/{name}`` (``test/rel_mse``, ``test/acc``,
            ``test/n_64/acc``, ``test/n_64/supported``, ``val/best_loss``, ...).
        curve: learning curve, one dict per evaluation: ``step``, ``train/loss``, ``val/loss``,
            and the task's other validation metrics (``val/acc``, ``val/rel_mse``, ...).
        state_dict: model parameters with the best validation loss, on the CPU, plus the task's
            state (learned ``E``/``U``, fixed embedding) under ``task.``. A pickled result
            carries it as :meth:`state_bytes` and decodes it where it is first read.
        n_params: trainable scalars of the model (the task's ``E``/``U`` not counted).
        diverged: the training loss became NaN or inf; metrics are from the last finite state.
        start_ms, end_ms: wall-clock start and end (milliseconds since the epoch).
    """

    metrics: dict[str, float]
    curve: list[dict[str, float]]
    state_dict: dict[str, torch.Tensor]
    n_params: int
    diverged: bool = False
    start_ms: int = 0
    end_ms: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    def state_bytes(self) -> bytes:
        """``state_dict`` as ``torch.save`` writes it: the ``model_state.pt`` artifact's bytes
        (``torch.load(io.BytesIO(b), weights_only=True)`` reads them back)."""
        kept = self.__dict__.get("_state_bytes")
        if kept is not None and "state_dict" not in self.__dict__:
            return kept
        buffer = io.BytesIO()
        torch.save(self.state_dict, buffer)
        return buffer.getvalue()

    # A result is pickled (Ray returns it from its worker) with its state as torch.save's bytes,
    # made in the worker: the driver writes them as model_state.pt without decoding them, and
    # decodes them only where ``state_dict`` is read. Pickled as tensors, each tensor cost the
    # driver a legacy torch.load (about 1 ms a trial for ~15 tensors) and then a torch.save.
    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k != "state_dict"}
        state["_state_bytes"] = self.state_bytes()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __getattr__(self, name: str) -> Any:  # only for attributes not set: an unpickled state_dict
        if name == "state_dict" and "_state_bytes" in self.__dict__:
            value = torch.load(io.BytesIO(self.__dict__["_state_bytes"]), weights_only=True)
            self.__dict__["state_dict"] = value
            return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` (or ``cuda:N``), or ``auto`` (cuda when available).

    Raises:
        ValueError: for another name, or ``cuda`` on a machine without CUDA.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu" or name.startswith("cuda"):
        if name.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"cluster.device={name!r} but CUDA is not available here")
        return torch.device(name)
    raise ValueError(f"cluster.device={name!r}; allowed: cpu, cuda, cuda:N, auto")


def selection_error(metrics: dict[str, float]) -> float:
    """The task's error metric from a metrics dict (paper.md §13, "Selection"): ``rel_mse``
    (regression) if present, else ``1 − acc`` (token tasks). Checkpoints and learning rates are
    selected on it (validation only), ties broken by the loss.

    Raises:
        KeyError: the metrics have neither ``rel_mse`` nor ``acc``.
    """
    if "rel_mse" in metrics:
        return float(metrics["rel_mse"])
    if "acc" in metrics:
        return 1.0 - float(metrics["acc"])
    raise KeyError(f"metrics have neither 'rel_mse' nor 'acc': {sorted(metrics)}")


def budget_summary(curve: list[dict[str, float]], max_steps: int) -> dict[str, float]:
    """What the *budget-limited* precondition of paper.md §13 reads, from the best-so-far
    validation error of the learning curve: ``val/best_error_at_80``, ``val/best_error_at_90``
    (best-so-far at the last evaluation at or before 80% and 90% of ``max_steps``; NaN if none)
    and ``val/evals_last_20`` (evaluations after 80% of the budget)."""
    def at(fraction: float) -> float:
        points = [p["val/best_error"] for p in curve if p["step"] <= fraction * max_steps]
        return points[-1] if points else math.nan
    return {"val/best_error_at_80": at(0.8), "val/best_error_at_90": at(0.9),
            "val/evals_last_20": float(sum(p["step"] > 0.8 * max_steps for p in curve))}


# validation-error targets whose first crossing every run records (val/first_step_below/<t>):
# a part's ``value: steps_to_<t>`` (analysis.protocol) must name one of them; recorded for every
# run alike, so a trial's metrics never depend on which ablation asked for it
STEPS_TO_TARGETS = (0.1, 0.03, 0.01, 0.003, 0.001, 1e-05, 1e-06)  # 1e-06: C12(b) since issue 51


def first_step_below(curve: list[dict[str, float]], targets: tuple[float, ...] = STEPS_TO_TARGETS
                     ) -> dict[str, float]:
    """``val/first_step_below/<t>``: the first evaluation step at which the validation error
    (``val/error``, the selection metric) is ``≤ t``, or ``-1.0`` when no evaluation of the
    budget reaches it (``analysis.protocol`` then counts the whole budget: paper.md §13 C12(b)
    steps-to-target). ``<t>`` is ``format(t, "g")``, e.g. ``val/first_step_below/0.01``."""
    def first(t: float) -> float:
        return next((float(p["step"]) for p in curve if p["val/error"] <= t), -1.0)  # NaN never ≤ t
    return {f"val/first_step_below/{t:g}": first(t) for t in targets}


def _optimizer(cfg: Config, params) -> torch.optim.Optimizer:
    if cfg.train.optimizer is Optimizer.adam:
        return torch.optim.Adam(params, lr=cfg.train.lr)
    return torch.optim.SGD(params, lr=cfg.train.lr)


def rotation_matrix(cfg: Config, d: int, dtype: torch.dtype) -> Tensor:
    """T2's Haar-random ``Q: (d, d)`` from the stream ``(task.rotation_seed, "rotation")``."""
    return haar_orthogonal(d, generator(cfg.task.rotation_seed, "rotation"), dtype)


def _minibatch_loss(model: nn.Module, task: TaskBase, train: list[Batch], idx: Tensor,
                    view: Callable[[Batch], Batch] = lambda b: b) -> Tensor:
    """Loss of the examples ``idx`` of the concatenated training set (one part per length),
    each length's mean loss weighted by its share of the minibatch; ``view``: the minibatch as
    trained on (``train.augment``'s transformation, :mod:`harness.augment`)."""
    if len(train) == 1:
        sub = view(train[0].index(idx))
        return task.loss(model(task.inputs(sub)), sub)
    total, start = 0.0, 0
    for part in train:
        sel = idx[(idx >= start) & (idx < start + len(part))] - start
        start += len(part)
        if len(sel):
            sub = view(part.index(sel))
            total = total + task.loss(model(task.inputs(sub)), sub) * (len(sel) / len(idx))
    return total


@torch.no_grad()
def evaluate(model: nn.Module, task: TaskBase, batches: list[Batch], chunk: int = 1024,
             references: list[Sums] | None = None) -> dict[str, float]:
    """Metrics of ``model`` on a set (one batch per length): the task's metrics pooled over
    chunks and lengths, plus ``loss`` (mean per example) and the task's reference metrics.
    Long sequences are evaluated in smaller chunks (pairwise models hold ``(B, n, n, ·)``
    tensors): at most ``2**20 / n²`` sequences at once.

    ``references``: ``task.reference_sums`` of each chunk, in order, if already computed (they
    do not depend on the model; :class:`Checkpoints` computes them once).

    Raises:
        ValueError: from the model, e.g. a length beyond its maximum.
    """
    sums, loss, count = [], 0.0, 0
    for j, sub in enumerate(chunks(batches, chunk)):
        out = model(task.inputs(sub))
        loss += float(task.loss(out, sub)) * len(sub)
        count += len(sub)
        sums += [task.metric_sums(out, sub), task.reference_sums(sub) if references is None else references[j]]
    return {"loss": loss / count, **combine(sums)}


def chunks(batches: list[Batch], chunk: int = 1024) -> Iterator[Batch]:
    """The sub-batches :func:`evaluate` measures, in order: each batch in consecutive chunks of
    at most ``min(chunk, 2**20 / n²)`` sequences (a batch that fits is itself its one chunk)."""
    for batch in batches:
        size = max(1, min(chunk, 2**20 // batch.n**2))
        if size >= len(batch):
            yield batch
            continue
        for i in range(0, len(batch), size):
            yield batch.index(torch.arange(i, min(i + size, len(batch)), device=batch.y.device))


def evaluate_lengths(model: nn.Module, task: TaskBase, sets: dict[str, list[Batch]],
                     prefix: str = "test/") -> dict[str, float]:
    """:func:`evaluate` on each test set: ``test/<metric>`` for the in-distribution set (key
    ``""``), ``test/n_<n>/<metric>`` and ``test/n_<n>/supported`` (1 or 0) per test length.
    A length beyond the longest training length that the model refuses (``ValueError``) is
    recorded as ``supported = 0`` with no other metric."""
    metrics: dict[str, float] = {}
    for key, batches in sets.items():
        head = prefix + (f"{key}/" if key else "")
        try:
            values = evaluate(model, task, batches)
        except ValueError:
            if not key or max(b.n for b in batches) <= task.n_max:
                raise
            metrics[head + "supported"] = 0.0
            continue
        metrics.update({head + k: v for k, v in values.items()})
        if key:
            metrics[head + "supported"] = 1.0
    return metrics


def _rotation_metrics(model: nn.Module, task: TaskBase, test: list[Batch], Q: Tensor) -> dict[str, float]:
    """T2 evaluation: the test set in the rotated embedding ``Q E``, (a) with the model's knowledge
    rotated (``test/rotated/*``), (b) with it unchanged (``test/rotated_fixed/*``)."""
    rtask = task.rotated(Q)
    metrics = {f"test/rotated_fixed/{k}": v for k, v in evaluate(model, rtask, test).items()}
    try:
        rmodel = rotate(model, Q)
    except (KeyError, TypeError, ValueError):
        return {**metrics, "test/rotated/supported": 0.0}
    metrics.update({f"test/rotated/{k}": v for k, v in evaluate(rmodel, rtask, test).items()})
    return {**metrics, "test/rotated/supported": 1.0}


def _state(model: nn.Module, task: TaskBase) -> dict[str, Tensor]:
    return copy.deepcopy({**model.state_dict(), **{f"task.{k}": v for k, v in task.state_dict().items()}})


def _load(model: nn.Module, task: TaskBase, state: dict[str, Tensor]) -> None:
    model.load_state_dict({k: v for k, v in state.items() if not k.startswith("task.")})
    task.load_state_dict({k[5:]: v for k, v in state.items() if k.startswith("task.")})


@dataclass
class Setup:
    """A trial's task, model and data on its device, built as :func:`run_trial` builds them
    (shared with the packed trainer, :mod:`harness.pack`).

    Attributes:
        task, model: on ``dev``; for ``rotation=retrain`` already rotated.
        train, val: lists of batches (one per length); ``tests``: ``{"" or "n_<n>": batches}``.
        Q: T2's rotation ``(d, d)`` or ``None``; ``order``: the minibatch stream
        ``(seed, "batches")``; ``total``: training examples; ``batch_size``: minibatch size;
        ``augment``: the augmentation stream ``(seed, "augment")`` or ``None`` (``train.augment``).
    """

    cfg: Config
    dev: torch.device
    task: TaskBase
    model: nn.Module
    train: list[Batch]
    val: list[Batch]
    tests: dict[str, list[Batch]]
    Q: Tensor | None
    order: torch.Generator
    total: int
    batch_size: int
    augment: torch.Generator | None = None


def check_finite(sets: dict[str, list[Batch]]) -> None:
    """Every float ``x`` and ``y`` of ``sets`` (split name → its batches) is finite: checked on
    the preflight's sample (:func:`harness.validate.check_data`) and on every set a trial builds
    (:func:`prepare`), so that a NaN or inf anywhere in a task's data is named as the data's
    fault, not trained on and reported as "diverged" or as missing metrics. Token ids
    (integers) are not checked.

    Raises:
        ValueError: naming the split, the tensor, how many values are not finite, and that the
            task's data (its ``sample``), not the training, is at fault.
    """
    for split, batches in sets.items():
        for batch in batches:
            for name in ("x", "y"):
                tensor = getattr(batch, name)
                if tensor is not None and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                    bad = int((~torch.isfinite(tensor)).sum())
                    raise ValueError(f"the task's generated data is not finite: {bad} of {tensor.numel()} values "
                                     f"of its {split} {name} (shape {tuple(tensor.shape)}) are NaN or inf; "
                                     "the data, not the training, is at fault (the task's sample()); "
                                     "allowed: finite values only")


def prepare(cfg: Config, dev: torch.device, shared: Setup | None = None) -> Setup:
    """Build a trial's task (with its learned ``E``/``U`` initialised), data, model and minibatch
    stream on ``dev`` from the independent streams described in :func:`run_trial`. ``shared``:
    the setup of a trial with the same task config but for ``n_train`` (a pack's first trial),
    whose validation and test sets are taken instead of built again (the same data).

    Raises:
        ValueError: for non-positive train sizes, impossible task/model sizes, or data that is
            not finite (:func:`check_finite`; shared validation and test sets were checked
            where they were built).
    """
    dtype = DTYPES[cfg.train.dtype]
    if cfg.train.max_steps <= 0 or cfg.train.batch_size <= 0 or cfg.train.eval_every <= 0:
        raise ValueError(f"train sizes must be positive, got {cfg.train}")
    task = build_task(resolve_eval_seed(cfg.task, cfg.seed), dtype)  # None: the trial's own sets
    augment.check(cfg.train.augment, task, augment.task_label(cfg.task))
    task.init_parameters(generator(cfg.seed, "init", "task"))
    if shared is not None:
        task.share_data(shared.task)
    train, val = task.train_set(cfg.seed), task.val_set()
    tests = task.test_sets()
    check_finite({"train": train, **({} if shared is not None else {"val": val, **{
        f"test{'/' + key if key else ''}": batches for key, batches in tests.items()}})})
    model = build_model(cfg.model, task.d, task.n_max, generator(cfg.seed, "init")).to(dtype)
    rotation = cfg.task.rotation
    Q = rotation_matrix(cfg, task.d, dtype) if rotation is not Rotation.none else None
    if rotation is Rotation.retrain:
        model, task = rotate(model, Q), task.rotated(Q)
    model, task = model.to(dev), task.to(dev)
    train, val = [b.to(dev) for b in train], [b.to(dev) for b in val]
    tests = {key: [b.to(dev) for b in batches] for key, batches in tests.items()}
    total = sum(len(b) for b in train)
    return Setup(cfg, dev, task, model, train, val, tests, Q, generator(cfg.seed, "batches"),
                 total, min(cfg.train.batch_size, total), augment.stream(cfg.train.augment, cfg.seed))


class Checkpoints:
    """Validation-based checkpoint selection and the learning curve of one trial.

    :meth:`record` evaluates the model on the validation set, appends a curve point (``step``,
    ``time_ms``, ``train/loss`` = mean of ``running``, ``val/*``, ``val/error``,
    ``val/best_error``) and keeps a copy of the model and task state when its key
    ``(val error, val loss)`` is the smallest so far (paper.md §13, "Selection"). The task's
    reference metrics (``val/uniform_rel_mse``, ``val/majority_acc``, …: trivial predictors, the
    same at every step) are in the first point only: repeated at every evaluation they were about
    a quarter of a regression trial's metric rows (27 of 112 for 10 evaluations), each a row
    written to the store.
    """

    def __init__(self, model: nn.Module, task: TaskBase, copy_initial: bool = True) -> None:
        self.best = (math.inf, math.inf)  # (val error, val loss) of the kept state: selection key
        # the initial state is the best until an evaluation beats it; a subclass that keeps
        # states elsewhere (copy_initial=False) fills best_state before conclude
        self.best_state, self.best_step = (_state(model, task) if copy_initial else {}), 0
        self.curve: list[dict[str, float]] = []
        self._references: list[Sums] | None = None  # the validation set's reference sums
        self._reference_keys: set[str] = set()  # their metric names, in the first curve point only

    def record(self, step: int, running: list[float], model: nn.Module, task: TaskBase,
               val: list[Batch]) -> None:
        """Evaluate at ``step`` (``running``: the training losses since the last point)."""
        self.references(val, task)
        self.note(step, running, evaluate(model, task, val, references=self._references), model, task)

    def references(self, val: list[Batch], task: TaskBase, known: list[Sums] | None = None) -> list[Sums]:
        """The validation set's reference sums, one per chunk (model-independent: computed once,
        or ``known``: those of another trial on the same validation set)."""
        if self._references is None:
            self._references = known or [task.reference_sums(sub) for sub in chunks(val)]
            self._reference_keys = {k for sums in self._references for k in sums}
        return self._references

    def keep(self, model: nn.Module, task: TaskBase) -> None:
        """Keep the current state as the best (a deep copy; the packed trainer keeps it by
        index in its stacked tensors instead, :mod:`harness.pack`)."""
        self.best_state = _state(model, task)

    def note(self, step: int, running: list[float], val_metrics: dict[str, float],
             model: nn.Module | None = None, task: TaskBase | None = None) -> None:
        """The curve point and checkpoint selection for validation metrics already measured
        (``val_metrics``: :func:`evaluate`'s dict, reference metrics included)."""
        key = (selection_error(val_metrics), val_metrics["loss"])
        if key < self.best:  # NaN never compares smaller: never kept
            self.best, self.best_step = key, step
            self.keep(model, task)
        self.curve.append({"step": step, "time_ms": time.time() * 1000.0,
                           "train/loss": sum(running) / len(running),
                           **{f"val/{k}": v for k, v in val_metrics.items()
                              if not self.curve or k not in self._reference_keys},
                           "val/error": key[0], "val/best_error": self.best[0]})


def symmetry_input(s: Setup) -> Tensor:
    """The batch the trial-end symmetry measurements read (cheap): the model's inputs
    (``task.inputs``, with the task's current state) of the first 64 sequences of the
    in-distribution test set's first batch, ``(B, n, d)`` with ``B ≤ 64``."""
    probe = s.tests[""][0]
    return s.task.inputs(probe.index(torch.arange(min(64, len(probe)), device=probe.y.device)))


def conclude(s: Setup, kept: Checkpoints, diverged: bool, start: float, symmetry: bool = True) -> TrialResult:
    """Load the kept state into ``s.model``/``s.task``, evaluate the test sets (and T2's rotated
    ones), measure the symmetries, and return the :class:`TrialResult` (``start``: wall-clock
    seconds since the epoch when the trial began). ``symmetry=False``: no symmetry metrics (a
    pack measures its trials' together afterwards, :mod:`harness.pack`)."""
    cfg, model, task, tests = s.cfg, s.model, s.task, s.tests
    _load(model, task, kept.best_state)
    metrics = {"val/best_error": kept.best[0], "val/best_loss": kept.best[1],
               "train/best_step": float(kept.best_step),
               **budget_summary(kept.curve, cfg.train.max_steps), **first_step_below(kept.curve)}
    metrics.update(evaluate_lengths(model, task, tests))
    if cfg.task.rotation is Rotation.eval:
        metrics.update(_rotation_metrics(model, task, tests[""], s.Q))
    if symmetry:
        metrics.update(measure(model, symmetry_input(s), generator(cfg.seed, "symmetry")))
    return TrialResult(
        metrics=metrics,
        curve=kept.curve,
        state_dict={k: v.detach().cpu() for k, v in kept.best_state.items()},
        n_params=count_parameters(model),
        diverged=diverged,
        start_ms=int(start * 1000),
        end_ms=int(time.time() * 1000),
        info={"device": str(s.dev), "torch_threads": torch.get_num_threads(), "processor": processor(s.dev),
              "pack_size": 1, "compiled": False},  # a pack (harness/pack.py) sets its own
    )


@functools.lru_cache(maxsize=None)
def processor(dev: torch.device) -> str:
    """The model name of the processor that trains on ``dev``: the GPU's name on CUDA, else the
    CPU's ``model name`` from ``/proc/cpuinfo`` (``platform.processor()`` where there is none).
    Results reproduce bit for bit only per processor model (paper.md §13), so every run records it."""
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def is_eval_step(step: int, cfg: Config) -> bool:
    """Whether the validation set is evaluated after ``step`` (every ``eval_every`` and the last)."""
    return step % cfg.train.eval_every == 0 or step == cfg.train.max_steps


def run_trial(cfg: Config, device: str = "cpu",
              progress: Callable[[dict[str, float]], None] | None = None) -> TrialResult:
    """Train ``cfg.model`` (and the task's learned ``E``/``U``) on ``cfg.task`` and evaluate it
    (paper.md §13 protocol).

    Adam (or SGD) for ``cfg.train.max_steps`` steps on minibatches drawn with replacement from
    exactly ``task.n_train`` examples (all training lengths pooled); every ``eval_every`` steps
    the validation loss is measured and the best model and task state kept; the test sets
    (in-distribution, and one per test length) are evaluated once, with that state.
    Streams: data ``(seed, "train", …)``, minibatch order ``(seed, "batches")``, model
    initialisation ``(seed, "init")`` and task initialisation ``(seed, "init", "task")`` are
    independent generators; validation/test come from the task's own streams; no global RNG.
    T2 (``task.rotation``): ``retrain`` starts from the rotated initialisation in the rotated
    embedding; ``eval`` adds ``test/rotated/*`` and ``test/rotated_fixed/*``.

    Args:
        cfg: the trial's resolved config.
        device: ``cpu``, ``cuda`` or ``auto`` (see :func:`resolve_device`).
        progress: called with each learning-curve point as it is measured (the dict that
            ``curve`` gets: ``step``, ``train/loss``, ``val/…``); the driver logs it live.

    Returns:
        The final metrics (``test/rel_mse`` or ``test/acc``, ``test/n_<n>/…``, ``val/best_loss``,
        ...), the learning curve, the best state and the parameter count.

    Raises:
        ValueError: for impossible sizes or an unavailable device.
    """
    start = time.time()
    s = prepare(cfg, resolve_device(device))
    model, task = s.model, s.task
    opt = _optimizer(cfg, [*model.parameters(), *task.parameters()])
    kept = Checkpoints(model, task)
    diverged, running = False, []
    view = functools.partial(augment.transform, cfg.train.augment, g=s.augment)  # built once, not per step
    for step in range(1, cfg.train.max_steps + 1):
        idx = torch.randint(s.total, (s.batch_size,), generator=s.order).to(s.dev)
        loss = _minibatch_loss(model, task, s.train, idx, view)
        if not torch.isfinite(loss):
            diverged = True
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        running.append(loss.item())
        if is_eval_step(step, cfg):
            kept.record(step, running, model, task, s.val)
            if progress is not None:
                progress(kept.curve[-1])
            running = []
    return conclude(s, kept, diverged, start)
