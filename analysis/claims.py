"""The claims of paper.md §13 and the rules that decide them from recorded runs.

Every verdict is derived by a stated rule, never written by hand:

* **Exact claims** (E): measured errors against tolerances. Random models are measured in
  float64 on weights re-drawn at O(1) scale (``harness.models.table.measure_presets``): a claimed
  symmetry holds if its error is ≤ 1e-10, a symmetry is broken if its error is > 1e-3. Trained
  models (float32) hold a symmetry if their error is ≤ 1e-4.
* **Statistical claims** (S): a comparison "A has lower test error than B" is evaluated at the
  largest training-set size both have, after choosing each variant's learning rate on validation
  loss (:func:`analysis.stats.select_lr`), by the 95% paired bootstrap interval over seeds of
  ``error_B − error_A``: *supported* if it lies above 0, *contradicted* if below 0, otherwise
  *inconclusive*. An equivalence "A and B are equally good" is *supported* if that interval lies
  within ±25% of A's mean error, *contradicted* if it excludes 0 and its mean is beyond ±25%,
  otherwise *inconclusive*.
* A claim is *supported* if all its parts are, *contradicted* if any part is, else
  *inconclusive* (also when a part has no runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from analysis import stats

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
EXACT_TOL, BROKEN_TOL, TRAINED_TOL, MARGIN = 1e-10, 1e-3, 1e-4, 0.25


DERIVED = {  # comparison values computed from logged metrics (lower is better)
    "absent_error": lambda df: 1.0 - df["test/acc_not_answer_in_input"],
}


@dataclass(frozen=True)
class Comparison:
    """A statistical prediction: ``better`` has lower error than ``worse`` on ``task`` in
    ``ablation`` (``kind="better"``), or both are equally good (``kind="equivalent"``)."""

    ablation: str
    task: str
    better: str
    worse: str
    kind: str = "better"
    value: str = "error"  # or a key of DERIVED, e.g. "absent_error" (1 − accuracy on absent answers)


@dataclass
class Part:
    """One decided part of a claim: what was checked, the verdict, and the numbers behind it."""

    what: str
    verdict: str
    evidence: str


@dataclass
class Claim:
    """A claim of paper.md §13 with its exact checks and statistical comparisons."""

    id: str
    statement: str
    kind: str
    exact: list[Callable[["Evidence"], Part]] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)


@dataclass
class Evidence:
    """What the rules read: runs per ablation (:func:`analysis.load.load_runs`) and the float64
    symmetry measurements of every preset (``harness.models.table.measure_presets``)."""

    runs: dict[str, pd.DataFrame]
    presets: pd.DataFrame
    fip: dict


def combine(verdicts: list[str]) -> str:
    """Supported if all parts are, contradicted if any is, else inconclusive."""
    if not verdicts:
        return INCONCLUSIVE
    if CONTRADICTED in verdicts:
        return CONTRADICTED
    return SUPPORTED if all(v == SUPPORTED for v in verdicts) else INCONCLUSIVE


def compare(runs: dict[str, pd.DataFrame], c: Comparison, seed: int = 0) -> Part:
    """Decide one :class:`Comparison` by the paired rule of the module docstring."""
    what = (f"{c.ablation} / {c.task}: `{c.better}` "
            f"{'lower ' + c.value + ' than' if c.kind == 'better' else 'as good as'} `{c.worse}`"
            + ("" if c.value == "error" else f" ({c.value})"))
    df = runs.get(c.ablation)
    if df is None or df.empty:
        return Part(what, INCONCLUSIVE, "no runs")
    if c.value in DERIVED:
        if "test/acc_not_answer_in_input" not in df:
            return Part(what, INCONCLUSIVE, f"no runs with {c.value}")
        df = df.assign(**{c.value: DERIVED[c.value](df)})
    df = stats.select_lr(stats.add_error(df))
    df = df[(df["task"] == c.task) & df["variant"].isin([c.better, c.worse])]
    ok = stats.finished(df, c.value)
    sizes = [set(ok[ok["variant"] == v]["task.n_train"]) for v in (c.better, c.worse)]
    common = sorted(sizes[0] & sizes[1])
    if not common:
        return Part(what, INCONCLUSIVE, "no paired runs")
    at = ok[ok["task.n_train"] == common[-1]]
    diff = stats.paired_difference(at, c.value, a=c.worse, b=c.better, seed=seed).iloc[0]
    ref = float(at[at["variant"] == c.better][c.value].mean())
    lo, hi, mean = float(diff["lo"]), float(diff["hi"]), float(diff["mean"])
    if c.kind == "better":
        verdict = SUPPORTED if lo > 0 else CONTRADICTED if hi < 0 else INCONCLUSIVE
    else:
        band = MARGIN * abs(ref)
        inside = -band <= lo and hi <= band
        verdict = (SUPPORTED if inside else CONTRADICTED
                   if (lo > 0 or hi < 0) and abs(mean) > band else INCONCLUSIVE)
    name = "error" if c.value == "error" else c.value
    evidence = (f"n_train={common[-1]}, {int(diff['n_pairs'])} paired seeds: {name}({c.better}) = "
                f"{ref:.4g}, {name}({c.worse}) − {name}({c.better}) = {mean:.3g} [{lo:.3g}, {hi:.3g}]")
    return Part(what, verdict, evidence)


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
        shown = ", ".join(f"`{p}` {e:.1e}" for p, e in errs.items())
        return Part(what, verdict, f"{key.split('/')[1]}: {shown}")
    return check


def runs_part(what: str, ablation: str, select: Callable[[pd.DataFrame], pd.DataFrame],
              metric: str, rule: Callable[[pd.Series], bool], describe: str) -> Callable[[Evidence], Part]:
    """Exact check on recorded runs: ``rule`` holds for ``metric`` over the FINISHED runs that
    ``select`` picks (inconclusive when there are none)."""
    def check(ev: Evidence) -> Part:
        df = ev.runs.get(ablation)
        if df is None or df.empty:
            return Part(what, INCONCLUSIVE, "no runs")
        try:
            df = select(df)
        except KeyError as err:  # a metric the selection needs was never logged
            return Part(what, INCONCLUSIVE, f"no runs with {err}")
        if metric not in df:
            return Part(what, INCONCLUSIVE, f"no runs with {metric}")
        values = stats.finished(df, metric)[metric]
        if values.empty:
            return Part(what, INCONCLUSIVE, "no runs")
        verdict = SUPPORTED if rule(values) else CONTRADICTED
        return Part(what, verdict, f"{describe}: {len(values)} runs, min {values.min():.3g}, "
                                   f"max {values.max():.3g}")
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
            return Part(what, INCONCLUSIVE, "no runs")
        ok = stats.finished(df, "test/loss")
        ok = ok[(ok["train.optimizer"] == optimizer) & (ok["variant"] != "coordwise")]
        keys = ["variant", "seed"]
        a = ok[ok["task.rotation"] == "none"][keys + ["test/loss"]]
        b = ok[ok["task.rotation"] == "retrain"][keys + ["test/loss"]]
        pairs = a.merge(b, on=keys, suffixes=("_none", "_retrain"))
        if pairs.empty:
            return Part(what, INCONCLUSIVE, "no paired runs")
        rel = (pairs["test/loss_retrain"] - pairs["test/loss_none"]).abs() / pairs["test/loss_none"].abs()
        holds = bool((rel <= 1e-6).all()) if equal else bool((rel > 1e-6).any())
        return Part(what, SUPPORTED if holds else CONTRADICTED,
                    f"{len(pairs)} pairs ({optimizer}): relative |Δ test loss| max {rel.max():.2g}, "
                    f"median {np.median(rel):.2g}")
    return check


def fip_part(ev: Evidence) -> Part:
    """C6: every n×n word of up to six factors has an even number (≥ 2) of Y factors, alternating."""
    counts = dict(sorted(ev.fip["y_counts"].items()))
    verdict = SUPPORTED if ev.fip["all_even_alternating"] else CONTRADICTED
    return Part("every length-free n×n product of Y, Yᵀ, W (≤ 6 factors) is even and alternating",
                verdict, f"{len(ev.fip['words'])} words; by number of Y factors: {counts}")


def decide(claim: Claim, ev: Evidence, seed: int = 0) -> tuple[str, list[Part]]:
    """The claim's verdict and its decided parts."""
    parts = [check(ev) for check in claim.exact] + [compare(ev.runs, c, seed) for c in claim.comparisons]
    return combine([p.verdict for p in parts]), parts
