"""Tables from a runs DataFrame (:func:`analysis.load.load_runs`), paper.md §13, and their writer.

Tables keep numbers as numbers (``X``, ``X_lo``, ``X_hi`` columns for an estimate and its 95%
interval); :func:`write_table` writes them to CSV as they are and to Markdown with each such
triple shown as ``X [lo, hi]``. Rows sort by their keys, numeric parameters as numbers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from analysis import stats


def symmetry_table(df: pd.DataFrame, by: Sequence[str] = ("variant",)) -> pd.DataFrame:
    """Mean measured equivariance errors (every ``symmetry/*`` column) per ``by`` group over the
    FINISHED runs (claims C1–C7; errors are relative, ~1e-7 in fp32 means exact), plus
    ``n_params`` (median over the group's runs; it depends on the task's ``d``) and ``n_runs``.

    Raises:
        ValueError: no ``symmetry/*`` column.
    """
    cols = sorted(c for c in df.columns if c.startswith("symmetry/"))
    if not cols:
        raise ValueError("no symmetry/* columns in the runs table")
    ok = stats.finished(df)
    table = ok.groupby(list(by), sort=True)[cols].mean()
    if "n_params" in ok:
        table.insert(0, "n_params", ok.groupby(list(by), sort=True)["n_params"].median())
    table.insert(0, "n_runs", ok.groupby(list(by), sort=True).size())
    return table.reset_index()


def _wide_errors(df: pd.DataFrame, x: str, seed: int) -> pd.DataFrame:
    """``error_n<x>``, ``error_n<x>_lo``, ``error_n<x>_hi`` per task × variant, x ascending."""
    ci = stats.mean_ci(df, by=("task", "variant", x), seed=seed)
    ci = ci.sort_values(x)
    parts = []
    for size, grp in ci.groupby(x, sort=True):
        name = f"error_n{int(size) if float(size).is_integer() else size}"
        parts.append(grp.set_index(["task", "variant"])[["mean", "lo", "hi"]]
                     .rename(columns={"mean": name, "lo": f"{name}_lo", "hi": f"{name}_hi"}))
    return pd.concat(parts, axis=1) if parts else pd.DataFrame()


def sample_efficiency_table(df: pd.DataFrame, x: str = "task.n_train",
                            target: float | Mapping[str, float] | None = None,
                            target_fraction: float = 0.5, seed: int = 0) -> pd.DataFrame:
    """One row per task × variant (claims C9, C10; paper.md §13 protocol):

    ``task``, ``variant``, ``n_params`` (median), ``lr`` (chosen on validation loss, median over
    sizes; see :func:`analysis.stats.select_lr`), ``error_n<size>`` with ``_lo``/``_hi`` (mean
    test error over seeds and its 95% bootstrap interval, one triple per size ascending),
    ``slope``/``_lo``/``_hi`` (:func:`analysis.stats.loglog_slope`), ``target``,
    ``n_to_target``/``_lo``/``_hi`` (:func:`analysis.stats.samples_to_target`; ``inf`` = not
    reached), ``reference_error`` (the trivial predictor's), and the counts ``finished``,
    ``failed``, ``killed``, ``diverged`` of every trial at the chosen lr.

    Args:
        target: error level for samples-to-target, or ``{task: level}``; ``None`` uses
            ``target_fraction`` × the task's reference error (:func:`analysis.stats.default_targets`).

    Raises:
        ValueError: no FINISHED run has an error metric.
    """
    data = stats.add_error(df)
    chosen = stats.select_lr(data, group=("task", "variant", x))
    ok = stats.finished(chosen, "error")
    if ok.empty:
        raise ValueError("no FINISHED run has test/rel_mse or test/acc")
    key = ["task", "variant"]
    base = ok.groupby(key).agg(n_params=("n_params", "median"), lr=("lr_chosen", "median"),
                               reference_error=("reference_error", "mean"))
    goals = stats.default_targets(ok, target_fraction) if target is None else target
    slope = stats.loglog_slope(ok, x=x, by=key, seed=seed).set_index(key).drop(columns="n_sizes")
    reach = stats.samples_to_target(ok, goals, x=x, by=key, seed=seed).set_index(key)
    count = stats.counts(chosen, by=key).set_index(key)[["finished", "failed", "killed", "diverged"]]
    table = pd.concat([base, _wide_errors(ok, x, seed), slope, reach], axis=1)
    table = table.join(count, how="outer")
    return table.reset_index().sort_values(key, ignore_index=True)


def _fmt(v: object) -> str:
    if isinstance(v, (float, np.floating)):
        if np.isnan(v):
            return "–"
        if np.isinf(v):
            return "∞" if v > 0 else "−∞"
        return f"{v:.0f}" if float(v).is_integer() and abs(v) < 1e7 else f"{v:.3g}"
    return str(v)


def for_markdown(df: pd.DataFrame) -> pd.DataFrame:
    """Strings for display: every ``X``, ``X_lo``, ``X_hi`` triple as one column ``X [lo, hi]``,
    numbers to 3 significant digits, integers as integers, NaN as ``–`` (a NaN estimate without
    its interval) and inf as ``∞``."""
    out = pd.DataFrame(index=df.index)
    for col in df.columns:
        if re.search(r"_(lo|hi)$", col) and col[:-3] in df:
            continue
        if f"{col}_lo" in df and f"{col}_hi" in df:
            out[col] = [f"{_fmt(m)} [{_fmt(lo)}, {_fmt(hi)}]" if pd.notna(m) else "–"
                        for m, lo, hi in zip(df[col], df[f"{col}_lo"], df[f"{col}_hi"])]
        else:
            out[col] = df[col].map(_fmt)
    return out


def write_table(df: pd.DataFrame, out: Path) -> list[Path]:
    """Write ``df`` to ``<out>.csv`` (numbers as they are) and ``<out>.md`` (:func:`for_markdown`,
    a GitHub pipe table); returns ``[csv, md]``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    csv, md = out.with_suffix(".csv"), out.with_suffix(".md")
    df.to_csv(csv, index=False)
    md.write_text(for_markdown(df).to_markdown(index=False) + "\n")
    return [csv, md]
