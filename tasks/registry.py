"""Explicit registry of task families: stable short name → (config schema, class).

A family's name is stored with every run (``task.name``); never rename one. Presets in
``conf/task/`` pick a family and set its options; T2 (rotation) and T5 (lengths) are options of
every family (:class:`tasks.base.CommonConfig`), used by their own presets.
"""

from __future__ import annotations

from dataclasses import dataclass
import dataclasses
from enum import Enum
from typing import Any, Mapping

import torch

from tasks.arithmetic import ArithmeticConfig, ArithmeticTask
from tasks.base import TaskBase
from tasks.external import NAME as EXTERNAL, build_external_task
from tasks.mqar import MQARConfig, MQARTask
from tasks.selection import SelectionConfig, SelectionTask
from tasks.teacher import TeacherConfig, TeacherTask


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
    """Why the task of a run, given by its flat params (``task.<option>``: a results bundle's
    columns), has no definition at sequence length ``n``, or None where it has one: the family's
    config rebuilt from the run's scalar options (list options, T5's lengths, left at their
    defaults; an option the run does not log, or one that does not parse, too) at ``task.n = n``,
    and the task built from it, its family's own checks deciding.

    E.g. a teacher calibrated at n = 8 so that uniform mixing has relative error 0.6 reaches only
    0.731-0.981 at n = 32 (:meth:`tasks.teacher.TeacherTask._calibrate`); ``repeated`` (T4c′)
    needs ``n ≤ V + 3``. A family without an ``n`` option, an external task or an unregistered
    family is not checked (None).
    """
    name = str(params.get("task.name"))
    if name not in TASKS:
        return None
    schema = TASKS[name].schema
    if "n" not in {f.name for f in dataclasses.fields(schema)}:
        return None  # a family without a length option (T1: its lengths are its terms)
    options: dict[str, Any] = {}
    defaults = schema()  # each option's type, read from its default
    for f in dataclasses.fields(schema):
        raw = params.get(f"task.{f.name}")
        if f.name in ("name", "n") or raw is None or str(raw) in ("", "nan", "None"):
            continue
        default = getattr(defaults, f.name)
        try:
            if isinstance(default, Enum):
                options[f.name] = type(default)(str(raw))
            elif isinstance(default, bool):
                options[f.name] = str(raw).lower() in ("true", "1", "1.0")
            elif isinstance(default, int):
                options[f.name] = int(float(raw))
            elif isinstance(default, float):
                options[f.name] = float(raw)
            elif isinstance(default, str):
                options[f.name] = str(raw)
        except (TypeError, ValueError):
            continue  # an option this family no longer reads as logged: its default
    try:
        TASKS[name].cls(schema(**options, n=int(n)))
    except ValueError as err:
        return str(err)
    return None
