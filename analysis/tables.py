"""Tables from a runs DataFrame (:func:`analysis.load.load_runs`), paper.md §13, and their writer.

Tables keep numbers as numbers (``X``, ``X_lo``, ``X_hi`` columns for an estimate and its 95%
interval); :func:`write_table` writes them to CSV as they are and to Markdown with each such
triple shown as ``X [lo, hi] n=N`` under a caption that names the interval's method. Intervals are
Student-t over seeds (paper.md §13: a percentile bootstrap under-covers with 5 seeds), on the log
scale for test errors, except where a column's name says ``boot``; fewer than 3 seeds give none. Rows sort naturally by their keys (``k=2 < k=16``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from analysis import curves, stats
from analysis.curves import SIZE

def symmetry_table(df: pd.DataFrame, by: Sequence[str] = ("variant",)) -> pd.DataFrame:
    """Mean measured equivariance errors (every ``symmetry/*`` column) per ``by`` group over the
    FINISHED, non-diverged runs (claims C1–C7; errors are relative, ~1e-7 in fp32 means exact),
    plus ``n_params`` (median over the group's runs; it depends on the task's ``d``) and
    ``n_runs``. Rows in natural order of ``by``.

    Raises:
        ValueError: no ``symmetry/*`` column.
    """
    cols = sorted(c for c in df.columns if c.startswith("symmetry/"))
    if not cols:
        raise ValueError("no symmetry/* columns in the runs table")
    ok = stats.finished(df)
    ok = ok[~stats.diverged(ok)]
    grouped = ok.groupby(list(by), dropna=False)
    table = grouped[cols].mean()
    if "n_params" in ok:
        table.insert(0, "n_params", grouped["n_params"].median())
    table.insert(0, "n_runs", grouped.size())
    return curves.sort_rows(table.reset_index(), by)


def _name(size: float) -> str:
    return f"error_n{int(size) if float(size).is_integer() else size}"


def _wide_errors(ok: pd.DataFrame, x: str) -> pd.DataFrame:
    """``error_n<N>`` with ``_lo``/``_hi`` and ``_n`` (geometric mean and t-interval of log error
    over seeds, :data:`analysis.stats.LOG_T_INTERVAL`) per task × arm, N ascending."""
    per_size = curves.t_summary(ok, "error", ["task", "arm", x], log=True)
    parts = []
    for size in sorted(per_size[x].unique()):
        grp = per_size[per_size[x] == size].set_index(["task", "arm"])
        name = _name(size)
        parts.append(grp[["error", "error_lo", "error_hi", "error_n"]].rename(
            columns={"error": name, "error_lo": f"{name}_lo", "error_hi": f"{name}_hi",
                     "error_n": f"{name}_n"}))
    return pd.concat(parts, axis=1) if parts else pd.DataFrame()


def _reach(ok: pd.DataFrame, goals: float | Mapping[str, float], x: str, seed: int) -> pd.DataFrame:
    """``target`` and ``n_to_target_boot`` (+ ``_lo``/``_hi``, :func:`analysis.stats.samples_to_target`);
    no interval where some size has fewer than :data:`analysis.stats.MIN_SEEDS` runs."""
    key = ["task", "arm"]
    reach = stats.samples_to_target(ok, goals, x=x, by=key, seed=seed).set_index(key)
    reach.columns = [c.replace("n_to_target", "n_to_target_boot") for c in reach.columns]
    single = ok.groupby([*key, x], dropna=False).size().groupby(key, dropna=False).min() < stats.MIN_SEEDS
    reach.loc[single[single].index.intersection(reach.index),
              ["n_to_target_boot_lo", "n_to_target_boot_hi"]] = np.nan
    return reach


def sample_efficiency_table(df: pd.DataFrame, x: str = SIZE,
                            target: float | Mapping[str, float] | None = None,
                            target_fraction: float = 0.5, seed: int = 0) -> pd.DataFrame:
    """One row per task × arm (claims C9, C10, C12; paper.md §13; caption
    :data:`SAMPLE_EFFICIENCY_CAPTION`):

    ``task``, ``arm``, ``variant``, ``n_params`` (median), ``lr`` (chosen on validation at the
    largest ``x``), ``error_n<N>`` with ``_lo``/``_hi``/``_n`` (geometric mean test error over
    seeds and its 95% Student-t interval on the log scale, one per size ascending),
    ``auc_log_error`` and ``slope`` with ``_lo``/``_hi``/``_n`` (:func:`analysis.curves.per_seed`,
    mean and t-interval over seeds; none of these intervals with fewer than 3 seeds),
    ``target``, ``n_to_target_boot`` with ``_lo``/``_hi`` (bootstrap; ``inf`` = not reached),
    ``reference_error`` (the trivial predictor's), and the counts ``used``, ``failed``,
    ``killed``, ``running``, ``diverged``, ``blowup`` of the trials at the chosen lr.

    Args:
        df: runs (see :func:`analysis.curves.prepare`; raw runs are prepared here).
        target: error level for samples-to-target, or ``{task: level}``; ``None`` uses
            ``target_fraction`` × the task's reference error (:func:`analysis.stats.default_targets`).

    Raises:
        ValueError: no usable run has an error metric.
    """
    chosen = curves.prepare(df, x)
    ok = curves.usable(chosen)
    if ok.empty:
        raise ValueError("no FINISHED, non-diverged run has test/rel_mse or test/acc")
    key = ["task", "arm"]
    g = ok.groupby(key, dropna=False)
    base = pd.DataFrame({"variant": g["variant"].first() if "variant" in ok else g["arm"].first(),
                         "n_params": g["n_params"].median() if "n_params" in ok else np.nan,
                         "reference_error": g["reference_error"].mean()})
    if "lr_chosen" in ok:
        base.insert(2, "lr", ok.sort_values(x).groupby(key, dropna=False)["lr_chosen"].last())
    seeds = curves.per_seed(ok, x=x, by=key)
    summary = [curves.t_summary(seeds, v, key).set_index(key) for v in ("auc", "slope")]
    summary[0].columns = [c.replace("auc", "auc_log_error") for c in summary[0].columns]
    goals = (stats.default_targets(ok.assign(variant=ok["arm"]), target_fraction)
             if target is None else target)
    count = stats.counts(chosen, by=key).set_index(key)
    count.insert(0, "used", g.size())
    count["used"] = count["used"].fillna(0).astype(int)
    table = pd.concat([base, _wide_errors(ok, x), *summary, _reach(ok, goals, x, seed)], axis=1)
    table = table.join(count[["used", "failed", "killed", "running", "diverged", "blowup"]], how="outer")
    reference = table.pop("reference_error")
    table.insert(table.columns.get_loc("used"), "reference_error", reference)
    return curves.sort_rows(table.reset_index(), key)


def write_csv(df: pd.DataFrame, out: Path) -> Path:
    """Write ``df`` to ``<out>.csv``, numbers as they are (its Markdown twin, with its caption:
    :func:`analysis.render_tables.write_markdown`); returns the path."""
    csv = Path(out).with_suffix(".csv")
    csv.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(csv, index=False)
    return csv
