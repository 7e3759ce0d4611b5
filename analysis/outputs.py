"""Every figure and table of one ablation, written from its runs (used by ``python -m analysis``
and by the report)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from analysis import curves, lengths, plots, render_tables, stats, tables

MAX_CURVES = 8
CURVES_PICK = ("per task × arm, the FINISHED run that did not diverge with the largest n_train, then "
               "the smallest seed (a diverged one only where every run of the arm diverged)")
# figure name → (the column that must exist, the figure function)
SPECIAL: dict[str, tuple[str, Callable[..., list[Path]]]] = {
    "permutation_error": ("symmetry/permutation_err", plots.permutation_error),
    "rotation_transfer": ("test/rotated/loss", plots.rotation_transfer),
    "absent_answers": ("test/acc_not_answer_in_input", plots.absent_answers),
}


def curve_runs(df: pd.DataFrame, limit: int = MAX_CURVES) -> list[str]:
    """Run ids for the learning-curve figure (:data:`CURVES_PICK`); at most ``limit``."""
    ok = stats.finished(curves.prepare(df))
    ok = ok.assign(_diverged=stats.diverged(ok))
    order = ["_diverged", *[c for c in ("task.n_train", "seed") if c in ok]]
    ok = ok.sort_values(order, ascending=[True, False, True][:len(order)], kind="stable")
    return list(curves.sort_rows(ok.drop_duplicates(["task", "arm"]), ["task", "arm"])["run_id"].head(limit))


def _counts(df: pd.DataFrame) -> pd.DataFrame:
    """Every trial (all learning rates) by outcome per task × arm, in natural order."""
    arm = df["arm"] if "arm" in df else df["variant"]
    return curves.sort_rows(stats.counts(stats.add_error(df).assign(arm=arm.astype(str)),
                                         by=("task", "arm")), ["task", "arm"])


def write_all(df: pd.DataFrame, out: Path, tracking_uri: str | None = None,
              runs_csv: bool = False, *, ablation: str | None = None, scale: str | None = None,
              axes: Sequence[str] | None = None, figures: Sequence[str] | None = None,
              formats: Sequence[str] = plots.FORMATS) -> list[Path]:
    """An ablation's figures (PNG, PDF) and tables (CSV, Markdown) from its runs ``df`` into
    ``out``: counts; sample-efficiency figure and table; length-generalisation figure (when runs
    have per-length metrics); symmetry table; the figures of :data:`SPECIAL` whose column
    exists (permutation error, rotation transfer gap, absent-answer accuracy); with
    ``tracking_uri``, learning curves of :func:`curve_runs`; with ``runs_csv``, the runs table
    itself. ``ablation`` and ``scale`` go into the figure titles; ``axes`` (the swept columns
    other than task, n_train, seed and lr) choose the panels (:func:`analysis.curves.facet_axes`).
    ``figures`` names the :data:`SPECIAL` figures the ablation's question needs (``ablation.figures``
    in its file); ``None`` draws every one whose column exists. ``formats``: the files of each
    figure of the ablation by suffix (learning curves are always PNG and PDF).
    ``df`` follows :func:`analysis.curves.prepare` (raw runs are prepared here). Returns the paths.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = render_tables.write_table(_counts(df), out / "counts")
    if runs_csv:
        df.to_csv(out / "runs.csv", index=False)
        paths.insert(0, out / "runs.csv")
    data = curves.prepare(df)
    if curves.usable(data).empty:
        print("no usable trial with test/rel_mse or test/acc: no figures", file=sys.stderr)
        return paths
    look = dict(ablation=ablation, scale=scale, axes=axes, formats=formats)
    paths += plots.sample_efficiency(data, out / "sample_efficiency", **look)
    paths += render_tables.write_table(tables.sample_efficiency_table(data), out / "sample_efficiency_table",
                                       caption=render_tables.SAMPLE_EFFICIENCY_CAPTION)
    if not lengths.per_length(stats.finished(data)).empty:
        paths += plots.length_generalisation(data, out / "length_generalisation", **look)
    if any(c.startswith("symmetry/") for c in data.columns):
        paths += render_tables.write_table(tables.symmetry_table(data, by=("task", "arm")), out / "symmetry")
    for name, (column, figure) in SPECIAL.items():
        if column in data and (figures is None or name in figures):
            try:
                paths += figure(data, out / name, **look)
            except ValueError as err:  # the column exists but no usable run has it
                print(f"{name}: {err}", file=sys.stderr)
    runs = curve_runs(df) if tracking_uri else []
    if runs:
        title = " · ".join(p for p in (ablation, f"scale={scale}" if scale else None) if p) or None
        paths += plots.learning_curves(tracking_uri, runs, out / "learning_curves", title=title,
                                       caption=f"Runs shown: {CURVES_PICK}.", of=len(df))
    return paths
