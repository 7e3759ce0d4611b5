"""One trial: data, model, training with a fixed step budget, checkpoint selection on
validation, test evaluation. Pure PyTorch: no Ray, Hydra or MLflow here."""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.config import Config, DType, Optimizer
from harness.models import build_model, count_parameters
from tasks import Batch, build_task
from tasks.base import generator

DTYPES = {DType.float32: torch.float32, DType.float64: torch.float64}


@dataclass
class TrialResult:
    """What a trial returns.

    Attributes:
        metrics: final metrics, keys ``{split}/{name}`` (``test/rel_mse``, ``val/best_loss``, ...).
        curve: learning curve, one dict per evaluation: ``step``, ``train/loss``, ``val/loss``.
        state_dict: parameters with the best validation loss, on the CPU.
        n_params: trainable scalars.
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


def _optimizer(cfg: Config, params) -> torch.optim.Optimizer:
    if cfg.train.optimizer is Optimizer.adam:
        return torch.optim.Adam(params, lr=cfg.train.lr)
    return torch.optim.SGD(params, lr=cfg.train.lr)


@torch.no_grad()
def _evaluate(model, task, batch: Batch, chunk: int = 1024) -> tuple[torch.Tensor, float]:
    preds = torch.cat([model(batch.x[i:i + chunk]) for i in range(0, len(batch), chunk)])
    return preds, float(task.loss(preds, batch))


def run_trial(cfg: Config, device: str = "cpu") -> TrialResult:
    """Train ``cfg.model`` on ``cfg.task`` and evaluate it (paper.md §13 protocol).

    Adam (or SGD) for ``cfg.train.max_steps`` steps on minibatches drawn with replacement from
    exactly ``task.n_train`` examples; every ``eval_every`` steps the validation loss is measured
    and the best parameters kept; the test set is evaluated once, with those parameters.
    Streams: data ``(seed, "train")``, minibatch order ``(seed, "batches")`` and initialisation
    ``(seed, "init")`` are independent generators; no global RNG is used.

    Args:
        cfg: the trial's resolved config.
        device: ``cpu``, ``cuda`` or ``auto`` (see :func:`resolve_device`).

    Returns:
        The final metrics (``test/rel_mse``, ``test/uniform_rel_mse``, ``val/loss``, ...), the
        learning curve, the best parameters and the parameter count.

    Raises:
        ValueError: for impossible sizes or an unavailable device.
    """
    start = time.time()
    dev = resolve_device(device)
    dtype = DTYPES[cfg.train.dtype]
    if cfg.train.max_steps <= 0 or cfg.train.batch_size <= 0 or cfg.train.eval_every <= 0:
        raise ValueError(f"train sizes must be positive, got {cfg.train}")
    task = build_task(cfg.task, dtype)
    train, val, test = (b.to(dev) for b in (task.train_set(cfg.seed), task.val_set(), task.test_set()))
    model = build_model(cfg.model, task.d, task.n_max, generator(cfg.seed, "init")).to(dev, dtype)
    opt = _optimizer(cfg, model.parameters())
    order = generator(cfg.seed, "batches")
    batch_size = min(cfg.train.batch_size, len(train))

    best_val, best_state, best_step = math.inf, copy.deepcopy(model.state_dict()), 0
    curve: list[dict[str, float]] = []
    diverged, running = False, []
    for step in range(1, cfg.train.max_steps + 1):
        idx = torch.randint(len(train), (batch_size,), generator=order).to(dev)
        loss = task.loss(model(train.x[idx]), train.index(idx))
        if not torch.isfinite(loss):
            diverged = True
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        running.append(loss.item())
        if step % cfg.train.eval_every == 0 or step == cfg.train.max_steps:
            _, val_loss = _evaluate(model, task, val)
            curve.append({"step": step, "train/loss": sum(running) / len(running), "val/loss": val_loss})
            running = []
            if val_loss < best_val:  # NaN never compares smaller: a diverged state is never kept
                best_val, best_step = val_loss, step
                best_state = copy.deepcopy(model.state_dict())

    model.load_state_dict(best_state)
    test_pred, test_loss = _evaluate(model, task, test)
    metrics = {"val/best_loss": best_val, "test/loss": test_loss, "train/best_step": float(best_step)}
    metrics.update({f"test/{k}": v for k, v in task.metrics(test_pred, test).items()})
    metrics.update({f"test/{k}": v for k, v in task.reference_metrics(test).items()})
    return TrialResult(
        metrics=metrics,
        curve=curve,
        state_dict={k: v.detach().cpu() for k, v in best_state.items()},
        n_params=count_parameters(model),
        diverged=diverged,
        start_ms=int(start * 1000),
        end_ms=int(time.time() * 1000),
        info={"device": str(dev), "torch_threads": torch.get_num_threads()},
    )
