"""Explicit registry of model families: stable short name → (config schema, builder).

A family's name is stored with every run (``model.name``); never rename one. Presets in
``conf/model/`` pick a family and set its options; the preset's file name is the variant.

=============  =====================  =============================================
name           paper.md §11 id        file
=============  =====================  =============================================
general        M0 (Prop. 2)           general.py
xg             M1                     xg.py
xg_noknow      M2 (Prop. 1)           gram.py
attention      M3, M4, M5, M6         attention.py
multihead      M7                     multihead.py
higher_order   M8                     higher_order.py
zg2            M9                     zg2.py
transformer    M10                    transformer.py
mlp            B1                     mlp.py
mixing         B2                     mixing.py
tokenwise      B3                     tokenwise.py
deepsets       B4                     deepsets.py
gru            B5                     gru.py
cnn            B6                     cnn.py
coordwise      B7                     coordwise.py
=============  =====================  =============================================

One more name, ``external``, is not a family of the paper but the way in for code the package
does not own: ``model=external model.target=package.module:ClassName`` (external.py). It is
kept out of ``MODELS`` (whose entries are the paper's families, each with presets and the
contract tests of tests/test_models.py) and built by :func:`build_model` alone.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor, nn

from harness.models.attention import Attention, AttentionConfig
from harness.models.cnn import CNN, CNNConfig
from harness.models.coordwise import CoordWise, CoordWiseConfig
from harness.models.deepsets import DeepSets, DeepSetsConfig
from harness.models.external import NAME as EXTERNAL, build_external
from harness.models.general import General, GeneralConfig
from harness.models.gram import Gram, GramConfig
from harness.models.gru import GRUConfig, GRUSeq2Seq
from harness.models.higher_order import HigherOrder, HigherOrderConfig
from harness.models.mixing import Mixing, MixingConfig
from harness.models.mlp import FlatMLP, FlatMLPConfig
from harness.models.multihead import MultiheadAttention, MultiheadConfig
from harness.models.stack import Stack
from harness.models.tokenwise import TokenMLP, TokenMLPConfig
from harness.models.transformer import Transformer, TransformerConfig
from harness.models.xg import XG, XGConfig
from harness.models.zg2 import ZG2, ZG2Config


@dataclass(frozen=True)
class ModelEntry:
    """A family: its config dataclass and ``build(cfg, d, n_max, generator) -> nn.Module``."""

    schema: type
    build: Callable[[Any, int, int, torch.Generator], nn.Module]


MODELS: dict[str, ModelEntry] = {
    "general": ModelEntry(GeneralConfig, lambda c, d, n_max, g: General(c, d, g)),
    "xg": ModelEntry(XGConfig, lambda c, d, n_max, g: XG(c, d, g)),
    "xg_noknow": ModelEntry(GramConfig, lambda c, d, n_max, g: Gram(c, d, g)),
    "attention": ModelEntry(AttentionConfig, lambda c, d, n_max, g: Attention(c, d, g, n_max)),
    "multihead": ModelEntry(MultiheadConfig, lambda c, d, n_max, g: MultiheadAttention(c, d, g)),
    "higher_order": ModelEntry(HigherOrderConfig, lambda c, d, n_max, g: HigherOrder(c, d, g)),
    "zg2": ModelEntry(ZG2Config, lambda c, d, n_max, g: ZG2(c, d, g)),
    "transformer": ModelEntry(TransformerConfig, lambda c, d, n_max, g: Transformer(c, d, n_max, g)),
    "mlp": ModelEntry(FlatMLPConfig, lambda c, d, n_max, g: FlatMLP(c, d, n_max, g)),
    "mixing": ModelEntry(MixingConfig, lambda c, d, n_max, g: Mixing(c, d, n_max, g)),
    "tokenwise": ModelEntry(TokenMLPConfig, lambda c, d, n_max, g: TokenMLP(c, d, g)),
    "deepsets": ModelEntry(DeepSetsConfig, lambda c, d, n_max, g: DeepSets(c, d, g)),
    "gru": ModelEntry(GRUConfig, lambda c, d, n_max, g: GRUSeq2Seq(c, d, g)),
    "cnn": ModelEntry(CNNConfig, lambda c, d, n_max, g: CNN(c, d, g)),
    "coordwise": ModelEntry(CoordWiseConfig, lambda c, d, n_max, g: CoordWise(c, d, g)),
}


def build_model(cfg: Any, d: int, n_max: int, generator: torch.Generator) -> nn.Module:
    """Build the model named by ``cfg.name``: a module mapping ``(B, n, d) → (B, n, d)``.

    Every model has ``symmetries: frozenset[str]`` (a subset of ``orthogonal_knowledge``,
    ``orthogonal``, ``permutation``), ``rotate_(Q)`` and ``span_knowledge()``.

    Args:
        cfg: a registered family's config dataclass (e.g. :class:`AttentionConfig`).
        d: embedding dimension.
        n_max: the longest training sequence (used only by families with a maximum length).
        generator: the initialisation stream; no global RNG is used.

    ``cfg.name == "external"``: the class ``cfg.target`` (:mod:`harness.models.external`).
    ``cfg.blocks = L ≥ 1`` (a key of the attention, MLP and external configs; absent or 0: the bare
    model): L pre-norm residual blocks, each with its own copy of the model
    (:class:`harness.models.stack.Stack`).

    Raises:
        KeyError: for an unregistered family, naming the registered ones.
        ValueError: for impossible sizes (raised by the family); for an external model, a
            target that does not import or cannot be built (naming ``model.target``); a
            ``blocks`` below 0.
    """
    if cfg.name != EXTERNAL and cfg.name not in MODELS:
        raise KeyError(f"unknown model family {cfg.name!r}; registered: {sorted(MODELS)}")
    one = build_external if cfg.name == EXTERNAL else MODELS[cfg.name].build
    blocks = getattr(cfg, "blocks", 0)
    if not isinstance(blocks, int) or blocks < 0:
        raise ValueError(f"model.blocks={blocks!r}; allowed: 0 (the bare model) or a positive number of blocks")
    if blocks == 0:
        return one(cfg, d, n_max, generator)
    # the mixers first, then the blocks' MLPs, all from the one generator (harness/models/stack.py)
    return Stack([one(cfg, d, n_max, generator) for _ in range(blocks)], d, generator)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars in ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def rotate(model: nn.Module, q: Tensor) -> nn.Module:
    """A deep copy of ``model`` with every embedding-space parameter transformed by ``Q``
    (paper.md §9, C4): ``W_Q, W_K ↦ ·Qᵀ``; square ``W_V ↦ Q W_V Qᵀ`` (``W_V ↦ W_V Qᵀ`` when a
    ``W_out`` follows); ``W_out ↦ Q W_out``; FFN ``W1 ↦ W1 Qᵀ``, ``W2 ↦ Q W2``; positional table
    ``↦ QP``; ``Z ↦ QZ``; embedding-space biases ``b ↦ Qb``; baselines' input weights ``↦ W Qᵀ``
    and output weights ``↦ Q W``. For a model claiming ``orthogonal_knowledge``,
    ``rotate(f, Q)(QX) = Q f(X)``.

    Args:
        model: a registered model.
        q: an orthogonal ``(d, d)`` matrix (cast to the model's dtype and device).

    Raises:
        TypeError: if ``model`` has no ``rotate_`` method (not a registered family).
    """
    if not hasattr(model, "rotate_"):
        raise TypeError(f"{type(model).__name__} does not define rotate_(Q)")
    out = copy.deepcopy(model)
    ref = next(iter(out.parameters()), None)
    if ref is not None:
        q = q.to(dtype=ref.dtype, device=ref.device)
    out.rotate_(q)
    return out
