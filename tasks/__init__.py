"""Task families of paper.md §12: registry and one file per family."""

from tasks.base import Batch, derive_seed
from tasks.registry import TASKS, build_task

__all__ = ["Batch", "TASKS", "build_task", "derive_seed"]
