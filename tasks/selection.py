"""T4: selection and copy tasks, whose answer tokens occur in the input (paper.md §12 T4).

Tokens are drawn from ``{0..V-1}`` and embedded by the task (:mod:`tasks.tokens`). Four kinds:

* ``nearest`` (a), hidden-metric nearest neighbour: ``y_i = t_{j*(i)}``,
  ``j*(i) = argmax_{j≠i} H[t_i, t_j]`` with the hidden metric ``H = P W* Pᵀ`` (``P: (V, k)``
  token features, ``W*: (k, k)``). Every position counts. Example (``V=3``)::

      H = [[0, 2, 1], [2, 0, 3], [1, 3, 0]], tokens [0, 1, 2]  →  y [1, 2, 1]

* ``argmax`` (b), hidden-direction argmax: every position outputs the input token with the
  largest hidden score ``u[t]`` (``u = P z*``). Example: ``u = [0.5, −1, 2, 0]``,
  tokens [1, 3, 0] → y [0, 0, 0].
* ``duplicate`` (c): ``n − 1`` distinct tokens, one of them repeated once; every position
  outputs the repeated token (needs ``n − 1 ≤ V``). Example: tokens [3, 1, 4, 1] → y [1, 1, 1, 1].
* ``repeated`` (c′, ours; claim C11): one token occurs M ∈ {3, 4} times (the mode), another twice,
  the rest once; each position outputs its own token if that token occurs more than once, else
  the mode (needs ``n ≥ 7`` and ``n − 3 ≤ V``). Uniform mixing (the mode everywhere) errs at the
  pair's two positions; ``α XᵀX`` gives each position the multiplicity of its own token, which
  a softmax turns into "own token if repeated" for both M, while ``α I`` needs a different α
  per M. Example (M = 3): tokens [5, 2, 5, 7, 2, 5, 0, 9] → y [5, 2, 5, 5, 2, 5, 5, 5].
* ``recall`` (d), associative recall "k1 v1 k2 v2 … q → v": keys ``0..V/2−1`` (distinct),
  values ``V/2..V−1``; the answer is read at the last position (``n`` odd). Example (``V=8``):
  tokens [2, 5, 0, 7, 1, 4, 0] → y [·, ·, ·, ·, ·, ·, 7], mask only the last position.

Metrics: ``acc`` (strict argmax on the masked positions) and ``loss`` (cross-entropy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor

from tasks.base import Batch, Sums, check_positive, generator
from tasks.tokens import TokenConfig, TokenTask


class SelectionKind(Enum):
    """The selection tasks (a)-(d) of paper.md §12 T4."""

    nearest = "nearest"
    argmax = "argmax"
    duplicate = "duplicate"
    repeated = "repeated"
    recall = "recall"


@dataclass
class SelectionConfig(TokenConfig):
    """Options of :class:`SelectionTask` (registry name ``selection``)."""

    name: str = "selection"
    kind: SelectionKind = SelectionKind.nearest
    V: int = 16  # vocabulary size
    n: int = 8  # training length (when train_lengths is empty)
    k: int = 4  # hidden-metric knowledge size (nearest, argmax)
    task_seed: int = 0  # fixes the hidden metric/direction and the validation/test streams


def nearest_targets(tokens: Tensor, H: Tensor) -> Tensor:
    """``y_i = t_{j*(i)}``, ``j*(i) = argmax_{j≠i} H[t_i, t_j]``: tokens ``(B, n)`` → ``(B, n)``."""
    s = H[tokens[:, :, None], tokens[:, None, :]]  # (B, n, n): s_ij = H[t_i, t_j]
    eye = torch.eye(tokens.shape[1], dtype=torch.bool, device=tokens.device)
    j = s.masked_fill(eye, float("-inf")).argmax(-1)  # (B, n)
    return tokens.gather(1, j)


def argmax_targets(tokens: Tensor, u: Tensor) -> Tensor:
    """Every position: the input token with the largest ``u[t]``; ``(B, n)`` → ``(B, n)``."""
    j = u[tokens].argmax(-1, keepdim=True)  # (B, 1)
    return tokens.gather(1, j).expand_as(tokens)


def duplicate_targets(tokens: Tensor) -> Tensor:
    """Every position: the token that occurs twice; ``(B, n)`` → ``(B, n)``."""
    same = (tokens[:, :, None] == tokens[:, None, :]).sum(-1)  # (B, n): occurrences of t_i
    j = (same > 1).to(torch.int64).argmax(-1, keepdim=True)  # (B, 1): a duplicated position
    return tokens.gather(1, j).expand_as(tokens)


def repeated_targets(tokens: Tensor) -> Tensor:
    """Each position: its own token if it occurs more than once, else the most frequent token
    (the mode, unique by construction); ``(B, n)`` → ``(B, n)``."""
    same = (tokens[:, :, None] == tokens[:, None, :]).sum(-1)  # (B, n): occurrences of t_i
    mode = tokens.gather(1, same.argmax(-1, keepdim=True))  # (B, 1)
    return torch.where(same > 1, tokens, mode)


def recall_targets(tokens: Tensor) -> Tensor:
    """The value paired with the query key (last token); ``(B, n)`` → ``(B,)``."""
    keys, values = tokens[:, 0:-1:2], tokens[:, 1:-1:2]  # (B, p), (B, p)
    j = (keys == tokens[:, -1:]).to(torch.int64).argmax(-1, keepdim=True)  # (B, 1)
    return values.gather(1, j).squeeze(1)


def recall_unbound_accuracy(V: int, n: int) -> float:
    """The best accuracy on ``recall`` (vocabulary ``V``, length ``n``) of a prediction that binds
    no key to its value, e.g. any permutation-equivariant map, which sees the tokens but not their
    order (paper.md §12 T4d).

    Given the tokens, each of the ``p = (n − 1)/2`` value slots is equally likely to be the
    query's, so the best guess is the most frequent value, right with probability (its
    multiplicity)/``p``. The values are i.i.d. uniform over the ``m = V − V/2`` value tokens
    (:meth:`SelectionTask._tokens`): the accuracy is ``E[max multiplicity]/p``, exact, from
    ``P(max ≤ c) = p! [x^p] (Σ_{j ≤ c} x^j/j!)^m / m^p``. ``V = 16, n = 9``: 0.4123, not ``1/p``.

    Raises:
        ValueError: ``n`` even or below 3, or ``V < 2``.
    """
    from fractions import Fraction

    if n < 3 or n % 2 == 0 or V < 2:
        raise ValueError(f"recall_unbound_accuracy: V={V}, n={n}; allowed: V ≥ 2 and odd n ≥ 3")
    p, m = (n - 1) // 2, V - V // 2

    def at_most(c: int) -> Fraction:  # P(no value occurs more than c times)
        poly = [Fraction(1)]  # coefficients of Π (Σ_{j ≤ c} x^j/j!) over the values so far, up to x^p
        term = [Fraction(1, math.factorial(j)) for j in range(c + 1)]
        for _ in range(m):
            poly = [sum(poly[i - j] * term[j] for j in range(min(c, i) + 1) if i - j < len(poly))
                    for i in range(p + 1)]
        return poly[p] * math.factorial(p) / Fraction(m) ** p

    expected_max = sum(1 - at_most(c) for c in range(p))  # E[X] = Σ_{c ≥ 0} P(X > c), X ≤ p
    return float(expected_max / p)


class SelectionTask(TokenTask):
    """T4 selection tasks: tokens and targets ``(B, n)``, mask ``(B, n)``.

    Training data come from ``(seed, "train", n)``; validation and test data from
    ``(task_seed, split, n)`` (i.i.d. draws: the space of sequences is far larger than the sets;
    ``task.eval_seed`` re-seeds them, :meth:`tasks.base.TaskBase.eval_generator`).

    Raises:
        ValueError: sizes < 1; ``duplicate`` with ``n − 1 > V`` or ``n < 2``; ``repeated`` with ``n < 7`` or
            ``n − 3 > V``; ``recall`` with an even ``n``, ``n < 3`` or more pairs than keys ``V/2``; ``nearest`` with ``n < 2``.
    """

    def __init__(self, cfg: SelectionConfig, dtype: torch.dtype = torch.float32) -> None:
        check_positive("selection", V=cfg.V, n=cfg.n, k=cfg.k, n_train=cfg.n_train,
                       n_val=cfg.n_val, n_test=cfg.n_test)
        super().__init__(cfg, cfg.V, dtype)
        self.set_lengths([cfg.n], minimum=3 if cfg.kind is SelectionKind.recall else 2)
        for n in [*self.lengths, *self.test_ns]:
            self._check_length(n)
        g = generator(cfg.task_seed, "selection", cfg.kind.value)
        P = torch.randn(cfg.V, cfg.k, generator=g, dtype=torch.float64)  # (V, k) token features
        W = torch.randn(cfg.k, cfg.k, generator=g, dtype=torch.float64) / math.sqrt(cfg.k)
        self.H = P @ W @ P.T  # (V, V): hidden metric
        self.u = P @ torch.randn(cfg.k, generator=g, dtype=torch.float64)  # (V,): hidden direction

    def _check_length(self, n: int) -> None:
        kind, V = self.cfg.kind, self.cfg.V
        if kind is SelectionKind.duplicate and n - 1 > V:
            raise ValueError(f"task 'selection' (duplicate): length n={n} needs n − 1 ≤ V={V}")
        if kind is SelectionKind.repeated and (n < 7 or n - 3 > V):
            raise ValueError(f"task 'selection' (repeated): length n={n}; allowed: 7 ≤ n ≤ V + 3 = {V + 3}")
        if kind is SelectionKind.recall and (n % 2 == 0 or (n - 1) // 2 > V // 2):
            raise ValueError(f"task 'selection' (recall): length n={n}; allowed: odd n with "
                             f"(n − 1)/2 ≤ V/2 = {V // 2} pairs")

    def _tokens(self, g: torch.Generator, size: int, n: int) -> Tensor:
        kind, V = self.cfg.kind, self.cfg.V
        if kind in (SelectionKind.nearest, SelectionKind.argmax):
            return torch.randint(V, (size, n), generator=g)
        if kind is SelectionKind.duplicate:
            distinct = torch.rand(size, V, generator=g).argsort(-1)[:, : n - 1]  # (B, n-1)
            dup = distinct.gather(1, torch.randint(n - 1, (size, 1), generator=g))  # (B, 1)
            seq = torch.cat([distinct, dup], 1)  # (B, n)
            return seq.gather(1, torch.rand(size, n, generator=g).argsort(-1))  # shuffled
        if kind is SelectionKind.repeated:
            return self._repeated_tokens(g, size, n)
        p, half = (n - 1) // 2, V // 2
        keys = torch.rand(size, half, generator=g).argsort(-1)[:, :p]  # (B, p) distinct keys
        values = half + torch.randint(V - half, (size, p), generator=g)  # (B, p)
        query = keys.gather(1, torch.randint(p, (size, 1), generator=g))  # (B, 1)
        pairs = torch.stack([keys, values], -1).reshape(size, 2 * p)  # (B, 2p): k1 v1 k2 v2 …
        return torch.cat([pairs, query], 1)

    def _repeated_tokens(self, g: torch.Generator, size: int, n: int) -> Tensor:
        """``(size, n)``: a mode of multiplicity M ∈ {3, 4} (uniform), a pair, singletons; shuffled."""
        V = self.cfg.V
        distinct = torch.rand(size, V, generator=g).argsort(-1)[:, : n - 3]  # (B, n-3): mode, pair, singles
        four = torch.rand(size, 1, generator=g) < 0.5  # (B, 1): M = 4, else M = 3
        # which distinct token sits in each slot; M = 3: [m, m, m, p, p, s1 .. s_{n-5}]; M = 4: [m, m, m, m, p, p, s1 .. s_{n-6}]
        three = torch.tensor([0, 0, 0, 1, 1] + list(range(2, n - 3)))  # (n,)
        four_ = torch.tensor([0, 0, 0, 0, 1, 1] + list(range(2, n - 4)))  # (n,)
        idx = torch.where(four, four_.expand(size, n), three.expand(size, n))  # (B, n)
        seq = distinct.gather(1, idx)  # (B, n)
        return seq.gather(1, torch.rand(size, n, generator=g).argsort(-1))  # shuffled

    def symmetries(self) -> frozenset[str]:
        """``permutation`` for (a)-(c′): each target is a function of the token at its position
        and of the multiset of tokens, so permuting positions permutes the targets; not for
        ``recall``, whose pairs and query are read by position."""
        return frozenset() if self.cfg.kind is SelectionKind.recall else frozenset({"permutation"})

    def targets(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """Targets and mask ``(B, n)`` of input tokens ``(B, n)``."""
        kind = self.cfg.kind
        mask = torch.ones_like(tokens, dtype=torch.bool)
        if kind is SelectionKind.nearest:
            return nearest_targets(tokens, self.H), mask
        if kind is SelectionKind.argmax:
            return argmax_targets(tokens, self.u), mask
        if kind is SelectionKind.duplicate:
            return duplicate_targets(tokens), mask
        if kind is SelectionKind.repeated:
            return repeated_targets(tokens), mask
        y = torch.zeros_like(tokens)
        y[:, -1] = recall_targets(tokens)
        mask[:, :-1] = False
        return y, mask

    def order_blind_reference_sums(self, batch: Batch) -> Sums:
        """``recall``: ``order_blind_acc``, the expected accuracy of guessing the most frequent of
        the sequence's values (a tie drawn uniformly), the best a prediction that binds no key to
        its value can do (:func:`recall_unbound_accuracy` is its expectation over the task's
        sequences); none for the other kinds, where uniform mixing is the order-blind guess."""
        if self.cfg.kind is not SelectionKind.recall:
            return {}
        values = batch.tokens[:, 1:-1:2]  # (B, p)
        counts = (values[:, :, None] == values[:, None, :]).sum(-1)  # (B, p): each value's multiplicity
        most = counts.max(-1, keepdim=True).values  # (B, 1)
        top = counts == most  # (B, p): the slots of a most frequent value
        answer = values == batch.y[:, -1:]  # (B, p): the slots holding the answer
        tied = top.sum(-1) / most.squeeze(-1)  # (B,): how many values share the top count
        hit = (answer & top).any(-1).double() / tied  # (B,): P(the guess is the answer)
        return {"order_blind_acc": (hit.sum(), torch.tensor(float(len(values))))}

    def sample_split(self, split: str, n: int, size: int, seed: int) -> Batch:
        """``size`` sequences of length ``n`` (streams in the class docstring)."""
        g = generator(seed, split, n) if split == "train" else self.eval_generator(self.cfg.task_seed, split, n)
        tokens = self._tokens(g, size, n)
        y, mask = self.targets(tokens)
        return Batch(x=None, y=y, tokens=tokens, mask=mask)
