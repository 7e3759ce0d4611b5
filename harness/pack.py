"""Packed trials: many trials that differ only in values that keep every tensor shape (``seed``,
``train.lr``, ``task.n_train``) trained as one pack in one process. Pure PyTorch: no Ray, Hydra
or MLflow here.

Each trial of a pack is built exactly as :func:`harness.trial.run_trial` builds it
(:func:`harness.trial.prepare`: its own data stream, initialisation, minibatch order). Training
steps are vectorised over a leading trial axis: the trainable parameters of the pack's models and
tasks are stacked (``P`` trials: ``(P, *shape)``) and one step is ``torch.func.vmap`` over
``torch.func.functional_call`` of a template model, each trial on its own minibatch, followed by
Adam (or SGD) on the stacked tensors with a learning rate per trial. A step never waits for the
device: its losses (and the mask of trials still finite) are read at the next evaluation.
Validation runs vmapped over the pack (on CUDA; one batched pass per chunk, each trial on its
own seed's set stacked on the trial axis, or on the one set the pack shares) or per trial
after the trial's parameters are copied into its own modules (a CPU, compiled step or not:
measured faster there); checkpoint selection and the curve are the lone code's
(:class:`harness.trial.Checkpoints`), the best state kept by index in stacked tensors; the test
evaluation runs per trial (:func:`harness.trial.conclude`), the symmetry measurements once for
the pack (vmapped over the kept parameters; the span residuals one batched QR on the CPU), so a
packed trial returns the same :class:`~harness.trial.TrialResult` fields as ``run_trial``, plus
``info["pack_size"]`` and ``info["compiled"]``. ``train.compile`` runs the step's forward and
backward (and the vmapped validation) under ``torch.compile``, on CUDA with CUDA graphs.

What reproduces (see also the README, "Packed trials"):

* the data, initialisation, minibatch indices and optimiser arithmetic are those of the lone
  trial; the forward/backward pass of a pack uses batched kernels whose summation order differs
  from the lone kernels, so per-step losses agree to rounding (≤ 1e-10 relative over 50 steps in
  float64, ≤ 1e-5 over 20 steps in float32: ``tests/test_pack.py``), and over a long budget the
  trajectories drift apart as rounding differences grow;
* a trial's result depends on its id, its pack's size and composition (the batched kernels can
  choose another blocking for another ``P``) and the device; the same pack on the same device
  and threads reproduces bit for bit.

Divergence: a trial whose loss becomes NaN or inf stops (its kept state and curve stay those of
its last finite evaluation, as alone); the others go on.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from harness.config import Augment, Config, Optimizer
from harness.models import external
from harness.symmetry import measure_each, measure_stacked
from harness.pack_table import (CPU_VMAP_EVAL, DEFAULT_PACK, auto_compile, auto_pack_size,
                                measured_pack)
from harness.trial import (Checkpoints, Setup, TrialResult, _state, chunks, conclude, is_eval_step,
                           prepare, resolve_device, symmetry_input)
from tasks import Batch, TaskBase, combine
from tasks.base import generator, resolve_eval_seed

# Model families that cannot be packed, and why (the dry run prints the reason).
UNPACKABLE = {"gru": "nn.GRU has no vmap batching rule"}
FIELDS = ("x", "y", "tokens", "mask")  # Batch tensors a training step reads
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults, as run_trial uses them
CPU_PACK, CUDA_PACK = DEFAULT_PACK["cpu"], DEFAULT_PACK["cuda"]  # auto for a family the table lacks
# (task class, sets stacked) whose metrics vmap refused in this process: validated per trial
_NO_METRICS_VMAP: set[tuple[type, bool]] = set()
_NO_SYMMETRY_VMAP: set[type] = set()  # model classes whose forward vmap refused: measured per trial
INDEX_CHUNK = 64  # minibatch indices drawn this many steps at a time (same stream as step by step)


def cannot_pack(cfg: Config) -> str | None:
    """Why a trial must run alone (``None`` if it can be packed): its model family has no
    batched (vmap) form, or it trains on several lengths (the minibatch's mix of lengths, and so
    its tensor shapes, change from step to step)."""
    if cfg.model.name in UNPACKABLE:
        return f"model {cfg.model.name}: {UNPACKABLE[cfg.model.name]}"
    if cfg.model.name == "external" and external.vmap_reason(cfg):  # vmap tried on it once
        return external.vmap_reason(cfg)
    if cfg.train.augment is not Augment.none:
        return f"train.augment={cfg.train.augment.value}: each step draws its transformation outside the vmapped step"
    lengths = set(getattr(cfg.task, "terms", None) or cfg.task.train_lengths or [0])
    if len(lengths) > 1:
        return "several training lengths (shapes change per step)"
    return None


def pack_key(cfg: Config) -> str:
    """What trials of one pack share: the config without ``seed``, ``train.lr``,
    ``task.n_train`` and ``task.eval_seed``, plus the minibatch size (``min(batch_size,
    n_train)``). Trials of one pack with different evaluation seeds each keep their own
    validation and test sets (:func:`_build`)."""
    task = dataclasses.replace(cfg.task, n_train=0)
    if hasattr(task, "eval_seed"):
        task = dataclasses.replace(task, eval_seed=None)
    neutral = dataclasses.replace(cfg, seed=0, train=dataclasses.replace(cfg.train, lr=0.0), task=task)
    return f"{min(cfg.train.batch_size, cfg.task.n_train)}|{neutral!r}"


def _on_cuda(device: str) -> bool:
    return device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())


def per_trial_bytes(cfg: Config) -> float:
    """A coarse estimate of one packed trial's memory in bytes (for the ``auto`` bound): its
    training pool (inputs and targets, ``n_train × n × d``), its copy of the validation set in
    the stacked chunks of a vmapped validation (``n_val × n × d``, inputs and targets), a
    minibatch's pairwise activations (``batch × n² × d``, pairwise models hold
    ``(B, n, n, ·)``) with their gradients, in the trial's dtype."""
    item = 8 if cfg.train.dtype.value == "float64" else 4
    n = max([getattr(cfg.task, "n", 0) or 0, *(cfg.task.train_lengths or [])]) or 16
    d = getattr(cfg.task, "d", 0) or 64
    batch = min(cfg.train.batch_size, cfg.task.n_train)
    return float(item * (2 * (cfg.task.n_train + cfg.task.n_val) * n * d + 4 * batch * n * n * d))


def _device_bytes(device: str) -> float:
    """Memory of the device trials run on: the GPU's total, or the machine's RAM."""
    if _on_cuda(device) and torch.cuda.is_available():
        return float(torch.cuda.get_device_properties(0).total_memory)
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8e9


def device_kind(device: str) -> str:
    """``cuda`` or ``cpu``: the row kind of the packing tables for ``device`` (``cpu``, ``cuda``,
    ``cuda:N``, or ``auto``: CUDA where this process has it)."""
    return "cuda" if _on_cuda(device) else "cpu"


def resolve_pack_size(value: str | int, device: str, cfg: Config | None = None) -> int:
    """``cluster.pack_size`` as a number. ``auto``: for a trial ``cfg``, the committed table's
    choice for its model family on this device within a memory bound
    (:func:`harness.pack_table.auto_pack_size`); without ``cfg``, the device's default
    (:data:`CPU_PACK`, :data:`CUDA_PACK`). An integer applies to every trial.

    Raises:
        ValueError: neither ``auto`` nor a positive integer, naming the value and allowed ones.
    """
    if str(value) == "auto":
        if cfg is None:
            return DEFAULT_PACK[device_kind(device)]
        return auto_pack_size(device_kind(device), cfg.model.name, per_trial_bytes(cfg), _device_bytes(device))
    try:
        size = int(value)
    except ValueError:
        size = 0
    if size < 1:
        raise ValueError(f"cluster.pack_size={value!r}; allowed: auto or a positive integer")
    return size


def runs_alone(cfg: Config, pack_size: str | int, device: str) -> str | None:
    """Why the trial ``cfg`` runs alone under ``cluster.pack_size=pack_size`` on ``device``
    (``None`` if it is packed with others): :func:`cannot_pack`, or ``auto`` where the table
    measured its family fastest alone on this device. A pack size of 1 is no reason."""
    reason = cannot_pack(cfg)
    if reason is None and str(pack_size) == "auto" and measured_pack(device_kind(device), cfg.model.name)[0] == 1:
        reason = (f"pack_size=auto on a {'GPU' if _on_cuda(device) else 'CPU'}: packed "
                  f"{cfg.model.name} trials are no faster than lone ones (benchmarks/RESULTS.md)")
    return reason


def resolve_compile(cfg: Config, device: str, pack: int) -> bool:
    """Whether a pack of ``pack`` trials like ``cfg`` trains under ``torch.compile``
    (``train.compile``: ``off``, ``on``, or ``auto``: :func:`harness.pack_table.auto_compile`)."""
    mode = cfg.train.compile.value
    if mode == "auto":
        return auto_compile(device_kind(device), cfg.model.name, pack, cfg.train.max_steps)[0]
    return mode == "on"


def compile_fn(fn: Callable, dev: torch.device) -> Callable:
    """``fn`` under ``torch.compile`` (inductor; on CUDA with CUDA graphs, ``reduce-overhead``:
    one graph launch per step instead of one launch per kernel). Compiled code is cached per
    shape in this process and in inductor's cache folder between runs
    (``TORCHINDUCTOR_CACHE_DIR``, by default under the system's temporary folder)."""
    return torch.compile(fn, mode="reduce-overhead" if dev.type == "cuda" else None, dynamic=False)


class _Loss(nn.Module):
    """``forward(*fields) -> loss``: the dense training loss of ``model`` on one minibatch."""

    def __init__(self, model: nn.Module, task: TaskBase, names: Sequence[str]) -> None:
        super().__init__()
        self.model, self.task, self.names = model, task, tuple(names)
        # the Batch fields no training step reads, built once (not per traced call)
        self.absent = {f: None for f in ("x", "tokens", "mask") if f not in self.names}

    def forward(self, *tensors: Tensor) -> Tensor:
        batch = Batch(**self.absent, **dict(zip(self.names, tensors)))
        return self.task.loss_dense(self.model(self.task.inputs(batch)), batch)


class _Metrics(nn.Module):
    """``forward(batch) -> (loss, sums)``: what :func:`harness.trial.evaluate` measures of one
    trial on one chunk (the task's loss and metric sums, in their dense forms: equal up to
    summation order, with no boolean indexing), as tensors so that it vmaps over the stacked
    parameters of a pack and, where each trial has its own set, over the stacked chunks."""

    def __init__(self, model: nn.Module, task: TaskBase) -> None:
        super().__init__()
        self.model, self.task = model, task

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, tuple[Tensor, Tensor]]]:
        out = self.model(self.task.inputs(batch))
        sums = self.task.metric_sums_dense(out, batch)
        return self.task.loss_dense(out, batch), {k: (torch.as_tensor(a), torch.as_tensor(b))
                                                   for k, (a, b) in sums.items()}


class StackedOptimizer:
    """``torch.optim.Adam`` (defaults) or ``torch.optim.SGD`` on stacked parameters ``(P, ...)``,
    with one learning rate per trial: the same arithmetic, in the same order, as the lone
    optimiser's single-tensor implementation applied to each slice.

    Args:
        params: stacked leaf tensors, trial axis first.
        lrs: the ``P`` learning rates.
        kind: :class:`harness.config.Optimizer`.
    """

    def __init__(self, params: list[Tensor], lrs: Sequence[float], kind: Optimizer) -> None:
        self.params, self.lrs, self.kind, self.step_count = params, list(lrs), kind, 0
        self.exp_avg = [torch.zeros_like(p) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in params]
        self._sgd = [self._per_trial([-lr for lr in self.lrs], p) for p in params]
        # the learning rates in float64 on the device: each step's step sizes lr / (1 − β1^t)
        # are one division there (what Python's float division gives, then rounded to the
        # parameters' dtype as torch.tensor rounds a Python float), not a tensor built per step
        self._lr64 = torch.tensor(self.lrs, dtype=torch.float64, device=params[0].device) if params else None
        self._shapes = [(-1, *[1] * (p.dim() - 1)) for p in params]

    @staticmethod
    def _per_trial(values: Sequence[float], like: Tensor) -> Tensor:
        """``(P, 1, …, 1)`` in ``like``'s dtype (rounded as a Python scalar argument is)."""
        return torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, *[1] * (like.dim() - 1))

    @torch.no_grad()
    def step(self, grads: list[Tensor]) -> None:
        """One update from ``grads`` (same shapes as the parameters)."""
        self.step_count += 1
        if self.kind is not Optimizer.adam:
            for p, g, neg_lr in zip(self.params, grads, self._sgd):
                p.addcmul_(g, neg_lr)  # p - lr·g
            return
        beta1, beta2 = ADAM_BETAS
        step = float(self.step_count)
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        neg_step = (self._lr64 / bias_correction1).neg_()  # (P,) float64: −step_size per trial
        cast: dict[torch.dtype, Tensor] = {}
        for p, g, m, v, shape in zip(self.params, grads, self.exp_avg, self.exp_avg_sq, self._shapes):
            if p.dtype not in cast:
                cast[p.dtype] = neg_step.to(p.dtype)
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (v.sqrt() / bias_correction2_sqrt).add_(ADAM_EPS)
            p.addcdiv_(m * cast[p.dtype].view(shape), denom)  # p + (−step_size·m) / denom, as Adam's addcdiv_


def _stack_pool(setups: list[Setup]) -> tuple[dict[str, Tensor], list[int]]:
    """The trials' training sets concatenated (one length each): ``{field: (Σ n_train, …)}``
    and each trial's offset into it."""
    parts = [s.train[0] for s in setups]
    names = [f for f in FIELDS if getattr(parts[0], f) is not None]
    offsets, total = [], 0
    for part in parts:
        offsets.append(total)
        total += len(part)
    return {f: torch.cat([getattr(p, f) for p in parts]) for f in names}, offsets


def _copy_into(stacked: dict[str, Tensor], i: int, module: nn.Module) -> None:
    """Trial ``i``'s slice of the stacked parameters into ``module`` (its own model and task)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(stacked[name][i])


def _check_packable(cfgs: Sequence[Config], progress) -> None:
    """Raise ``ValueError`` unless ``cfgs`` can train as one pack (one :func:`pack_key`, a
    packable family) with one progress callback per config."""
    if progress is not None and len(progress) != len(cfgs):
        raise ValueError(f"progress: one callback per config, got {len(progress)} for {len(cfgs)}")
    if len({pack_key(c) for c in cfgs}) != 1:
        raise ValueError("a pack's trials must differ only in seed, train.lr and task.n_train")
    reason = cannot_pack(cfgs[0])
    if reason:
        raise ValueError(f"cannot pack: {reason}")


class _KeptByIndex(Checkpoints):
    """:class:`~harness.trial.Checkpoints` of trial ``i`` of a pack that keeps its best state as
    slice ``i`` of the pack's stacked ``best`` tensors (one in-place copy per new best, where
    the lone trial deep-copies its state dicts); :func:`_conclude` turns it into a state dict."""

    def __init__(self, setup: Setup, best: dict[str, Tensor], stacked: dict[str, Tensor], i: int) -> None:
        super().__init__(setup.model, setup.task, copy_initial=False)
        self._best, self._stacked, self._i = best, stacked, i

    def keep(self, model: nn.Module | None, task: TaskBase | None) -> None:
        with torch.no_grad():
            for name, kept in self._best.items():
                kept[self._i].copy_(self._stacked[name][self._i])


@dataclasses.dataclass
class _Pack:
    """A pack ready to train: ``P`` trials' setups, their pooled training sets, the stacked
    parameters ``{name: (P, *shape)}`` (and the best ones so far), the optimiser and the
    (vmapped) loss, plus per-trial state: checkpoints, which trials still train, their training
    losses since the last evaluation (``pending``: one ``(P,)`` tensor per step, read at the
    next evaluation, so a step never waits for its losses)."""

    cfgs: Sequence[Config]
    setups: list[Setup]
    pool: dict[str, Tensor]  # {field: (Σ n_train, …)}
    offset: Tensor  # (P, 1, 1): each trial's first row in the pool
    losses_of: list[_Loss]
    stacked: dict[str, Tensor]
    best: dict[str, Tensor]  # {name: (P, *shape)}: each trial's kept (best) parameters
    trainable: list[Tensor]
    opt: StackedOptimizer
    forward: Callable  # (stacked, mask, *fields) -> (total, losses (P,), mask (P,))
    metrics: Callable | None  # (stacked, *chunk fields) -> vmapped (loss, sums); None: per trial
    val_chunks: list[tuple[int, tuple]] | None  # the vmapped pass's (size, chunk fields): _val_chunks
    vmap_key: tuple[type, bool]  # (task class, sets stacked): remembered if vmap refuses the metrics
    kept: list[_KeptByIndex]
    active: list[bool]
    diverged: list[bool]
    running: list[list[float]]
    mask: Tensor  # (P,) bool: the trials whose loss still counts
    pending: list[Tensor]


def _masked_total(step_losses: Callable) -> Callable:
    """``(stacked, mask, *fields) -> (total, losses, mask)``: the pack's losses ``(P,)``, the
    mask of trials whose losses stay finite, and the sum of their losses (what one backward
    pass differentiates: trial ``i``'s gradient is that of its own loss)."""
    def forward(stacked: dict[str, Tensor], mask: Tensor, *fields: Tensor):
        losses = step_losses(stacked, *fields)
        mask = mask & torch.isfinite(losses.detach())
        return torch.where(mask, losses, torch.zeros_like(losses)).sum(), losses, mask
    return forward


def _vmapped_metrics(template: _Metrics, stacked_sets: bool) -> Callable:
    """``(stacked, x, y, tokens, mask, groups) -> (loss (P,), {metric: (num (P,), den (P,))})``
    of one chunk's fields (tensors, so that ``torch.compile`` can trace it): one chunk every
    trial reads (``x: (c, n, d)``, …), or, ``stacked_sets``, each trial's own chunk stacked on
    a leading trial axis (``x: (P, c, n, d)``, ``groups: {name: (P, c)}``)."""
    def metrics(stacked: dict[str, Tensor], x, y, tokens, mask, groups):
        fields = (x, y, tokens, mask, groups)
        dims = [0 if stacked_sets and f is not None else None for f in fields]  # vmap maps no None
        return vmap(lambda params, *chunk: functional_call(template, params, (Batch(*chunk),)),
                    in_dims=(0, *dims))(stacked, *fields)
    return metrics


def _val_chunks(setups: list[Setup], shared: bool) -> list[tuple[int, tuple]]:
    """The validation chunks of a vmapped pass (:func:`harness.trial.chunks`, in order) as
    ``(size, (x, y, tokens, mask, groups))``, ``size`` the chunk's number of sequences: the
    one set's own tensors where the pack shares it, else
    each field of the trials' ``j``-th chunks stacked on a leading trial axis (the trials' sets
    have one shape: ``n_val`` and the task are part of the pack key)."""
    def fields(b: Batch) -> tuple:
        return b.x, b.y, b.tokens, b.mask, b.groups
    if shared:
        return [(len(sub), fields(sub)) for sub in chunks(setups[0].val)]

    def stack(parts: list) -> object:
        if parts[0] is None:
            return None
        if isinstance(parts[0], dict):
            return {k: torch.stack([g[k] for g in parts]) for k in parts[0]}
        return torch.stack(parts)
    per_trial = [list(chunks(s.val)) for s in setups]
    return [(len(per_trial[0][j]), tuple(stack([fields(trial[j])[f] for trial in per_trial]) for f in range(5)))
            for j in range(len(per_trial[0]))]


# compiled pack functions, one per (shape key, pack size, device) in this process: compiling is
# paid once per shape per worker (the template module they close over is interchangeable among
# packs of one key: same shapes, and buffers equal across seeds, as _check_buffers requires)
_COMPILED: dict[tuple[str, int, str], tuple[Callable, Callable]] = {}


def _shape_key(cfg: Config) -> str:
    """What fixes a packed step's code and shapes: the model, the task but for ``n_train``,
    the minibatch size and the dtype (not the step budget or the evaluation interval)."""
    task = dataclasses.replace(cfg.task, n_train=0)
    return f"{min(cfg.train.batch_size, cfg.task.n_train)}|{cfg.train.dtype}|{cfg.model!r}|{task!r}"


def _check_buffers(setups: list[Setup]) -> None:
    """Raise ``ValueError`` unless every trial's buffers (fixed embeddings, tables) equal the
    first trial's: they are shared by the pack, not stacked."""
    for s in setups[1:]:
        for mine, ref in ((s.model, setups[0].model), (s.task, setups[0].task)):
            theirs = dict(ref.named_buffers())
            if any(not torch.equal(b, theirs[n]) for n, b in mine.named_buffers()):
                raise ValueError("cannot pack: the trials' buffers differ")


def prepare_setups(cfgs: Sequence[Config], dev: torch.device) -> tuple[list[Setup], list[int]]:
    """Each trial of a pack built as :func:`harness.trial.prepare` builds it alone, the trials
    of one evaluation seed sharing the first one's validation and test sets (built once).
    Returns the setups and, per trial, the index of the trial whose sets it reads.

    Raises:
        ValueError: as :func:`harness.trial.prepare`.
    """
    firsts: dict[int, int] = {}  # evaluation seed -> the first trial that built its sets
    setups, owners = [], []
    for i, c in enumerate(cfgs):
        eval_seed = getattr(resolve_eval_seed(c.task, c.seed), "eval_seed", 0)
        owner = firsts.setdefault(eval_seed, i)
        setups.append(prepare(c, dev, shared=setups[owner] if owner != i else None))
        owners.append(owner)
    return setups, owners


def _build(cfgs: Sequence[Config], dev: torch.device, compiled: bool, vmap_eval: bool) -> _Pack:
    """Each trial built as alone (:func:`prepare_setups`), then stacked; ``compiled``: the
    step's forward (and the vmapped evaluation) under ``torch.compile``.

    Raises:
        ValueError: several training lengths, or trials whose buffers differ.
    """
    setups, owners = prepare_setups(cfgs, dev)
    first = setups[0]
    if any(len(s.train) != 1 for s in setups):
        raise ValueError("cannot pack: several training lengths")
    P = len(cfgs)
    _check_buffers(setups)
    pool, offsets = _stack_pool(setups)
    losses_of = [_Loss(s.model, s.task, list(pool)) for s in setups]
    names = [n for n, _ in losses_of[0].named_parameters()]
    per_trial = [dict(m.named_parameters()) for m in losses_of]
    stacked = {n: torch.stack([t[n].detach() for t in per_trial]).requires_grad_(per_trial[0][n].requires_grad)
               for n in names}
    best = {n: t.detach().clone() for n, t in stacked.items()}
    trainable = [stacked[n] for n in names if stacked[n].requires_grad]
    template = losses_of[0]
    forward = _masked_total(vmap(lambda params, *data: functional_call(template, params, data),
                                 in_dims=(0, *[0] * len(pool))))
    # vmapped validation: every trial on the one set the pack shares, or each on its own set
    # (one per evaluation seed) stacked on the trial axis
    shared_eval = len(set(owners)) == 1
    # compiled or not, a CPU validates per trial (vmap_eval False): measured faster there even
    # beside a compiled step (benchmarks/RESULTS.md, issue 46 second pass)
    vmap_key = (type(first.task), not shared_eval)
    vmap_eval = vmap_eval and vmap_key not in _NO_METRICS_VMAP
    metrics = _vmapped_metrics(_Metrics(first.model, first.task), not shared_eval) if vmap_eval else None
    if compiled:
        key = (_shape_key(cfgs[0]), P, str(dev), shared_eval, vmap_eval)
        if key not in _COMPILED:
            _COMPILED[key] = compile_fn(forward, dev), (compile_fn(metrics, dev) if metrics is not None else None)
        forward, metrics = _COMPILED[key]
    kept = [_KeptByIndex(s, best, stacked, i) for i, s in enumerate(setups)]
    if metrics is not None:  # the reference sums once per set (the per-trial path: at its first record)
        for i, (k, s) in enumerate(zip(kept, setups)):
            k.references(s.val, s.task, known=None if owners[i] == i else kept[owners[i]].references(s.val, s.task))
    return _Pack(cfgs, setups, pool, torch.tensor(offsets, device=dev).view(P, 1, 1), losses_of,
                 stacked, best, trainable,
                 StackedOptimizer(trainable, [c.train.lr for c in cfgs], cfgs[0].train.optimizer),
                 forward, metrics, _val_chunks(setups, shared_eval) if metrics is not None else None, vmap_key,
                 kept, [True] * P, [False] * P, [[] for _ in range(P)],
                 torch.ones(P, dtype=torch.bool, device=dev), [])


def _step(pack: _Pack, rows: Tensor) -> None:
    """One vectorised training step on the minibatch ``rows`` (``(P·B,)`` rows of the pool). A
    trial whose loss is not finite drops out of the mask (its gradient is zero from then on;
    :func:`_sync` stops it at the next evaluation). Nothing here waits for the device."""
    P, batch_size = len(pack.setups), pack.setups[0].batch_size
    total, losses, mask = pack.forward(pack.stacked, pack.mask, *[
        t.index_select(0, rows).view(P, batch_size, *t.shape[1:]) for t in pack.pool.values()])
    pack.opt.step(list(torch.autograd.grad(total, pack.trainable)))
    pack.mask = mask.clone()  # a CUDA graph's outputs are overwritten by its next replay
    pack.pending.append(losses.detach().clone())


def _sync(pack: _Pack) -> bool:
    """Read the losses since the last evaluation: a trial whose mask dropped stops (diverged,
    as alone: its curve ends at its last finite evaluation); the others' losses go to their
    running lists. Returns whether any trial still trains."""
    active = pack.mask.tolist()
    values = torch.stack(pack.pending, dim=1).tolist() if pack.pending else [[] for _ in active]
    pack.pending = []
    for i, still in enumerate(active):
        if pack.active[i] and not still:
            pack.active[i], pack.diverged[i] = False, True
        elif pack.active[i]:
            pack.running[i].extend(values[i])
    return any(pack.active)


def _vmapped_val(pack: _Pack) -> list[dict[str, float]]:
    """:func:`harness.trial.evaluate`'s validation metrics of every trial, measured vmapped
    over the stacked parameters (one batched pass per chunk instead of one per trial), each
    trial on its own validation set (:func:`_val_chunks`)."""
    P = len(pack.setups)
    references = [k.references(s.val, s.task) for k, s in zip(pack.kept, pack.setups)]  # built in _build
    losses, sums, count = [0.0] * P, [[] for _ in range(P)], 0
    for j, (size, fields) in enumerate(pack.val_chunks):
        loss, parts = pack.metrics(pack.stacked, *fields)
        loss = loss.tolist()
        parts = {k: (a.tolist(), b.tolist()) for k, (a, b) in parts.items()}
        count += size
        for i in range(P):
            losses[i] += loss[i] * size
            sums[i] += [{k: (a[i], b[i]) for k, (a, b) in parts.items()}, references[i][j]]
    return [{"loss": losses[i] / count, **combine(sums[i])} for i in range(P)]


def _evaluate(pack: _Pack, step: int, progress) -> None:
    """Validation and checkpoint selection of each training trial: vmapped over the pack
    (:func:`_vmapped_val`) or with the lone code after its slice of the stacked parameters is
    copied into its own modules; the curve point and selection are the lone code's. A task
    whose dense metrics still do not vmap (e.g. a user's task with boolean indexing: data-
    dependent shapes) is validated trial by trial from then on: this pack, and the later packs
    of its task class with sets shared or stacked alike in this process (``_NO_METRICS_VMAP``)."""
    vals = None
    if pack.metrics is not None:
        try:
            vals = _vmapped_val(pack)
        except RuntimeError:  # vmap refused an operation of the task's metrics
            _NO_METRICS_VMAP.add(pack.vmap_key)
            pack.metrics = None
    for i, s in enumerate(pack.setups):
        if pack.active[i]:
            if vals is None:
                _copy_into(pack.stacked, i, pack.losses_of[i])
                pack.kept[i].record(step, pack.running[i], s.model, s.task, s.val)
            else:
                pack.kept[i].note(step, pack.running[i], vals[i])
            pack.running[i] = []
            if progress is not None and progress[i] is not None:
                progress[i](pack.kept[i].curve[-1])


def _train(pack: _Pack, dev: torch.device, clock: dict[str, float], progress) -> None:
    """Every training step of the pack, evaluating on the lone schedule; ``clock`` adds up the
    seconds of steps and evaluations."""
    cfg0, setups = pack.cfgs[0], pack.setups
    batch_size, max_steps = setups[0].batch_size, cfg0.train.max_steps
    mark = time.perf_counter()
    for first in range(1, max_steps + 1, INDEX_CHUNK):
        k = min(INDEX_CHUNK, max_steps + 1 - first)
        idx = torch.stack([torch.randint(s.total, (k, batch_size), generator=s.order) for s in setups])
        idx = idx.to(dev) + pack.offset  # (P, k, B): rows of the pooled training sets
        for j in range(k):
            step = first + j
            _step(pack, idx[:, j].reshape(-1))  # (P·B,) rows: index_select, about 5× faster than t[rows] on a CPU
            if is_eval_step(step, cfg0):
                _sync(pack)
                now = time.perf_counter()
                clock["steps"], mark = clock["steps"] + now - mark, now
                _evaluate(pack, step, progress)
                now = time.perf_counter()
                clock["eval"], mark = clock["eval"] + now - mark, now
                if not any(pack.active):
                    return
    clock["steps"] += time.perf_counter() - mark


def _vmapped_model(template: nn.Module, states: dict[str, Tensor]) -> Callable[[Tensor], Tensor]:
    """``x (P, B, n, d) → (P, B, n, d)``: ``template`` with trial ``i``'s slice of ``states``
    (stacked parameters, and buffers where given) on ``x[i]``, one vmapped pass."""
    return lambda x: vmap(lambda state, xi: functional_call(template, state, (xi,)))(states, x)


class _Rotation(nn.Module):
    """``forward(q) -> state``: ``model.rotate_(q)`` applied to the parameters and buffers it
    is called with (:func:`torch.func.functional_call`), which it returns; vmapped over a
    pack's stacked states and ``Q``s it rotates every trial at once, with
    :func:`harness.models.rotate`'s arithmetic (``model`` itself is left unchanged)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, q: Tensor) -> dict[str, Tensor]:
        self.model.rotate_(q)
        return {n: t for n, t in [*self.model.named_parameters(), *self.model.named_buffers()]}


def _rotated_models(models: list[nn.Module]) -> Callable[[Tensor], Callable[[Tensor], Tensor]]:
    """``qs (P, d, d) → f_rot``: each trial's model rotated by its own ``Q`` (:class:`_Rotation`
    vmapped over the trials' parameters and buffers, stacked), then vmapped over the trials."""
    def rotated(qs: Tensor) -> Callable[[Tensor], Tensor]:
        owns = [dict([*m.named_parameters(), *m.named_buffers()]) for m in models]
        # fresh tensors: rotate_ changes them in place
        state = {f"model.{n}": torch.stack([own[n].detach() for own in owns]) for n in owns[0]}
        rotation = _Rotation(models[0])
        return _vmapped_model(models[0], vmap(lambda st, q: functional_call(rotation, st, (q,)))(state, qs))
    return rotated


def measure_pack(setups: list[Setup], best: dict[str, Tensor]) -> list[dict[str, float]]:
    """:func:`harness.symmetry.measure` of every trial of a pack on its kept state, once for the
    pack (:func:`harness.symmetry.measure_stacked`: each transformation one pass vmapped over
    the kept parameters, on the pack's device; the span residuals one batched QR on the CPU).
    Per trial (:func:`harness.symmetry.measure_each`, the same values) where vmap refuses the
    model's forward (data-dependent control flow, e.g. an external model's), the trials'
    inputs differ in shape, or the device runs out of memory; a refusal is remembered per
    model class.

    Args:
        setups: the trials' setups, their modules holding the kept state.
        best: the same state stacked ``{name: (P, *shape)}``, names of the pack's ``_Loss``
            (``model.*`` are read).
    """
    models = [s.model for s in setups]
    xs = [symmetry_input(s) for s in setups]

    def generators() -> list[torch.Generator]:  # fresh: a refused pass has drawn from them
        return [generator(s.cfg.seed, "symmetry") for s in setups]
    if type(models[0]) not in _NO_SYMMETRY_VMAP and len({x.shape for x in xs}) == 1:
        kept = {n[len("model."):]: t for n, t in best.items() if n.startswith("model.")}
        try:
            return measure_stacked(
                _vmapped_model(models[0], kept), torch.stack(xs), generators(),
                _rotated_models(models) if hasattr(models[0], "rotate_") else None,
                [m.span_knowledge() if hasattr(m, "span_knowledge") else None for m in models])
        except RuntimeError as err:  # vmap refused an operation of the model's forward, or memory ran out
            if not isinstance(err, torch.cuda.OutOfMemoryError):  # out of memory: this pack only
                _NO_SYMMETRY_VMAP.add(type(models[0]))
    return measure_each(models, xs, generators())


def _conclude(pack: _Pack, start: float) -> list[TrialResult]:
    """Each trial's kept parameters into its own modules, then the lone code's conclusion but
    for the symmetry measurements, which run once for the pack (:func:`measure_pack`); a trial's
    ``end_ms`` is the pack's end."""
    results = []
    for i, s in enumerate(pack.setups):
        _copy_into(pack.best, i, pack.losses_of[i])
        pack.kept[i].best_state = _state(s.model, s.task)
        result = conclude(s, pack.kept[i], pack.diverged[i], start, symmetry=False)
        result.info["pack_size"] = len(pack.setups)
        results.append(result)
    for result, values in zip(results, measure_pack(pack.setups, pack.best)):
        result.metrics.update(values)
    end_ms = int(time.time() * 1000)
    for result in results:
        result.end_ms = end_ms
    return results


def run_pack(cfgs: Sequence[Config], device: str = "cpu",
             timings: dict[str, float] | None = None,
             progress: Sequence[Callable[[dict[str, float]], None] | None] | None = None,
             vmap_eval: bool | None = None) -> list[TrialResult]:
    """Train the trials ``cfgs`` as one pack and evaluate each; the results are those of
    :func:`harness.trial.run_trial` for each config, up to rounding (module docstring).

    Args:
        cfgs: trial configs with one :func:`pack_key`, none of which :func:`cannot_pack`.
        device: ``cpu``, ``cuda`` or ``auto``.
        timings: if given, filled with where the pack's wall time went, in seconds: ``setup``
            (data, models), ``steps`` (vectorised training), ``eval`` (validation and
            checkpoints), ``conclude`` (per-trial test evaluation, the symmetry measurements once for the pack).
        progress: if given, one callback (or ``None``) per config, called with each of that
            trial's learning-curve points as it is measured (as ``run_trial``'s ``progress``).
        vmap_eval: validate the pack vmapped (one batched pass) rather than trial by trial;
            ``None``: vmapped on CUDA, else :data:`CPU_VMAP_EVAL`; under ``train.compile`` the
            vmapped validation is compiled too.
            A task whose metrics do not vmap (data-dependent shapes) is validated per trial.

    Returns:
        One :class:`~harness.trial.TrialResult` per config, in order; ``info`` holds
        ``pack_size`` and ``compiled``.

    Raises:
        ValueError: configs that do not share a pack key or cannot be packed, impossible sizes,
            an unavailable device.
        torch.cuda.OutOfMemoryError: the pack does not fit (the caller splits it).
    """
    start = time.time()
    if not cfgs:
        return []
    _check_packable(cfgs, progress)
    dev = resolve_device(device)
    compiled = resolve_compile(cfgs[0], str(dev), len(cfgs))
    if vmap_eval is None:
        vmap_eval = dev.type == "cuda" or CPU_VMAP_EVAL
    clock = {"setup": 0.0, "steps": 0.0, "eval": 0.0, "conclude": 0.0}
    mark = time.perf_counter()
    pack = _build(cfgs, dev, compiled, vmap_eval)
    clock["setup"] = time.perf_counter() - mark
    _train(pack, dev, clock, progress)
    mark = time.perf_counter()
    results = _conclude(pack, start)
    for r in results:
        r.info["compiled"] = compiled
    clock["conclude"] = time.perf_counter() - mark
    if timings is not None:
        timings.update(clock)
    return results
