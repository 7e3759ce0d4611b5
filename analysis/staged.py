"""A confirmation block decided, and run, in the sequential design's stages (issue 64;
:mod:`analysis.sequential`, paper.md §13 "Confirmation block").

Reading: a block whose runs carry a ``design`` tag (:func:`analysis.sequential.design_tag`,
written by the round that ran it) is decided look by look (:func:`decide_block`): at look k
the part is decided by the protocol (:func:`analysis.protocol.decide_part`, every precondition)
on the block's first ``n_k`` seeds, and its interval rule is applied at the look's nominal
levels (:func:`analysis.sequential.look_step`); it stops at the first look where that decides
it with every precondition holding, or, at an interim look, where it is futile (*the effect is
about δ*, :attr:`analysis.decision.Rule.ABOUT_DELTA`). Its verdict and intervals are those of
the look where it stopped (or the last look its runs reach). A block without the tag (every
block run before issue 64, e.g. the committed bundle's) is read with the fixed design: one
decision on all its seeds.

Running: :func:`run_stages` runs a block's seeds look by look, each stage only for the parts
still open (their frozen rows: arms, positive control's pair, floor arm), so a part decided at
4 seeds spends no further runs; the reading above decides which are open, so the run and the
report agree.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis import protocol, sequential, stats
from analysis.decision import Look, Reason, Rule
from analysis.protocol import CONTRADICTED, INCONCLUSIVE, SUPPORTED

DECISIVE = (SUPPORTED, CONTRADICTED)
SEED = "seed"


def looks_of(block: pd.DataFrame) -> tuple[int, ...] | None:
    """The design a block's runs were run in (their ``design`` tag; the first tagged run's):
    its looks, or None for the fixed design (no run tagged)."""
    if block.empty or sequential.DESIGN_TAG not in block:
        return None
    tags = [t for t in block[sequential.DESIGN_TAG].dropna().astype(str) if t.strip()]
    return sequential.looks_of(tags[0]) if tags else None


def block_seeds(block: pd.DataFrame) -> list[int]:
    """The block's seeds in order (any arm's): look k reads the first ``n_k`` of them."""
    return sorted(int(s) for s in pd.to_numeric(block[SEED], errors="coerce").dropna().unique())


def _why(d: np.ndarray, spec: Mapping[str, Any], lo95: float, lo90: float, hi90: float) -> Reason:
    """The test's rule that leaves the part open (as the protocol's step 3 names it)."""
    if spec["test"] == "difference":
        return Reason(Rule.INCLUDES_ZERO)
    if int(spec["sides"]) == 2:
        return Reason(Rule.STRADDLES_DELTA)
    return Reason(Rule.ONE_SIDED_OPEN, values=(hi90, lo95))


def at_look(result: protocol.PartResult, label: str, look: int, looks: tuple[int, ...],
            futile: bool = False) -> protocol.PartResult:
    """``result`` (the protocol's decision on the look's seeds) with the look's intervals (the
    protocol's 95% and 90% intervals at the look's nominal levels,
    :func:`analysis.sequential.nominal_level`) and its sequential verdict: ``label`` where the
    protocol decided it with every precondition; inconclusive with the test's rule where only
    the wider interval leaves it open; :attr:`Rule.ABOUT_DELTA` where it stopped ``futile``."""
    d = np.asarray(result.d, dtype=float)
    if d.size < 2:
        return result
    l95, l90 = sequential.nominal_level(look, looks, 0.95), sequential.nominal_level(look, looks, 0.90)
    _, lo95, hi95 = stats.t_interval(d, l95)
    _, lo90, hi90 = stats.t_interval(d, l90)
    lo, hi = (lo95, hi95) if result.spec["test"] == "difference" else (lo90, hi90)
    out = dataclasses.replace(result, lo=lo, hi=hi, lo95=lo95, hi95=hi95, reasons=list(result.reasons))
    if futile:
        keep = [x for x in result.reasons if x.rule.precondition]
        out.verdict, out.reasons = INCONCLUSIVE, [Reason(Rule.ABOUT_DELTA, values=(float(d.size),)), *keep]
    elif result.verdict in DECISIVE and label not in DECISIVE:
        out.verdict, out.reasons = INCONCLUSIVE, [_why(d, result.spec, lo95, lo90, hi90)]
    return out


def decide_block(block: pd.DataFrame, part: Any, looks: tuple[int, ...], explored: protocol.PartResult | None = None,
                 check_edge: bool = False, futility: bool = True) -> tuple[protocol.PartResult, Look]:
    """One part decided on a block run in stages at ``looks`` (module docstring): the
    protocol's decision (:func:`analysis.protocol.decide_part` with ``check_edge`` and
    ``explored``, as the fixed block is decided) on the first ``n_k`` seeds of each look the
    block's runs reach, until it stops. Returns the decision at the look where it stopped (or
    the last look reached) and that :class:`Look`."""
    seeds = block_seeds(block)
    reached = [k for k, n in enumerate(looks) if k == 0 or len(seeds) >= n]
    result, look = protocol.PartResult(protocol.spec_dict(part), INCONCLUSIVE), Look(0, 0, looks)
    for k in reached:
        n = looks[k]
        mine = block[pd.to_numeric(block[SEED], errors="coerce").isin(seeds[:n])]
        raw = protocol.decide_part(mine, part, n, check_edge=check_edge, explored=explored)
        if len(raw.d) < 2:
            result, look = raw, Look(k, len(raw.d), looks)
            continue
        label, stop = sequential.look_step(raw.d, raw.spec, k, looks, raw.verdict in DECISIVE, futility)
        result = at_look(raw, label, k, looks, futile=stop == "futile")
        look = Look(k, len(raw.d), looks, stopped=bool(stop), futile=stop == "futile")
        if stop:
            break
    return result, look


def decide_confirmation(block: pd.DataFrame, first: protocol.PartResult) -> tuple[protocol.PartResult, Look | None]:
    """A part decided on a confirmation block (the main one, or a column's, issue 64) after
    ``first``, its decision on the exploratory seeds (of the grid, or of the column): ``b`` as
    ``first`` chose it (frozen), one lr per arm, so no lr-edge precondition, every other one; in
    the sequential design's stages where the block's runs say they ran so (:func:`decide_block`,
    with the :class:`Look` it stopped at), else on all its seeds (the fixed design, Look None)."""
    frozen = {**first.spec, "choose_b": [], "chosen_among": first.spec["choose_b"]}  # b stays named as chosen
    seeds = int(block[SEED].nunique()) if SEED in block and not block.empty else None
    looks = looks_of(block)
    if looks is None:
        return protocol.decide_part(block, frozen, seeds, check_edge=False, explored=first), None
    return decide_block(block, frozen, looks, explored=first)


def look_seeds(block: pd.DataFrame, look: Look | None) -> pd.DataFrame:
    """The block's runs a staged decision read (the first ``looks[look]`` seeds); all of them
    for the fixed design (None)."""
    if look is None or block.empty:
        return block
    return block[pd.to_numeric(block[SEED], errors="coerce").isin(block_seeds(block)[:look.looks[look.look]])]


def stages(seeds: Sequence[int], looks: Sequence[int] | None) -> list[list[int]]:
    """The block's seeds in the stages of ``looks`` (``[s[:4], s[4:7], s[7:10]]``); one stage of
    every seed for the fixed design (None or empty)."""
    seeds = list(seeds)
    if not looks:
        return [seeds]
    cuts = [0, *looks]
    return [seeds[a:b] for a, b in zip(cuts, cuts[1:])]


Todo = Mapping[str, list]


def run_stages(seeds: Sequence[int], looks: Sequence[int] | None, frozen: pd.DataFrame,
               build: Callable[[pd.DataFrame, list[int]], Todo], run: Callable[[Todo], int],
               open_parts: Callable[[pd.DataFrame], set[tuple[str, str]]]) -> list[int]:
    """Run a block's ``seeds`` in the stages of ``looks`` (:func:`stages`): stage k builds the
    trials of the frozen rows (:func:`analysis.confirm.freeze`'s: ``ablation``, ``part``, each
    arm) of the parts still open on the stage's seeds (``build(rows, seeds) -> {ablation:
    [Trial]}``) and runs them as one queue (``run``); then ``open_parts(rows)`` (reading the
    runs, :func:`decide_block`) says which of those parts the look left open. The fixed design
    (no looks) is one stage of every part and seed. Returns the trials built per stage."""
    rows, done = frozen, []
    parts = stages(seeds, looks)
    for k, chunk in enumerate(parts):
        todo = build(rows, chunk) if not rows.empty and chunk else {}
        done.append(sum(len(t) for t in todo.values()))
        if todo:
            run(todo)
        if k == len(parts) - 1:
            break
        still = open_parts(rows)
        rows = rows[[(a, p) in still for a, p in zip(rows["ablation"], rows["part"])]]
    return done
