"""A runs table made ready for figures and tables (paper.md §13), and per-seed curve summaries.

Shared by :mod:`analysis.plots` and :mod:`analysis.tables`: the compared configuration of a run
is its ``arm`` (the variant plus every other swept axis except task, n_train, seed and lr; the
variant alone when there is no ``arm`` column); groups, colours, legends and table rows are per
arm and never pool two arms. Everything sorts naturally (``k=2 < k=4 < k=16``, numbers as
numbers; :data:`natural`). Only FINISHED, non-diverged runs with a finite value enter a mean,
a band or an interval (:func:`usable`); the others are counted (:func:`excluded`).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from natsort import natsort_keygen, natsorted, ns
from scipy.integrate import trapezoid

from analysis import stats

SIZE = "task.n_train"
# Axes that change what a run measures (T2's rotation mode, the optimiser of C5b): figures
# facet by them instead of colouring by them.
FACET_AXES = ("task.rotation", "train.optimizer")
BAND = "95% percentile bootstrap over seeds, plot only"
T_INTERVAL = "95% Student-t over seeds (n − 1 df)"

natural = natsort_keygen(alg=ns.FLOAT)
"""Sort key: digits inside strings compare as numbers (``"k=2" < "k=16"``, ``"1e-3" < "0.01"``);
no signs, so ``"x-2"`` is not negative."""


def ordered(values: Iterable) -> list:
    """The distinct non-missing ``values`` in natural order (:data:`natural`)."""
    return natsorted(pd.unique(pd.Series(list(values)).dropna()), alg=ns.FLOAT)


def sort_rows(df: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """``df`` sorted by the ``by`` columns present, each in natural order; index reset."""
    by = [c for c in by if c in df]
    if not by:
        return df.reset_index(drop=True)
    return df.sort_values(by, key=lambda s: s.map(natural), kind="stable", ignore_index=True)


def prepare(df: pd.DataFrame, x: str = SIZE) -> pd.DataFrame:
    """A copy ready for figures and tables: ``error`` columns (:func:`analysis.stats.add_error`)
    if missing, ``arm`` (falls back to ``variant``) as text, and the rows at the learning rate
    chosen on validation per task × arm × ``x`` (:func:`analysis.stats.select_lr`) if no
    ``lr_chosen`` column says that was done already.

    Raises:
        ValueError: the table has neither ``arm`` nor ``variant``.
    """
    out = df if "error_name" in df else stats.add_error(df)  # add_error names its metric
    if "arm" not in out and "variant" not in out:
        raise ValueError("the runs table needs an 'arm' or a 'variant' column")
    out = out.assign(arm=(out["arm"] if "arm" in out else out["variant"]).astype(str))
    if "lr_chosen" not in out and "train.lr" in out:
        out = stats.select_lr(out, group=[c for c in ("task", "arm", x) if c in out])
    return out.reset_index(drop=True)


def usable(df: pd.DataFrame, value: str = "error") -> pd.DataFrame:
    """FINISHED, non-diverged rows with a finite ``value``: the runs a mean or interval uses."""
    ok = stats.finished(df, value)
    return ok[~stats.diverged(ok)]


def excluded(df: pd.DataFrame, value: str = "error") -> dict[str, int]:
    """Counts of ``df``'s runs that no statistic uses: ``failed``, ``killed``, ``running``,
    ``diverged`` (FINISHED), ``no value`` (FINISHED, not diverged, ``value`` not finite), and
    ``used`` (:func:`usable`)."""
    c = stats.counts(df, by=()).iloc[0] if len(df) else pd.Series(0, index=["finished"])
    used = len(usable(df, value)) if value in df else 0
    out = {k: int(c.get(k, 0)) for k in ("failed", "killed", "running", "diverged")}
    out["no value"] = int(c.get("finished", 0)) - out["diverged"] - used
    return {"used": used, **out}


def describe_excluded(df: pd.DataFrame, value: str = "error") -> str:
    """``"5 runs used"`` or ``"4 runs used; 1 failed, 2 diverged"`` (:func:`excluded`)."""
    c = excluded(df, value)
    rest = [f"{n} {k}" for k, n in c.items() if k != "used" and n]
    return f"{c['used']} runs used" + (f"; {', '.join(rest)}" if rest else "")


def facet_axes(df: pd.DataFrame, axes: Sequence[str] | None = None) -> list[str]:
    """The columns of ``axes`` (default: every column) among :data:`FACET_AXES` that take more
    than one value in ``df``."""
    pool = FACET_AXES if axes is None else [a for a in axes if a in FACET_AXES]
    return [a for a in pool if a in df and df[a].nunique() > 1]


def short(axis: str) -> str:
    """``"task.rotation"`` → ``"rotation"`` (the name an arm label uses)."""
    return axis.rsplit(".", 1)[-1]


def strip_arm(arm: str, axes: Sequence[str]) -> str:
    """``arm`` without its ``name=value`` parts for the faceted ``axes`` (the facet says them):
    ``"softmax · rotation=eval · optimizer=sgd"`` → ``"softmax"``."""
    names = {short(a) for a in axes}
    parts = [p for p in str(arm).split(" · ") if p.split("=", 1)[0] not in names]
    return " · ".join(parts) or str(arm)


def facet_label(row: pd.Series, axes: Sequence[str]) -> str:
    """``"teacher · rotation=eval · optimizer=sgd"`` for a run's task and faceted axes."""
    return " · ".join([str(row["task"]), *[f"{short(a)}={row[a]}" for a in axes]])


def per_seed(df: pd.DataFrame, x: str = SIZE, by: Sequence[str] = ("task", "arm"),
             floor: float = 1e-6) -> pd.DataFrame:
    """Per ``by`` group and seed, the sample-efficiency curve summarised (paper.md §13 C9):

    * ``auc``: the trapezoid area under ``log error`` against ``log x`` divided by the log-width
      ``log x_max − log x_min`` (the curve's mean log error over the range; lower is better);
    * ``slope``: the OLS slope of ``log error`` on ``log x``.

    Seeds are paired across ``x`` (the same seed at every size): a seed enters only if it has a
    usable run (:func:`usable`) at every size of its task, so every area spans the same range.
    Errors below ``floor`` (a perfect accuracy gives 0) count as ``floor`` so that the log is
    defined. Both are NaN with fewer than two sizes.

    Returns:
        columns ``*by``, ``seed``, ``n_sizes``, ``auc``, ``slope``.
    """
    ok = usable(df)
    rows = []
    for task, here in ok.groupby("task", dropna=False):
        sizes = np.array(sorted(here[x].unique()), dtype=float)
        for key, grp in here.groupby(list(by) + ["seed"], dropna=False):
            curve = grp.groupby(x, dropna=False)["error"].mean().reindex(sizes)
            row = {**dict(zip([*by, "seed"], key)), "n_sizes": len(sizes), "auc": np.nan, "slope": np.nan}
            if len(sizes) >= 2 and curve.notna().all():
                logx, logy = np.log(sizes), np.log(np.maximum(curve.to_numpy(float), floor))
                row["auc"] = float(trapezoid(logy, logx) / (logx[-1] - logx[0]))
                row["slope"] = float(np.polyfit(logx, logy, 1)[0])
            rows.append(row)
    return pd.DataFrame(rows, columns=[*by, "seed", "n_sizes", "auc", "slope"])


def t_summary(df: pd.DataFrame, value: str, by: Sequence[str], log: bool = False) -> pd.DataFrame:
    """Per ``by`` group: ``<value>``, ``<value>_lo``, ``<value>_hi`` (:func:`analysis.stats.seed_interval`:
    the mean and :data:`T_INTERVAL`, or with ``log`` the geometric mean and
    :data:`analysis.stats.LOG_T_INTERVAL`; NaN bounds with fewer than
    :data:`analysis.stats.MIN_SEEDS` seeds) and ``<value>_n`` (how many finite values entered)."""
    rows = []
    for key, grp in df.groupby(list(by), sort=False, dropna=False):
        mean, lo, hi, n = stats.seed_interval(pd.to_numeric(grp[value], errors="coerce"), log=log)
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), value: mean, f"{value}_lo": lo, f"{value}_hi": hi,
                     f"{value}_n": n})
    return pd.DataFrame(rows, columns=[*by, value, f"{value}_lo", f"{value}_hi", f"{value}_n"])
