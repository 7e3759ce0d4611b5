"""What the driver prints and draws at the end of a sweep (and for ``dry_run``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Collection

if TYPE_CHECKING:
    from harness.sweep import Trial
    from harness.tracking import Store, Tracker


def print_trials(trials: list[Trial], finished: Collection[str] = ()) -> None:
    """One line per trial: id, ``done`` if its id is in ``finished`` (already FINISHED in the
    store, so a run would skip it), variant, overrides."""
    done = sum(t.trial_id in finished for t in trials)
    print(f"{len(trials)} trials" + (f", {done} already finished (done)" if finished else ""))
    width = max(len(t.variant) for t in trials)
    for t in trials:
        mark = "done " if t.trial_id in finished else "     "
        print(f"{t.trial_id}  {mark}{t.variant:<{width}}  {' '.join(t.overrides)}")


def summarise(ablation: str, store: Store, tracker: Tracker, parent: str, out_dir: Path) -> None:
    """Load the ablation's runs from MLflow, draw the sample-efficiency plot, print a table.

    The plot (PNG, PDF) and the table (CSV) go to ``out_dir`` and are logged as artifacts of the
    parent run ``parent``; the printed plot location is its artifact URI in the store (under a
    Ray job, ``out_dir`` lies in Ray's temporary working directory).
    """
    from analysis.load import load_runs
    from analysis.plots import sample_efficiency, with_error

    df = with_error(load_runs(ablation, store.uri))
    finished = df[df["status"] == "FINISHED"].dropna(subset=["error"])
    if finished.empty:
        print("no finished trial with test/rel_mse or test/acc: no plot", file=sys.stderr)
        return
    table = (finished.groupby(["task", "variant", "task.n_train"])["error"]
             .agg(["mean", "std", "count"]).reset_index())
    out_dir.mkdir(parents=True, exist_ok=True)
    table_path = out_dir / "sample_efficiency.csv"
    table.to_csv(table_path, index=False)
    paths = sample_efficiency(df, out_dir / "sample_efficiency")
    for path in [*paths, table_path]:
        tracker.log_artifact(parent, path)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    info = tracker.client.get_run(parent).info
    print(f"plot: {info.artifact_uri}/{paths[0].name}\n"
          f"records: {store.uri} (experiment {ablation!r}, parent run {parent})\n"
          f"browse: {ui_link(store, info.experiment_id)}")


def ui_link(store: Store, experiment_id: str) -> str:
    """Where the MLflow UI shows an experiment's training runs (MLflow 3 opens its GenAI pages
    unless the URL asks for ``workflowType=machine_learning``)."""
    page = f"#/experiments/{experiment_id}?workflowType=machine_learning"
    if store.artifact_root is None:  # a tracking server serves the UI itself
        return f"{store.uri}/{page}"
    return f"mlflow ui --backend-store-uri {store.uri} --port 5000, then http://127.0.0.1:5000/{page}"
