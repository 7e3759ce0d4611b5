"""One analysis path: what ``python -m analysis`` writes and prints, and the end-of-sweep summary
that ``python -m harness`` prints, are the same code on the same runs.

:func:`analyse` reads the runs of exactly the trials an ablation and its overrides compose to
(:func:`analysis.trials.restrict`: runs made with other overrides in the same experiment, e.g.
another ``train.max_steps``, are never pooled in) and writes every figure and table of
:func:`analysis.outputs.write_all`; each run's arm names every swept value, so runs that differ
in any configured value are never averaged together. :func:`summary_table` is the printed table:
one row per task × arm, the metric named, the mean test error at each training-set size, and the
runs used and left out. A run counts as diverged only by its ``diverged`` tag (training loss
became non-finite); an undefined summary such as ``val/best_error_at_80`` after a single
evaluation (listed in the ``nonfinite`` tag) is not a divergence.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import pandas as pd

from analysis import curves, tables
from analysis.load import load_runs
from analysis.outputs import write_all
from analysis.trials import restrict, swept_axes

if TYPE_CHECKING:
    from harness.sweep import Trial
    from harness.tracking import Store, Tracker

COUNTS = ("used", "failed", "killed", "diverged")


def analyse(name: str, trials: Sequence[Trial], store_uri: str, out: Path, *, scale: str | None = None,
            figures: Sequence[str] | None = None, runs_csv: bool = False) -> tuple[pd.DataFrame, list[Path]]:
    """The runs of exactly ``trials`` of ablation ``name`` in the store at ``store_uri``, and the
    paths of every figure and table of them written to ``out`` (none if there is no run).

    Raises:
        LookupError: as :func:`analysis.trials.restrict` (the runs lack a ``trial_id``).
    """
    df = restrict(load_runs(name, store_uri), trials, name)
    if df.empty:
        return df, []
    paths = write_all(df, out, tracking_uri=store_uri, runs_csv=runs_csv, ablation=name, scale=scale,
                      axes=swept_axes(trials), figures=figures)
    return df, paths


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per task × arm of the runs ``df`` (:func:`analysis.curves.prepare`'s contract):
    ``task``, ``arm``, ``metric`` (what ``error`` is: test relative MSE or 1 − test accuracy),
    ``lr`` (chosen on validation), ``error_n<N>`` (+ ``_lo``/``_hi``, :data:`tables.SAMPLE_EFFICIENCY_CAPTION`)
    and the counts :data:`COUNTS`. Empty if no usable run has an error."""
    data = curves.prepare(df)
    if curves.usable(data).empty:
        return pd.DataFrame()
    full = tables.sample_efficiency_table(data)
    metric = data.groupby("task")["error_name"].first()
    full.insert(2, "metric", full["task"].map(metric))
    keep = ["task", "arm", "metric", *(c for c in full.columns if c == "lr" or c.startswith("error_n")),
            *COUNTS]
    return full[[c for c in keep if c in full]]


def format_table(table: pd.DataFrame) -> str:
    """``table`` as printed text: each estimate with its interval (:func:`tables.for_markdown`)."""
    return tables.for_markdown(table).to_string(index=False)


def report(df: pd.DataFrame, out: Path) -> Path | None:
    """Print :func:`summary_table` of ``df`` and write it to ``out/sample_efficiency.csv``;
    ``None`` (and a line on stderr) if no usable run has an error."""
    table = summary_table(df)
    if table.empty:
        print("no finished trial with test/rel_mse or test/acc: no table", file=sys.stderr)
        return None
    print(format_table(table))
    path = Path(out) / "sample_efficiency.csv"
    table.to_csv(path, index=False)
    return path


def summarise(ablation: str, trials: Sequence[Trial], store: Store, tracker: Tracker, parent: str,
              out_dir: Path, scale: str | None = None, figures: Sequence[str] | None = None) -> None:
    """The end-of-sweep summary of ``python -m harness``: :func:`analyse` and :func:`report` on
    the sweep's ``trials``, exactly what ``python -m analysis`` with the same overrides writes and
    prints. Every file goes to ``out_dir`` and is logged as an artifact of the parent run
    ``parent``; the printed plot location is its artifact URI in the store (under a Ray job,
    ``out_dir`` lies in Ray's temporary working directory). A no-op resume (``parent`` empty: every
    trial had finished, no run was written) still prints the table and writes the files."""
    df, paths = analyse(ablation, trials, store.uri, out_dir, scale=scale, figures=figures)
    table = report(df, out_dir) if not df.empty else None
    if not parent:
        experiment = tracker.client.get_experiment_by_name(ablation)
        if paths:
            print(f"plot: {out_dir / 'sample_efficiency.png'}")
        if experiment is not None:
            print(f"records: {store.uri} (experiment {ablation!r}; nothing new recorded)\n"
                  f"browse: {ui_link(store, experiment.experiment_id)}")
        return
    for path in [*paths, *([table] if table else [])]:
        tracker.log_artifact(parent, path)
    info = tracker.client.get_run(parent).info
    plot = next((p.name for p in paths if p.name == "sample_efficiency.png"), None)
    if plot:
        print(f"plot: {info.artifact_uri}/{plot}")
    print(f"records: {store.uri} (experiment {ablation!r}, parent run {parent})\n"
          f"browse: {ui_link(store, info.experiment_id)}")


def ui_link(store: Store, experiment_id: str) -> str:
    """Where the MLflow UI shows an experiment's training runs (MLflow 3 opens its GenAI pages
    unless the URL asks for ``workflowType=machine_learning``), in the saved view whose columns
    are the headline metrics and key params (:func:`harness.naming.view_state_tag`)."""
    from harness.naming import VIEW_KEY

    # the shared view is read on the runs page itself (from #/experiments/ID it is dropped)
    page = f"#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
    if store.artifact_root is None:  # a tracking server serves the UI itself
        return f"{store.uri}/{page}"
    return f"mlflow ui --backend-store-uri {store.uri} --port 5000, then http://127.0.0.1:5000/{page}"
