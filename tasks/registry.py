"""Explicit registry of task families: stable short name → (config schema, class).

A family's name is stored with every run (``task.name``); never rename one. Presets in
``conf/task/`` pick a family and set its options; T2 (rotation) and T5 (lengths) are options of
every family (:class:`tasks.base.CommonConfig`), used by their own presets.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any, Mapping

import torch

from tasks.arithmetic import ArithmeticConfig, ArithmeticTask
from tasks.base import TaskBase
from tasks.external import NAME as EXTERNAL, build_external_task
from tasks.mqar import MQARConfig, MQARTask
from tasks.selection import SelectionConfig, SelectionTask
from tasks.teacher import TeacherConfig, TeacherTask
from tasks.teachers import TeacherKind


@dataclass(frozen=True)
class TaskEntry:
    """A task family: its config dataclass and its class ``cls(cfg, dtype)``."""

    schema: type
    cls: type


TASKS: dict[str, TaskEntry] = {
    "teacher": TaskEntry(TeacherConfig, TeacherTask),  # T3
    "arithmetic": TaskEntry(ArithmeticConfig, ArithmeticTask),  # T1
    "selection": TaskEntry(SelectionConfig, SelectionTask),  # T4
    "mqar": TaskEntry(MQARConfig, MQARTask),  # multi-query associative recall (Zoology; issue 65)
}


def build_task(cfg: Any, dtype: torch.dtype = torch.float32) -> TaskBase:
    """Build the task named by ``cfg.name`` (an ``nn.Module``; see :class:`tasks.base.TaskBase`).

    ``cfg.name == "external"``: the class ``cfg.target`` (:mod:`tasks.external`), kept out of
    ``TASKS``, whose entries are the paper's task families.

    Raises:
        KeyError: for an unregistered task, naming the registered ones.
        ValueError: for bad sizes (raised by the family, naming the value and allowed range);
            for an external task, a target that does not import, build or keep the contract.
    """
    if cfg.name == EXTERNAL:
        return build_external_task(cfg, dtype)
    if cfg.name not in TASKS:
        raise KeyError(f"unknown task {cfg.name!r}; registered: {sorted(TASKS)}")
    return TASKS[cfg.name].cls(cfg, dtype)


def undefined_at(params: Mapping[str, Any], n: int) -> str | None:
    """Why the task of a run, given by its flat params (``task.name``, ``task.teacher``, ``task.d``,
    ``task.k``, ``task.teacher_seed``, ``task.uniform_rel_mse``: a results bundle's columns), has
    no definition at sequence length ``n``, or None where it has one.

    A teacher task is calibrated at its own ``n`` (``uniform_rel_mse``: the uniform-mixing
    predictor's error, :meth:`tasks.teacher.TeacherTask._calibrate`); at another length that
    target may lie outside what any temperature reaches (T3d's 0.6 at n = 32: 0.731-0.981), and
    then the task "at n = 32" does not exist. The other families are defined at every n their own
    checks accept.
    """
    if str(params.get("task.name")) != "teacher":
        return None

    def value(key: str, cast, default):
        v = params.get(f"task.{key}")
        return default if v is None or (isinstance(v, float) and math.isnan(v)) or str(v) in ("", "nan") \
            else cast(float(v) if cast is int else v)
    base = TeacherConfig()
    cfg = TeacherConfig(teacher=TeacherKind(value("teacher", str, base.teacher.value)), d=value("d", int, base.d),
                        n=int(n), k=value("k", int, base.k), teacher_seed=value("teacher_seed", int, base.teacher_seed),
                        uniform_rel_mse=value("uniform_rel_mse", float, base.uniform_rel_mse))
    try:
        TeacherTask(cfg)
    except ValueError as err:
        return str(err)
    return None
