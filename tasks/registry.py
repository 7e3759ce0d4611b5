"""Explicit registry of task families: stable short name → (config schema, class)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from tasks.base import Task
from tasks.teacher import TeacherConfig, TeacherTask


@dataclass(frozen=True)
class TaskEntry:
    """A task family: its config dataclass and its class ``cls(cfg, dtype)``."""

    schema: type
    cls: type


TASKS: dict[str, TaskEntry] = {
    "teacher": TaskEntry(TeacherConfig, TeacherTask),
}


def build_task(cfg: Any, dtype: torch.dtype = torch.float32) -> Task:
    """Build the task named by ``cfg.name``.

    Raises:
        KeyError: for an unregistered task, naming the registered ones.
    """
    if cfg.name not in TASKS:
        raise KeyError(f"unknown task {cfg.name!r}; registered: {sorted(TASKS)}")
    return TASKS[cfg.name].cls(cfg, dtype)
