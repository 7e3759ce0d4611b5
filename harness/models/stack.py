"""Pre-norm residual blocks around any mixer (``model.blocks``, issue 65): one implementation for
every family and every mixer from outside the package, so that a zoo arm and its references are
stacked alike.

A block, rows are tokens (``x: (B, n, d)``)::

    x ← x + mixer(norm(x))
    x ← x + MLP(norm(x)),   MLP: d → 2d → d, GELU, biases (harness.models.common.MLP)

``norm`` is RMSNorm without a learned gain, ``x / sqrt(mean(x², last axis) + eps)`` (Zhang &
Sennrich 2019): a per-coordinate gain or LayerNorm's mean over coordinates would tie the block to
the coordinate axes and break orthogonal equivariance; this norm is invariant under ``x ↦ x Qᵀ``.
``blocks = 0`` (the default) is the bare mixer as before: no block, no MLP, no norm.

The stack's declarations follow from its parts and are measured like any model's (the zoo's
pre-flight, :func:`harness.external_check.causality_refusal`):

* ``symmetries``: the mixers' common ones among ``orthogonal_knowledge`` (every part has
  ``rotate_``: the MLP's ``W1 ↦ W1 Qᵀ``, ``W2 ↦ Q W2``, ``b2 ↦ Q b2``) and ``permutation`` (the
  norm and the MLP act per token); never ``orthogonal`` (the MLP's fixed weights see the axes);
* ``causal``: the mixers' own declaration (the norm and the MLP act per token, so they keep it).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from harness.models.common import MLP

EPS = 1e-6  # RMSNorm's ε, added to the mean square
KEPT = frozenset({"orthogonal_knowledge", "permutation"})  # what the norm and the MLP preserve


def rms_norm(x: Tensor) -> Tensor:
    """``x / sqrt(mean(x², -1) + EPS)`` for ``x: (..., d)``; no learned gain (module docstring)."""
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + EPS)


def _declared_causal(mixer: nn.Module):
    """A mixer's ``causal`` as :func:`harness.external_check.declared_causal` reads it (its own
    attribute, else its config's, else False); passed on unchecked, so a non-bool is refused there."""
    return getattr(mixer, "causal", getattr(getattr(mixer, "cfg", None), "causal", False))


class Block(nn.Module):
    """One pre-norm residual block (module docstring) around ``mixer``; ``(B, n, d) → (B, n, d)``."""

    def __init__(self, mixer: nn.Module, d: int, generator: torch.Generator) -> None:
        super().__init__()
        self.mixer = mixer
        self.mlp = MLP([d, 2 * d, d], generator)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.mixer(rms_norm(x))
        return x + self.mlp(rms_norm(x))

    @torch.no_grad()
    def rotate_(self, q: Tensor) -> None:
        """In place: the mixer's own rule, the MLP's ``W1 ↦ W1 Qᵀ``, ``W2 ↦ Q W2``, ``b2 ↦ Q b2``."""
        self.mixer.rotate_(q)
        self.mlp.rotate_(q)


class Stack(nn.Module):
    """``len(mixers)`` pre-norm residual blocks, one per mixer (each built with its own weights).

    Args:
        mixers: the mixers, each ``(B, n, d) → (B, n, d)``, in order.
        d: embedding dimension.
        generator: draws the blocks' MLPs (after the mixers drew theirs).

    Raises:
        ValueError: no mixers.
    """

    def __init__(self, mixers: list[nn.Module], d: int, generator: torch.Generator) -> None:
        super().__init__()
        if not mixers:
            raise ValueError("model.blocks: a stack needs at least one block")
        self.blocks = nn.ModuleList(Block(m, d, generator) for m in mixers)
        common = frozenset.intersection(*(frozenset(getattr(m, "symmetries", ()) or ()) for m in mixers))
        rotatable = all(hasattr(m, "rotate_") for m in mixers)
        self.symmetries = common & (KEPT if rotatable else KEPT - {"orthogonal_knowledge"})
        said = [_declared_causal(m) for m in mixers]
        self.causal = said[0] if all(s is said[0] for s in said) else False
        if rotatable:  # without it orthogonal_knowledge cannot be measured (as for a bare mixer)
            self.rotate_ = self._rotate_

    def forward(self, x: Tensor) -> Tensor:
        """``x: (B, n, d) → (B, n, d)``, the blocks in order."""
        for block in self.blocks:
            x = block(x)
        return x

    @torch.no_grad()
    def _rotate_(self, q: Tensor) -> None:
        for block in self.blocks:
            block.rotate_(q)

    def span_knowledge(self) -> None:
        """No span residual for a stack: its output leaves span(X, knowledge) through the MLPs."""
        return None
