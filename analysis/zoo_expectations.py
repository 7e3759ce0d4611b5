"""The published expectations the zoo is held against (issue 65), each decided from the zoo's rows
as *agrees*, *disagrees* or *not reproduced at this scale*, with its source and the sizes.

Three layers, so that each can be tested alone:

* :class:`Cell`: one arm on one task, typed values read from the bundle (:func:`cells`): the
  per-seed test error at the largest n_train (its lr chosen on validation) and the per-seed area
  under log test error over n_train, the arm's measured causality and permutation symmetry;
* :data:`EXPECTATIONS` and :func:`decide`: each expectation's rule on those values, returning a
  :class:`Finding` (an :class:`Agreement` and its evidence as numbers, no words);
* :func:`words`: the one place the findings are worded for the page (:mod:`analysis.zoo_page`).

Thresholds (module constants): *solved* is a test error ≤ :data:`SOLVED` (accuracy ≥ 90%, the
published "near 100%"); *near chance* is an accuracy within :data:`NEAR` of the task's chance,
the best accuracy of a prediction that binds no key to its value (:func:`chance`: a model that
finds the values but not which one is bound to the query; on ``recall``, whose 4 values are drawn
with replacement, the most frequent value, 0.41 at V = 16, not seq_icl's 1/4; on MQAR, whose KV =
T/8 values are distinct, 1/KV); *beats chance* is a 95% lower bound of the accuracy over seeds
above chance + :data:`BEATS`; a *trend* (width d 16 → 32, or length T 32 → 64)
is the per-seed paired change of the area, significant where its 95% interval excludes 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Mapping

import numpy as np

from analysis import stats

SOLVED, NEAR, BEATS = 0.1, 0.1, 0.05
RECALL, CAUSAL_REFERENCE = "recall", "softmax_causal"
RECALL_V, RECALL_N = 16, 9  # conf/task/recall.yaml (V: SelectionConfig's default)
# Zoology's fixed-state mixers (gated convolutions, SSMs, linear attention and its gated and decayed forms)
FIXED_STATE = ("linear_attention", "retnet", "gla", "s4d", "mamba", "hyena", "rwkv")
MQAR = re.compile(r"^mqar_t(\d+)_d(\d+)$")


class Agreement(Enum):
    """How the zoo's rows stand to a published expectation."""

    AGREES = "agrees"
    DISAGREES = "disagrees"
    NOT_REPRODUCED = "not reproduced at this scale"


@dataclass(frozen=True)
class Cell:
    """One arm on one task. ``error``: per-seed test error at ``n_train`` (the largest size, the
    lr chosen on validation); ``area``: ``{seed: area under log test error over n_train}``."""

    arm: str
    task: str
    causal: bool
    permutation: bool
    error: tuple[float, ...]
    area: Mapping[int, float]
    n_train: int
    chance: float = float("nan")  # chance(task, V, n) of the runs' sizes; NaN: the task's registered sizes

    def __post_init__(self) -> None:
        if not np.isfinite(self.chance):
            object.__setattr__(self, "chance", chance(self.task))


@dataclass(frozen=True)
class Evidence:
    """One number a finding rests on: ``arm`` on ``task`` (``task`` of a trend: ``"a → b"``),
    ``what`` it is (``accuracy``, ``chance``, ``area change``) and its value with a 95% interval."""

    arm: str
    task: str
    what: str
    value: float
    lo: float = float("nan")
    hi: float = float("nan")


@dataclass(frozen=True)
class Finding:
    key: str
    agreement: Agreement
    evidence: tuple[Evidence, ...]
    reason: str = ""  # a short code: why it is not reproduced (not_run, reference_unsolved, nothing_learned)


@dataclass(frozen=True)
class Expectation:
    key: str
    source: str  # paper, year
    claim: str  # the published result, as the page states it
    rule: Callable[[dict[tuple[str, str], Cell]], Finding]


def chance(task: str, V: int = RECALL_V, n: int = RECALL_N) -> float:
    """The best accuracy of a prediction that binds no key to its value (it may find the values,
    not which one follows the queried key): on ``recall`` (vocabulary ``V``, length ``n``; default
    conf/task/recall.yaml's) the most frequent of its values, which repeat
    (:func:`tasks.selection.recall_unbound_accuracy`, 0.412 at V = 16, n = 9); on MQAR ``1/KV``, its
    KV = T/8 values distinct (tasks/mqar.py); NaN for another task."""
    if task == RECALL:
        from tasks.selection import recall_unbound_accuracy

        return recall_unbound_accuracy(int(V), int(n))
    m = MQAR.match(task)
    return 8 / int(m.group(1)) if m else float("nan")


def accuracy(cell: Cell) -> tuple[float, float, float]:
    """Mean test accuracy over seeds with its 95% interval (``1 − error``)."""
    mean, lo, hi = stats.t_interval(1 - np.asarray(cell.error, float), 0.95)
    return mean, lo, hi


def _acc_evidence(cell: Cell) -> Evidence:
    return Evidence(cell.arm, cell.task, "accuracy", *accuracy(cell))


def solved(cell: Cell) -> bool:
    return float(np.mean(cell.error)) <= SOLVED


def near_chance(cell: Cell) -> bool:
    return accuracy(cell)[0] <= cell.chance + NEAR


def _chance_evidence(cell: Cell) -> Evidence:
    return Evidence("", cell.task, "chance", cell.chance)


def trend(a: Cell, b: Cell) -> Evidence:
    """The per-seed change of the area from ``a`` to ``b`` (the seeds both have), mean and 95%
    interval: below 0 the error fell."""
    seeds = sorted(set(a.area) & set(b.area))
    mean, lo, hi = stats.t_interval([b.area[s] - a.area[s] for s in seeds], 0.95)
    return Evidence(a.arm, f"{a.task} → {b.task}", "area change", mean, lo, hi)


def _mqar_tasks(rows: dict) -> dict[tuple[int, int], str]:
    """``{(T, d): task}`` of the MQAR tasks in ``rows``."""
    return {(int(m.group(1)), int(m.group(2))): t for (_, t) in rows for m in [MQAR.match(t)] if m}


def _seq_icl(rows: dict) -> Finding:
    ref, arms = rows.get((CAUSAL_REFERENCE, RECALL)), [rows.get((a, RECALL)) for a in ("s4d", "rwkv")]
    if ref is None or None in arms:
        return Finding("seq_icl", Agreement.NOT_REPRODUCED, (), "not_run")
    shown = (_chance_evidence(ref), _acc_evidence(ref), *(_acc_evidence(c) for c in arms))
    if not solved(ref):
        return Finding("seq_icl", Agreement.NOT_REPRODUCED, shown, "reference_unsolved")
    ok = all(near_chance(c) for c in arms)
    return Finding("seq_icl", Agreement.AGREES if ok else Agreement.DISAGREES, shown)


def _zoology_attention(rows: dict) -> Finding:
    tasks = _mqar_tasks(rows)
    refs = [rows[(CAUSAL_REFERENCE, t)] for _, t in sorted(tasks.items()) if (CAUSAL_REFERENCE, t) in rows]
    if not refs:
        return Finding("zoology_attention", Agreement.NOT_REPRODUCED, (), "not_run")
    shown = tuple(_acc_evidence(c) for c in refs)
    if all(solved(c) for c in refs):
        return Finding("zoology_attention", Agreement.AGREES, shown)
    # attention failing MQAR at a budget far below Zoology's is the budget, not a refutation
    return Finding("zoology_attention", Agreement.NOT_REPRODUCED, shown, "reference_unsolved")


def _trend_finding(key: str, rows: dict, arms: tuple[str, ...], pairs: list[tuple[str, str]]) -> Finding:
    """Majority of the significant area changes from the first to the second task of each pair,
    over the ``arms`` that learned at either end (not near chance): falling agrees."""
    if not pairs:
        return Finding(key, Agreement.NOT_REPRODUCED, (), "not_run")
    shown, down, up = [], 0, 0
    for arm in arms:
        for a, b in pairs:
            ca, cb = rows.get((arm, a)), rows.get((arm, b))
            if ca is None or cb is None or (near_chance(ca) and near_chance(cb)):
                continue
            e = trend(ca, cb)
            shown.append(e)
            down += bool(e.hi < 0)
            up += bool(e.lo > 0)
    if not shown:
        return Finding(key, Agreement.NOT_REPRODUCED, (), "nothing_learned")
    return Finding(key, Agreement.AGREES if down > up else Agreement.DISAGREES, tuple(shown))


def _zoology_width(rows: dict) -> Finding:
    tasks = _mqar_tasks(rows)
    pairs = [(tasks[(T, 16)], tasks[(T, 32)]) for T in sorted({T for T, _ in tasks}) if (T, 16) in tasks and (T, 32) in tasks]
    return _trend_finding("zoology_width", rows, FIXED_STATE, pairs)


def _zoology_length(rows: dict) -> Finding:
    """The gap to attention (area(arm) − area(attention), per seed) grows from T = 32 to 64 at
    each d, over the fixed-state arms that learned; only at widths where attention learned both."""
    tasks, shown, up, down = _mqar_tasks(rows), [], 0, 0
    if not tasks:
        return Finding("zoology_length", Agreement.NOT_REPRODUCED, (), "not_run")
    for d in sorted({d for _, d in tasks}):
        short, long = tasks.get((32, d)), tasks.get((64, d))
        refs = [rows.get((CAUSAL_REFERENCE, t)) for t in (short, long)]
        if short is None or long is None or None in refs or any(near_chance(c) for c in refs):
            continue
        for arm in FIXED_STATE:
            ca, cb = rows.get((arm, short)), rows.get((arm, long))
            if ca is None or cb is None or (near_chance(ca) and near_chance(cb)):
                continue
            gap = [{s: c.area[s] - r.area[s] for s in set(c.area) & set(r.area)} for c, r in zip((ca, cb), refs)]
            e = trend(Cell(arm, short, True, False, ca.error, gap[0], ca.n_train),
                      Cell(arm, long, True, False, cb.error, gap[1], cb.n_train))
            shown.append(Evidence(arm, e.task, "gap change", e.value, e.lo, e.hi))
            up += bool(e.lo > 0)
            down += bool(e.hi < 0)
    if not shown:
        return Finding("zoology_length", Agreement.NOT_REPRODUCED, (), "nothing_learned")
    return Finding("zoology_length", Agreement.AGREES if up > down else Agreement.DISAGREES, tuple(shown))


def _based(rows: dict) -> Finding:
    tasks = _mqar_tasks(rows)
    pairs = [(tasks[(T, 16)], tasks[(T, 32)]) for T in sorted({T for T, _ in tasks}) if (T, 16) in tasks and (T, 32) in tasks]
    return _trend_finding("based", rows, ("linear_attention",), pairs)


def _symmetry(rows: dict) -> Finding:
    cells = [c for (_, t), c in sorted(rows.items()) if t == RECALL and c.permutation]
    if not cells:
        return Finding("symmetry", Agreement.NOT_REPRODUCED, (), "not_run")
    shown = (_chance_evidence(cells[0]), *(_acc_evidence(c) for c in cells))
    beats = [c for c in cells if accuracy(c)[1] > c.chance + BEATS]
    return Finding("symmetry", Agreement.DISAGREES if beats else Agreement.AGREES, shown)


EXPECTATIONS: tuple[Expectation, ...] = (
    Expectation("seq_icl", "Akyürek et al. 2024, In-Context Language Learning: Architectures and Algorithms (seq_icl)",
                "on in-context associative recall with two or more layers, softmax attention is near 100% while S4D and "
                "RWKV-4 stay near chance (Transformer 100, H3 98.2, S4D 32.4, RWKV 30.0; chance 25)", _seq_icl),
    Expectation("zoology_attention", "Arora et al. 2023, Zoology: Measuring and Improving Recall in Efficient Language Models",
                "attention solves multi-query associative recall (MQAR) at every width", _zoology_attention),
    Expectation("zoology_width", "Arora et al. 2023, Zoology",
                "fixed-state mixers (gated convolutions, SSMs, linear attention) improve on MQAR with the width d", _zoology_width),
    Expectation("zoology_length", "Arora et al. 2023, Zoology",
                "fixed-state mixers fall further behind attention on MQAR as the sequence (and KV = T/8) grows", _zoology_length),
    Expectation("based", "Arora et al. 2024, Simple linear attention language models balance the recall-throughput tradeoff (Based)",
                "linear attention's recall is bought with its state size: its MQAR error falls as its state (d × d) grows", _based),
    Expectation("symmetry", "Ma & Ying 2022, On the symmetries of self-attention (the paper this harness tests)",
                "a permutation-equivariant mixer without positions cannot beat chance on a task whose answer depends on "
                "order (here `recall`: chance is the best guess that ignores order, the most frequent of its 4 values)", _symmetry),
)


def decide(rows: dict[tuple[str, str], Cell]) -> list[Finding]:
    """Every expectation's finding on ``rows`` (``{(arm, task): Cell}``), in :data:`EXPECTATIONS`' order."""
    return [e.rule(rows) for e in EXPECTATIONS]


def cells(df, measured: Mapping[str, tuple[bool, bool]], tasks: list[str]) -> dict[tuple[str, str], Cell]:
    """The :class:`Cell` of each arm on each task that has runs (``df``: the bundle's grid runs
    with ``error``; ``measured``: ``{arm: (causal, permutation-equivariant)}`` as the pre-flight
    measured them at init)."""
    import pandas as pd

    from analysis import protocol

    out = {}
    for arm, (causal, perm) in measured.items():
        for task in tasks:
            ok, at, why = protocol.chosen_runs(df, task, arm, "error")
            if why or ok.empty:
                continue
            area, _, _ = protocol.arm_values(df, task, arm, "auc")
            sizes = {k: int(float(ok[f"task.{k}"].dropna().iloc[0])) for k in ("V", "n")
                     if f"task.{k}" in ok and ok[f"task.{k}"].notna().any()}  # the runs' own recall sizes
            out[(arm, task)] = Cell(arm, task, causal, perm,
                                    tuple(pd.to_numeric(ok.sort_values("seed")["error"], errors="coerce").dropna()),
                                    {int(s): float(v) for s, v in area.items()}, int(float(at[-1])),
                                    chance(task, **sizes) if task == RECALL else float("nan"))
    return out


WHY = {"not_run": "the zoo has no runs of this",
       "reference_unsolved": "attention itself does not solve it at these sizes",
       "nothing_learned": "no mixer learned it at these sizes (all near chance)"}


def _number(e: Evidence) -> str:
    shown = f"{e.value:.2f}" if e.what in ("accuracy", "chance") else f"{e.value:+.2f}"
    ci = f" [{e.lo:.2f}, {e.hi:.2f}]" if np.isfinite(e.lo) else ""
    return f"`{e.arm}` {e.task} {e.what} {shown}{ci}" if e.arm else f"{e.task} {e.what} {shown}"


def words(findings: list[Finding], sizes: str) -> list[str]:
    """The page's Markdown lines of ``findings`` (the one place they are worded); ``sizes``: the
    zoo's scale in words (n_train, steps, depth), which "not reproduced at this scale" refers to."""
    by_key = {e.key: e for e in EXPECTATIONS}
    lines = ["## The published expectations", "",
             f"Each decided from this zoo's rows ({sizes}); *solved*: test error ≤ {SOLVED:g}; *near chance*: accuracy "
             f"within {NEAR:g} of chance, the best accuracy of a guess that binds no key to its value (on `recall` "
             f"the most frequent of the sequence's values, which repeat: {chance(RECALL):.2f}, not 1/4; on MQAR 1/KV); trends: the per-seed change of the area, mean [95% CI].", "",
             "| expectation | source | here | evidence |", "|---|---|---|---|"]
    for f in findings:
        e = by_key[f.key]
        said = f"**{f.agreement.value}**" + (f" ({WHY[f.reason]})" if f.reason else "")
        evidence = "; ".join(_number(x) for x in f.evidence) or "–"
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in (e.claim, e.source, said, evidence)) + " |")
    return lines + [""]
