"""A task from outside the package, named by import path (``task=external``).

``task=external task.target=package.module:ClassName task.kwargs.<name>=<value>`` builds
``cls(cfg, dtype, **cfg.kwargs)``: a subclass of :class:`tasks.base.TaskBase` (a regression
task starts from :class:`tasks.base.RegressionTask`) that keeps the metric contract stated in
``TaskBase``'s docstring. ``cfg`` is :class:`ExternalTaskConfig`: the options every task shares
(``n_train``, ``n_val``, ``n_test``, ``train_lengths``, ``test_lengths``, ``rotation``) plus
``target`` and ``kwargs``, which are part of the trial's identity.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Dict

import torch

from tasks.base import Batch, CommonConfig, TaskBase
from tasks.user_code import load_class

NAME = "external"


@dataclass
class ExternalTaskConfig(CommonConfig):
    """Options of a task named by import path (registry name ``external``)."""

    name: str = NAME
    # "package.module:ClassName", importable from the driver's sys.path; empty = not given (an
    # error when built: not MISSING, so that an ablation grid can set it like any value)
    target: str = ""
    kwargs: Dict[str, Any] = field(default_factory=dict)  # constructor keyword arguments


def load_task_class(target: str) -> type:
    """The :class:`TaskBase` subclass named by ``target`` (``package.module:ClassName``).

    Raises:
        ValueError: a malformed path, a module that does not import (with its error), a missing
            attribute, or one that is not a ``TaskBase`` subclass; names ``task.target``.
    """
    if not target:
        raise ValueError("task=external needs task.target=package.module:ClassName")
    return load_class(target, TaskBase, "task.target",
                      "a subclass of tasks.base.TaskBase (a regression task: tasks.base.RegressionTask)")


def build_external_task(cfg: ExternalTaskConfig, dtype: torch.dtype = torch.float32) -> TaskBase:
    """``cls(cfg, dtype, **cfg.kwargs)`` for the class ``cfg.target``, checked against the
    contract: ``d`` and ``n_max`` set, and a probe batch's metrics include ``rel_mse`` or ``acc``.

    Raises:
        ValueError: as :func:`load_task_class`; a constructor that cannot take the arguments or
            raises; a task that breaks the contract (naming ``task.target`` and what is wrong).
    """
    cls = load_task_class(cfg.target)
    kwargs = dict(cfg.kwargs)
    try:
        inspect.signature(cls).bind(cfg, dtype, **kwargs)
    except TypeError as err:
        raise ValueError(f"task.target={cfg.target!r}: constructor {cls.__name__}{inspect.signature(cls)} "
                         f"cannot take (cfg, dtype, **{kwargs}): {err}") from err
    try:
        task = cls(cfg, dtype, **kwargs)
    except ValueError:
        raise
    except Exception as err:
        raise ValueError(f"task.target={cfg.target!r}: {cls.__name__}(cfg, dtype, **{kwargs}) raised "
                         f"{type(err).__name__}: {err}") from err
    _check_contract(cfg.target, task)
    return task


def _check_contract(target: str, task: TaskBase) -> None:
    missing = [a for a in ("d", "n_max", "lengths", "test_ns") if not hasattr(task, a)]
    if missing:
        raise ValueError(f"task.target={target!r}: {missing} not set in __init__ (set self.d and "
                         "call self.set_lengths([...]))")
    try:
        batch: Batch = task.sample_split("val", task.lengths[0], 2, 0)
        x = task.inputs(batch)
        sums = task.metric_sums(torch.zeros_like(x), batch)
    except Exception as err:
        raise ValueError(f"task.target={target!r}: a probe batch fails: {type(err).__name__}: {err}") from err
    if tuple(x.shape) != (2, task.lengths[0], task.d):
        raise ValueError(f"task.target={target!r}: inputs must be (B, n, d)=(2, {task.lengths[0]}, "
                         f"{task.d}), got {tuple(x.shape)}")
    if "rel_mse" not in sums and "acc" not in sums:
        raise ValueError(f"task.target={target!r}: metric_sums must report 'rel_mse' or 'acc' "
                         f"(the error the harness selects on), got {sorted(sums)}")
