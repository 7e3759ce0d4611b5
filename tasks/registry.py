"""Explicit registry of task families: stable short name → (config schema, class).

A family's name is stored with every run (``task.name``); never rename one. Presets in
``conf/task/`` pick a family and set its options; T2 (rotation) and T5 (lengths) are options of
every family (:class:`tasks.base.CommonConfig`), used by their own presets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
