"""Every figure and table of one ablation, written from its runs (used by ``python -m analysis``
and by the report)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from analysis import lengths, plots, stats, tables

MAX_CURVES = 8


def curve_runs(df: pd.DataFrame, limit: int = MAX_CURVES) -> list[str]:
    """Run ids for the learning-curve figure: per task × variant, the FINISHED run with the
    largest ``task.n_train`` and then the smallest ``seed``; at most ``limit``."""
    ok = stats.finished(stats.add_error(df))
    order = [c for c in ("task.n_train", "seed") if c in ok]
    ok = ok.sort_values(order, ascending=[False, True][:len(order)]) if order else ok
    return list(ok.drop_duplicates(["task", "variant"])["run_id"].head(limit))


def write_all(df: pd.DataFrame, out: Path, tracking_uri: str | None = None,
              runs_csv: bool = False) -> list[Path]:
    """An ablation's figures (PNG, PDF) and tables (CSV, Markdown) from its runs ``df`` into
    ``out``: counts; sample-efficiency figure and table; length-generalisation figure (when runs
    have per-length metrics); symmetry table; with ``tracking_uri``, learning curves of
    :func:`curve_runs`; with ``runs_csv``, the runs table itself. Returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = tables.write_table(stats.counts(df), out / "counts")
    if runs_csv:
        df.to_csv(out / "runs.csv", index=False)
        paths.insert(0, out / "runs.csv")
    if stats.finished(stats.add_error(df), "error").empty:
        print("no finished trial with test/rel_mse or test/acc: no figures", file=sys.stderr)
        return paths
    paths += plots.sample_efficiency(df, out / "sample_efficiency")
    paths += tables.write_table(tables.sample_efficiency_table(df), out / "sample_efficiency_table")
    if not lengths.per_length(stats.finished(df)).empty:
        paths += plots.length_generalisation(df, out / "length_generalisation")
    if any(c.startswith("symmetry/") for c in df.columns):
        paths += tables.write_table(tables.symmetry_table(df), out / "symmetry")
    runs = curve_runs(df) if tracking_uri else []
    if runs:
        paths += plots.learning_curves(tracking_uri, runs, out / "learning_curves")
    return paths


