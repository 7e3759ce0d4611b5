"""Statistics on a runs table (one row per trial, :func:`analysis.load.load_runs`), paper.md §13.

Verdicts use Student-t intervals and TOST (:func:`t_interval`, :func:`tost`, scipy): with 5
seeds a percentile bootstrap under-covers, so the bootstrap below serves plot bands only.

Every bootstrap interval is a percentile bootstrap over seeds (trials) with an explicit
``numpy.random.Generator(seed)``, so each result is a deterministic function of its inputs and
``seed``. Quantiles are taken conservatively (``lower``/``higher`` order statistics), so
identical values give a zero-width interval and infinite values (a target never reached) stay
infinite. Only FINISHED runs with a finite value enter a statistic; FAILED, KILLED and diverged
trials are counted by :func:`counts`, never silently dropped from the report.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

B = 2000  # bootstrap resamples
LEVEL = 0.95
# Fewer seeds give no interval: a Student-t interval from 2 seeds has 1 degree of freedom
# (±12.7 standard errors) and a bootstrap of 2 values is their range
MIN_SEEDS = 3
FLOOR = 1e-12  # an error of exactly 0 counts as this on the log scale
LOG_T_INTERVAL = "geometric mean over seeds with a 95% Student-t interval of log error (n − 1 df)"


def seed_interval(values: Sequence[float] | np.ndarray, log: bool = False,
                  level: float = LEVEL) -> tuple[float, float, float, int]:
    """``(estimate, lo, hi, n)`` of per-seed ``values`` (non-finite ones dropped) for tables.

    ``log=False``: the mean and its Student-t interval (:func:`t_interval`). ``log=True``, for a
    non-negative error: the geometric mean and the Student-t interval of the mean log error,
    exponentiated (:data:`LOG_T_INTERVAL`), so the bounds stay positive and a spread over
    decades is not summarised by a symmetric interval reaching below 0; errors below
    :data:`FLOOR` count as :data:`FLOOR`. With fewer than :data:`MIN_SEEDS` values the bounds
    are NaN: no interval, the estimate and ``n`` say what there is.
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if log:
        x = np.log(np.maximum(x, FLOOR))
    mean, lo, hi = t_interval(x, level)
    if x.size < MIN_SEEDS:
        lo = hi = np.nan
    if log and x.size:
        mean, lo, hi = np.exp(mean), np.exp(lo), np.exp(hi)
    return float(mean), float(lo), float(hi), int(x.size)


def t_interval(values: Sequence[float] | np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """Mean of ``values`` (e.g. per-seed paired differences) and its two-sided Student-t interval
    at ``level`` with n − 1 degrees of freedom (``scipy.stats.ttest_1samp``), paper.md §13.

    NaNs are dropped. Returns ``(mean, lo, hi)``; with fewer than two values the bounds are NaN
    (no interval from one seed); with zero spread the interval is ``[mean, mean]``.
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return np.nan, np.nan, np.nan
    mean = float(x.mean())
    if x.size < 2:
        return mean, np.nan, np.nan
    if np.ptp(x) == 0:
        return mean, mean, mean
    ci = sps.ttest_1samp(x, 0.0).confidence_interval(confidence_level=level)
    return mean, float(ci.low), float(ci.high)


def tost(values: Sequence[float] | np.ndarray, delta: float, alpha: float = 0.05) -> dict[str, float | bool]:
    """Two one-sided t-tests (TOST) that the mean of ``values`` lies inside ``(−delta, delta)``
    (paper.md §13 equivalence): H0 mean ≤ −δ and H0 mean ≥ δ, each a one-sided
    ``scipy.stats.ttest_1samp`` at ``alpha``. Equivalent ⇔ both rejected ⇔ the (1 − 2α) t-interval
    lies inside ±δ.

    Returns ``p`` (the larger one-sided p-value), ``equivalent`` (``p < alpha``), and ``lo``,
    ``hi`` of the (1 − 2α) interval. With fewer than two values: ``p`` NaN, not equivalent; with
    zero spread: equivalent iff ``|mean| < delta``.

    Raises:
        ValueError: ``delta`` not > 0.
    """
    if not delta > 0:
        raise ValueError(f"the equivalence margin must be > 0, got {delta}")
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    mean, lo, hi = t_interval(x, 1 - 2 * alpha)
    if x.size < 2:
        return {"p": np.nan, "equivalent": False, "lo": lo, "hi": hi}
    if np.ptp(x) == 0:
        inside = abs(mean) < delta
        return {"p": 0.0 if inside else 1.0, "equivalent": inside, "lo": lo, "hi": hi}
    p_low = sps.ttest_1samp(x, -delta, alternative="greater").pvalue
    p_high = sps.ttest_1samp(x, delta, alternative="less").pvalue
    p = float(max(p_low, p_high))
    return {"p": p, "equivalent": p < alpha, "lo": lo, "hi": hi}


def token_reference(majority_acc: pd.Series, uniform_acc: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """A token task's trivial reference per run: the better of the majority class
    (``1 − majority_acc``) and uniform mixing (``1 − uniform_acc``, the most frequent input
    token; NaN where not logged), as ``(error, name)``."""
    majority = 1.0 - pd.to_numeric(majority_acc, errors="coerce")
    mixing = 1.0 - pd.to_numeric(uniform_acc, errors="coerce")
    better = mixing < majority
    return majority.where(~better, mixing), np.where(better, "uniform mixing", "majority class")


def add_error(df: pd.DataFrame) -> pd.DataFrame:
    """A copy with ``error``, ``error_name`` and ``reference_error`` added.

    ``error`` is ``test/rel_mse`` (regression tasks) or ``1 − test/acc`` (token tasks);
    ``reference_error`` is the trivial predictor's error on the same test set: the uniform-mixing
    (token-mean) predictor's ``test/uniform_rel_mse``; for token tasks the better of the
    majority class ``1 − test/majority_acc`` and uniform mixing ``1 − test/uniform_acc`` (the
    most frequent input token); NaN where the run did not log one. ``reference_name`` names it.
    ``task`` falls back to ``task.name`` for runs without a task tag.
    """
    out = df.copy()
    nan = pd.Series(np.nan, index=out.index)
    rel, acc = out.get("test/rel_mse", nan), out.get("test/acc", nan)
    regression = rel.notna()
    out["error"] = rel.where(regression, 1.0 - acc)
    out["error_name"] = np.where(regression, "test relative MSE", "test error (1 − accuracy)")
    token_error, token_name = token_reference(out.get("test/majority_acc", nan), out.get("test/uniform_acc", nan))
    out["reference_error"] = out.get("test/uniform_rel_mse", nan).where(regression, token_error)
    out["reference_name"] = np.where(regression, "uniform mixing", token_name)
    fallback = out["task.name"] if "task.name" in out else "task"
    out["task"] = out["task"].fillna(fallback) if "task" in out else fallback
    # always from the runs themselves (a bundle regenerates offline; an MLflow tag is for the UI)
    arm = "arm" if "arm" in out else "variant"
    out[BLOWUP] = blowup(out, [arm if c == "arm" else c for c in BLOWUP_GROUP])
    return out


def diverged(df: pd.DataFrame) -> pd.Series:
    """Boolean series: the run's ``diverged`` tag is true (``True``/``"true"``); False if absent."""
    if "diverged" not in df:
        return pd.Series(False, index=df.index)
    return df["diverged"].astype(str).str.lower().eq("true")


def is_blowup(df: pd.DataFrame) -> pd.Series:
    """Boolean series: the run's ``blowup`` column or tag is true (:func:`blowup`, added by
    :func:`add_error`); False if absent."""
    if BLOWUP not in df:
        return pd.Series(False, index=df.index)
    return df[BLOWUP].astype(str).str.lower().eq("true")


def finished(df: pd.DataFrame, value: str | None = None) -> pd.DataFrame:
    """FINISHED rows (all rows if there is no ``status`` column), with a finite ``value``."""
    out = df[df["status"] == "FINISHED"] if "status" in df else df
    if value is not None:
        out = out[np.isfinite(pd.to_numeric(out[value], errors="coerce"))]
    return out


def counts(df: pd.DataFrame, by: Sequence[str] = ("task", "variant")) -> pd.DataFrame:
    """Trials per group by outcome: ``total``, ``finished``, ``failed``, ``killed``, ``running``,
    ``diverged`` (FINISHED runs whose training loss became non-finite; their metrics are
    from the last finite state) and ``blowup`` (FINISHED runs whose validation error blew up,
    :func:`blowup`; they stay in every statistic and are counted here). Groups sort by their
    values (numbers as numbers)."""
    status = df["status"].astype(str)
    flags = pd.DataFrame({"total": 1, "finished": status.eq("FINISHED"), "failed": status.eq("FAILED"),
                          "killed": status.eq("KILLED"), "running": status.eq("RUNNING"),
                          "diverged": status.eq("FINISHED") & diverged(df),
                          "blowup": status.eq("FINISHED") & is_blowup(df)}, index=df.index)
    flags = flags.astype(int)
    if not by:
        return flags.sum().to_frame().T.reset_index(drop=True)
    return flags.groupby([df[c] for c in by], dropna=False).sum().reset_index()


def select_lr(df: pd.DataFrame, group: Sequence[str] = ("task", "variant", "task.n_train"),
              lr: str = "train.lr", criterion: str = "val/best_error",
              tie_break: str = "val/best_loss", exclude_blowup: bool = False) -> pd.DataFrame:
    """The rows at the learning rate chosen per ``group`` on validation (paper.md §13 "Selection").

    Rule: per group and learning rate, the mean over seeds of ``criterion`` (the task's error
    metric on validation: relative MSE, or 1 − accuracy) over FINISHED runs, ties broken by the
    mean ``tie_break`` (validation loss), then by the smaller lr. An lr with any diverged FINISHED seed (or a
    non-finite criterion) is not eligible (paper.md §13 *diverged*); with ``exclude_blowup``, nor is
    an lr with a blown-up seed (the ``blowup`` column, :func:`is_blowup`; paper.md §13 "Blown-up
    runs", for a selection on the exploratory seeds). Test metrics are never looked at.
    All rows of the chosen lr are returned (FAILED and diverged ones included, so that
    :func:`counts` still sees them), with columns ``lr_chosen``, ``lr_grid`` (the sorted tried lrs,
    as a tuple), ``lr_ties`` (the eligible lrs whose criterion equals the chosen one's, which the
    tie-break decided between) and ``lr_eligible`` (how many lrs were eligible). A group with no eligible lr keeps
    all its rows with ``lr_chosen = NaN``. Without an ``lr`` column, or with one lr, nothing is
    dropped. Runs logged before ``criterion`` existed fall back to ``tie_break``.

    Raises:
        KeyError: a ``group`` column is missing while several lrs exist.
    """
    out = df.copy()
    if criterion not in out:
        criterion = tie_break
    if criterion not in out:  # no run logged either (all diverged before their first evaluation)
        out[criterion] = np.nan
    if lr not in out:
        out["lr_chosen"], out["lr_grid"], out["lr_ties"], out["lr_eligible"] = np.nan, [()] * len(out), [()] * len(out), 0
        return out
    group = list(group)
    done = out["status"] == "FINISHED"  # FAILED/KILLED runs are counted, not judged here
    runs = out[done].assign(_ok=~diverged(out[done])
                            & np.isfinite(pd.to_numeric(out[done][criterion], errors="coerce")))
    if exclude_blowup:
        runs["_ok"] &= ~is_blowup(runs)
    runs["_tie"] = pd.to_numeric(runs[tie_break], errors="coerce") if tie_break in runs else 0.0
    per_lr = runs.groupby([*group, lr], dropna=False).agg(
        ok=("_ok", "all"), crit=(criterion, "mean"), tie=("_tie", "mean")).reset_index()
    # per group, over its few (lr, ok, crit, tie) rows: one pass in Python, then one column per
    # field mapped onto every run (a pandas merge per field cost most of a part's decision)
    summary = _lr_summary(per_lr, group, lr)
    keys = _keys(out, group)
    for i, name in enumerate(("lr_chosen", "lr_grid", "lr_ties", "lr_eligible")):
        missing = 0 if name == "lr_eligible" else np.nan
        out[name] = [summary[k][i] if k in summary else missing for k in keys]
    out["lr_chosen"] = out["lr_chosen"].astype(float)
    out["lr_eligible"] = out["lr_eligible"].astype(int)
    keep = out["lr_chosen"].isna() | np.isclose(pd.to_numeric(out[lr], errors="coerce"), out["lr_chosen"])
    return out[keep.to_numpy()].reset_index(drop=True)


def _keys(df: pd.DataFrame, group: list[str]) -> list[tuple]:
    """Each row's group key, a missing value as None (so that missing keys match, as in a merge)."""
    cols = [[None if pd.isna(v) else v for v in df[c].tolist()] for c in group]
    return list(zip(*cols)) if cols else [()] * len(df)


def _nan_last(x: float) -> tuple[bool, float]:
    return (True, 0.0) if pd.isna(x) else (False, float(x))


def _lr_summary(per_lr: pd.DataFrame, group: list[str], lr: str) -> dict[tuple, tuple]:
    """``{group key: (chosen lr or NaN, the sorted lr grid, the tied eligible lrs or NaN, how
    many lrs are eligible)}`` from the per-(group, lr) means: the lowest mean criterion, then the
    lowest mean tie-break, then the smaller lr (NaN last) among the eligible lrs; ties: the
    eligible lrs whose criterion is the chosen one's within 1e-12."""
    rows: dict[tuple, list] = {}
    for key, x, ok, crit, tie in zip(_keys(per_lr, group), per_lr[lr].tolist(), per_lr["ok"].tolist(),
                                     per_lr["crit"].tolist(), per_lr["tie"].tolist()):
        rows.setdefault(key, []).append((x, bool(ok), crit, tie))
    out = {}
    for key, lrs in rows.items():
        grid = tuple(sorted(x for x, *_ in lrs))
        eligible = [r for r in lrs if r[1]]
        if not eligible:
            out[key] = (np.nan, grid, np.nan, 0)
            continue
        best = min(eligible, key=lambda r: (_nan_last(r[2]), _nan_last(r[3]), _nan_last(r[0])))
        ties = tuple(sorted(x for x, _, crit, _ in eligible if np.isclose(crit, best[2], rtol=0.0, atol=1e-12)))
        out[key] = (best[0], grid, ties, len(eligible))
    return out


def _interval(samples: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Conservative percentile interval of bootstrap ``samples``; NaNs dropped; NaN if empty."""
    s = np.asarray(samples, dtype=float)
    s = s[~np.isnan(s)]
    if s.size == 0:
        return np.nan, np.nan
    a = (1 - level) / 2
    return float(np.quantile(s, a, method="lower")), float(np.quantile(s, 1 - a, method="higher"))


def bootstrap_means(values: np.ndarray, rng: np.random.Generator, n_resamples: int = B) -> np.ndarray:
    """``(n_resamples,)`` means of ``values`` resampled with replacement (all NaN if empty)."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return np.full(n_resamples, np.nan)
    idx = rng.integers(0, values.size, (n_resamples, values.size))
    return values[idx].mean(axis=1)


def mean_ci(df: pd.DataFrame, by: Sequence[str], value: str = "error", seed: int = 0,
            n_resamples: int = B, level: float = LEVEL) -> pd.DataFrame:
    """Mean of ``value`` over the FINISHED runs (seeds) of each ``by`` group, with a percentile
    bootstrap interval of the mean (``level``, default 95%).

    Returns columns ``*by``, ``n_runs``, ``mean``, ``lo``, ``hi``, sorted by ``by`` (numbers as
    numbers). With ``n_runs = 1`` the interval is ``[mean, mean]``: read it with ``n_runs``.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for key, grp in finished(df, value).groupby(list(by), sort=True, dropna=False):
        x = grp[value].to_numpy(float)
        lo, hi = _interval(bootstrap_means(x, rng, n_resamples), level)
        rows.append({**dict(zip(by, key)), "n_runs": len(x), "mean": x.mean(), "lo": lo, "hi": hi})
    return pd.DataFrame(rows, columns=[*by, "n_runs", "mean", "lo", "hi"])


def paired_difference(df: pd.DataFrame, value: str, a: str, b: str,
                      pair_on: Sequence[str] = ("task", "task.n_train", "seed"),
                      column: str = "variant", by: Sequence[str] = (), seed: int = 0,
                      n_resamples: int = B, level: float = LEVEL) -> pd.DataFrame:
    """Paired differences ``value[a] − value[b]`` over runs matched on ``pair_on`` (paper.md §13:
    the same seeds for every variant), pooled within each ``by`` group (``()``: one row).

    Returns columns ``*by``, ``a``, ``b``, ``n_pairs``, ``mean``, ``lo``, ``hi`` (percentile
    bootstrap of the mean difference over pairs) and ``excludes_zero`` (see :func:`excludes_zero`).
    Only FINISHED runs with a finite value pair up; unmatched runs are left out (``n_pairs``).

    Raises:
        ValueError: a pair key matches more than one run of ``a`` or ``b`` (e.g. several
            learning rates: apply :func:`select_lr` first).
    """
    keys = list(dict.fromkeys([*by, *pair_on]))
    ok = finished(df, value)
    sides = []
    for name in (a, b):
        side = ok[ok[column] == name][keys + [value]]
        if side.duplicated(keys).any():
            raise ValueError(f"{column}={name!r} has several runs per {keys}; select_lr first")
        sides.append(side)
    pairs = sides[0].merge(sides[1], on=keys, suffixes=("_a", "_b"))
    pairs["diff"] = pairs[f"{value}_a"] - pairs[f"{value}_b"]
    rng = np.random.default_rng(seed)
    groups = pairs.groupby(list(by), sort=True, dropna=False) if by else [((), pairs)]
    rows = []
    for key, grp in groups:
        d = grp["diff"].to_numpy(float)
        lo, hi = _interval(bootstrap_means(d, rng, n_resamples), level)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), "a": a, "b": b, "n_pairs": len(d),
                     "mean": d.mean() if len(d) else np.nan, "lo": lo, "hi": hi})
    out = pd.DataFrame(rows, columns=[*by, "a", "b", "n_pairs", "mean", "lo", "hi"])
    out["excludes_zero"] = excludes_zero(out)
    return out


def excludes_zero(result: pd.DataFrame | Mapping[str, float]) -> pd.Series | bool:
    """Verdict rule: the interval ``[lo, hi]`` lies strictly on one side of 0 (``lo > 0`` or
    ``hi < 0``). Accepts a table with ``lo``/``hi`` columns (→ boolean Series) or one row."""
    return (result["lo"] > 0) | (result["hi"] < 0)


def _curves(grp: pd.DataFrame, x: str, y: str, rng: np.random.Generator,
            n_resamples: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sizes ``(k,)`` ascending, the mean curve ``(k,)`` and bootstrap curves ``(n_resamples, k)``
    (seeds resampled with replacement independently at each size: the trials at different sizes
    are separate runs)."""
    levels = sorted(grp[x].unique())
    mean = np.array([grp.loc[grp[x] == v, y].mean() for v in levels])
    boot = np.stack([bootstrap_means(grp.loc[grp[x] == v, y].to_numpy(float), rng, n_resamples)
                     for v in levels], axis=1)
    return np.asarray(levels, dtype=float), mean, boot


def _slopes(logx: np.ndarray, curves: np.ndarray) -> np.ndarray:
    """OLS slopes of ``log curves`` (``(m, k)``) on ``logx`` (``(k,)``); NaN where a point ≤ 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logy = np.where(curves > 0, np.log(np.where(curves > 0, curves, 1.0)), np.nan)
    dx = logx - logx.mean()
    return ((logy - logy.mean(axis=1, keepdims=True)) * dx).sum(axis=1) / (dx**2).sum()


def loglog_slope(df: pd.DataFrame, x: str = "task.n_train", y: str = "error",
                 by: Sequence[str] = ("task", "variant"), seed: int = 0,
                 n_resamples: int = B, level: float = LEVEL) -> pd.DataFrame:
    """Slope of ``log mean(y)`` against ``log x``: OLS through the per-``x`` means over seeds
    (FINISHED runs), one fit per ``by`` group, with a percentile bootstrap interval (seeds
    resampled at each ``x``; a resample whose mean at some ``x`` is ≤ 0 is left out).

    Returns ``*by``, ``n_sizes`` (distinct ``x`` values), ``slope``, ``slope_lo``, ``slope_hi``.
    ``slope`` is NaN with fewer than two sizes or a mean error ≤ 0 (log undefined).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for key, grp in finished(df, y).groupby(list(by), sort=True, dropna=False):
        sizes, mean, boot = _curves(grp, x, y, rng, n_resamples)
        row = {**dict(zip(by, key)), "n_sizes": len(sizes), "slope": np.nan,
               "slope_lo": np.nan, "slope_hi": np.nan}
        if len(sizes) >= 2:
            logx = np.log(sizes)
            row["slope"] = float(_slopes(logx, mean[None])[0])
            row["slope_lo"], row["slope_hi"] = _interval(_slopes(logx, boot), level)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*by, "n_sizes", "slope", "slope_lo", "slope_hi"])


def crossing(sizes: np.ndarray, curves: np.ndarray, target: float) -> np.ndarray:
    """Where each curve (``(m, k)`` errors at ascending ``sizes``) first reaches ``≤ target``.

    Between the last size above the target and the first at or below it, ``log size`` is
    interpolated linearly in ``log error`` (in ``error`` when that point's error is 0). A curve
    already at or below the target at the smallest size gives that size (an upper bound); one
    that never reaches it gives ``inf``; a NaN curve gives NaN. Returns ``(m,)``.
    """
    curves = np.atleast_2d(curves)
    reached = curves <= target
    first = reached.argmax(axis=1)
    rows = np.arange(len(curves))
    prev = np.maximum(first - 1, 0)
    x0, x1 = np.log(sizes[prev]), np.log(sizes[first])
    y0, y1 = curves[rows, prev], curves[rows, first]
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = (y1 > 0) & (y0 > 0)
        t = np.where(logs, (np.log(target) - np.log(y0)) / (np.log(y1) - np.log(y0)),
                     (target - y0) / (y1 - y0))
        out = np.exp(x0 + np.clip(np.nan_to_num(t), 0, 1) * (x1 - x0))
    out = np.where(first == 0, sizes[0], out)
    out = np.where(reached.any(axis=1), out, np.inf)
    return np.where(np.isnan(curves).any(axis=1), np.nan, out)


def samples_to_target(df: pd.DataFrame, target: float | Mapping[str, float], x: str = "task.n_train",
                      y: str = "error", by: Sequence[str] = ("task", "variant"), seed: int = 0,
                      n_resamples: int = B, level: float = LEVEL) -> pd.DataFrame:
    """The smallest training-set size at which the mean error over seeds reaches ``target``
    (paper.md §13 "samples to reach X%"), by :func:`crossing` on the per-``x`` mean curve of
    FINISHED runs, with a percentile bootstrap interval (seeds resampled at each size).

    Args:
        target: an error level (> 0), or ``{task: level}`` (``by`` must contain ``task``).

    Returns:
        ``*by``, ``target``, ``n_to_target`` (``inf`` if never reached), ``n_to_target_lo``,
        ``n_to_target_hi``.

    Raises:
        ValueError: a target ≤ 0. KeyError: a task missing from a ``target`` mapping.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for key, grp in finished(df, y).groupby(list(by), sort=True, dropna=False):
        labels = dict(zip(by, key))
        goal = float(target[labels["task"]] if isinstance(target, Mapping) else target)
        if not goal > 0:
            raise ValueError(f"target must be > 0, got {goal} for {labels}")
        sizes, mean, boot = _curves(grp, x, y, rng, n_resamples)
        lo, hi = _interval(crossing(sizes, boot, goal), level)
        rows.append({**labels, "target": goal, "n_to_target": float(crossing(sizes, mean, goal)[0]),
                     "n_to_target_lo": lo, "n_to_target_hi": hi})
    return pd.DataFrame(rows, columns=[*by, "target", "n_to_target", "n_to_target_lo", "n_to_target_hi"])


def default_targets(df: pd.DataFrame, fraction: float = 0.5) -> dict[str, float]:
    """Per task, ``fraction`` × the trivial reference predictor's mean error (``reference_error``
    of :func:`add_error`), e.g. half the uniform-mixing relative MSE; tasks without a reference
    get ``fraction`` × the largest mean error measured on that task."""
    ok = finished(df, "error")
    targets = {}
    for task, grp in ok.groupby("task", dropna=False):
        ref = grp["reference_error"].mean() if "reference_error" in grp else np.nan
        base = ref if np.isfinite(ref) and ref > 0 else grp.groupby("variant", dropna=False)["error"].mean().max()
        targets[task] = fraction * float(base)
    return targets


# ----------------------------------------------------------------------------- blown-up runs
BLOWUP = "blowup"  # a run's tag/column: its validation error blew up (not the claim label *unstable*)
FAR_DECADES = 1.0  # "far above": at least this many decades (log10) above the other seeds' median …
FAR_MADS = 5.0  # … and at least this many robust SDs (1.4826 × MAD of their log10 errors) …
FAR_REFERENCE = 0.1  # … and within a decade of learning nothing (≥ this × the nothing-learned error)
ABOVE_RATIO = 2.0  # a run above the nothing-learned reference blew up if ≥ this × its other seeds' median
MIN_OTHERS = 2  # other seeds needed to judge "far above" (a median and a MAD of fewer says nothing)
BLOWUP_GROUP = ("task", "arm", "task.n_train", "train.lr", "train.max_steps", "task.readout")


def nothing_learned(df: pd.DataFrame) -> pd.Series:
    """Per run, the validation error of the task's *nothing learned* reference (paper.md §13
    "Blown-up runs"): for relative MSE the zero predictor (``val/zero_rel_mse``, exactly 1; the
    identity and uniform mixing are predictors that learned something, and the identity can
    be far worse than 0), for token tasks the worse of the majority class (``1 −
    val/majority_acc``) and uniform mixing (``1 − val/uniform_acc``). NaN where the run logged
    none."""
    nan = pd.Series(np.nan, index=df.index)
    num = lambda c: pd.to_numeric(df[c], errors="coerce") if c in df else nan  # noqa: E731
    regression = num("val/rel_mse").notna() | num("test/rel_mse").notna()
    token = pd.concat([1.0 - num("val/majority_acc"), 1.0 - num("val/uniform_acc")], axis=1).max(axis=1)
    return num("val/zero_rel_mse").fillna(1.0).where(regression, token)


def blowup(df: pd.DataFrame, group: Sequence[str] = BLOWUP_GROUP,
           criterion: str = "val/best_error") -> pd.Series:
    """Boolean series: the run *blew up* (paper.md §13 "Blown-up runs"): its validation error at
    its best checkpoint (``criterion``) is

    * above the task's nothing-learned reference (:func:`nothing_learned`) where its arm's other
      seeds are not (their median is below it) and at least :data:`ABOVE_RATIO` × their median
      (with fewer than :data:`MIN_OTHERS` others, by the reference alone): an arm above it on
      every seed learned nothing (the precondition *not learned*), and one hovering at it
      (0.998 and 1.002) did not blow up; or
    * far above its arm's other seeds: on the log10 scale at least :data:`FAR_DECADES` decade and
      :data:`FAR_MADS` robust SDs (1.4826 × the median absolute deviation) above the median of
      the other FINISHED runs of its ``group`` (task, arm, n_train, lr, steps, readout: the same
      configuration on other seeds, every block of seeds pooled), judged only with ≥
      :data:`MIN_OTHERS` others, and at least :data:`FAR_REFERENCE` × the nothing-learned
      error (a seed at 1e-5 beside seeds at 1e-8 sits on another floor; it did not blow up).
      Errors below :data:`FLOOR` count as it.

    A diverged run (non-finite loss) is not a blow-up: it has its own tag. Group columns missing
    from ``df`` are left out; a run without ``criterion`` is False."""
    out = pd.Series(False, index=df.index)
    if df.empty or criterion not in df:
        return out
    value = pd.to_numeric(df[criterion], errors="coerce")
    done = (df["status"] == "FINISHED") if "status" in df else pd.Series(True, index=df.index)
    ok = done & ~diverged(df) & np.isfinite(value)
    reference = nothing_learned(df)
    above = ok & (value > reference).fillna(False)
    material = (value >= FAR_REFERENCE * reference).fillna(False)
    logs = np.log10(value.clip(lower=FLOOR)).where(ok)
    keys = [c for c in group if c in df]
    grouped = logs.groupby([df[c].astype(str) for c in keys], sort=False, dropna=False) if keys else [((), logs)]
    for _, g in grouped:
        x = g.dropna()
        for i, v in x.items():
            others = x.drop(index=i).to_numpy()
            if others.size < MIN_OTHERS:
                out[i] = bool(above[i])
                continue
            med = float(np.median(others))
            out[i] = (bool(above[i]) and med < np.log10(max(float(reference[i]), FLOOR))
                      and v - med >= np.log10(ABOVE_RATIO))
            mad = 1.4826 * float(np.median(np.abs(others - med)))
            out[i] = out[i] or (bool(material[i]) and v - med >= max(FAR_DECADES, FAR_MADS * mad))
    return out


def signed_rank_null(n: int) -> np.ndarray:
    """The exact null distribution of the Wilcoxon signed-rank statistic ``T⁺`` for ``n``
    untied, non-zero differences: ``(n(n+1)/2 + 1,)`` probabilities of T⁺ = 0, 1, …
    (each sign ± with probability ½, so the count of sign patterns with a given rank sum,
    over 2ⁿ; the distribution ``scipy.stats.wilcoxon(method="exact")`` uses)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for rank in range(1, n + 1):  # add rank with a + sign: shift the counts by rank
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return counts / 2.0 ** n


def hodges_lehmann(values: Sequence[float] | np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """The Hodges–Lehmann estimate of the centre of paired differences ``values: (n,)`` (the
    median of the Walsh averages ``(d_i + d_j)/2``, i ≤ j) and its exact distribution-free
    confidence interval at ``level`` (Hollander & Wolfe, *Nonparametric Statistical Methods*,
    §3.2): the Walsh averages of order ``C`` and ``M + 1 − C`` (``M = n(n+1)/2``), ``C`` the
    largest count with ``P(T⁺ < C) ≤ (1 − level)/2`` under the exact signed-rank null
    (:func:`signed_rank_null`). A robust paired statistic: a few blown-up seeds move it little.

    Returns ``(estimate, lo, hi)``; NaN with no value; ``(−inf, inf)`` bounds where ``n`` is too
    small for the level (n ≤ 5 at 95%: even the most extreme sign pattern has probability
    2/2ⁿ ≥ 5%)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return np.nan, np.nan, np.nan
    i, j = np.triu_indices(x.size)
    walsh = np.sort((x[i] + x[j]) / 2.0)
    estimate = float(np.median(walsh))
    cdf = np.cumsum(signed_rank_null(x.size))  # cdf[t] = P(T⁺ ≤ t)
    c = int(np.searchsorted(cdf, (1.0 - level) / 2.0, side="right"))  # P(T⁺ ≤ c − 1) ≤ α/2
    if c < 1:
        return estimate, -np.inf, np.inf
    return estimate, float(walsh[c - 1]), float(walsh[walsh.size - c])
