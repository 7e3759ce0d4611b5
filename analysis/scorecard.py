"""``python -m analysis.scorecard model=external model.target=PACKAGE.MODULE:CLASS [scale=quick] [KEY=VALUE ...]``

One page for a mixer against attention's reference arms (``conf/ablation/scorecard.yaml``:
softmax M4a, W_V M5, the best elementwise σ with 1/n, the MLP B1) on the tasks that separate
the paper's terms (selection, generation outside span(X), repeated tokens, length
generalisation). It runs the ablation ``scorecard`` with the grid's model axis and with the
command line's model (``model=…``, ``model.*``) as one more arm, in this process as ``python -m
harness`` runs a sweep: trials already in the store (the reference arms of an earlier scorecard,
by trial id) are skipped, so a second mixer runs only its own trials. Command-line sweeps are
axes as in ``python -m harness`` (``task.n_train=64,256,1024 seed=0,1,2``, with or without
``-m``). Before the first trial it prints the expected CPU time (:data:`COST_TABLE`). Where a
row's arm chose an lr at the grid's edge, the grid is extended one ×√10 step past it, up to
``report.extend_lr`` times, as the report does (paper.md §13). Then it writes
``outputs/scorecard-<variant>-<scale>[-<hash of the other overrides>]/scorecard.md`` in the
current directory, a folder per setting that changes the page (with ``scorecard.csv`` and the
figures beside it):

* one sentence per task saying where the mixer stands;
* the measured symmetry table: the mixer's symmetries on re-drawn float64 weights
  (:func:`harness.external_check.measure_redrawn`, as the pre-flight measures them), and every
  arm's median ``symmetry/*`` error on its trained weights, under the same names;
* per part of the ablation file (``a: MIXER`` is the mixer's arm) the mixer's test error against
  the reference's with the paired interval under the verdict protocol (:mod:`analysis.protocol`):
  *better* (the difference part supported), *worse* (contradicted), *equivalent within δ* (the
  two-sided TOST part supported, its positive control softmax-vs-MLP contradicted), else
  *inconclusive* with the reason; a better / worse / equivalent verdict also needs its
  Holm-adjusted p below 0.05 across the page's comparisons; and per task the positive control;
* the sample-efficiency and length-generalisation figures (:mod:`analysis.plots`), the mixer
  drawn thick and black.

Exit status: 0 the page is written, 1 some trials failed (the page counts them), 2 bad input
(nothing run: an unknown key or option, a mixer that does not build, with "did you mean" where a
name is close), 130 interrupted.
"""

from __future__ import annotations

if __name__ == "__main__":  # the shell's refusals before this module's imports (pandas, scipy, plots)
    from harness.shell import main

    main("analysis.scorecard")

import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

import hydra
import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf
from scipy import stats as sps

from analysis import budget, phases, plots, protocol, render, rounds, stats
from analysis.decision import Open, Reason, Rule, Step
from analysis.load import load_runs
from analysis.trials import restrict
from harness.cli import Runtime
from harness.console import load_note

ABLATION, MIXER, ALPHA = "scorecard", "MIXER", 0.05
# the symmetry names of harness.models.common.SYMMETRIES → the metric each trial logs on its weights
SYMMETRY_KEYS = {"orthogonal_knowledge": "symmetry/rotation_knowledge_err",
                 "orthogonal": "symmetry/rotation_err", "permutation": "symmetry/permutation_err"}
# CPU-ms per training step per trial, per model preset and task (``mixer``: any model not in it,
# costed as the example gated linear attention, examples/my_mixers/gated.py). Measured at
# scale=quick, cluster=serial, under /usr/bin/time on a 2-core machine: the 540 reference trials
# took 348 CPU-s, the mixer's 108 about 95 CPU-s; split over (model, task) in proportion to
# their mean trial durations in a local-Ray run of the same 648 trials.
COST_TABLE = Path(__file__).with_name("scorecard_cost.csv")
# overrides that change where trials run or are recorded, not what the page says
NOT_ON_PAGE = ("cluster", "tracking", "hydra", "force", "dry_run", "summary")


# The area's floor is the metric's own resolution (issue 63): a test error below it is not
# measured, so it counts as it, and an arm that fits a task exactly does not win or lose by
# round-off orders of magnitude on the log scale. Accuracy: half an error in the n_test test
# examples; relative MSE: this stated floor (an RMS error of 0.1% of the target's, below which the
# page tells no fits apart). The zoo's and the scorecard's only: the report keeps its own
# (analysis.stats.FLOOR).
ACC_RESOLUTION, REL_MSE_FLOOR = 0.5, 1e-6
# The lr-edge rounds' cap (issue 63): 10× the 0.3 that two rounds past the grid's 0.03 reached,
# where a fifth of the zoo's rows stopped "at grid edge"; a row still choosing it needs more.
LR_MAX = 3.0


def error_floor(df: pd.DataFrame) -> pd.Series:
    """Per run, the resolution of its test error (:data:`ACC_RESOLUTION` / ``task.n_test`` for
    accuracy, :data:`REL_MSE_FLOOR` for relative MSE; NaN where the run has no ``task.n_test``
    or no error). ``df`` as :func:`analysis.stats.add_error` returns it (``error_name``)."""
    n_test = pd.to_numeric(df.get("task.n_test", pd.Series(np.nan, index=df.index)), errors="coerce")
    acc = df.get("error_name", pd.Series("", index=df.index)).astype(str).str.contains("accuracy")
    return pd.Series(np.where(acc, ACC_RESOLUTION / n_test, REL_MSE_FLOOR), index=df.index).where(df["error"].notna())


def floored(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (with ``error``, :func:`analysis.stats.add_error`) with each test error below its
    resolution (:func:`error_floor`) raised to it; a copy."""
    if df.empty or "error" not in df:
        return df
    floor = error_floor(df)
    return df.assign(error=df["error"].where(~(df["error"] < floor), floor))


def floor_words(df: pd.DataFrame) -> str:
    """The floor as the page states it, e.g. ``accuracy 0.5/n_test (n_test = 2048: 0.000244);
    relative MSE 1e-06``."""
    n_test = sorted(pd.to_numeric(df.get("task.n_test", pd.Series(dtype=float)), errors="coerce").dropna().astype(int).unique())
    shown = ", ".join(f"{n}: {ACC_RESOLUTION / n:.3g}" for n in n_test) or "none"
    return (f"a test error below the metric's resolution counts as it: accuracy {ACC_RESOLUTION:g}/n_test, half an "
            f"error in the test set (n_test = {shown}); relative MSE {REL_MSE_FLOOR:g}, the stated floor")


def _p_values(diff: protocol.PartResult, delta: float) -> tuple[float, float]:
    """(difference p, TOST p) of the paired per-seed differences, from the 95% Student-t
    interval the protocol printed (mean ``effect``, bounds ``lo, hi``, ``n`` pairs)."""
    n = diff.n_pairs
    if n < 2 or not np.isfinite(diff.lo):
        return np.nan, np.nan
    se = (diff.hi - diff.lo) / (2 * sps.t.ppf(0.975, n - 1))
    if se == 0:
        return (0.0 if diff.effect else 1.0), (0.0 if abs(diff.effect) < delta else 1.0)
    p_diff = 2 * sps.t.sf(abs(diff.effect) / se, n - 1)
    p_tost = max(sps.t.sf((diff.effect + delta) / se, n - 1), sps.t.sf((delta - diff.effect) / se, n - 1))
    return float(p_diff), float(p_tost)


def _tests(df: pd.DataFrame, spec: dict, check_edge: bool = True) -> tuple[protocol.PartResult, protocol.PartResult]:
    """``(difference, two-sided equivalence)`` of one concrete part on ``df``, the equivalence
    against the ``b`` the difference chose."""
    diff = protocol.decide_part(df, {**spec, "test": "difference"}, check_edge=check_edge)
    equiv = protocol.decide_part(df, {**spec, "b": diff.spec["b"], "choose_b": [],  # the same b
                                      "test": "equivalence", "sides": 2}, check_edge=check_edge)
    return diff, equiv


def _open_for_budget(reasons) -> bool:
    """Whether the ×factor reruns can decide a row the grid leaves open: an arm is budget-limited
    and nothing but *not learned* comes before that. An arm still falling at the end of its budget
    may yet learn, or a reference still falling may yet pass the arm the row judged; reading such a
    row as *not learned* lets the budget decide it (the two-layer zoo's ``teacher_general`` at 300
    steps: the softmax references, still falling, read *not learned* on 40 rows)."""
    steps = [r.rule.step for r in reasons]
    if Step.BUDGET not in steps:
        return False
    return all(s is Step.NOT_LEARNED for s in steps[:steps.index(Step.BUDGET)])


def _deciding(spec: dict, mixer: str) -> dict:
    """A page's part as the row decides it: the mixer as ``a`` and the role ``deciding`` (test and
    preconditions: an observation's test verdict is not reported by the protocol, and the page's
    rows are verdicts of their own, module docstring)."""
    return {**spec, "a": mixer if spec["a"] == MIXER else spec["a"], "role": "deciding"}


def _row(df: pd.DataFrame, spec: dict, mixer: str, longer: pd.DataFrame | None) -> dict:
    """One part's row (:func:`decide`): decided on ``df``; a part whose first open rule is the
    budget's is decided instead on ``longer`` (its arms' runs at ×factor steps, one lr each, so
    without the lr-edge precondition; :func:`budget_round`) where those hold runs."""
    spec = _deciding(spec, mixer)
    diff, equiv = _tests(df, spec)
    longer_used = False
    # only a row the grid leaves open for the budget, as budget_round chose its reruns: a difference
    # decided on the grid (its winner's still-falling curve cannot reverse it) stays decided, though
    # its equivalence test is budget-limited and the ×factor runs hold none of its arms
    open_for_budget = (diff.verdict not in (protocol.SUPPORTED, protocol.CONTRADICTED)
                       and _open_for_budget(diff.reasons or equiv.reasons))
    if longer is not None and not longer.empty and open_for_budget:
        diff, equiv = _tests(longer, {**spec, "b": diff.spec["b"], "choose_b": []}, check_edge=False)
        longer_used = True
    return {**_fields(diff, equiv, spec, mixer), "longer": longer_used}


def _fields(diff: protocol.PartResult, equiv: protocol.PartResult, spec: dict, mixer: str) -> dict:
    """A row's columns from its two tests (:func:`_tests`) on the runs it is decided on."""
    reasons = diff.reasons or equiv.reasons
    p_diff, p_tost = _p_values(diff, float(spec["delta"]))
    shown = diff.spec["b"] if not spec.get("choose_b") else f"{spec['b']}: {diff.spec['b']}"
    return {"task": spec["task"], "name": spec["name"], "reference": shown, "b": diff.spec["b"], "delta": float(spec["delta"]),
            "n_train": render.sizes(diff.sizes), "seeds": render.seeds(diff.paired, diff.expected), "mixer": diff.mean_a,
            "reference_error": diff.mean_b, "effect": diff.effect, "lo": diff.lo, "hi": diff.hi,
            "p_diff": p_diff, "p_tost": p_tost, "value": spec.get("value", "error"), "diff": diff.verdict, "equiv": equiv.verdict,
            "why": render.reasons(reasons), "choice": render.choice(diff.choice),
            "not_learned": _not_learned(reasons, mixer), "at_cap": _at_cap(reasons),
            "first_rule": reasons[0].rule if reasons else None, "budget_open": _open_for_budget(reasons),
            "confirmed": False, "n_pairs": diff.n_pairs}


def decide(df: pd.DataFrame, parts: list[dict], mixer: str, longer: pd.DataFrame | None = None,
           factor: int = 0, block: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> pd.DataFrame:
    """One row per part: the mixer (``a``) against its reference (``b``), the verdict, why, and
    ``open`` (:class:`analysis.decision.Open`, None where decided). ``longer``: the ×``factor``
    budget reruns (:func:`budget_round`); a budget-limited row is decided on them (:func:`_row`),
    and reads "budget-limited at ×factor" where it still is. ``block``: the confirmation block's
    runs ``(at ×1, at ×factor)`` (:func:`confirmation_round`); a row the seeds leave open is
    decided on them alone (:func:`_confirm`)."""
    from analysis.render_tables import budget_limited, decided_longer

    table = pd.DataFrame([_row(df, spec, mixer, longer) for spec in parts])
    _holm(table)  # one family of comparisons: each part's difference and equivalence test
    capped = (table["verdict"] == "inconclusive") & table["at_cap"].fillna("").astype(bool)
    table.loc[capped, "reason"] = table.loc[capped, "at_cap"]
    table["open"] = [open_reason(r) for r in table.itertuples()]
    still = table["open"].map(lambda o: o is Open.BUDGET_X4)
    table.loc[still, "reason"] = [_at_factor(why, budget_limited(factor)) for why in table.loc[still, "reason"]]
    decided = table["longer"] & (table["verdict"] != "inconclusive")
    table.loc[decided, "reason"] = decided_longer(factor)
    # the row's reason is the part's own why, led by the mixer not learning
    table["not_learned"] = table["not_learned"] & (table["verdict"] == "inconclusive") & ~_holm_only(table)
    if block is not None:
        table = _confirm(table, parts, mixer, block, factor)
    return table.drop(columns=["first_rule", "budget_open", "n_pairs", "b"])


def _holm(table: pd.DataFrame) -> None:
    """Holm's adjustment across ``table``'s rows (each row's difference and equivalence p, one
    family), then each row's verdict and reason (:func:`_verdict`), in place."""
    adjusted = protocol.holm(np.concatenate([table["p_diff"], table["p_tost"]]))
    table["p_diff_holm"], table["p_tost_holm"] = adjusted[:len(table)], adjusted[len(table):]
    table["verdict"], table["reason"] = zip(*(_verdict(r) for r in table.itertuples()))


# Why a row's confirmation block reruns it: the interval (or Holm) leaves it open, or its positive
# control is not contradicted yet; more paired seeds are what either needs.
CONFIRMABLE = (Open.SEEDS, Open.POWER)


def _confirm(table: pd.DataFrame, parts: list[dict], mixer: str, block: tuple[pd.DataFrame, pd.DataFrame],
             factor: int) -> pd.DataFrame:
    """``table`` with each row open on the seeds (:data:`CONFIRMABLE`) decided again on its
    confirmation block alone: its arms (and its positive control's) rerun on fresh seeds at the
    lrs the exploratory seeds chose and the budget its row was decided at (``block``: the runs at
    ×1 and at ×factor, :func:`confirmation_round`), no pooling with the exploratory seeds; the
    confirmed rows are one Holm family of their own (the exploratory family is not re-adjusted,
    so no row it decided moves). A row still open there reads :attr:`Open.CONFIRMED` (more runs
    of this design cannot decide it) unless the block names another reason. A row the block holds
    no pairs of keeps its exploratory reading."""
    from analysis.render_tables import budget_limited, confirmed_words

    confirmed = []
    for i, row in table.iterrows():
        runs = block[1] if row["longer"] else block[0]
        if row["open"] not in CONFIRMABLE or runs is None or getattr(runs, "empty", True):
            continue
        spec = {**_deciding(parts[i], mixer), "b": row["b"], "choose_b": []}
        diff, equiv = _tests(runs, spec, check_edge=False)
        if diff.n_pairs == 0:
            continue
        longer = bool(row["longer"])
        x4 = block[1]
        if (not longer and x4 is not None and not getattr(x4, "empty", True)  # as _row: budget-limited at ×1
                and diff.verdict not in (protocol.SUPPORTED, protocol.CONTRADICTED)
                and _open_for_budget(diff.reasons or equiv.reasons)):
            diff4, equiv4 = _tests(x4, spec, check_edge=False)
            if diff4.n_pairs:
                diff, equiv, longer = diff4, equiv4, True
        was = f"open on the exploratory seeds {row['seeds']}: {row['reason'] or row['why']}"
        confirmed.append((i, {**_fields(diff, equiv, spec, mixer), "longer": longer, "confirmed": True,
                              "explored": was}))
    if not confirmed:
        return table
    block_table = pd.DataFrame([r for _, r in confirmed], index=[i for i, _ in confirmed])
    _holm(block_table)
    block_table["open"] = [open_reason(r) for r in block_table.itertuples()]
    block_table["open"] = block_table["open"].map(lambda o: Open.CONFIRMED if o in CONFIRMABLE else o)
    still = block_table["open"].map(lambda o: o is Open.BUDGET_X4)  # its budget line named for the ×factor runs
    for column in ("why", "reason"):
        block_table.loc[still, column] = [_at_factor(w, budget_limited(factor)) for w in block_table.loc[still, column]]
    block_table["reason"] = [confirmed_words(r.seeds, factor if r.longer else 1, r.open is None, r.reason or r.why, r.explored)
                             for r in block_table.itertuples()]
    decided = block_table["verdict"] != "inconclusive"
    block_table["not_learned"] = block_table["not_learned"] & ~decided & ~_holm_only(block_table)
    records = table.to_dict("records")
    for i, row in block_table.drop(columns="explored").iterrows():
        records[i] = {**records[i], **row.to_dict()}
    return pd.DataFrame(records, columns=table.columns)


def _at_factor(why: str, words: str) -> str:
    """A row's why with its budget line named for the ×factor reruns (``words``), wherever that line
    is (after *not learned* where an arm did not learn either)."""
    head = f"{render.STEP_NAMES[Step.BUDGET]}: "
    return why.replace(head, f"{words}: ", 1) if head in why else f"{words}: {why}"


def open_reason(r) -> Open | None:
    """Why a decided row (:func:`decide`'s columns) stays inconclusive, typed; None where decided."""
    if r.verdict != "inconclusive":
        return None
    if r.diff in (protocol.SUPPORTED, protocol.CONTRADICTED) or r.equiv == protocol.SUPPORTED:
        return Open.SEEDS  # only Holm's correction holds it back
    if r.at_cap:
        return Open.LR_CAP
    rule = r.first_rule
    if rule is None:
        return Open.SEEDS
    if rule.step is Step.BUDGET or getattr(r, "budget_open", False):  # not learned, and still falling
        return Open.BUDGET_X4 if r.longer else Open.BUDGET
    if rule is Rule.AUC_SIZES:
        return Open.SIZES
    if rule is Rule.CONTROL_OPEN or rule is Rule.NO_CONTROL:
        return Open.POWER if rule is Rule.CONTROL_OPEN else Open.FLOOR
    return _STEP_OPEN.get(rule.step, Open.SEEDS)


_STEP_OPEN = {Step.DATA: Open.RUNS, Step.TEST: Open.SEEDS, Step.NOT_LEARNED: Open.NOT_LEARNED,
              Step.DIVERGED: Open.DIVERGED, Step.LR_EDGE: Open.LR_EDGE, Step.NO_POWER: Open.FLOOR,
              Step.BLOWUP: Open.BLOWUP, Step.RESOLUTION: Open.FLOOR}


def _at_cap(reasons: list[Reason], lr_max: float = LR_MAX) -> str:
    """``"needs lr > 3.0: …"`` where the first rule that leaves the row open is an arm choosing
    the largest lr of its grid at the cap (:data:`LR_MAX`: the lr-edge rounds stop there), else ``""``."""
    first = reasons[0] if reasons else None
    if first is None or first.rule is not Rule.LR_LARGEST or not first.values:
        return ""
    chosen = float(first.values[0])
    if not rounds.at_cap(chosen, lr_max):
        return ""
    return f"needs lr > {lr_max}: `{first.arm}` at n_train={first.n_train} chose {chosen:.3g}, the largest tried"


def _not_learned(reasons: list[Reason], mixer: str) -> bool:
    """Whether the first rule that leaves the row open is *not learned* for the mixer."""
    return bool(reasons) and reasons[0].rule.step is Step.NOT_LEARNED and reasons[0].arm == mixer


def _holm_only(table: pd.DataFrame) -> pd.Series:
    """Rows whose test decided but whose Holm-adjusted p did not (:func:`_verdict`'s third case)."""
    decisive = (protocol.SUPPORTED, protocol.CONTRADICTED)
    return table["diff"].isin(decisive) | (table["equiv"] == protocol.SUPPORTED)


def _verdict(r) -> tuple[str, str]:
    if r.diff == protocol.SUPPORTED and r.p_diff_holm < ALPHA:
        return "better", ""
    if r.diff == protocol.CONTRADICTED and r.p_diff_holm < ALPHA:
        return "worse", ""
    if r.equiv == protocol.SUPPORTED and r.p_tost_holm < ALPHA:
        return "equivalent within δ", ""
    if r.diff in (protocol.SUPPORTED, protocol.CONTRADICTED) or r.equiv == protocol.SUPPORTED:
        return "inconclusive", f"not significant after Holm (p = {min(r.p_diff_holm, r.p_tost_holm):.2g})"
    return "inconclusive", r.why or "the 95% interval includes 0 and the 90% interval is not inside ±δ"


def symmetry_rows(df: pd.DataFrame, trial_cfg, mixer: str) -> list[str]:
    """The measured symmetry table (Markdown lines): the mixer's errors on re-drawn weights
    (an external model only) and each arm's median on its trained weights, the mixer's row bold."""
    from harness.models import build_model
    from harness.external_check import measure_redrawn
    from harness.models.external import NAME, declared
    from tasks import build_task

    lines = []
    if trial_cfg.model.name == NAME:
        task = build_task(trial_cfg.task)
        model = build_model(trial_cfg.model, task.d, task.n_max, __import__("torch").Generator().manual_seed(0))
        errors, dtype = measure_redrawn(model, task.d, task.n_max)
        lines += redrawn_lines(errors, dtype, declared(model, trial_cfg.model.target), task.d)
    return lines + trained_lines(df, mixer)


def redrawn_lines(errors: dict[str, float], dtype, claims: frozenset[str], d: int) -> list[str]:
    """The re-drawn-weights table (Markdown lines) of :func:`harness.external_check.measure_redrawn`'s
    ``errors`` (``{symmetry/* key: relative error}``) in ``dtype`` against the declared ``claims``."""
    from harness.external_check import TOLERANCE, symmetry_table

    table = symmetry_table(errors, dtype, claims)
    lines = [f"On re-drawn {str(dtype)[6:]} weights (tolerance {TOLERANCE[dtype]:g}, the pre-flight's "
             f"measurement at d={d}):", "", "| symmetry | error | |", "|---|---|---|"]
    for name, key in SYMMETRY_KEYS.items():
        shown = f"{errors[key]:.0e}" if key in errors and np.isfinite(errors[key]) else "–"
        lines.append(f"| {name} | {shown} | {table[name]} |")
    return lines + [""]


def trained_lines(df: pd.DataFrame, mixer: str) -> list[str]:
    """Each arm's median ``symmetry/*`` error over its trials, on its trained weights (Markdown
    lines), the mixer's row bold."""
    present = [k for k in SYMMETRY_KEYS.values() if k in df]
    med = df.groupby("arm", dropna=False)[present].median() if present else pd.DataFrame()
    lines = ["Median relative error over each arm's trials, on its trained weights (float32; `symmetry/*` "
             "of each run):", "", "| arm | " + " | ".join(SYMMETRY_KEYS) + " |", "|---|" + "---|" * len(SYMMETRY_KEYS)]
    for arm, row in med.iterrows():
        cells = [f"{row[k]:.0e}" if k in row and np.isfinite(row[k]) else "–" for k in SYMMETRY_KEYS.values()]
        shown = f"**`{arm}`** (the mixer)" if arm == mixer else f"`{arm}`"
        lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    return lines


def _fmt(v: float) -> str:
    return "–" if not np.isfinite(v) else f"{v:.3g}"


def _words(name: str) -> tuple[str, str]:
    """``(the task in words, the reference in words)`` of a part name ``"selection vs softmax (M4a)"``."""
    task, _, ref = name.partition(" vs ")
    return task, ref or name


def _references(names: list[str], n_train) -> list[str]:
    """The references of one verdict's rows in words, each named once: a part name
    ``"task vs softmax (M4a), auc over n_train"`` (the zoo's rows) qualifies its reference, and
    a reference that appears both plain (at the page's ``n_train``) and qualified reads
    ``"softmax (M4a) (at n_train = 1024 and by auc over n_train)"``."""
    quals: dict[str, list[str]] = {}
    for name in names:
        base, _, qual = _words(name)[1].partition(", ")
        quals.setdefault(base, []).append(qual)
    out = []
    for base, qs in quals.items():
        said = [f"by {q}" if q else f"at n_train = {n_train}" for q in qs]
        out.append(base if qs == [""] else f"{base} {said[0]}" if len(said) == 1
                   else f"{base} ({' and '.join(said)})")
    return out


def _control_words(ctrl: pd.DataFrame) -> str:
    """The positive control's clause of a task's sentence: it holds (supported), or it is
    contradicted or inconclusive, and then no equivalence of the row may be read."""
    if not len(ctrl):
        return ""
    verdict = ctrl["verdict"].iloc[0]
    state = ("holds" if verdict == protocol.SUPPORTED
             else "is contradicted: read no equivalence here" if verdict == protocol.CONTRADICTED
             else "is inconclusive (see Positive control): read no equivalence here")
    return f"; the positive control ({ctrl['a'].iloc[0]} beats {ctrl['b'].iloc[0]}) {state}"


def summary_sentences(table: pd.DataFrame, control: pd.DataFrame, mixer: str) -> list[str]:
    """One sentence per task, in words, from the page's rows (``table``: :func:`decide`;
    ``control``: :func:`control_rows`)."""
    out = []
    for task, rows in table.groupby("task", sort=False, dropna=False):
        words, n = _words(rows["name"].iloc[0])[0], rows["n_train"].iloc[0]
        said = []
        unlearned = rows.get("not_learned", pd.Series(False, index=rows.index)).astype(bool)
        if unlearned.all():
            said.append("not learned: no better than the task's trivial predictor, so no row is decided")
        rows = rows[~unlearned] if not unlearned.all() else rows.iloc[0:0]
        for verdict, label in (("better", "better than"), ("equivalent within δ", "equivalent within δ to"),
                               ("worse", "worse than"), ("inconclusive", "inconclusive against")):
            refs = _references(list(rows.loc[rows["verdict"] == verdict, "name"]), n)
            if refs:
                said.append(f"{label} {', '.join(refs[:-1]) + ' and ' if len(refs) > 1 else ''}{refs[-1]}")
        held = _control_words(control[control["task"] == task])
        at = f"n_train = {n}" if pd.notna(n) and str(n) else "no runs"
        out.append(f"* **{words}** (`{task}`, {at}): `{mixer}` is "
                   f"{'; '.join(said)}{held}.")
    return out


def control_rows(df: pd.DataFrame, parts: list[dict]) -> pd.DataFrame:
    """Per task the positive control of its parts (``control: [a', b']``, the MLP against
    softmax): the difference test of ``b'`` (the better arm) against ``a'``."""
    rows = []
    for spec in {p["task"]: p for p in parts if len(p.get("control") or []) == 2}.values():
        worse, better = spec["control"]
        res = protocol.decide_part(df, {**spec, "a": better, "b": worse, "control": [], "choose_b": [],
                                        "test": "difference", "role": "control"})
        rows.append({"task": spec["task"], "a": better, "b": worse, "n_train": render.sizes(res.sizes),
                     "seeds": render.seeds(res.paired, res.expected),
                     "mean_a": res.mean_a, "mean_b": res.mean_b, "effect": res.effect, "lo": res.lo,
                     "hi": res.hi, "verdict": res.verdict, "why": render.reasons(res.reasons)})
    return pd.DataFrame(rows, columns=["task", "a", "b", "n_train", "seeds", "mean_a", "mean_b", "effect",
                                       "lo", "hi", "verdict", "why"])


def page(mixer: str, table: pd.DataFrame, control: pd.DataFrame, sym: list[str], figures: list[str],
         header: str) -> str:
    """The scorecard's Markdown (``header``: the setting's line, :func:`_header`)."""
    lines = [f"# Scorecard: `{mixer}`", "", header, "", *summary_sentences(table, control, mixer), "",
             "## Measured symmetries", "", *sym, "",
             "## Against the reference arms", "",
             "Test error at the largest training-set size, each arm at its lr chosen on validation; "
             "d = reference − mixer per seed, its paired 95% Student-t interval; δ per task from "
             f"the ablation file; Holm across the page's {2 * len(table)} tests (difference and TOST per row)."
             + (" Rows with `auc` in the name read instead, per seed, the mean natural-log test error over the "
                "sizes listed (trapezoid in log n_train), δ in that unit (conf/zoo.yaml)."
                if "value" in table and (table["value"] == "auc").any() else ""), "",
             "| task | reference | n_train | seeds | mixer | reference | d [95% CI] | δ | verdict | why |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        ci = f"{_fmt(r.effect)} [{_fmt(r.lo)}, {_fmt(r.hi)}]"
        why = "; ".join(x for x in (r.reason, r.choice) if x)
        lines.append(f"| {r.task} | `{r.reference}` | {r.n_train} | {r.seeds} | {_fmt(r.mixer)} | "
                     f"{_fmt(r.reference_error)} | {ci} | {r.delta:g} | **{r.verdict}** | {why} |")
    lines += ["", "## Positive control", "",
              "Per task the known-different pair each row's equivalence test needs (paper.md §13, *Power*): "
              "d = error(b) − error(a), paired per seed; *supported*: `a` is better.", "",
              "| task | a | b | n_train | seeds | a | b | d [95% CI] | verdict | why |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in control.itertuples():
        lines.append(f"| {r.task} | `{r.a}` | `{r.b}` | {r.n_train} | {r.seeds} | {_fmt(r.mean_a)} | {_fmt(r.mean_b)} | "
                     f"{_fmt(r.effect)} [{_fmt(r.lo)}, {_fmt(r.hi)}] | **{r.verdict}** | {r.why} |")
    if figures:  # a page drawn from a bundle alone (analysis/zoo.py) has none
        lines += ["", "## Figures", "", f"The mixer `{mixer}` is the thick black line.", "",
                  *[f"![{Path(f).stem}]({Path(f).name})" for f in figures]]
    lines.append("")
    return "\n".join(lines)


def mixer_overrides(overrides: list[str]) -> tuple[list[str], list[str]]:
    """``(model overrides, the rest)`` of the command line."""
    model = [o for o in overrides if o.lstrip("+~").split("=", 1)[0].split(".")[0] == "model"]
    return model, [o for o in overrides if o not in model]


class BadInput(ValueError):
    """A command line the scorecard cannot run (exit 2, one line)."""


def out_folder(cwd: Path, mixer: str, scale: str, overrides: list[str]) -> Path:
    """``cwd/outputs/scorecard-<mixer>-<scale>[-<8 hex digits>]``: a folder per setting that
    changes the page; the digits hash the sorted overrides other than the mixer's, the scale
    and :data:`NOT_ON_PAGE` (so ``seed=0,1,2`` and ``seed=0,1`` never share a page)."""
    rest = sorted(o for o in overrides if o.lstrip("+~").split("=", 1)[0].split(".")[0].split("/")[0]
                  not in (*NOT_ON_PAGE, "scale") or o.lstrip("+~").startswith("scale."))
    name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"scorecard-{mixer}-{scale}")
    if rest:
        name += "-" + hashlib.sha256("\n".join(rest).encode()).hexdigest()[:8]
    return cwd / "outputs" / name


def _costs() -> dict[tuple[str, str], float]:
    table = pd.read_csv(COST_TABLE)
    return {(r.model, r.task): float(r.cpu_ms_per_step) for r in table.itertuples()}


def expected_cpu_s(trials: list, mixer: str, costs: dict[tuple[str, str], float] | None = None) -> float:
    """Expected CPU-seconds of ``trials`` from ``costs`` (``{(preset, task): CPU-ms a step}``;
    default :data:`COST_TABLE`): steps × CPU-ms per step of the trial's model preset on its task;
    the mixer and presets not in the table are costed as softmax attention, a task the table
    lacks at its dearest step."""
    from harness.naming import preset

    costs, total = costs or _costs(), 0.0
    for t in trials:
        model = "mixer" if t.variant == mixer else preset(t.variant)
        ms = costs.get((model, t.task), costs.get(("mixer", t.task), costs.get(("softmax", t.task))))
        total += (max(costs.values()) if ms is None else ms) * t.config.train.max_steps / 1000
    return total


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} CPU-min" if seconds >= 60 else f"{seconds:.0f} CPU-s"


def print_expected(refs: list, mine: list, done: set[str], mixer: str, cores: int,
                   command: str = "scorecard", what: str = "the mixer",
                   costs: tuple[str, dict[tuple[str, str], float]] | None = None) -> None:
    """One line before the first trial: what is left to run and its expected CPU time (the
    references' too when they are not in the store yet), and the wall time if ``cores`` cores
    are free, with the load average where it is above this machine's cores
    (:func:`harness.console.load_note`); the sweep replaces it with the measured rate once a
    tenth of its trials are back.
    ``command``, ``what``: the line's prefix and the name of ``mine`` (the zoo: "the mixers");
    ``costs``: ``(the table's name, its costs)`` in place of :data:`COST_TABLE` (the zoo's own)."""
    todo_refs = [t for t in refs if t.trial_id not in done]
    todo_mine = [t for t in mine if t.trial_id not in done]
    table, costs = costs or (COST_TABLE.name, None)
    a, b = expected_cpu_s(todo_refs, mixer, costs), expected_cpu_s(todo_mine, mixer, costs)
    refs_text = (f"references {len(todo_refs)} of {len(refs)} trials ≈ {_minutes(a)}; " if todo_refs
                 else f"references in the store ({len(refs)} trials); ")
    print(f"{command}: expected {refs_text}{what} {len(todo_mine)} of {len(mine)} trials ≈ {_minutes(b)}; "
          f"≈ {(a + b) / 60 / max(cores, 1):.1f} min wall if {cores} cores are free, plus lr-edge and ×4 budget reruns "
          f"(costs: {table}){load_note(os.cpu_count() or 1)}", flush=True)


def _expand(cli: list[str], sweeps: list[str]) -> tuple[DictConfig, list, list, list[str], list[str]]:
    """``(ablation config, reference trials, mixer trials, base overrides, model overrides)``;
    a preset that is a reference arm (``model=softmax``) has the references' trials as its own.

    Raises:
        BadInput: no mixer named, a sweep over the mixer's keys, or a grid that does not expand.
    """
    model, rest = mixer_overrides(cli)
    model_sweeps, rest_sweeps = mixer_overrides(sweeps)
    if not model:
        raise BadInput("name the mixer: model=external model.target=PACKAGE.MODULE:CLASS (or model=PRESET)")
    if model_sweeps:
        raise BadInput(f"{' '.join(model_sweeps)}: a scorecard scores one mixer; give one value "
                       "(run the scorecard once per mixer: the references are reused)")
    sc, refs, (mine,), base = expand_arms(rest, rest_sweeps, [model])
    return sc, refs, mine, base, model


def expand_arms(rest: list[str], sweeps: list[str], models: list[list[str]]) -> tuple[DictConfig, list, list[list], list[str]]:
    """``(ablation config, reference trials, [trials of each model], base overrides)``: the
    scorecard's grid composed with the overrides ``rest`` and ``sweeps`` (no ``model`` keys), once
    for the reference arms and once per model's overrides (``["model=external", "model.target=…"]``).

    Raises:
        BadInput: a grid that does not expand, or a model with no trials.
    """
    from harness.expansion import SweepError, expand

    base = ["+ablation=scorecard", *rest]
    sc = None
    try:
        sc = hydra.compose(config_name="config", overrides=base)
        refs = expand(sc, [*base, *sweeps])
        arms = [expand(sc, [*base, *model, *sweeps]) for model in models]
    except (SweepError, ValueError) as err:
        raise BadInput(_one_line(str(err), sc)) from err
    for model, mine in zip(models, arms):
        if not mine:
            raise BadInput(f"{' '.join(model)}: no trials")
    return sc, refs, arms, base


def _one_line(message: str, cfg: DictConfig | None) -> str:
    """OmegaConf's several-line "Key 'x' not in 'YConfig' … full_key: task.x" as one line, with
    "did you mean" among the keys of that node of the composed ``cfg``."""
    from harness.cli import suggest

    first = message.splitlines()[0] if message else message
    full = re.search(r"full_key: ([\w.]+)", message)
    if cfg is None or not full or "." not in full.group(1):
        return first
    parent, _, key = full.group(1).rpartition(".")
    node = OmegaConf.select(cfg, parent)
    allowed = sorted(node.keys()) if isinstance(node, DictConfig) else []
    return f"{full.group(1)}: no key {key!r} in {parent}{suggest(key, allowed)} (allowed: {', '.join(allowed)})"


def _sweep(sc: DictConfig, trials: list, cli: list[str], store, before=None) -> int:
    """Run ``trials`` as ``python -m harness`` runs a sweep (checks first, then
    ``before(finished)`` with the trial ids already finished as the checks read them, then the
    trials; finished ones skipped): its exit status."""
    from harness.sweep import Sweep

    sweep = Sweep([(ABLATION, trials)], OmegaConf.to_object(sc.cluster), store, cli, sc.tracking.lease_s)
    try:
        sweep.check()
    except ValueError as err:  # SweepError, StoreError: bad input, nothing run or recorded
        print(f"error: {err}", file=sys.stderr)
        return 2
    if before is not None:
        before(set(sweep.finished.get(ABLATION, {})))
    return sweep.main()  # checked above: main() does not check again


def _runs(trials: list, store) -> pd.DataFrame:
    return restrict(stats.add_error(load_runs(ABLATION, store.uri)), trials, ABLATION)


def _grid_runs(sc: DictConfig, trials: list, store) -> pd.DataFrame:
    """:func:`_runs` less the budget reruns and the confirmation block (:func:`split_rounds`):
    they extend the grid's trials, so the store's reruns of an earlier invocation (a resume) are
    read with them, and pooled with the grid's runs they left no row budget-limited to rerun."""
    return split_rounds(_runs(trials, store), int(sc.train.max_steps))[0]


def split_rounds(df: pd.DataFrame, steps: int) -> tuple[pd.DataFrame, pd.DataFrame, tuple[pd.DataFrame, pd.DataFrame]]:
    """``(the grid and its lr-edge runs, the ×factor budget reruns, the confirmation block as
    (its runs at the grid's ``steps``, its runs longer))`` of one ablation's runs, by their phase
    (:func:`analysis.phases.phase_column`)."""
    if df.empty or "seed" not in df:  # no seeds: no block told apart (a frame built by hand)
        main, longer = budget.split_budget(df, steps)
        return main, longer, (df.iloc[0:0], df.iloc[0:0])
    phase = phases.phase_column(df, steps)
    block = df[phase == phases.CONFIRMATION].reset_index(drop=True)
    main, longer = budget.split_budget(df[phase != phases.CONFIRMATION].reset_index(drop=True), steps)
    if block.empty or budget.STEPS not in block:
        return main, longer, (block, block.iloc[0:0])
    at = pd.to_numeric(block[budget.STEPS], errors="coerce").fillna(steps) > steps
    return main, longer, (block[~at].reset_index(drop=True), block[at].reset_index(drop=True))


def extend_lr(sc: DictConfig, parts: list[dict], groups: list[tuple[list, list[str]]], mixer: str,
              store, lr_max: float = LR_MAX) -> tuple[list, int]:
    """Extend the lr grid one ×√10 step past each edge a row's arm chose, round after round,
    until every choice is interior (an lr past it diverging on every seed leaves it interior) or
    the next step passes ``lr_max`` (a row still there reads "needs lr > 3.0"): as many rounds as
    take the grid's largest lr to ``lr_max`` (:func:`analysis.rounds.steps_to`), at least
    ``report.extend_lr`` (none at ``scale=tiny``), with the report's rounds
    (:func:`analysis.rounds.edge_rounds`, :func:`analysis.rounds.extension_trials`; phase
    ``lr_extension``). ``groups``: ``(grid trials, overrides they were composed with)``, the
    references' and the mixer's. Returns ``(the extension trials, the worst exit status of their
    sweeps)``."""
    from harness.expansion import split_sweeps

    grid = [t for trials, _ in groups for t in trials]
    added: list = []
    status = [0]

    def read() -> dict[str, pd.DataFrame]:
        return {"": _grid_runs(sc, grid + added, store)}

    def edges_of(runs: Mapping[str, pd.DataFrame]) -> dict[str, list]:
        return {"": [e for spec in parts for e in protocol.decide_part(
            runs[""], {**spec, "a": mixer if spec["a"] == MIXER else spec["a"]}).edges]}

    def build(_: str, edges: list) -> list:
        new: dict[str, Any] = {}
        for trials, cli in groups:
            for t in rounds.extension_trials(edges, {t.trial_id: t for t in trials}, split_sweeps(cli)[0],
                                             lr_max=lr_max):
                new.setdefault(t.trial_id, t)
        return list(new.values())

    def run(todo: dict[str, list]) -> int:
        new = todo[""]
        print(f"scorecard: {len(new)} trials past an lr grid edge", flush=True)
        added.extend(new)
        status[0] = max(status[0], _sweep(sc, new, groups[0][1], store))
        return -1 if status[0] == 2 else len(new)

    top = max((float(t.config.train.lr) for t in grid), default=lr_max)
    cap = 0 if sc.scale.name == "tiny" else max(int(sc.report.extend_lr), rounds.steps_to(top, lr_max))  # tiny: a path check
    rounds.edge_rounds(cap, {"": {t.trial_id for t in grid}}, read, edges_of, build, run)
    return added, status[0]


def budget_round(sc: DictConfig, parts: list[dict], groups: list[tuple[list, list[str]]], mixer: str,
                 store, added: list, prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> tuple[list, int]:
    """The ×``report.budget_factor`` budget reruns (paper.md §13 *budget-limited*) of every row
    still budget-limited after the lr-edge rounds (:func:`decide` on the grid and ``added``, its
    extensions): the row's two arms and its positive control's, every seed and size the row
    reads, each arm at its lr chosen on validation (:func:`analysis.confirm.freeze`), built by the
    report's :func:`analysis.budget.budget_trials` and tagged phase ``budget``. ``groups`` as
    :func:`extend_lr`'s; ``prepare``: applied to the runs before deciding, as the page that reads
    the reruns applies it (the zoo's trivial references, :func:`analysis.zoo_page.reference_rows`),
    so that the rows rerun are the rows the page finds budget-limited. Returns ``(the reruns, the
    worst exit status of their sweep)``; none where ``report.budget_factor`` ≤ 1 or no row is
    budget-limited."""
    from analysis.budget import budget_trials

    factor = int(sc.report.budget_factor)
    grid = [t for trials, _ in groups for t in trials] + list(added)
    if factor <= 1:
        return [], 0
    df = floored(_grid_runs(sc, grid, store))
    table = decide(df if prepare is None else prepare(df), parts, mixer)
    limited = [{**p, "a": mixer if p["a"] == MIXER else p["a"], "role": "deciding"}
               for p, why in zip(parts, table["open"]) if why is Open.BUDGET]
    if not limited:
        return [], 0
    new = _reruns(limited, df, groups, lambda configs, trials, plain, frozen: budget_trials(
        configs, {ABLATION: df}, {ABLATION: trials}, plain, factor, frozen))
    todo = rounds.tag(new.values(), phases.BUDGET)
    if not todo:
        return [], 0
    print(f"scorecard: {len(todo)} trials at ×{factor} steps ({len(limited)} budget-limited rows, "
          "their arms and positive controls)", flush=True)
    return todo, _sweep(sc, todo, groups[0][1], store)


def _reruns(rows: list[dict], runs: pd.DataFrame, groups: list[tuple[list, list[str]]], build) -> dict[str, Any]:
    """``{trial id: trial}`` of a rerun round (the budget's, the confirmation block's) for the
    concrete parts ``rows``: their arms' lrs frozen on ``runs`` (:func:`analysis.confirm.freeze`),
    then per group of grid trials ``build(configs, trials, overrides, frozen)`` with the group's
    overrides less the ``+ablation`` the rounds add, each trial once; none for no rows."""
    from types import SimpleNamespace

    from analysis.confirm import freeze
    from harness.expansion import split_sweeps

    if not rows:
        return {}
    configs = {ABLATION: SimpleNamespace(ablation=SimpleNamespace(parts=rows))}
    frozen = freeze(configs, {ABLATION: runs})
    out: dict[str, Any] = {}
    for trials, cli in groups:
        plain = [o for o in split_sweeps(cli)[0] if o != f"+ablation={ABLATION}"]
        for t in build(configs, trials, plain, frozen).get(ABLATION, []):
            out.setdefault(t.trial_id, t)
    return out


def confirmation_round(sc: DictConfig, parts: list[dict], groups: list[tuple[list, list[str]]], mixer: str,
                       store, added: list, seeds: list[int],
                       prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> tuple[list, int]:
    """The confirmation block (paper.md §13 *Confirmation block*; issue 63) of every row the
    exploratory seeds leave open on the seeds (:data:`CONFIRMABLE`: the interval decides neither
    way, only Holm's correction holds it back, or its positive control is not contradicted yet),
    after the lr-edge and budget rounds (``added``: their trials), decided as the page decides
    (:func:`decide` on the grid and the ×factor reruns, after ``prepare``): the row's two arms and
    its positive control's, once per seed of ``seeds`` (registered before the run), every size the
    row reads, each arm at its lr chosen on the exploratory seeds (:func:`analysis.confirm.freeze`)
    and at the budget its row was decided at (×factor where its ×factor reruns decided it), on the
    grid's evaluation sets (``task.eval_seed`` as the grid's: the training data and init are what
    the seeds draw afresh); tagged phase ``confirmation``. Such a row is then decided on these runs
    alone (:func:`_confirm`). ``groups`` as :func:`extend_lr`'s. Returns ``(the block's trials, the
    worst exit status of its sweep)``; none where no row is open on the seeds or ``seeds`` is empty.

    Raises:
        ValueError: a seed of ``seeds`` the grid already ran, or one of a spent block
            (:func:`analysis.confirm.check_unspent`).
    """
    from analysis.confirm import check_unspent, confirmation_trials

    if not seeds:
        return [], 0
    check_unspent(seeds)
    factor = int(sc.report.budget_factor)
    steps = int(sc.train.max_steps)
    grid = [t for trials, _ in groups for t in trials] + list(added)
    ready = (lambda df: df) if prepare is None else prepare  # applied to floored runs

    def table_of(runs: pd.DataFrame, with_block: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
        main, longer, block = split_rounds(runs, steps)
        main = floored(main)
        blocks = (ready(floored(block[0])), ready(floored(block[1]))) if with_block else None
        return decide(ready(main), parts, mixer, ready(floored(longer)), factor, blocks), main

    def trials_of(rows: list[dict], main: pd.DataFrame, at_factor: bool) -> dict[str, Any]:
        """The block's trials of ``rows`` at ×1 or at ×factor, at their frozen lrs."""
        change = {budget.STEPS: str(steps * factor), "train.eval_every": str(int(sc.train.eval_every) * factor)} if at_factor else {}
        return _reruns(rows, main, groups, lambda configs, trials, plain, frozen: confirmation_trials(
            configs, {ABLATION: main}, {ABLATION: trials}, plain, seeds, frozen, column=lambda row: change,
            fresh_eval=False))

    table, main = table_of(_runs(grid, store), with_block=False)
    todo: dict[str, Any] = {}
    for at_factor in (False, True):
        todo.update(trials_of([_deciding(p, mixer) for p, why, was_longer in zip(parts, table["open"], table["longer"])
                               if why in CONFIRMABLE and bool(was_longer) is at_factor], main, at_factor))
    new = rounds.tag(todo.values(), phases.CONFIRMATION)
    if not new:
        return [], 0
    n_rows = int(table["open"].isin(CONFIRMABLE).sum())
    print(f"scorecard: {len(new)} trials of the confirmation block (seeds {seeds[0]}–{seeds[-1]}; {n_rows} rows "
          "open on the seeds, their arms and positive controls)", flush=True)
    status = _sweep(sc, new, groups[0][1], store)
    if status == 2:
        return new, status
    # as on the exploratory seeds: a block row still budget-limited at ×1 is rerun at ×factor on
    # the block's seeds and decided there (_confirm)
    confirmed, _ = table_of(_runs(grid + new, store), with_block=True)
    limited = [_deciding(p, mixer) for p, row in zip(parts, confirmed.itertuples())
               if row.confirmed and row.open is Open.BUDGET]
    more = rounds.tag(trials_of(limited, main, True).values(), phases.CONFIRMATION)
    more = [t for t in more if t.trial_id not in {n.trial_id for n in new}]
    if not more:
        return new, status
    print(f"scorecard: {len(more)} trials of the confirmation block at ×{factor} steps ({len(limited)} block rows "
          "budget-limited at ×1)", flush=True)
    return new + more, max(status, _sweep(sc, more, groups[0][1], store))


def run(cfg: DictConfig, runtime: Runtime) -> int:
    """Run the scorecard's trials, decide, write the page (module docstring); the exit status."""
    from harness.store import resolve_store

    try:
        sc, refs, mine, base, model = _expand(list(runtime.overrides), list(runtime.sweeps))
    except BadInput as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    mixer = mine[0].variant
    mine = [t for t in mine if t.trial_id not in {r.trial_id for r in refs}]
    store = resolve_store(OmegaConf.to_object(sc.tracking), runtime.cwd)
    if cfg.dry_run:
        return _dry_run(sc, refs, mine, mixer, [*base, *model, *runtime.sweeps], store,
                        out_folder(runtime.cwd, mixer, sc.scale.name,
                                   [*(o for o in base if o != "+ablation=scorecard"), *runtime.sweeps]))
    status = _sweep(sc, refs + mine, [*base, *model, *runtime.sweeps], store, before=lambda finished: print_expected(
        refs, mine, finished, mixer, _cores(sc.cluster)))
    if status == 2:
        return 2
    rest = [o for o in base if o != "+ablation=scorecard"]
    parts = [protocol.spec_dict(p) for p in OmegaConf.to_object(sc.ablation.parts)]
    groups = [(refs, [*base, *runtime.sweeps]), (mine, [*base, *model, *runtime.sweeps])]
    added, ext_status = extend_lr(sc, parts, groups, mixer, store)
    if ext_status == 2:
        return 2
    longer, budget_status = budget_round(sc, parts, groups, mixer, store, added)
    if budget_status == 2:
        return 2
    ext_status = max(ext_status, budget_status)
    # the zoo's and the scorecard's floor (error_floor); the ×4 reruns decide only the rows they rerun
    df, x4 = budget.split_budget(floored(_runs(refs + mine + added + longer, store)), int(sc.train.max_steps))
    out = out_folder(runtime.cwd, mixer, sc.scale.name, [*rest, *runtime.sweeps])
    out.mkdir(parents=True, exist_ok=True)
    table = decide(df, parts, mixer, x4, int(sc.report.budget_factor))
    control = control_rows(df, parts)
    figures = _figures(df, out, sc.scale.name, mixer)
    extended = int((df["extends"].astype(str) != "").sum()) if "extends" in df else 0  # this run's and earlier ones'
    header = _header(sc.scale.name, len(df), extended, [*runtime.overrides, *runtime.sweeps]) + \
        f" The area's floor: {floor_words(df)}."
    text = page(mixer, table, control, symmetry_rows(df, (mine or [t for t in refs if t.variant == mixer])[0].config, mixer), figures, header)
    (out / "scorecard.md").write_text(text)
    table.to_csv(out / "scorecard.csv", index=False)
    print(f"scorecard: {out / 'scorecard.md'}")
    return max(status, ext_status)


def _dry_run(sc: DictConfig, refs: list, mine: list, mixer: str, cli: list[str], store, out: Path) -> int:
    """``dry_run=true``: the trials (those already in the store marked ``done``), the expected
    time, and the page it would write; nothing run or written. Exit status 0, 2 bad input."""
    from harness.command import dry_run

    finished = dry_run([(ABLATION, refs + mine)], OmegaConf.to_object(sc.cluster), store, cli, sc.tracking.lease_s)
    if finished is None:
        return 2
    print_expected(refs, mine, set(finished.get(ABLATION, {})), mixer, _cores(sc.cluster))
    print(f"scorecard: dry run: would run the trials not done, extend the lr grid past its edges, rerun "
          f"budget-limited rows at ×{sc.report.budget_factor} steps and "
          f"write {out / 'scorecard.md'}; nothing was run or written")
    return 0


def _cores(cluster: DictConfig) -> int:
    """The cores the trials run on: one in this process (``cluster=serial``), else the local
    instance's ``num_cpus`` (default: this machine's)."""
    if getattr(cluster.scheduler, "name", str(cluster.scheduler)) == "serial":
        return 1
    return int(cluster.get("num_cpus") or os.cpu_count() or 1)


def _header(scale: str, n: int, extended: int, overrides: list[str]) -> str:
    path = " (a check of the path, not evidence)" if scale == "tiny" else ""
    return (f"Scale `{scale}`{path}; {n} runs ({extended} past an lr grid edge) in the store's experiment "
            f"`{ABLATION}` (`conf/ablation/scorecard.yaml`). Command: `python -m analysis.scorecard "
            f"{' '.join(overrides)}`.")


def _figures(df: pd.DataFrame, out: Path, scale: str, mixer: str) -> list[str]:
    paths = [*plots.sample_efficiency(df, out / "sample_efficiency", ablation=ABLATION, scale=scale,
                                      formats=("png",), highlight=mixer)]
    lengths = df[df["task"] == "teacher_length"]
    try:
        paths += plots.length_generalisation(lengths, out / "length_generalisation", ablation=ABLATION,
                                             scale=scale, formats=("png",), highlight=mixer)
    except ValueError as err:  # no per-length metric (no finished run on the length task)
        print(f"scorecard: no length figure: {err}", file=sys.stderr)
    return [str(p) for p in paths]
