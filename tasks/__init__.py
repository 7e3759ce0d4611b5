"""Task families of paper.md §12: registry and one file per family."""

from tasks.base import Batch, TaskBase, combine, derive_seed
from tasks.registry import TASKS, build_task

Task = TaskBase  # the protocol every family implements (see tasks/base.py)

__all__ = ["Batch", "TASKS", "Task", "TaskBase", "build_task", "combine", "derive_seed"]
