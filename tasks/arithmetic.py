"""T1: the paper's arithmetic example and its extensions (paper.md §5, §12 T1).

Vocabulary (paper.md §5): ``+`` → 0, ``-`` → 1, digit ``j`` → ``j + 2`` (the paper's
``e_{j+3}``, 1-based), and ``=`` → 12 when ``equals`` is on; ``V = 12`` (13 with ``=``).
An expression of ``L`` terms "a o b o …" has ``n = 2L − 1`` tokens (+1 for ``=``), is evaluated
left to right, and its answer is read at the last position (``=`` when present). Two regimes:

* ``modular=false`` (the paper's): only expressions whose result lies in 0..9 are valid. For
  ``L = 2`` with mixed operators that is exactly 55 + 55 = 110 examples ("a+b", a+b ≤ 9;
  "a−b", a ≥ b).
* ``modular=true`` (extension i): every expression, result mod 10; ``10^L·2^(L−1)`` examples.

Example (L=2, one-hot, no ``=``)::

    "2+1"  tokens [4, 0, 3]  →  y [·, ·, 5] ("3"), mask [F, F, T], answer_in_input False
    "2-1"  tokens [4, 1, 3]  →  y [·, ·, 3] ("1"), mask [F, F, T], answer_in_input True

Metrics: ``acc`` (strict argmax at the answer position), ``loss``, and ``acc_answer_in_input``
/ ``acc_not_answer_in_input`` (does the answer token occur among the inputs? paper.md §10.3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import List

import torch
from torch import Tensor

from tasks.base import Batch, check_positive, generator, split_evenly
from tasks.tokens import TokenConfig, TokenTask

PLUS, MINUS, DIGIT0, EQUALS = 0, 1, 2, 12
MAX_POOL = 1 << 22  # largest pool enumerated for a training length


class Ops(Enum):
    """``mixed``: ``+`` and ``−``; ``add``: addition only (targets depend on the multiset)."""

    mixed = "mixed"
    add = "add"


@dataclass
class ArithmeticConfig(TokenConfig):
    """Options of :class:`ArithmeticTask` (registry name ``arithmetic``)."""

    name: str = "arithmetic"
    terms: List[int] = field(default_factory=lambda: [2])  # training numbers of terms L
    test_terms: List[int] = field(default_factory=list)  # extra test L (T5), per-length metrics
    ops: Ops = Ops.mixed
    modular: bool = False  # result mod 10 (every expression) vs results restricted to 0..9
    equals: bool = False  # append "=" and read the answer there
    split_seed: int = 0  # fixes which examples are validation/test
    n_train: int = 50
    n_val: int = 20
    n_test: int = 40


class ArithmeticTask(TokenTask):
    """T1 arithmetic: tokens ``(B, n)``, targets ``(B, n)`` (answer at the last position).

    Finite pools are split once by ``split_seed`` into disjoint test / validation / training
    parts, per training length; a trial draws ``n_train`` distinct training examples from the
    training part with its stream ``(seed, "train")``. Test-only lengths (``test_terms``) are
    sampled uniformly from the valid expressions (they share no example with training).

    Raises:
        ValueError: ``train_lengths``/``test_lengths`` set (use ``terms``/``test_terms``); a
            number of terms < 2; a training pool above ``MAX_POOL``; ``n_train + n_val +
            n_test`` (per length) exceeding a pool, naming the largest ``n_train`` allowed.
    """

    def __init__(self, cfg: ArithmeticConfig, dtype: torch.dtype = torch.float32) -> None:
        super().__init__(cfg, 13 if cfg.equals else 12, dtype)
        if cfg.train_lengths or cfg.test_lengths:
            raise ValueError("task 'arithmetic' takes terms/test_terms, not train_lengths/test_lengths")
        check_positive("arithmetic", n_train=cfg.n_train, n_val=cfg.n_val, n_test=cfg.n_test)
        bad = [L for L in [*cfg.terms, *cfg.test_terms] if L < 2]
        if bad or not cfg.terms:
            raise ValueError(f"task.terms/test_terms {bad or cfg.terms}; allowed: lists of L ≥ 2")
        self.terms = sorted(set(cfg.terms))
        self.lengths = [self.length(L) for L in self.terms]
        self.test_ns = [self.length(L) for L in cfg.test_terms]
        self.n_max = max(self.lengths)
        self.parts = {n: self._partition(L, i) for i, (n, L) in enumerate(zip(self.lengths, self.terms))}

    def length(self, L: int) -> int:
        """Tokens in an expression of ``L`` terms."""
        return 2 * L - 1 + int(self.cfg.equals)

    def _k(self) -> int:
        return 2 if self.cfg.ops is Ops.mixed else 1

    def decode(self, idx: Tensor, L: int) -> tuple[Tensor, Tensor]:
        """Expression indices ``(m,)`` → tokens ``(m, n)`` and results ``(m,)`` (not reduced).

        Index layout: digits ``(idx // 10^j) % 10``, then operators ``(idx // 10^L // k^j) % k``.
        """
        k = self._k()
        digits = torch.stack([(idx // 10**j) % 10 for j in range(L)], 1)  # (m, L)
        ops = torch.stack([(idx // 10**L // k**j) % k for j in range(L - 1)], 1)  # (m, L-1)
        tokens = torch.empty(len(idx), 2 * L - 1, dtype=torch.long)
        tokens[:, 0::2], tokens[:, 1::2] = digits + DIGIT0, ops  # op 0 = "+", 1 = "-"
        signs = 1 - 2 * ops  # (m, L-1): +1 or -1
        result = digits[:, 0] + (signs * digits[:, 1:]).sum(1)  # left to right (no precedence)
        if self.cfg.equals:
            tokens = torch.cat([tokens, torch.full((len(idx), 1), EQUALS)], 1)
        return tokens, result

    def pool_size(self, L: int) -> int:
        """Number of expressions (valid or not) with ``L`` terms: ``10^L·k^(L−1)``."""
        return 10**L * self._k() ** (L - 1)

    def _valid(self, result: Tensor) -> Tensor:
        return torch.ones_like(result, dtype=torch.bool) if self.cfg.modular else (result >= 0) & (result <= 9)

    def pool(self, L: int) -> Tensor:
        """Indices of every valid expression of ``L`` terms, ascending (``(P,)`` int64)."""
        size = self.pool_size(L)
        if size > MAX_POOL:
            raise ValueError(f"task.terms has L={L} ({size} expressions); allowed for training: "
                             f"at most {MAX_POOL} expressions")
        idx = torch.arange(size)
        return idx[self._valid(self.decode(idx, L)[1])]

    def _partition(self, L: int, i: int) -> dict[str, Tensor]:
        cfg, parts = self.cfg, len(self.terms)
        pool = self.pool(L)
        sizes = [split_evenly(total, parts)[i] for total in (cfg.n_test, cfg.n_val, cfg.n_train)]
        if sum(sizes) > len(pool):
            raise ValueError(
                f"task.n_train={cfg.n_train} too large: L={L} has {len(pool)} valid expressions, "
                f"{sizes[0]} test and {sizes[1]} validation; allowed: n_train ≤ "
                f"{(len(pool) - sizes[0] - sizes[1]) * parts}")
        perm = pool[torch.randperm(len(pool), generator=generator(cfg.split_seed, "split", L))]
        return {"test": perm[:sizes[0]], "val": perm[sizes[0]:sizes[0] + sizes[1]],
                "train": perm[sizes[0] + sizes[1]:]}

    def _draw(self, n: int, size: int, g: torch.Generator) -> Tensor:
        """``size`` valid expression indices of length ``n`` by rejection, uniform over valid."""
        L = (n - int(self.cfg.equals) + 1) // 2
        found: list[Tensor] = []
        while sum(len(f) for f in found) < size:
            idx = torch.randint(self.pool_size(L), (4 * size,), generator=g)
            found.append(idx[self._valid(self.decode(idx, L)[1])])
        return torch.cat(found)[:size]

    def sample_split(self, split: str, n: int, size: int, seed: int) -> Batch:
        """``size`` examples of length ``n``; see the class docstring for the streams."""
        L = (n - int(self.cfg.equals) + 1) // 2
        if n in self.parts:
            part = self.parts[n][split]
            if split == "train":
                part = part[torch.randperm(len(part), generator=generator(seed, "train", L))]
            elif self.eval_seed():
                part = self._held_out(n, L)[split]
            idx = part[:size]
        else:
            g = generator(self.cfg.split_seed, split, L) if split == "train" else \
                self.eval_generator(self.cfg.split_seed, split, L)
            idx = self._draw(n, size, g)
        return self.batch(idx, L)

    def _held_out(self, n: int, L: int) -> dict[str, Tensor]:
        """``{"test", "val"}`` at ``task.eval_seed`` ≠ 0: the held-out pool (test ∪ validation
        parts) split again by the stream ``(split_seed, "eval", eval_seed, "held_out", L)``. A
        finite pool has no examples to spare outside the training part, so fresh sets are a new
        draw of which held-out examples are validation and which are test; the training part,
        and so every training set, is unchanged."""
        held = torch.cat([self.parts[n]["test"], self.parts[n]["val"]])
        held = held[torch.randperm(len(held), generator=self.eval_generator(self.cfg.split_seed, "held_out", L))]
        n_test = len(self.parts[n]["test"])
        return {"test": held[:n_test], "val": held[n_test:]}

    def batch(self, idx: Tensor, L: int) -> Batch:
        """The :class:`Batch` of expression indices ``idx`` with ``L`` terms."""
        tokens, result = self.decode(idx, L)
        answer = result.remainder(10) + DIGIT0  # (m,)
        y = torch.zeros_like(tokens)
        y[:, -1] = answer
        mask = torch.zeros_like(tokens, dtype=torch.bool)
        mask[:, -1] = True
        in_input = (tokens == answer[:, None]).any(1)  # (m,)
        return Batch(x=None, y=y, tokens=tokens, mask=mask, groups={"answer_in_input": in_input})

    def encode(self, text: str) -> Tensor:
        """Tokens of an expression such as ``"2+1"`` or ``"2-1="``: ``(n,)`` int64."""
        table = {"+": PLUS, "-": MINUS, "=": EQUALS, **{str(j): DIGIT0 + j for j in range(10)}}
        return torch.tensor([table[c] for c in text])
