"""The verdict protocol of paper.md §13 for statistical (S) parts, pre-registered in each
ablation file (``ablation.parts``, :class:`harness.config.PartConfig`).

For one part on one ablation's runs (:func:`analysis.trials.restrict`, with ``arm``):

1. **Selection** on validation only: per task × arm × ``task.n_train`` the learning rate with the
   lowest mean validation error metric (ties: validation loss), among lrs with no diverged seed
   (:func:`analysis.stats.select_lr`). Test is read once, at the chosen lr.
2. **Pairs**: the seeds that both arms finished (FINISHED, not diverged, finite value) at the
   decided ``task.n_train`` (the largest both arms have; ``value = auc``: every size both have).
   ``d = value(b) − value(a)`` per seed; every missing pair is counted and shown, never dropped
   silently. A part with a registered ``readout`` (token tasks) reads only the runs under it;
   runs under another readout are its stability rows (:mod:`analysis.stability`).
3. **Test**: *difference* — the paired 95% Student-t interval of ``d`` (n − 1 degrees of
   freedom): *supported* if it excludes 0 with ``d > 0`` (``a`` lower), *contradicted* if it
   excludes 0 the other way. *Equivalence*, two-sided — TOST at α = 0.05 (the paired 90%
   t-interval inside ±δ): *supported*; the 95% interval entirely outside ±δ: *contradicted*.
   One-sided (``a`` does not beat ``b`` by δ or more, ``d < δ``): the 90% interval's upper bound
   below δ (a one-sided 95% test): *supported*; the 95% interval above δ: *contradicted*.
   Otherwise *inconclusive*.
4. **Preconditions**, each printed, each turning a verdict into *inconclusive* with its reason:
   *not learned* (a difference needs the observed better arm, an equivalence both arms, to beat
   the task's best reference predictor — uniform mixing, the identity (where logged) or zero
   predictor for relative MSE, the better of the majority class and uniform mixing (the most frequent input token) for accuracy — by at least δ); *budget-limited* (per arm, on the seed-mean
   best-so-far validation error: the best still fell within the last 10% of the budget and by
   more than δ/2 over the last 20%; fewer than 5 evaluations in the last 20% cannot be judged;
   direction-aware: an arm at 0 validation error is not budget-limited, and in a decisive
   difference the late fall of the arm that came out lower, which can only widen the effect,
   does not void it); *diverged* (every lr of an arm had a diverged seed); *lr at grid edge* (the chosen lr is the
   smallest or largest tried, the grid has < 3 values, and it is not the part's stated bound;
   an edge that an inner lr ties on the validation error, e.g. both at 0, won the tie-break on
   validation loss only and does not bind); *no power* (equivalences only, and it voids only a
   *supported* one: a contradiction needs no power): the part's registered positive control
   (``control: [a', b']``, a known-different pair on the same task, n_train, budget, readout and
   seeds) is not contradicted by the same test on its own interval, or no control is registered,
   or both arms are within δ of 0 error (at most δ: ≤), or both within δ of the error of the
   part's named ``floor`` arm (a family that cannot represent the target).

   4b. **Blown-up runs** (:func:`analysis.stats.blowup`: validation error at the best checkpoint
   above the task's nothing-learned reference where the arm's other seeds are not, or far
   above them on the log scale) stay in the pairs and are counted; a part with any is decided
   again without their seeds and by the Hodges–Lehmann estimate with its exact signed-rank
   interval (:func:`analysis.stats.hodges_lehmann`), and where either says otherwise than its
   own test it is *inconclusive: decided by N blown-up runs*. An lr with a blown-up
   exploratory seed is not eligible for selection; a verdict only that exclusion makes is
   inconclusive for the same reason.

   4c. **Resolution**: the largest effect the measurement could show (the compared arm's
   distance from the value's floor: 0 error, or the first validation step for
   steps-to-target), on the exploratory block, below δ (0 for a difference) plus the
   exploratory 95% half-width: *inconclusive: the measurement cannot show δ*.

   These rules (4b, 4c) only ever make a part inconclusive.
5. **Multiplicity**: each deciding part's *p-value for contradiction* (:func:`p_contradiction`:
   the part is contradicted, unadjusted, exactly when it is below α = 0.05) is adjusted by
   Holm's step-down method over the claim's deciding parts (:func:`holm`; a part without an
   interval counts with p = 1). A claim is *contradicted* if any deciding part is contradicted
   and its Holm-adjusted p is below α; *supported* if all its deciding parts are supported (an
   intersection of the parts' hypotheses: every part must pass at its own level, so it needs no
   adjustment); otherwise *inconclusive*. A part contradicted before the adjustment but not
   after counts as inconclusive for its claim and says so. Sanity parts are shown and never
   decide; observations carry no verdict.
6. **Intervals printed**: a difference prints its 95% interval; an equivalence prints its 90%
   interval (support) and its 95% interval (contradiction), since both decide.

Margins δ are absolute, in the value's units (test error; ``auc``: the mean natural-log test
error over the sizes, so δ = 0.1 is about a 10% ratio; ``steps_to_<t>``: a fraction of the step
budget), never a fraction of an arm's error.

**Steps-to-target** (``value: steps_to_<t>``, paper.md §13 C12(b): a reparameterisation is an
equivalence of how fast both arms reach a target, not of errors at a shared floor): per run, the
first validation step at which the validation error is ``≤ t`` (``val/first_step_below/<t>``,
recorded by :func:`harness.trial.first_step_below` for ``t`` in
:data:`harness.trial.STEPS_TO_TARGETS`), divided by the run's ``train.max_steps``; a run that
never reaches ``t`` within its budget (recorded as ``-1``) counts as the whole budget, ``1.0``
(right-censored at the budget: the value can only understate a slow arm's steps, never
overstate a fast one's). Its preconditions differ where the error-based ones do not apply:
*not learned* needs the judged arm(s) to reach ``t`` on every paired seed (a task both arms
learn); *budget-limited* is not applied (the budget is the value's own ceiling); *no power*
also fails where both arms are within δ of the budget (neither reaches the target).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis import stats
from analysis.decision import (BlownUp, Check, Choice, Combined, Conditions, Control, Interval, LrChoice, Method,
                               Reason, Robust, Rule, Step)

SUPPORTED, CONTRADICTED, INCONCLUSIVE, OBSERVED = "supported", "contradicted", "inconclusive", "—"
PRECONDITIONS = (Step.NOT_LEARNED, Step.BUDGET, Step.DIVERGED, Step.LR_EDGE)
NO_POWER = Step.NO_POWER  # equivalences only (step 4): voids a supported equivalence
ALPHA = 0.05  # level of every test, and of Holm's family-wise error within a claim
MIN_EVALS = 5  # evaluations in the last 20% of the budget needed to judge it
DERIVED = {"absent_error": lambda df: 1.0 - df["test/acc_not_answer_in_input"]}
STEPS_TO = re.compile(r"steps_to_(\d*\.?\d+(?:e-?\d+)?)")  # value: steps_to_<t>, e.g. steps_to_0.01
STEPS = "train.max_steps"


@dataclass
class PartResult:
    """A decided part: the spec, the numbers, each precondition's status and the verdict."""

    spec: dict[str, Any]
    verdict: str
    reasons: list[Reason] = field(default_factory=list)  # why inconclusive (preconditions, data)
    sizes: tuple[int, ...] = ()  # the decided size(s), n_train
    expected: int | None = None  # the seeds each arm was meant to have (None: not paired yet; the paired: ``paired``)
    mean_a: float = np.nan
    mean_b: float = np.nan
    effect: float = np.nan  # mean of d = value(b) − value(a)
    lo: float = np.nan
    hi: float = np.nan
    method: Method | None = None  # the interval read (step 3)
    method_p: float = np.nan  # TOST's p-value (Method.TOST90), else NaN
    preconditions: dict[Step, Check] = field(default_factory=dict)  # precondition → its check
    lr: dict[str, LrChoice] = field(default_factory=dict)  # "arm @ n_train" → the lr chosen, its grid, ties
    lr_chosen: dict[str, float] = field(default_factory=dict)  # "arm @ n_train" → the chosen lr
    edges: list[dict[str, Any]] = field(default_factory=list)  # arms to extend past an edge
    test_alone: str = ""  # what the interval alone would say, where a precondition failed
    choice: Choice | None = None  # how b was chosen among the part's choose_b arms (on validation)
    lo95: float = np.nan  # the 95% interval (an equivalence's contradiction test; = lo, hi for a difference)
    hi95: float = np.nan
    p: float = np.nan  # p-value for contradiction (p_contradiction), unadjusted
    p_holm: float = np.nan  # Holm-adjusted within the claim's deciding parts (adjust)
    params: dict[str, float] = field(default_factory=dict)  # arm → n_params (logged per run)
    control: Control | None = None  # an equivalence's positive control, decided by the same test (step 4)
    se: float = np.nan  # standard error of the mean paired difference, sd(d)/√n
    n_runs: int = 0  # runs of both arms at their chosen lr and the decided size(s)
    conditions: Conditions | None = None  # the verdict under other readouts / ×4 where it moves (verdicts.annotate)
    blowups: int = 0  # blown-up runs (stats.blowup) among the part's pairs
    blown_runs: tuple[tuple[str, int, str], ...] = ()  # those runs as (arm, seed, trial id), sorted
    d: tuple[float, ...] = ()  # the per-seed paired differences value(b) − value(a), in seed order
    resolution: float | None = None  # the largest effect the measurement could show, in the value's units
    shared_with: tuple[str, ...] = ()  # other claims' parts built from the same trial ids
    trial_ids: tuple[str, ...] = ()  # the paired runs' trial ids, both arms (sorted)
    robust: Robust | None = None  # the blown-up runs' checks: without them, and Hodges–Lehmann (step 4b)
    n_pairs: int = 0  # paired seeds
    paired: tuple[int, ...] = ()  # the paired seeds
    blown_up: tuple[BlownUp, ...] = ()  # the blown-up runs among the pairs, by arm, seed and trial id


def spec_dict(part: Any) -> dict[str, Any]:
    """A part spec (``PartConfig``, DictConfig or mapping) as a plain dict with enum values as
    strings and defaults filled in."""
    if hasattr(part, "items"):
        raw = dict(part.items())
    else:
        raw = dict(vars(part))
    out = {k: (v.value if hasattr(v, "value") else v) for k, v in raw.items()}
    out.setdefault("test", "difference")
    out.setdefault("sides", 2)
    out.setdefault("role", "deciding")
    out.setdefault("value", "error")
    out.setdefault("lr_bound", None)
    out["choose_b"] = list(out.get("choose_b") or [])
    out["control"] = list(out.get("control") or [])
    out.setdefault("floor", None)
    out.setdefault("readout", None)
    out["stability_readouts"] = list(out.get("stability_readouts") or [])
    out["scale_check"] = bool(out.get("scale_check") or False)
    return out


def steps_to(df: pd.DataFrame, target: float) -> pd.Series:
    """Steps-to-target per run as a fraction of its budget (module docstring): the first
    validation step with error ``≤ target`` over ``train.max_steps``, ``1.0`` where it never got
    there (``-1`` recorded), NaN where the run recorded no such metric.

    Raises:
        KeyError: no run has ``val/first_step_below/<target>`` or ``train.max_steps`` (a target
            not in :data:`harness.trial.STEPS_TO_TARGETS`, or runs from before it was recorded).
    """
    column = f"val/first_step_below/{target:g}"
    if column not in df or STEPS not in df:
        raise KeyError(column if column not in df else STEPS)
    step = pd.to_numeric(df[column], errors="coerce")
    budget = pd.to_numeric(df[STEPS], errors="coerce")
    return (step / budget).where(step >= 0, 1.0).where(step.notna())


def _steps_target(value: str) -> float | None:
    """The target ``t`` of a ``steps_to_<t>`` value, else None."""
    match = STEPS_TO.fullmatch(value)
    return float(match[1]) if match else None


def _values(df: pd.DataFrame, value: str) -> pd.DataFrame:
    if _steps_target(value) is not None:
        return df.assign(**{value: steps_to(df, _steps_target(value))})
    if value in DERIVED:
        if "test/acc_not_answer_in_input" not in df:
            raise KeyError("test/acc_not_answer_in_input")
        return df.assign(**{value: DERIVED[value](df)})
    length = re.fullmatch(r"error_n(\d+)", value)
    if length:  # a token task's test error at one test length (T5), against that length's references
        at = f"test/n_{length[1]}"
        if f"{at}/acc" not in df or f"{at}/majority_acc" not in df:
            raise KeyError(f"{at}/acc")
        error, name = stats.token_reference(df[f"{at}/majority_acc"],
                                            df.get(f"{at}/uniform_acc", pd.Series(np.nan, index=df.index)))
        return df.assign(**{value: 1.0 - pd.to_numeric(df[f"{at}/acc"], errors="coerce"),
                            "reference_error": error,
                            "reference_name": [f"{n} at n = {length[1]}" for n in name]})
    return df.assign(auc=np.log(df["error"].clip(lower=1e-12))) if value == "auc" else df


def _usable(df: pd.DataFrame, value: str) -> pd.DataFrame:
    ok = stats.finished(df, value)
    return ok[~stats.diverged(ok)]


def _sizes_name(sizes: Any) -> str:
    """Training-set sizes as a :class:`Reason` names them (``"64, 256"``): data, not a sentence."""
    return ", ".join(str(int(n)) for n in sizes)


def reference(rows: pd.DataFrame) -> tuple[float, str]:
    """The task's best reference predictor's error on these runs' test sets, and its name:
    the logged one (uniform mixing, majority class), and for relative MSE also the zero
    predictor (exactly 1) and the identity ``ŷ = x`` where logged (``test/identity_rel_mse``)."""
    ref = float(pd.to_numeric(rows["reference_error"], errors="coerce").mean())
    name = str(rows["reference_name"].iloc[0]) if "reference_name" in rows and len(rows) else "reference"
    regression = "test/rel_mse" in rows and rows["test/rel_mse"].notna().any()
    if regression and not (ref <= 1.0):  # the zero predictor's relative MSE is exactly 1
        ref, name = 1.0, "zero predictor"
    if regression and "test/identity_rel_mse" in rows:
        identity = float(pd.to_numeric(rows["test/identity_rel_mse"], errors="coerce").mean())
        if identity < ref:
            return identity, "identity"
    return ref, name


def learned_bar(rows: pd.DataFrame, at: list, value: str) -> tuple[float, str]:
    """The bar that *not learned* holds an arm to (it must sit δ below it), and its name: for an
    area (``value = "auc"``) the mean over the sizes ``at`` of the log of :func:`reference` at
    each size, else :func:`reference` on the rows at ``at``."""
    rows = rows[rows["task.n_train"].isin(at)]
    if value == "auc":
        refs = [reference(rows[rows["task.n_train"] == n])[0] for n in at]
        return float(np.mean(np.log(np.clip(refs, 1e-12, None)))), "reference (mean log)"
    return reference(rows)


def _budget(rows: pd.DataFrame, delta: float, log: bool) -> tuple[Rule, tuple[float, ...]] | None:
    """None, or the rule that finds the arm's budget binding with its numbers (paper.md §13
    *budget-limited*)."""
    need = ["val/best_error", "val/best_error_at_80", "val/best_error_at_90", "val/evals_last_20"]
    if any(c not in rows for c in need) or rows.empty:
        return Rule.BUDGET_UNLOGGED, ()
    evals = int(pd.to_numeric(rows["val/evals_last_20"], errors="coerce").min())
    if evals < MIN_EVALS:
        return Rule.BUDGET_UNJUDGED, (evals, MIN_EVALS)
    end, at80, at90 = (float(pd.to_numeric(rows[c], errors="coerce").mean()) for c in need[:3])
    if end <= 0:  # direction-aware: an arm at 0 validation error cannot fall further
        return None
    if log:
        end, at80, at90 = np.log(max(end, 1e-12)), np.log(max(at80, 1e-12)), np.log(max(at90, 1e-12))
    if at90 > end and at80 - end > delta / 2:
        return Rule.BUDGET_FALLING, (at80, end)
    return None


def _ties(rows: pd.DataFrame) -> tuple:
    """The lrs that tied the chosen one on validation error (``lr_ties`` of
    :func:`analysis.stats.select_lr`; empty where absent)."""
    ties = rows["lr_ties"].iloc[0] if "lr_ties" in rows and len(rows) else ()
    return ties if isinstance(ties, tuple) else ()


def _edge(rows: pd.DataFrame, bound: float | None) -> tuple[Rule | None, str | None]:
    """(None or the rule that fires, 'high'/'low' when the chosen lr is an extendable edge)."""
    chosen = float(rows["lr_chosen"].iloc[0])
    grid = tuple(rows["lr_grid"].iloc[0])
    if bound is not None and np.isclose(chosen, bound):
        return None, None
    if len(grid) >= 3 and any(min(grid) < t < max(grid) for t in _ties(rows)):
        return None, None  # an inner lr reaches the same validation error: the edge won a tie-break only
    if len(grid) < 3:
        side = "high" if np.isclose(chosen, max(grid)) else "low" if np.isclose(chosen, min(grid)) else None
        return Rule.GRID_SMALL, side
    if np.isclose(chosen, max(grid)):
        return Rule.LR_LARGEST, "high"
    if np.isclose(chosen, min(grid)):
        return Rule.LR_SMALLEST, "low"
    return None, None


def _test(d: np.ndarray, spec: Mapping[str, Any]) -> tuple[str, float, float, Method, float, Reason | None]:
    """(verdict before preconditions, lo, hi, method, TOST's p or NaN, the rule that leaves it
    open or None)."""
    delta = float(spec["delta"])
    if spec["test"] == "difference":
        _, lo, hi = stats.t_interval(d, 0.95)
        verdict = SUPPORTED if lo > 0 else CONTRADICTED if hi < 0 else INCONCLUSIVE
        return verdict, lo, hi, Method.T95, np.nan, None if verdict != INCONCLUSIVE else Reason(Rule.INCLUDES_ZERO)
    if int(spec["sides"]) == 2:
        result = stats.tost(d, delta)
        _, lo95, hi95 = stats.t_interval(d, 0.95)
        outside = lo95 > delta or hi95 < -delta
        verdict = SUPPORTED if result["equivalent"] else CONTRADICTED if outside else INCONCLUSIVE
        why = None if verdict != INCONCLUSIVE else Reason(Rule.STRADDLES_DELTA)
        return verdict, result["lo"], result["hi"], Method.TOST90, float(result["p"]), why
    _, lo90, hi90 = stats.t_interval(d, 0.90)
    _, lo95, _ = stats.t_interval(d, 0.95)
    verdict = SUPPORTED if hi90 < delta else CONTRADICTED if lo95 > delta else INCONCLUSIVE
    why = None if verdict != INCONCLUSIVE else Reason(Rule.ONE_SIDED_OPEN, values=(hi90, lo95))
    return verdict, lo90, hi90, Method.ONE_SIDED90, np.nan, why


def choose_arm(df: pd.DataFrame, task: str, arms: list[str]) -> tuple[str, Choice]:
    """The arm among ``arms`` with the lowest seed-mean validation error (``val/best_error``)
    at the largest ``task.n_train`` they all have, each at its lr chosen on validation (paper.md
    §13: a choice among arms is made on validation too), and a line saying so. Test metrics are
    never read. Falls back to the first arm (with the reason) when none has an eligible lr."""
    rows = df[(df["task"] == task) & df["arm"].isin(arms)]
    chosen = stats.select_lr(rows, group=("task", "arm", "task.n_train")).dropna(subset=["lr_chosen"])
    chosen = chosen[chosen["status"] == "FINISHED"]
    sizes = [set(chosen[chosen["arm"] == arm]["task.n_train"]) for arm in arms]
    common = sorted(set.intersection(*sizes)) if sizes and all(sizes) else []
    if not common:
        return arms[0], Choice(tuple(arms), arms[0])
    at = chosen[chosen["task.n_train"] == common[-1]]
    crit = "val/best_error" if "val/best_error" in at else "val/error"
    means = at.groupby("arm", dropna=False)[crit].mean().reindex(arms)
    best = str(means.idxmin())
    return best, Choice(tuple(arms), best, int(common[-1]), tuple(float(means[arm]) for arm in arms))


def _resolve(df: pd.DataFrame, part: Any) -> tuple[dict[str, Any], Choice | None]:
    """The part's spec with ``b`` chosen among ``choose_b`` on validation (where given)."""
    spec = spec_dict(part)
    chose = None
    if spec["choose_b"] and not df.empty:
        spec["b"], chose = choose_arm(df, spec["task"], spec["choose_b"])
    return spec, chose


def _arm_rows(df: pd.DataFrame, spec: Mapping[str, Any]) -> tuple[pd.DataFrame, Reason | None]:
    """Both arms' runs on the part's task with its value column, and None or why there are none."""
    rows = df[(df["task"] == spec["task"]) & df["arm"].isin([spec["a"], spec["b"]])] if not df.empty else df
    if spec.get("readout") and "task.readout" in rows:  # the registered readout only (stability rows apart)
        rows = rows[rows["task.readout"].astype(str) == spec["readout"]]
    for arm in (spec["a"], spec["b"]):
        if rows.empty or not (rows["arm"] == arm).any():
            return rows, Reason(Rule.NO_RUNS, arm=str(arm), names=(str(spec["task"]), str(spec.get("readout") or "")))
    try:
        return _values(rows, spec["value"]), None
    except KeyError as err:
        return rows, Reason(Rule.NO_COLUMN, names=(str(err.args[0]),))


def _diverged(chosen: pd.DataFrame, rows: pd.DataFrame, arm: str, pre: dict[Step, list[Reason]]) -> set:
    """Precondition *diverged* for one arm; returns the sizes where it has an eligible lr."""
    mine = chosen[chosen["arm"] == arm]
    if mine["lr_chosen"].isna().any():
        n_lr = len(rows[(rows["arm"] == arm)]["train.lr"].unique()) if "train.lr" in rows else 1
        pre[Step.DIVERGED].append(Reason(Rule.DIVERGED, arm=str(arm), values=(n_lr,)))
    return set(mine.dropna(subset=["lr_chosen"])["task.n_train"])


def _checks(pre: dict[Step, list[Reason]], judged: bool = True) -> dict[Step, Check]:
    """Each precondition's :class:`~analysis.decision.Check` from its failures."""
    return {k: Check(tuple(v), judged=judged or bool(v)) for k, v in pre.items()}


def _no_size(result: PartResult, pre: dict[Step, list[Reason]]) -> PartResult:
    result.preconditions = _checks(pre, judged=False)
    result.reasons = [Reason(Rule.NO_SIZE), *(x for v in pre.values() for x in v)]
    return result


def _per_seed(ok: pd.DataFrame, key: str, at: list) -> pd.Series:
    """One arm's value per seed: the test value at the decided size, or (``auc``) the mean log
    error over the sizes (trapezoid in log n_train, normalised by the log-n range)."""
    if key != "auc":
        return ok.set_index("seed")[key]
    wide = ok.pivot(index="seed", columns="task.n_train", values="auc").reindex(columns=at).dropna()
    logn = np.log(np.asarray(at, dtype=float))
    area = (np.trapezoid(wide.to_numpy(), logn, axis=1) / (logn[-1] - logn[0]) if len(at) > 1
            else np.full(len(wide), np.nan))
    return pd.Series(area, index=wide.index, dtype=float)


def arm_values(df: pd.DataFrame, task: str, arm: str, value: str = "auc") -> tuple[pd.Series, str, Reason | None]:
    """One arm's value per seed on ``task``, each size at the lr chosen on validation (step 1,
    the blown-up lr rule included) and read as a part reads it (step 2): ``auc`` the area
    under log test error over every size the arm has an eligible lr at (:func:`_per_seed`),
    else the test value at its largest such size. For a table of arms (the zoo's leaderboard),
    not a verdict.

    Returns:
        ``(per-seed values indexed by seed, the sizes as text "64, 256", None or why it is empty)``;
        never raises for missing data.
    """
    ok, at, missing = chosen_runs(df, task, arm, value)
    text = _sizes_name(at)
    if missing:
        return pd.Series(dtype=float), text, missing
    if value == "auc" and len(at) < 2:
        return pd.Series(dtype=float), text, Reason(Rule.AUC_SIZES, arm=str(arm), names=(text,))
    return _per_seed(ok, value, at).dropna(), text, None


def chosen_runs(df: pd.DataFrame, task: str, arm: str, value: str = "error") -> tuple[pd.DataFrame, list,
                                                                                     Reason | None]:
    """``(the arm's usable runs at the lr chosen on validation per size, the sizes read, None or
    why there are none)``: every size with an eligible lr for ``auc``, else the largest
    (:func:`arm_values`)."""
    spec = spec_dict({"task": task, "a": arm, "b": arm, "value": value, "delta": 0.0})
    rows, missing = _arm_rows(df, spec)
    if missing:
        return rows.iloc[0:0], [], missing
    chosen = stats.select_lr(_with_blowup(rows), group=("task", "arm", "task.n_train"), exclude_blowup=True)
    chosen = chosen.dropna(subset=["lr_chosen"])
    sizes = sorted(chosen["task.n_train"].unique())
    at = sizes if value == "auc" else sizes[-1:]
    if not at:
        return chosen.iloc[0:0], [], Reason(Rule.DIVERGED, arm=str(arm))
    return _usable(chosen[chosen["task.n_train"].isin(at)], value), at, None


def _lr_choice(g: pd.DataFrame) -> LrChoice:
    """The chosen lr, its grid and the lrs it tied with on validation error."""
    lr_at = float(g["lr_chosen"].iloc[0])
    return LrChoice(lr_at, tuple(float(x) for x in g["lr_grid"].iloc[0]),
                    tuple(float(t) for t in _ties(g) if not np.isclose(t, lr_at)))


def _edge_check(result: PartResult, pre: dict[Step, list[Reason]], g: pd.DataFrame, arm: str, n: Any,
                bound: float | None) -> None:
    """Precondition *lr at grid edge* for one arm at one size; records an extendable edge."""
    rule, side = _edge(g, bound)
    if rule is None:
        return
    grid = tuple(float(x) for x in g["lr_grid"].iloc[0])
    chosen = () if rule is Rule.GRID_SMALL else (float(g["lr_chosen"].iloc[0]),)
    pre[Step.LR_EDGE].append(Reason(rule, arm=str(arm), n_train=int(n), values=(*chosen, *grid)))
    if side:
        result.edges.append({"task": result.spec["task"], "arm": arm, "n_train": n, "side": side,
                             "lr": float(g["lr_chosen"].iloc[0]),
                             "trial_ids": sorted(g["trial_id"].astype(str)),
                             "extends": sorted(g.get("extends", pd.Series(dtype=str)).astype(str))})


def _arm_checks(result: PartResult, pre: dict[Step, list[Reason]], mine: pd.DataFrame, arm: str,
                check_edge: bool) -> None:
    """Per size of one arm: the chosen lr line, *lr at grid edge* and *budget-limited*."""
    spec = result.spec
    for n, g in mine.dropna(subset=["lr_chosen"]).groupby("task.n_train", dropna=False):
        result.lr[f"{arm} @ {int(n)}"] = _lr_choice(g)
        result.lr_chosen[f"{arm} @ {int(n)}"] = float(g["lr_chosen"].iloc[0])
        if check_edge:
            _edge_check(result, pre, g, arm, n, spec["lr_bound"])
        if _steps_target(spec["value"]) is not None:
            continue  # steps-to-target: the budget is the value's own ceiling (module docstring)
        budget = _budget(_usable(g, "error"), float(spec["delta"]), log=spec["value"] == "auc")
        if budget is not None:
            pre[Step.BUDGET].append(Reason(budget[0], arm=str(arm), n_train=int(n), values=budget[1]))


def _not_reached(chosen: pd.DataFrame, at: list, result: PartResult, target: float) -> list[Reason]:
    """*Not learned* for steps-to-target: the judged arm(s) (as in :func:`_not_learned`) must
    reach the validation error ``target`` within the budget on every seed (a task they learn)."""
    spec = result.spec
    judged = [(spec["a"], result.mean_a), (spec["b"], result.mean_b)]
    if spec["test"] == "difference":
        judged = [min(judged, key=lambda t: t[1])]
    fails = []
    for arm, _ in judged:
        runs = _usable(chosen[(chosen["arm"] == arm) & chosen["task.n_train"].isin(at)], spec["value"])
        reached = int((pd.to_numeric(runs[f"val/first_step_below/{target:g}"], errors="coerce") >= 0).sum())
        if reached < len(runs) or not len(runs):
            fails.append(Reason(Rule.NOT_REACHED, arm=str(arm), values=(target, reached, len(runs))))
    return fails


def _not_learned(chosen: pd.DataFrame, at: list, result: PartResult) -> list[Reason]:
    """Precondition *not learned*: the failures against the best reference predictor on the
    same test sets (a difference judges the observed better arm, an equivalence both)."""
    spec, delta = result.spec, float(result.spec["delta"])
    target = _steps_target(spec["value"])
    if target is not None:
        return _not_reached(chosen, at, result, target)
    ref, ref_name = learned_bar(chosen, at, spec["value"])
    judged = [(spec["a"], result.mean_a), (spec["b"], result.mean_b)]
    if spec["test"] == "difference":
        judged = [min(judged, key=lambda t: t[1])]
    return [Reason(Rule.NOT_LEARNED, arm=str(arm), values=(mean, ref, ref - delta), names=(ref_name,))
            for arm, mean in judged if not (mean <= ref - delta)]


def _arm_mean(df: pd.DataFrame, spec: Mapping[str, Any], arm: str, sizes: tuple[int, ...]) -> float:
    """An arm's seed-mean test value at its chosen lr and the part's decided size (NaN if none)."""
    rows, missing = _arm_rows(df, {**spec, "a": arm, "b": arm})
    if missing or not sizes:
        return np.nan
    chosen = stats.select_lr(rows, group=("task", "arm", "task.n_train")).dropna(subset=["lr_chosen"])
    at = chosen[chosen["task.n_train"].isin([float(n) for n in sizes])]
    return float(_usable(at, spec["value"])[spec["value"]].mean()) if not at.empty else np.nan


def _power(df: pd.DataFrame, result: PartResult, check_edge: bool) -> list[Reason]:
    """Precondition *no power* of an equivalence (step 4): its failures, and the control's
    decision in ``result.control``."""
    spec, delta = result.spec, float(result.spec["delta"])
    fails = []
    steps = _steps_target(spec["value"]) is not None
    means = (result.mean_a, result.mean_b)
    if spec["value"] != "auc" and result.mean_a <= delta and result.mean_b <= delta:
        fails.append(Reason(Rule.AT_ZERO, values=means, names=("steps" if steps else "error",)))
    if steps and result.mean_a >= 1 - delta and result.mean_b >= 1 - delta:
        fails.append(Reason(Rule.AT_BUDGET, values=means))
    if spec["floor"]:
        floor = _arm_mean(df, spec, spec["floor"], result.sizes)
        if np.isnan(floor):
            fails.append(Reason(Rule.FLOOR_MISSING, arm=str(spec["floor"]), names=(_sizes_name(result.sizes),)))
        elif abs(result.mean_a - floor) <= delta and abs(result.mean_b - floor) <= delta:
            fails.append(Reason(Rule.AT_FLOOR, arm=str(spec["floor"]), values=(floor,)))
    if len(spec["control"]) != 2:
        return fails + [Reason(Rule.NO_CONTROL)]
    ca, cb = spec["control"]
    ctrl = decide_part(df, {**spec, "a": ca, "b": cb, "control": [], "floor": None, "choose_b": [],
                            "role": "control"}, check_edge=check_edge)
    said = ctrl.test_alone or ctrl.verdict
    if int(spec["sides"]) == 1:
        slack = ctrl.lo95 - delta
    else:
        slack = max(ctrl.lo95 - delta, -delta - ctrl.hi95)
    result.control = Control(str(ca), str(cb), ctrl.mean_a, ctrl.mean_b,
                             Interval(ctrl.effect, ctrl.lo95, ctrl.hi95), said,
                             tuple(ctrl.reasons) if np.isnan(ctrl.effect) else (), float(slack / delta))
    return fails + ([] if said == CONTRADICTED else [Reason(Rule.CONTROL_OPEN, control=result.control)])


def _verdict(result: PartResult, pairs: pd.DataFrame, pre: dict[Step, list[Reason]]) -> PartResult:
    """The test on the paired seeds, then the preconditions (module docstring, steps 3–4)."""
    spec = result.spec
    result.preconditions = _checks(pre)
    if len(pairs) < 2:
        result.reasons = [Reason(Rule.FEW_PAIRS, values=(len(pairs),))]
        return result
    pairs = pairs.sort_index()
    d = (pairs[spec["b"]] - pairs[spec["a"]]).to_numpy(float)
    result.d = tuple(float(x) for x in d)
    verdict, result.lo, result.hi, result.method, result.method_p, why = _test(d, spec)
    result.effect = float(d.mean())
    _, result.lo95, result.hi95 = stats.t_interval(d, 0.95)
    result.se = float(d.std(ddof=1) / np.sqrt(d.size))
    result.p = p_contradiction(d, spec)
    if spec["test"] == "difference" and verdict in (SUPPORTED, CONTRADICTED):  # direction-aware budget
        winner = spec["a"] if verdict == SUPPORTED else spec["b"]  # its late fall only widens the effect
        pre[Step.BUDGET] = [x for x in pre[Step.BUDGET] if x.arm != str(winner)]
        result.preconditions[Step.BUDGET] = Check(tuple(pre[Step.BUDGET]))
    failed = [x for k, v in pre.items() if k != NO_POWER or verdict == SUPPORTED for x in v]
    if spec["role"] == "observation":
        result.verdict, result.reasons = OBSERVED, failed
    elif failed:
        result.verdict, result.reasons, result.test_alone = INCONCLUSIVE, failed, verdict
    else:
        result.verdict, result.reasons = verdict, [why] if why else []
    return result


def decide_part(df: pd.DataFrame, part: Any, expected_seeds: int | None = None,
                check_edge: bool = True, explored: PartResult | None = None) -> PartResult:
    """Decide one pre-registered part on an ablation's runs (module docstring, steps 1–4).

    Args:
        df: the ablation's runs with ``arm`` (:func:`analysis.trials.restrict`) and the columns
            of :func:`analysis.stats.add_error` (``blowup`` computed here where absent).
        part: the part's spec (:class:`harness.config.PartConfig` or a mapping).
        expected_seeds: seeds per arm the ablation ran (for "k of n" pairs); default: the most
            seeds either arm has.
        check_edge: apply the *lr at grid edge* precondition and the blown-up lr rule of the
            selection (off for reruns at one fixed lr: the confirmation block,
            :mod:`analysis.budget`).
        explored: the part's decision on the exploratory block, whose resolution and half-width
            the *cannot show δ* rule reads (step 4c: known before the confirmation block);
            None: this decision's own.

    Returns:
        A :class:`PartResult`; never raises for missing data (the verdict is then inconclusive
        with the reason).
    """
    df = part_rows(df, part)
    result = _decide(df, part, expected_seeds, check_edge, exclude_blowup=check_edge)
    if check_edge and result.verdict in (SUPPORTED, CONTRADICTED) and _lr_moved(df, result.spec):
        # the blown-up lr rule moved a chosen lr: a decision it alone makes is not made (step 4b)
        before = _decide(df, part, expected_seeds, check_edge, exclude_blowup=False)
        if before.verdict != result.verdict:
            n = int(stats.is_blowup(_arm_rows(df, result.spec)[0]).sum())
            _void(result, Reason(Rule.BLOWUP_LR, values=(n,), verdict=before.test_alone or before.verdict))
    _resolve_limit(result, explored or result)
    return result


# columns no step of the protocol reads: the model's and the task's construction, the exact
# symmetry checks, and where and when a run ran; every filter of a decision copies each column
# (dozens of them strings), so a decision reads a frame without them
UNREAD_PREFIXES = ("model.", "symmetry/")
UNREAD = {"compiled", "device", "end_time", "git_commit", "node", "nonfinite", "overrides", "pack_members",
          "pack_size", "processor", "start_time", "ticket", "task.V", "task.d", "task.embedding",
          "task.embedding_seed", "task.eval_seed", "task.k", "task.kind", "task.n", "task.n_test", "task.n_val",
          "task.readout_beta", "task.rotation", "task.rotation_seed", "task.task_seed", "task.teacher",
          "task.teacher_seed", "task.test_lengths", "task.train_lengths", "train.batch_size", "train.dtype",
          "train.optimizer"}


def arms_of(spec: Mapping[str, Any]) -> list[str]:
    """Every arm a part's decision reads: ``a``, ``b`` (or its ``choose_b`` candidates), the
    positive control's pair and the floor arm."""
    b = list(spec["choose_b"]) or [spec["b"]]
    return list(dict.fromkeys([spec["a"], *b, *spec["control"], *([spec["floor"]] if spec["floor"] else [])]))


def part_rows(df: pd.DataFrame, part: Any) -> pd.DataFrame:
    """The runs a part's decision reads: its task's runs of :func:`arms_of`, without the columns
    of :data:`UNREAD`. Deciding on these gives the decision on ``df`` (every step filters on the
    task and an arm of these); callers that decide one part many times on subsets of a frame (a
    seed left out, resampled blocks) take them once, so each decision filters a few hundred rows,
    not the ablation's thousands."""
    df = _lean(df)
    if df.empty or "task" not in df or "arm" not in df:
        return df
    spec = spec_dict(part)
    keep = (df["task"] == spec["task"]) & df["arm"].isin(arms_of(spec))
    return df if keep.all() else df[keep]


def _lean(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without the columns a decision never reads (:data:`UNREAD`)."""
    drop = [c for c in df.columns if c in UNREAD or str(c).startswith(UNREAD_PREFIXES)]
    return df.drop(columns=drop) if drop else df


def _lr_moved(df: pd.DataFrame, spec: Mapping[str, Any]) -> bool:
    """Whether leaving out the lrs with a blown-up seed changes some arm's chosen lr."""
    rows, missing = _arm_rows(df, spec)
    if missing or rows.empty:
        return False
    rows = _with_blowup(rows)
    if not rows[stats.BLOWUP].any():  # nothing to leave out
        return False
    group = ("task", "arm", "task.n_train")
    now, before = (stats.select_lr(rows, group=group, exclude_blowup=x) for x in (True, False))
    pick = lambda t: t.groupby(list(group), dropna=False)["lr_chosen"].first()  # noqa: E731
    return not pick(now).fillna(-1).equals(pick(before).fillna(-1))


def _with_blowup(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the ``blowup`` column (:func:`analysis.stats.blowup` per arm where absent)."""
    if stats.BLOWUP in rows:
        return rows.assign(**{stats.BLOWUP: stats.is_blowup(rows)})
    return rows.assign(**{stats.BLOWUP: stats.blowup(rows)})


def _void(result: PartResult, reason: Reason) -> None:
    """Make a decided part inconclusive for ``reason`` (a rule of step 4b–c), keeping what its
    interval said; the generic 'interval includes …' line gives way to the rule's."""
    if result.verdict == OBSERVED:
        return
    if result.verdict in (SUPPORTED, CONTRADICTED):
        result.test_alone, result.reasons = result.verdict, []
    keep = [x for x in result.reasons if x.rule.precondition]
    result.verdict, result.reasons = INCONCLUSIVE, [reason, *keep]


def _decide(df: pd.DataFrame, part: Any, expected_seeds: int | None, check_edge: bool,
            exclude_blowup: bool) -> PartResult:
    """:func:`decide_part` with the blown-up lr rule on or off (``exclude_blowup``)."""
    spec, chose = _resolve(df, part)
    a, b, value = spec["a"], spec["b"], spec["value"]
    rows, missing = _arm_rows(df, spec)
    if missing:
        return PartResult(spec, INCONCLUSIVE, [missing])
    rows = _with_blowup(rows)
    chosen = stats.select_lr(rows, group=("task", "arm", "task.n_train"), exclude_blowup=exclude_blowup)
    result = PartResult(spec, INCONCLUSIVE, choice=chose)
    pre: dict[Step, list[Reason]] = {name: [] for name in PRECONDITIONS}
    if spec["test"] == "equivalence" and spec["role"] != "control":
        pre[NO_POWER] = []
    common = sorted(_diverged(chosen, rows, a, pre) & _diverged(chosen, rows, b, pre))
    if not common:
        return _no_size(result, pre)
    at = common if value == "auc" else [common[-1]]
    result.sizes = tuple(int(n) for n in at)
    per_arm: dict[str, pd.Series] = {}
    used = []
    for arm in (a, b):
        mine = chosen[(chosen["arm"] == arm) & chosen["task.n_train"].isin(at)]
        ok = _usable(mine, value)
        if ok.duplicated(["task.n_train", "seed"]).any():
            return PartResult(spec, INCONCLUSIVE, [Reason(Rule.POOLED, arm=str(arm))])
        per_arm[arm] = _per_seed(ok, value, at)
        used.append(ok)
        result.n_runs += len(ok)
        if "n_params" in ok and ok["n_params"].notna().any():
            result.params[arm] = float(pd.to_numeric(ok["n_params"], errors="coerce").max())
        _arm_checks(result, pre, mine, arm, check_edge)
    if value == "auc" and len(at) < 2:
        result.reasons = [Reason(Rule.AUC_SIZES, names=(_sizes_name(result.sizes),))]
        return result
    pairs = pd.concat(per_arm, axis=1, join="inner").dropna()
    result.expected = int(expected_seeds or max(len(s) for s in per_arm.values()))
    result.n_pairs, result.paired = len(pairs), tuple(sorted(int(x) for x in pairs.index))
    result.mean_a, result.mean_b = float(per_arm[a].mean()), float(per_arm[b].mean())
    paired = pd.concat(used)
    paired = paired[paired["seed"].isin(pairs.index)]
    result.trial_ids = tuple(sorted(paired["trial_id"].astype(str))) if "trial_id" in paired else ()
    result.resolution = _resolution(result, paired)
    pre[Step.NOT_LEARNED] += _not_learned(chosen, at, result)
    if NO_POWER in pre:
        pre[NO_POWER] += _power(df, result, check_edge)
    _verdict(result, pairs, pre)
    blown = sorted(set(paired.loc[paired[stats.BLOWUP], "seed"]))
    result.blowups = int(paired[stats.BLOWUP].sum())
    result.blown_runs = _blown_runs(paired)
    result.blown_up = tuple(BlownUp(*run) for run in result.blown_runs)
    if blown and len(pairs) >= 2:
        _robust(result, pairs, blown)
    return result


def _blown_runs(paired: pd.DataFrame) -> tuple[tuple[str, int, str], ...]:
    """The blown-up runs among a part's pairs as sorted ``(arm, seed, trial id)`` (trial id ``""``
    where the frame has none), so a reader can find each run in the store."""
    hit = paired[paired[stats.BLOWUP]]
    ids = hit["trial_id"].astype(str) if "trial_id" in hit else pd.Series("", index=hit.index)
    return tuple(sorted((str(a), int(s), i) for a, s, i in zip(hit["arm"], hit["seed"], ids)))


def _robust(result: PartResult, pairs: pd.DataFrame, blown: list) -> None:
    """Step 4b, a part with blown-up runs among its pairs: decided again without their seeds
    and by the Hodges–Lehmann estimate with its exact signed-rank interval
    (:func:`analysis.stats.hodges_lehmann`); where either test says otherwise than the
    part's own, it is *inconclusive: decided by N blown-up runs*. Never makes a part decisive."""
    spec = result.spec
    d = (pairs[spec["b"]] - pairs[spec["a"]])
    own = result.test_alone or result.verdict
    rest = d.drop(index=[s for s in blown if s in d.index]).to_numpy(float)
    without = _test(rest, spec)[0] if rest.size >= 2 else INCONCLUSIVE
    _, wlo, whi = stats.t_interval(rest, 0.95)
    hl, hlo, hhi = stats.hodges_lehmann(d.to_numpy(float), 0.95)
    robust = _interval_test(d.to_numpy(float), spec, stats.hodges_lehmann)
    result.robust = Robust(result.blown_up, Interval(float(np.mean(rest)) if rest.size else np.nan, wlo, whi,
                                                     int(rest.size)),
                           without, Interval(hl, hlo, hhi, int(d.size)), robust)
    if result.verdict != OBSERVED and (without != own or robust != own):
        _void(result, Reason(Rule.BLOWUP, values=(result.blowups,), robust=result.robust))


def _interval_test(d: np.ndarray, spec: Mapping[str, Any], interval: Any) -> str:
    """Step 3's rules on another interval (``interval(d, level) -> (estimate, lo, hi)``): a
    difference on its 95% interval; an equivalence supported by its 90% interval inside ±δ
    (two-sided) or below δ (one-sided), contradicted by its 95% interval outside."""
    delta = float(spec["delta"])
    _, lo95, hi95 = interval(d, 0.95)
    if spec["test"] == "difference":
        return SUPPORTED if lo95 > 0 else CONTRADICTED if hi95 < 0 else INCONCLUSIVE
    _, lo90, hi90 = interval(d, 0.90)
    if int(spec["sides"]) == 2:
        inside, outside = -delta < lo90 and hi90 < delta, lo95 > delta or hi95 < -delta
    else:
        inside, outside = hi90 < delta, lo95 > delta
    return SUPPORTED if inside else CONTRADICTED if outside else INCONCLUSIVE


def _floor(spec: Mapping[str, Any], rows: pd.DataFrame) -> float:
    """The value's floor (step 4c): the first validation step after 0 over the
    budget for steps-to-target (``train.eval_every / train.max_steps``), log of
    :data:`analysis.stats.FLOOR` for ``auc``, else 0 (no task has teacher noise; the zero
    predictor is a ceiling, not a floor)."""
    if _steps_target(spec["value"]) is not None:
        every = pd.to_numeric(rows.get("train.eval_every", pd.Series(dtype=float)), errors="coerce")
        budget = pd.to_numeric(rows.get(STEPS, pd.Series(dtype=float)), errors="coerce")
        if every.notna().any() and budget.notna().any():
            return float((every / budget).min())
        return 0.0
    if spec["value"] == "auc":
        return float(np.log(stats.FLOOR))
    return 0.0


def _resolution(result: PartResult, rows: pd.DataFrame) -> float:
    """The largest effect the part's measurement could show (step 4c), in the value's units:
    the comparison arm's distance from the value's floor (:func:`_floor`): the arm ``b`` for a
    one-sided equivalence (``d = b − a`` cannot exceed it), the higher arm otherwise (``|d|``
    cannot exceed it)."""
    floor = _floor(result.spec, rows)
    top = result.mean_b if result.spec["test"] == "equivalence" and int(result.spec["sides"]) == 1 \
        else max(result.mean_a, result.mean_b)
    return float(max(top - floor, 0.0)) if np.isfinite(top) else np.nan


def _resolve_limit(result: PartResult, explored: PartResult) -> None:
    """Step 4c, *the measurement cannot show δ*: where the exploratory decision's largest
    showable effect (``explored.resolution``) is below δ (an equivalence; 0 for a difference,
    whose test is against 0) plus its 95% half-width, the part is inconclusive."""
    spec = result.spec
    res = explored.resolution
    if res is None or not np.isfinite(res) or np.isnan(explored.lo95):
        return
    need = (float(spec["delta"]) if spec["test"] == "equivalence" else 0.0) + (explored.hi95 - explored.lo95) / 2
    result.resolution = res  # the deciding measurement's, known before the confirmation block
    margin = (res - need) / float(spec["delta"])
    if res < need:
        why = Reason(Rule.RESOLUTION, values=(res, need))
        result.preconditions[Step.RESOLUTION] = Check((why,), margin=margin)
        _void(result, why)
    else:
        result.preconditions.setdefault(Step.RESOLUTION, Check(margin=margin))


def p_contradiction(d: np.ndarray, spec: Mapping[str, Any]) -> float:
    """The p-value for *contradiction* of a part from its paired differences ``d: (n,)``: the
    one-sided paired t-test in the contradicting direction, doubled (the contradiction rules use
    two-sided 95% intervals), capped at 1, so that ``p < 0.05`` exactly when step 3 says
    *contradicted*. Difference: H0 ``mean(d) ≥ 0`` (``a`` not worse); equivalence, one-sided:
    H0 ``mean(d) ≤ δ``; two-sided: the smaller of H0 ``mean(d) ≤ δ`` and H0 ``mean(d) ≥ −δ``.
    NaN with fewer than two pairs; 0 or 1 with zero spread (the interval is a point).
    """
    x = np.asarray(d, dtype=float)
    if x.size < 2:
        return np.nan
    mean, se, dof = float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size)), x.size - 1
    if se == 0:
        return 0.0 if _test(x, spec)[0] == CONTRADICTED else 1.0
    delta = float(spec["delta"])
    if spec["test"] == "difference":
        one = sps.t.cdf(mean / se, dof)
    elif int(spec["sides"]) == 1:
        one = sps.t.sf((mean - delta) / se, dof)
    else:
        one = min(sps.t.sf((mean - delta) / se, dof), sps.t.cdf((mean + delta) / se, dof))
    return float(min(1.0, 2 * one))


def holm(p: Any) -> np.ndarray:
    """Holm's (1979, "A simple sequentially rejective multiple test procedure", Scand. J. Stat.
    6:65–70) step-down adjusted p-values, the same as statsmodels' ``multipletests(p,
    method="holm")`` (not installed here): sorted ascending, ``p_(i) · (m − i + 1)``, running
    maximum, capped at 1. NaN counts as 1. ``p: (m,)`` → ``(m,)`` in the input order."""
    x = np.nan_to_num(np.asarray(p, dtype=float), nan=1.0)
    order = np.argsort(x, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(x[order] * (x.size - np.arange(x.size))))
    out = np.empty_like(x)
    out[order] = adjusted
    return out


def adjust(results: list[PartResult]) -> None:
    """Fill ``p_holm`` of one claim's deciding parts (step 5), in place."""
    deciding = [r for r in results if r.spec["role"] == "deciding"]
    for r, q in zip(deciding, holm([r.p for r in deciding])):
        r.p_holm = float(q)


def combine(results: list[PartResult]) -> Combined:
    """A claim's verdict from its deciding parts (module docstring, step 5) with the counts it
    rests on (:class:`analysis.decision.Combined`; :func:`analysis.render.combined` words why).
    A contradicted part whose ``p_holm`` (:func:`adjust`) is not below α counts as inconclusive;
    one never adjusted (NaN) counts as it stands."""
    deciding = [r for r in results if r.spec["role"] == "deciding"]
    if not deciding:
        return Combined(INCONCLUSIVE)
    removed = [r for r in deciding if r.verdict == CONTRADICTED and r.p_holm >= ALPHA]
    verdicts = [INCONCLUSIVE if any(r is x for x in removed) else r.verdict for r in deciding]
    counts = tuple((v, verdicts.count(v)) for v in (CONTRADICTED, SUPPORTED, INCONCLUSIVE) if verdicts.count(v))
    verdict = (CONTRADICTED if CONTRADICTED in verdicts else SUPPORTED if all(v == SUPPORTED for v in verdicts)
               else INCONCLUSIVE)
    return Combined(verdict, counts, len(deciding), len(removed))
