"""The model family of paper.md §11: registry, builders, ``rotate``, and one file per family."""

from harness.models.registry import MODELS, ModelEntry, build_model, count_parameters, rotate

__all__ = ["MODELS", "ModelEntry", "build_model", "count_parameters", "rotate"]
