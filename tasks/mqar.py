"""Multi-query associative recall (MQAR), Zoology's construction (Arora et al. 2023, *Zoology:
Measuring and Improving Recall in Efficient Language Models*, §3; the generator
``zoology/data/multiquery_ar.py:multiquery_ar`` of HazyResearch/zoology).

A sequence of length ``T`` holds ``KV`` key–value pairs, then every key once more as a query:

* keys: ``KV`` distinct tokens of ``{1 .. V/2 − 1}`` (token 0 is never a key: it marks the
  filler positions before they are drawn); values: ``KV`` distinct tokens of ``{V/2 .. V − 1}``;
  the context ``k1 v1 k2 v2 … k_KV v_KV`` fills positions ``0 .. 2 KV − 1``;
* the remaining ``T − 2 KV`` positions hold ``space = (T − 2 KV)/2`` even slots; each key is
  queried exactly once, at slot ``gap`` (position ``2 KV + 2 gap``), the ``KV`` gaps drawn without
  replacement with probability ∝ ``a · gap^(a − 1)`` over ``gap = 1 .. space`` (Zoology's power
  law, ``power_a = a = 0.01``: near queries are likelier; ``a = 1`` is uniform);
* the target at a query position is the value bound to its key (Zoology's label of the next
  token, read at the query's own position); every other position is masked out of the loss and
  the metrics;
* ``random_non_queries`` (Zoology's default, True): the filler positions are uniform tokens of
  the whole vocabulary ``{0 .. V − 1}``, so a filler can repeat a key or a value (Zoology's
  noise); False: they stay 0, and then each query's key occurs exactly once before it.

Example (Zoology's own, ``V = 12``, ``KV = 2``, ``T = 14``, ``random_non_queries = False``)::

    tokens  2  8  4  7  0  0  4  0  0  0  0  0  2  0
    y       ·  ·  ·  ·  ·  ·  7  ·  ·  ·  ·  ·  8  ·      (mask only at positions 6 and 12)

Zoology asserts ``V > T``; the construction needs only ``KV ≤ V/2 − 1`` keys and ``4 KV ≤ T``
(room for every query), which is what this task checks, so that ``T = 64`` runs with ``V = 64``
(issue 65). One attention layer without positions can find the values of a sequence but not
which one follows the queried key (about ``1/KV`` right); binding them needs a previous-token
step, i.e. two layers or positions (Zoology trains two).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from tasks.base import Batch, Sums, check_positive, generator
from tasks.tokens import TokenConfig, TokenTask


@dataclass
class MQARConfig(TokenConfig):
    """Options of :class:`MQARTask` (registry name ``mqar``); sizes in Zoology's terms."""

    name: str = "mqar"
    T: int = 64  # sequence length (Zoology's input_seq_len; even), when train_lengths is empty
    KV: int = 0  # key-value pairs per sequence (Zoology's num_kv_pairs); 0: T/8 at each length
    V: int = 64  # vocabulary size: keys 1 .. V/2 − 1, values V/2 .. V − 1
    power_a: float = 0.01  # Zoology's power law of the query gaps (> 0; 1: uniform)
    random_non_queries: bool = True  # fillers uniform over the vocabulary (Zoology's default), else 0
    task_seed: int = 0  # the validation/test streams


def mqar_targets(tokens: Tensor, KV: int) -> tuple[Tensor, Tensor]:
    """Targets and mask ``(B, T)`` of MQAR token sequences ``(B, T)`` whose first ``2 KV``
    positions are the context ``k1 v1 … k_KV v_KV``: a position ``i ≥ 2 KV`` whose token is one
    of the sequence's keys is a query, its target the value after that key in the context; every
    other position is masked (target 0).

    Only meaningful where no filler repeats a key (``random_non_queries = False``); the task
    itself places its queries (:meth:`MQARTask.sample_split`) and uses this as the reference
    definition in tests.
    """
    keys, values = tokens[:, 0:2 * KV:2], tokens[:, 1:2 * KV:2]  # (B, KV)
    tail = tokens[:, 2 * KV:]  # (B, T − 2KV)
    hit = tail[:, :, None] == keys[:, None, :]  # (B, T − 2KV, KV)
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    mask[:, 2 * KV:] = hit.any(-1)
    y = torch.zeros_like(tokens)
    y[:, 2 * KV:] = torch.where(hit.any(-1), values.gather(1, hit.to(torch.int64).argmax(-1)), 0)
    return y, mask


class MQARTask(TokenTask):
    """MQAR (module docstring): tokens, targets and mask ``(B, T)``; the embedding and readout of
    :class:`tasks.tokens.TokenTask` (Zoology ties its readout to a learned embedding:
    ``embedding=learned``, ``readout=tied``, width ``task.d``).

    Training data come from ``(seed, "train", T)``; validation and test data from
    ``(task_seed, split, T)`` (re-seeded by ``task.eval_seed``,
    :meth:`tasks.base.TaskBase.eval_generator`); every draw from those explicit generators.

    Raises:
        ValueError: sizes < 1 (``V``, ``n_train``, ``n_val``, ``n_test``); ``KV < 0``;
            ``power_a ≤ 0``; a length ``T`` that is odd or < 4; ``KV = 0`` (T/8) at a ``T`` not a
            multiple of 8; more pairs than fit (``4 KV ≤ T``) or than there are keys
            (``KV ≤ V/2 − 1``); each naming the value and the allowed range.
    """

    def __init__(self, cfg: MQARConfig, dtype: torch.dtype = torch.float32) -> None:
        check_positive("mqar", V=cfg.V, n_train=cfg.n_train, n_val=cfg.n_val, n_test=cfg.n_test)
        if cfg.KV < 0:
            raise ValueError(f"task 'mqar': KV={cfg.KV}; allowed: KV ≥ 1, or 0 for T/8")
        if not cfg.power_a > 0:
            raise ValueError(f"task 'mqar': power_a={cfg.power_a}; allowed: a number > 0 (1: uniform gaps)")
        super().__init__(cfg, cfg.V, dtype)
        self.set_lengths([cfg.T], minimum=4)
        for T in [*self.lengths, *self.test_ns]:
            self.pairs(T)  # every length is checked before any trial

    def pairs(self, T: int) -> int:
        """The number of key-value pairs at length ``T``: ``task.KV``, or ``T/8`` where it is 0.

        Raises:
            ValueError: as the class says, naming ``T``, ``KV`` and the allowed range.
        """
        cfg = self.cfg
        if T % 2:
            raise ValueError(f"task 'mqar': length T={T}; allowed: an even T ≥ 4 (Zoology's construction)")
        if cfg.KV == 0 and T % 8:
            raise ValueError(f"task 'mqar': KV = T/8 needs T a multiple of 8, got T={T}; set task.KV")
        KV = cfg.KV or T // 8
        if 4 * KV > T:
            raise ValueError(f"task 'mqar': KV={KV} pairs do not fit in T={T}; allowed: 1 ≤ KV ≤ T/4 = {T // 4} "
                             "(the context and one query slot per key)")
        if KV > cfg.V // 2 - 1:
            raise ValueError(f"task 'mqar': KV={KV} distinct keys from V={cfg.V}; allowed: KV ≤ V/2 − 1 = "
                             f"{cfg.V // 2 - 1} (keys 1 .. V/2 − 1), or a larger V")
        return KV

    def order_blind_reference_sums(self, batch: Batch) -> Sums:
        """``order_blind_acc``: a uniform guess among the sequence's ``KV`` values (distinct), right
        ``1/KV`` of the time at each query; no prediction that binds no key to its value does better
        (fillers that repeat a value only make the values harder to tell). A causal model has seen
        every value at a query, so the bar is the same for it."""
        queries = batch.mask.sum().double()
        return {"order_blind_acc": (queries / self.pairs(batch.n), queries)}

    def gap_probabilities(self, T: int) -> Tensor:
        """Zoology's power law over the query slots ``1 .. space`` (``space = (T − 2 KV)/2``):
        ``p ∝ a · gap^(a − 1)``, normalised; ``(space,)`` float64."""
        space = (T - 2 * self.pairs(T)) // 2
        a = float(self.cfg.power_a)
        p = a * torch.arange(1, space + 1, dtype=torch.float64) ** (a - 1)
        return p / p.sum()

    def sample(self, g: torch.Generator, size: int, T: int) -> Batch:
        """``size`` sequences of length ``T`` from stream ``g`` (module docstring).

        Returns a :class:`Batch` with ``tokens``, ``y`` and ``mask`` ``(size, T)``, no groups;
        ``x`` is None (the task embeds ``tokens``)."""
        V, KV, half = self.cfg.V, self.pairs(T), self.cfg.V // 2
        keys = 1 + torch.rand(size, half - 1, generator=g).argsort(-1)[:, :KV]  # (B, KV) distinct, 1 .. V/2 − 1
        values = half + torch.rand(size, V - half, generator=g).argsort(-1)[:, :KV]  # (B, KV) distinct, V/2 .. V − 1
        context = torch.stack([keys, values], -1).reshape(size, 2 * KV)  # k1 v1 k2 v2 …
        p = self.gap_probabilities(T)  # (space,)
        gaps = torch.multinomial(p.expand(size, len(p)), KV, replacement=False, generator=g)  # (B, KV) slots 0 ..
        where = 2 * KV + 2 * gaps  # (B, KV): the query positions, key i at where[:, i]
        tokens = torch.cat([context, torch.zeros(size, T - 2 * KV, dtype=torch.int64)], 1)  # (B, T)
        tokens.scatter_(1, where, keys)
        y = torch.zeros_like(tokens).scatter_(1, where, values)
        mask = torch.zeros_like(tokens, dtype=torch.bool).scatter_(1, where, True)
        if self.cfg.random_non_queries:
            filler = torch.randint(V, (size, T), generator=g)
            tokens = torch.where(tokens == 0, filler, tokens)
        return Batch(x=None, y=y, tokens=tokens, mask=mask)

    def sample_split(self, split: str, n: int, size: int, seed: int) -> Batch:
        """``size`` sequences of length ``n`` (= T) of ``split`` (streams in the class docstring)."""
        g = generator(seed, split, n) if split == "train" else self.eval_generator(self.cfg.task_seed, split, n)
        return self.sample(g, size, n)
