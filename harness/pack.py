"""Packed trials: many trials that differ only in values that keep every tensor shape (``seed``,
``train.lr``, ``task.n_train``) trained as one pack in one process. Pure PyTorch: no Ray, Hydra
or MLflow here.

Each trial of a pack is built exactly as :func:`harness.trial.run_trial` builds it
(:func:`harness.trial.prepare`: its own data stream, initialisation, minibatch order). Training
steps are vectorised over a leading trial axis: the trainable parameters of the pack's models and
tasks are stacked (``P`` trials: ``(P, *shape)``) and one step is ``torch.func.vmap`` over
``torch.func.functional_call`` of a template model, each trial on its own minibatch, followed by
Adam (or SGD) on the stacked tensors with a learning rate per trial. Validation, checkpoint
selection, the test evaluation and the symmetry measurements run per trial with the lone code
(:class:`harness.trial.Checkpoints`, :func:`harness.trial.conclude`) after the trial's current
parameters are copied into its own modules, so a packed trial returns the same
:class:`~harness.trial.TrialResult` fields as ``run_trial``.

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
import math
import time
from typing import Callable, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from harness.config import Config, Optimizer
from harness.models import external
from harness.trial import (Checkpoints, Setup, TrialResult, conclude, is_eval_step, prepare,
                           resolve_device)
from tasks import Batch, TaskBase

# Model families that cannot be packed, and why (the dry run prints the reason).
UNPACKABLE = {"gru": "nn.GRU has no vmap batching rule"}
FIELDS = ("x", "y", "tokens", "mask")  # Batch tensors a training step reads
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults, as run_trial uses them
CPU_PACK = 16  # pack_size=auto on a CPU: wide enough to amortise per-op overhead (benchmarks/)
# Model families that pack_size=auto runs alone on a CPU, and why: packing did not speed them up
# on the CPUs measured (benchmarks/RESULTS.md, B1: 0.70-0.82x on an AMD EPYC, 1.00-1.19x on an
# Intel Xeon). A lone MLP step is a few large matrix products: no per-op overhead to amortise.
CPU_AUTO_ALONE = {"mlp": "pack_size=auto on a CPU: packed MLP trials are no faster than lone ones "
                         "(benchmarks/RESULTS.md)"}
CUDA_PACK = 256  # pack_size=auto on CUDA: a pack that runs out of memory is split in halves
INDEX_CHUNK = 64  # minibatch indices drawn this many steps at a time (same stream as step by step)


def cannot_pack(cfg: Config) -> str | None:
    """Why a trial must run alone (``None`` if it can be packed): its model family has no
    batched (vmap) form, or it trains on several lengths (the minibatch's mix of lengths, and so
    its tensor shapes, change from step to step)."""
    if cfg.model.name in UNPACKABLE:
        return f"model {cfg.model.name}: {UNPACKABLE[cfg.model.name]}"
    if cfg.model.name == "external" and external.vmap_reason(cfg):  # vmap tried on it once
        return external.vmap_reason(cfg)
    lengths = set(getattr(cfg.task, "terms", None) or cfg.task.train_lengths or [0])
    if len(lengths) > 1:
        return "several training lengths (shapes change per step)"
    return None


def pack_key(cfg: Config) -> str:
    """What trials of one pack share: the config without ``seed``, ``train.lr`` and
    ``task.n_train``, plus the minibatch size (``min(batch_size, n_train)``)."""
    neutral = dataclasses.replace(
        cfg, seed=0, train=dataclasses.replace(cfg.train, lr=0.0),
        task=dataclasses.replace(cfg.task, n_train=0))
    return f"{min(cfg.train.batch_size, cfg.task.n_train)}|{neutral!r}"


def _on_cuda(device: str) -> bool:
    return device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())


def resolve_pack_size(value: str | int, device: str, cfg: Config | None = None) -> int:
    """``cluster.pack_size`` as a number. ``auto``: :data:`CUDA_PACK` on CUDA (as wide as memory
    allows: the scheduler halves a pack that runs out of memory); on a CPU :data:`CPU_PACK`, or 1
    for a trial ``cfg`` whose model family is in :data:`CPU_AUTO_ALONE`. An integer applies to
    every trial.

    Raises:
        ValueError: neither ``auto`` nor a positive integer, naming the value and allowed ones.
    """
    if str(value) == "auto":
        if _on_cuda(device):
            return CUDA_PACK
        return 1 if cfg is not None and cfg.model.name in CPU_AUTO_ALONE else CPU_PACK
    try:
        size = int(value)
    except ValueError:
        size = 0
    if size < 1:
        raise ValueError(f"cluster.pack_size={value!r}; allowed: auto or a positive integer")
    return size


def runs_alone(cfg: Config, pack_size: str | int, device: str) -> str | None:
    """Why the trial ``cfg`` runs alone under ``cluster.pack_size=pack_size`` on ``device``
    (``None`` if it is packed with others): :func:`cannot_pack`, or ``auto`` on a CPU for a
    family in :data:`CPU_AUTO_ALONE`. A pack size of 1 is no reason (nothing is packed)."""
    reason = cannot_pack(cfg)
    if reason is None and str(pack_size) == "auto" and not _on_cuda(device):
        reason = CPU_AUTO_ALONE.get(cfg.model.name)
    return reason


class _Loss(nn.Module):
    """``forward(*fields) -> loss``: the dense training loss of ``model`` on one minibatch."""

    def __init__(self, model: nn.Module, task: TaskBase, names: Sequence[str]) -> None:
        super().__init__()
        self.model, self.task, self.names = model, task, tuple(names)

    def forward(self, *tensors: Tensor) -> Tensor:
        batch = Batch(**{"x": None, "tokens": None, "mask": None, **dict(zip(self.names, tensors))})
        return self.task.loss_dense(self.model(self.task.inputs(batch)), batch)


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
        for p, g, m, v in zip(self.params, grads, self.exp_avg, self.exp_avg_sq):
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (v.sqrt() / bias_correction2_sqrt).add_(ADAM_EPS)
            neg_step = self._per_trial([-(lr / bias_correction1) for lr in self.lrs], p)
            p.addcdiv_(m * neg_step, denom)  # p + (−step_size·m) / denom, as Adam's addcdiv_


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


@dataclasses.dataclass
class _Pack:
    """A pack ready to train: ``P`` trials' setups, their pooled training sets, the stacked
    parameters ``{name: (P, *shape)}``, the optimiser and the vmapped loss, plus per-trial state
    (checkpoints, which trials still train, their running losses since the last evaluation)."""

    cfgs: Sequence[Config]
    setups: list[Setup]
    pool: dict[str, Tensor]  # {field: (Σ n_train, …)}
    offset: Tensor  # (P, 1, 1): each trial's first row in the pool
    losses_of: list[_Loss]
    stacked: dict[str, Tensor]
    trainable: list[Tensor]
    opt: StackedOptimizer
    step_losses: Callable
    kept: list[Checkpoints]
    active: list[bool]
    diverged: list[bool]
    running: list[list[float]]
    mask: Tensor  # (P,) bool: the trials whose loss still counts


def _build(cfgs: Sequence[Config], dev: torch.device) -> _Pack:
    """Each trial built as :func:`harness.trial.prepare` builds it alone, then stacked.

    Raises:
        ValueError: several training lengths, or trials whose buffers differ.
    """
    first = prepare(cfgs[0], dev)
    setups = [first, *[prepare(c, dev, shared=first) for c in cfgs[1:]]]  # one validation/test set
    if any(len(s.train) != 1 for s in setups):
        raise ValueError("cannot pack: several training lengths")
    P = len(cfgs)
    for s in setups[1:]:  # buffers (fixed embeddings, tables) are shared, not stacked
        for mine, ref in ((s.model, setups[0].model), (s.task, setups[0].task)):
            theirs = dict(ref.named_buffers())
            if any(not torch.equal(b, theirs[n]) for n, b in mine.named_buffers()):
                raise ValueError("cannot pack: the trials' buffers differ")
    pool, offsets = _stack_pool(setups)
    losses_of = [_Loss(s.model, s.task, list(pool)) for s in setups]
    names = [n for n, _ in losses_of[0].named_parameters()]
    per_trial = [dict(m.named_parameters()) for m in losses_of]
    stacked = {n: torch.stack([t[n].detach() for t in per_trial]).requires_grad_(per_trial[0][n].requires_grad)
               for n in names}
    trainable = [stacked[n] for n in names if stacked[n].requires_grad]
    template = losses_of[0]
    step_losses = vmap(lambda params, *data: functional_call(template, params, data),
                       in_dims=(0, *[0] * len(pool)))
    return _Pack(cfgs, setups, pool, torch.tensor(offsets, device=dev).view(P, 1, 1), losses_of,
                 stacked, trainable, StackedOptimizer(trainable, [c.train.lr for c in cfgs],
                                                      cfgs[0].train.optimizer),
                 step_losses, [Checkpoints(s.model, s.task) for s in setups], [True] * P,
                 [False] * P, [[] for _ in range(P)], torch.ones(P, dtype=torch.bool, device=dev))


def _step(pack: _Pack, rows: Tensor) -> bool:
    """One vectorised training step on the minibatch ``rows`` (``(P·B,)`` rows of the pool);
    a trial whose loss is not finite stops. Returns whether any trial still trains."""
    P, batch_size = len(pack.setups), pack.setups[0].batch_size
    losses = pack.step_losses(pack.stacked, *[t.index_select(0, rows).view(P, batch_size, *t.shape[1:])
                                              for t in pack.pool.values()])  # (P,)
    values = losses.detach().tolist()
    for i in range(P):
        if pack.active[i] and not math.isfinite(values[i]):
            pack.active[i], pack.diverged[i] = False, True
            pack.mask[i] = False
    if not any(pack.active):
        return False
    total = torch.where(pack.mask, losses, torch.zeros_like(losses)).sum()
    pack.opt.step(list(torch.autograd.grad(total, pack.trainable)))
    for i in range(P):
        if pack.active[i]:
            pack.running[i].append(values[i])
    return True


def _evaluate(pack: _Pack, step: int, progress) -> None:
    """Validation and checkpoint selection of each training trial, with the lone code, after
    its slice of the stacked parameters is copied into its own modules."""
    for i, s in enumerate(pack.setups):
        if pack.active[i]:
            _copy_into(pack.stacked, i, pack.losses_of[i])
            pack.kept[i].record(step, pack.running[i], s.model, s.task, s.val)
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
            rows = idx[:, j].reshape(-1)  # (P·B,): t[rows] as index_select, about 5× faster on a CPU
            if not _step(pack, rows):
                break
            if is_eval_step(step, cfg0):
                now = time.perf_counter()
                clock["steps"], mark = clock["steps"] + now - mark, now
                _evaluate(pack, step, progress)
                now = time.perf_counter()
                clock["eval"], mark = clock["eval"] + now - mark, now
        if not any(pack.active):
            break
    clock["steps"] += time.perf_counter() - mark


def run_pack(cfgs: Sequence[Config], device: str = "cpu",
             timings: dict[str, float] | None = None,
             progress: Sequence[Callable[[dict[str, float]], None] | None] | None = None,
             ) -> list[TrialResult]:
    """Train the trials ``cfgs`` as one pack and evaluate each; the results are those of
    :func:`harness.trial.run_trial` for each config, up to rounding (module docstring).

    Args:
        cfgs: trial configs with one :func:`pack_key`, none of which :func:`cannot_pack`.
        device: ``cpu``, ``cuda`` or ``auto``.
        timings: if given, filled with where the pack's wall time went, in seconds: ``setup``
            (data, models), ``steps`` (vectorised training), ``eval`` (per-trial validation and
            checkpoints), ``conclude`` (per-trial test evaluation and symmetry measurements).
        progress: if given, one callback (or ``None``) per config, called with each of that
            trial's learning-curve points as it is measured (as ``run_trial``'s ``progress``).

    Returns:
        One :class:`~harness.trial.TrialResult` per config, in order.

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
    clock = {"setup": 0.0, "steps": 0.0, "eval": 0.0, "conclude": 0.0}
    mark = time.perf_counter()
    pack = _build(cfgs, dev)
    clock["setup"] = time.perf_counter() - mark
    _train(pack, dev, clock, progress)
    mark = time.perf_counter()
    results = [conclude(s, pack.kept[i], pack.diverged[i], start) for i, s in enumerate(pack.setups)]
    clock["conclude"] = time.perf_counter() - mark
    if timings is not None:
        timings.update(clock)
    return results
