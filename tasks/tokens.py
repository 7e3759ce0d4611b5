"""Token tasks: embedding ``E`` and readout owned by the task (paper.md §11 data interface).

Tokens ``t ∈ {0..V-1}`` are embedded as columns of ``E ∈ R^{d×V}``; in code ``x = Eᵀ[tokens]``,
shape ``(B, n, d)``. Readout of the model output ``F_rows: (B, n, d)`` is tied,
``logits = F_rows @ E`` (the paper's ``Eᵀ F``), tied with a learned temperature
``logits = β F_rows @ E`` (one scalar ``β > 0``), or a learned unembedding ``U ∈ R^{V×d}``,
``logits = F_rows @ Uᵀ``. Loss is cross-entropy on the masked positions. A prediction is correct
only if the target's logit is *strictly* the largest (paper.md §12 T1: with a tied readout the
absent tokens tie, and argmax's index tie-breaking would score by accident).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tasks.base import Batch, CommonConfig, Sums, TaskBase, generator


class Embedding(Enum):
    """``onehot``: ``E = I``, ``d = V`` (the paper's); ``orthonormal``: fixed random orthonormal
    columns, ``d ≥ V``; ``learned``: a parameter ``E: (d, V)`` trained with the model."""

    onehot = "onehot"
    orthonormal = "orthonormal"
    learned = "learned"


class Readout(Enum):
    """``tied``: ``logits = Eᵀ F`` (keeps exact equivariance); ``scaled``: ``β Eᵀ F`` with a
    learned scalar ``β`` (also equivariant; a span-X model's ``F`` is a convex mix of tokens, so
    tied logits lie in [0, 1] and cross-entropy cannot sharpen them: it then rewards mass on
    the target rather than its rank); ``learned``: ``U F``, ``U: (V, d)``."""

    tied = "tied"
    scaled = "scaled"
    learned = "learned"


@dataclass
class TokenConfig(CommonConfig):
    """Embedding and readout options of every token task."""

    embedding: Embedding = Embedding.onehot
    readout: Readout = Readout.tied
    d: int = 0  # embedding dimension; 0 means V (required for onehot)
    embedding_seed: int = 0  # draws the fixed orthonormal embedding
    readout_beta: float = 10.0  # readout=scaled: the initial temperature β (> 0)


def strictly_correct(logits: Tensor, target: Tensor) -> Tensor:
    """``(…,)`` bool: the target's logit is strictly larger than every other logit.

    ``logits: (…, V)``, ``target: (…)`` token ids.
    """
    true = logits.gather(-1, target.unsqueeze(-1))  # (…, 1)
    others = logits.scatter(-1, target.unsqueeze(-1), float("-inf"))  # (…, V)
    return true.squeeze(-1) > others.amax(-1)


class TokenTask(TaskBase):
    """Base of the token tasks (T1, T4): embedding, readout, loss and accuracy.

    Args:
        cfg: a :class:`TokenConfig` subclass.
        V: vocabulary size.
        dtype: floating dtype of ``E``, ``U`` and the embedded inputs.

    Raises:
        ValueError: ``onehot`` with ``d`` not in {0, V}; ``orthonormal`` with ``d < V``;
            ``d < 0``; ``readout_beta ≤ 0``.
    """

    def __init__(self, cfg: TokenConfig, V: int, dtype: torch.dtype) -> None:
        super().__init__(cfg, dtype)
        d = cfg.d or V
        kind = Embedding(cfg.embedding)
        if cfg.d < 0 or (kind is Embedding.onehot and d != V):
            raise ValueError(f"task.d={cfg.d} with embedding=onehot; allowed: 0 or V={V}")
        if kind is Embedding.orthonormal and d < V:
            raise ValueError(f"task.d={d} with embedding=orthonormal; allowed: d ≥ V={V}")
        self.V, self.d = V, d
        if kind is Embedding.onehot:
            E = torch.eye(V, dtype=dtype)
        elif kind is Embedding.orthonormal:
            g = generator(cfg.embedding_seed, "embedding")
            q, _ = torch.linalg.qr(torch.randn(d, V, generator=g, dtype=torch.float64))
            E = q.to(dtype)  # (d, V), orthonormal columns
        else:
            E = torch.zeros(d, V, dtype=dtype)
        if kind is Embedding.learned:
            self.E = nn.Parameter(E)
        else:
            self.register_buffer("E", E)
        self.U = nn.Parameter(torch.zeros(V, d, dtype=dtype)) if cfg.readout is Readout.learned else None
        if not cfg.readout_beta > 0:
            raise ValueError(f"task.readout_beta={cfg.readout_beta}; allowed: a number > 0")
        self.log_beta = (nn.Parameter(torch.tensor(math.log(cfg.readout_beta), dtype=dtype))
                         if Readout(cfg.readout) is Readout.scaled else None)  # β = exp(log_beta)

    def init_parameters(self, g: torch.Generator) -> None:
        """Learned ``E`` and ``U`` get i.i.d. ``N(0, 1/d)`` entries (isotropic, so SGD commutes
        with a rotation, paper.md §12 T2)."""
        with torch.no_grad():
            if isinstance(self.E, nn.Parameter):
                self.E.copy_(torch.randn(self.E.shape, generator=g, dtype=self.dtype) / math.sqrt(self.d))
            if self.U is not None:
                self.U.copy_(torch.randn(self.U.shape, generator=g, dtype=self.dtype) / math.sqrt(self.d))

    def inputs(self, batch: Batch) -> Tensor:
        """``x = Eᵀ[tokens]``: ``(B, n, d)``."""
        return self.E.T[batch.tokens]  # (B, n, d)

    def logits(self, out: Tensor) -> Tensor:
        """Readout of the model output ``(B, n, d)`` → logits ``(B, n, V)``."""
        if self.U is not None:
            return out @ self.U.T
        return out @ self.E if self.log_beta is None else self.log_beta.exp() * (out @ self.E)

    def loss(self, out: Tensor, batch: Batch) -> Tensor:
        """Mean cross-entropy over the masked positions."""
        logits = self.logits(out)[batch.mask]  # (P, V)
        return F.cross_entropy(logits, batch.y[batch.mask])

    def loss_dense(self, out: Tensor, batch: Batch) -> Tensor:
        """:meth:`loss` as a mask-weighted mean over every position (vmap-safe; same value up to
        summation order). ``out: (B, n, d)``; targets at unmasked positions must be valid ids."""
        logits = self.logits(out)  # (B, n, V)
        ce = F.cross_entropy(logits.flatten(0, 1), batch.y.flatten(), reduction="none")  # (B n,)
        weight = batch.mask.flatten().to(ce.dtype)
        return (ce * weight).sum() / weight.sum()

    def metric_sums(self, out: Tensor, batch: Batch) -> Sums:
        """``acc`` (strict argmax over masked positions), ``loss`` (cross-entropy), and
        ``acc_<group>`` / ``acc_not_<group>`` for each example group."""
        return self._sums(out, batch, dense=False)

    def metric_sums_dense(self, out: Tensor, batch: Batch) -> Sums:
        """:meth:`metric_sums` without boolean indexing (vmap-safe: the packed validation over
        each trial's own set): the counts exactly, the cross-entropy as a mask-weighted sum over
        every position (up to summation order). Targets at unmasked positions must be valid ids
        (as :meth:`loss_dense` requires)."""
        return self._sums(out, batch, dense=True)

    def _sums(self, out: Tensor, batch: Batch, dense: bool) -> Sums:
        """The sums of :meth:`metric_sums`; ``dense``: its cross-entropy without indexing. The
        counts are the same integers either way (masks multiplied rather than indexed)."""
        logits = self.logits(out)  # (B, n, V)
        ok = strictly_correct(logits, batch.y) & batch.mask  # (B, n)
        count = batch.mask.sum(-1)  # (B,)
        if dense:
            ce = F.cross_entropy(logits.flatten(0, 1), batch.y.flatten(), reduction="none")  # (B n,)
            ce = (ce * batch.mask.flatten().to(ce.dtype)).sum()
        else:
            ce = F.cross_entropy(logits[batch.mask], batch.y[batch.mask], reduction="sum")
        sums: Sums = {"acc": (ok.sum(), count.sum()), "loss": (ce, count.sum())}
        for name, tag in batch.groups.items():
            for key, sel in ((name, tag), (f"not_{name}", ~tag)):
                sums[f"acc_{key}"] = ((ok & sel.unsqueeze(-1)).sum(), (count * sel).sum())
        return sums

    def majority_class(self) -> int:
        """The most frequent target token over the masked positions of the validation set
        (ties: the smallest id); computed once and cached. It is fitted on validation, never on
        test, and is the same for every seed and variant (paper.md §13: trivial reference)."""
        if getattr(self, "_majority", None) is None:
            counts = torch.zeros(self.V, dtype=torch.long)
            for b in self.val_set():
                counts += torch.bincount(b.y[b.mask].cpu(), minlength=self.V)
            self._majority = int(counts.argmax())  # first maximum on ties
        return self._majority

    def reference_sums(self, batch: Batch) -> Sums:
        """Two trivial references on the masked positions (their errors are ``1 − acc``):

        * ``majority_acc``: always predicting :meth:`majority_class` (``test/majority_acc``);
        * ``uniform_acc``: uniform mixing under the tied readout, ``F_i = mean_j x_j`` at every
          position, whose logits are the counts of the input tokens: it predicts the most
          frequent input token, strictly (a tie is wrong). It is what a mixing form learns when
          its scores stay flat (paper.md §12 T3 "teacher scale", §13 *not learned*).
        """
        hit = (batch.y == self.majority_class()) & batch.mask  # (B, n)
        counts = F.one_hot(batch.tokens, self.V).sum(-2).float()  # (B, V): occurrences in the input
        mixed = strictly_correct(counts[:, None, :].expand(*batch.tokens.shape, self.V), batch.y)
        return {"majority_acc": (hit.sum(), batch.mask.sum()),
                "uniform_acc": ((mixed & batch.mask).sum(), batch.mask.sum())}

    def causal_reference_sums(self, batch: Batch) -> Sums:
        """:meth:`reference_sums` for a causal model: ``majority_acc`` as there (it reads no
        input), ``uniform_acc`` of uniform mixing over the prefix: at position t the most frequent
        of the tokens at positions ≤ t, strictly (a tie is wrong)."""
        hit = (batch.y == self.majority_class()) & batch.mask  # (B, n)
        counts = F.one_hot(batch.tokens, self.V).cumsum(-2).float()  # (B, n, V): occurrences up to t
        mixed = strictly_correct(counts, batch.y)
        return {"majority_acc": (hit.sum(), batch.mask.sum()),
                "uniform_acc": ((mixed & batch.mask).sum(), batch.mask.sum())}

    def rotated(self, Q: Tensor) -> "TokenTask":
        """A copy in the rotated embedding: ``E ↦ Q E``, ``U ↦ U Qᵀ`` (paper.md §12 T2, C4)."""
        task = self._copy()
        with torch.no_grad():
            Qc = Q.to(self.E)
            task.E.copy_(Qc @ self.E)  # (d, V)
            if task.U is not None:
                task.U.copy_(self.U @ Qc.T)
        return task
