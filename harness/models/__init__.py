"""The model family of paper.md §11: registry, builders, and one file per family."""

from harness.models.registry import MODELS, build_model, count_parameters

__all__ = ["MODELS", "build_model", "count_parameters"]
