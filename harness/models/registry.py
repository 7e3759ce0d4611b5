"""Explicit registry of model families: stable short name → (config schema, builder).

A family's name is stored with every run (``model.name``); never rename one. Presets in
``conf/model/`` pick a family and set its options; the preset's file name is the variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from harness.models.attention import Attention, AttentionConfig
from harness.models.mlp import FlatMLP, FlatMLPConfig


@dataclass(frozen=True)
class ModelEntry:
    """A family: its config dataclass and ``build(cfg, d, n_max, generator) -> nn.Module``."""

    schema: type
    build: Callable[[Any, int, int, torch.Generator], nn.Module]


MODELS: dict[str, ModelEntry] = {
    "attention": ModelEntry(AttentionConfig, lambda c, d, n_max, g: Attention(c, d, g)),
    "mlp": ModelEntry(FlatMLPConfig, lambda c, d, n_max, g: FlatMLP(c, d, n_max, g)),
}


def build_model(cfg: Any, d: int, n_max: int, generator: torch.Generator) -> nn.Module:
    """Build the model named by ``cfg.name``: a module mapping ``(B, n, d) → (B, n, d)``.

    Args:
        cfg: a registered family's config dataclass (e.g. :class:`AttentionConfig`).
        d: embedding dimension.
        n_max: the longest training sequence (used only by families with a maximum length).
        generator: the initialisation stream; no global RNG is used.

    Raises:
        KeyError: for an unregistered family, naming the registered ones.
    """
    if cfg.name not in MODELS:
        raise KeyError(f"unknown model family {cfg.name!r}; registered: {sorted(MODELS)}")
    return MODELS[cfg.name].build(cfg, d, n_max, generator)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars in ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
