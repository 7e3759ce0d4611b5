"""The claims C1–C12 of paper.md §13 and the exact checks (E rows) that test their identities.

E rows check the implementation of an identity: they cannot come out the other way unless the
code is wrong, so the report lists them as **checks**, apart from the empirical verdicts.

* Random models are measured in float64 on weights re-drawn at O(1) scale
  (``harness.variant_table.measure_presets``): a claimed symmetry holds if its error is ≤ 1e-10,
  a symmetry is broken if its error is > 1e-3.
* Trained models (float32) hold a symmetry if their error is ≤ 1e-4.

The statistical parts (S rows) are pre-registered in the ablation files and decided by
:mod:`analysis.protocol`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

import numpy as np
import pandas as pd

from analysis import stats

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
EXACT_TOL, BROKEN_TOL, TRAINED_TOL = 1e-10, 1e-3, 1e-4
PASSED, FAILED, INCOMPLETE = "passed", "failed", "incomplete"


class Measure(Enum):
    """What kind of measurement an exact check read (:class:`Measured`)."""

    ERRORS = "each preset's float64 error"
    VALUE = "one float64 measurement"
    RUNS = "a metric over recorded runs"
    PAIRS = "paired runs' relative difference"
    WORDS = "the enumerated words"
    NO_RUNS = "no runs (with the named metric)"
    NOT_MEASURED = "not measured"
    NO_PAIRS = "no paired runs"


@dataclass(frozen=True)
class Measured:
    """The numbers behind an exact check, worded by :func:`analysis.render_tables.measured`:
    ``name`` the measurement's key (ERRORS, VALUE, NOT_MEASURED), the runs' description (RUNS),
    the optimiser (PAIRS) or the missing metric (NO_RUNS, empty: no runs at all); ``values`` the
    (preset, error) pairs (ERRORS), the value (VALUE), (min, max) (RUNS), (max, median) (PAIRS);
    ``n`` runs, pairs or words; ``counts`` the words by number of Y factors (WORDS)."""

    kind: Measure
    name: str = ""
    values: tuple = ()
    n: int = 0
    counts: tuple[tuple[int, int], ...] = ()


@dataclass
class Part:
    """One decided part of a claim: what was checked, the verdict, and the numbers behind it."""

    what: str
    verdict: str
    evidence: Measured


@dataclass
class Claim:
    """A claim of paper.md §13 with its exact checks; its statistical parts live in the ablation
    files (``ablation.parts``) and are decided by :func:`analysis.protocol.decide_part`."""

    id: str
    statement: str
    kind: str  # E, S, E+S, E/S (paper.md §13)
    exact: list[Callable[["Evidence"], Part]] = field(default_factory=list)
    paper: str = ""  # what the paper says, in our words


@dataclass
class Evidence:
    """What the rules read: runs per ablation (:func:`analysis.load.load_runs`), the float64
    symmetry measurements of every preset (``harness.variant_table.measure_presets``), the FIP
    enumeration (``harness.fip.enumerate_terms``) and the arithmetic counterexample's identities
    (``harness.counterexample.measure_counterexample``, C2)."""

    runs: dict[str, pd.DataFrame]
    presets: pd.DataFrame
    fip: dict
    counterexample: dict[str, float] = field(default_factory=dict)  # harness.counterexample


def _preset_errors(ev: Evidence, presets: list[str], key: str) -> pd.Series:
    if key not in ev.presets:
        return pd.Series(dtype=float)
    table = ev.presets.set_index("preset")
    return table.loc[[p for p in presets if p in table.index], key].dropna()


def symmetry_part(what: str, presets: list[str], key: str, holds: bool) -> Callable[[Evidence], Part]:
    """Exact check on random float64 models: every preset's ``key`` error ≤ 1e-10 (``holds``)
    or > 1e-3 (broken); inconclusive if a preset has no such measurement."""
    def check(ev: Evidence) -> Part:
        errs = _preset_errors(ev, presets, key)
        ok = (errs <= EXACT_TOL) if holds else (errs > BROKEN_TOL)
        verdict = (INCONCLUSIVE if len(errs) < len(presets)  # a preset was not measured
                   else SUPPORTED if ok.all() else CONTRADICTED)
        return Part(what, verdict, Measured(Measure.ERRORS, key.split("/")[1],
                                            tuple((str(p), float(e)) for p, e in errs.items())))
    return check


def identity_part(what: str, key: str, holds: bool) -> Callable[[Evidence], Part]:
    """Exact check on one measurement without training (the arithmetic counterexample, paper.md
    §5, C2; the XᵀX = I identity, C11):
    ``ev.counterexample[key]`` ≤ 1e-10 (``holds``) or > 1e-3 (broken); inconclusive if it was
    not measured."""
    def check(ev: Evidence) -> Part:
        value = ev.counterexample.get(key)
        if value is None:
            return Part(what, INCONCLUSIVE, Measured(Measure.NOT_MEASURED, key))
        ok = value <= EXACT_TOL if holds else value > BROKEN_TOL
        return Part(what, SUPPORTED if ok else CONTRADICTED, Measured(Measure.VALUE, key.split("/", 1)[1], (float(value),)))
    return check


def runs_part(what: str, ablation: str, select: Callable[[pd.DataFrame], pd.DataFrame],
              metric: str, rule: Callable[[pd.Series], bool], describe: str) -> Callable[[Evidence], Part]:
    """Exact check on recorded runs: ``rule`` holds for ``metric`` over the FINISHED runs that
    ``select`` picks (inconclusive when there are none)."""
    def check(ev: Evidence) -> Part:
        df = ev.runs.get(ablation)
        if df is None or df.empty:
            return Part(what, INCONCLUSIVE, Measured(Measure.NO_RUNS))
        try:
            df = select(df)
        except KeyError as err:  # a metric the selection needs was never logged
            return Part(what, INCONCLUSIVE, Measured(Measure.NO_RUNS, str(err)))
        if metric not in df:
            return Part(what, INCONCLUSIVE, Measured(Measure.NO_RUNS, metric))
        values = stats.finished(df, metric)[metric]
        if values.empty:
            return Part(what, INCONCLUSIVE, Measured(Measure.NO_RUNS))
        verdict = SUPPORTED if rule(values) else CONTRADICTED
        return Part(what, verdict, Measured(Measure.RUNS, describe, (float(values.min()), float(values.max())),
                                            len(values)))
    return check


def variants(*names: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """Row selector: runs of these variants."""
    return lambda df: df[df["variant"].isin(names)]


def pairs_part(what: str, optimizer: str, equal: bool) -> Callable[[Evidence], Part]:
    """C5b: in the rotation ablation, the final test loss of ``task.rotation=retrain`` against
    the paired ``none`` run (same variant, seed and optimiser), relative difference ≤ 1e-6
    (``equal``) or > 1e-6 in some pair (deviates). B7 (coordwise) is the control and left out."""
    def check(ev: Evidence) -> Part:
        df = ev.runs.get("rotation")
        if df is None or df.empty:
            return Part(what, INCONCLUSIVE, Measured(Measure.NO_RUNS))
        ok = stats.finished(df, "test/loss")
        ok = ok[(ok["train.optimizer"] == optimizer) & (ok["variant"] != "coordwise")]
        keys = ["variant", "seed"]
        a = ok[ok["task.rotation"] == "none"][keys + ["test/loss"]]
        b = ok[ok["task.rotation"] == "retrain"][keys + ["test/loss"]]
        pairs = a.merge(b, on=keys, suffixes=("_none", "_retrain"))
        if pairs.empty:
            return Part(what, INCONCLUSIVE, Measured(Measure.NO_PAIRS))
        rel = (pairs["test/loss_retrain"] - pairs["test/loss_none"]).abs() / pairs["test/loss_none"].abs()
        holds = bool((rel <= 1e-6).all()) if equal else bool((rel > 1e-6).any())
        return Part(what, SUPPORTED if holds else CONTRADICTED,
                    Measured(Measure.PAIRS, optimizer, (float(rel.max()), float(np.median(rel))), len(pairs)))
    return check


def fip_part(ev: Evidence) -> Part:
    """C6: every n×n word of up to six factors has an even number (≥ 2) of Y factors, alternating."""
    counts = dict(sorted(ev.fip["y_counts"].items()))
    verdict = SUPPORTED if ev.fip["all_even_alternating"] else CONTRADICTED
    return Part("every length-free n×n product of Y, Yᵀ, W (≤ 6 factors) is even and alternating",
                verdict, Measured(Measure.WORDS, n=len(ev.fip["words"]), counts=tuple(counts.items())))


def check(claim: Claim, ev: Evidence) -> tuple[str, list[Part]]:
    """The claim's exact checks and their combined status: ``passed`` if every check is
    supported, ``failed`` if any is contradicted, else ``incomplete`` (a check had no data)."""
    parts = [run(ev) for run in claim.exact]
    verdicts = [p.verdict for p in parts]
    status = (FAILED if CONTRADICTED in verdicts else PASSED if parts and all(v == SUPPORTED for v in verdicts)
              else INCOMPLETE)
    return status, parts
