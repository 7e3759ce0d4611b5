"""What the driver prints and draws at the end of a sweep (and for ``dry_run``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Collection

if TYPE_CHECKING:
    import pandas as pd

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


def _varying(finished: pd.DataFrame) -> list[str]:
    """Config params (dotted names, not ``model.*``: the variant names those) that differ among
    the finished runs, ``task.n_train`` first: each is a column of the table, so runs with a
    different learning rate or step budget are never averaged together."""
    params = [c for c in finished.columns if "." in c and "/" not in c and not c.startswith("model.")
              and finished[c].astype(str).nunique() > 1]
    return sorted(params, key=lambda c: (c != "task.n_train", c))


def sweep_table(df: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and count of ``error`` per task, variant and varying param over the FINISHED
    runs that did not diverge; ``diverged`` counts, per group, the finished runs left out (loss
    or a metric became inf/NaN). Empty if no run has an error."""
    import pandas as pd

    finished = df[df["status"] == "FINISHED"]
    bad = finished["diverged"].fillna(False).astype(bool) if "diverged" in finished else False
    if "nonfinite" in finished:
        bad = bad | finished["nonfinite"].fillna(False).astype(bool)
    finished = finished.assign(_bad=bad)
    finished = finished[finished["_bad"] | finished["error"].notna()]
    if finished.empty:
        return pd.DataFrame()
    keys = ["task", "variant", *_varying(finished)]
    groups = finished.groupby(keys, dropna=False)
    table = groups["error"].agg(lambda e: e[~finished.loc[e.index, "_bad"]].mean()).rename("mean").to_frame()
    table["std"] = groups["error"].agg(lambda e: e[~finished.loc[e.index, "_bad"]].std())
    table["count"] = groups["_bad"].agg(lambda b: int((~b).sum()))
    table["diverged"] = groups["_bad"].agg(lambda b: int(b.sum()))
    return table.reset_index()


def print_packs(trials: list[Trial], pack_size: str, device: str) -> None:
    """How the trials would run (``cluster.pack_size``, harness/pack.py): the number of packs
    and their sizes, and the trials that run alone (:func:`harness.pack.runs_alone`: they cannot
    be packed, or ``auto`` runs their family alone on this device), by reason."""
    from harness.pack import resolve_pack_size, runs_alone
    from harness.scheduler import plan

    size = resolve_pack_size(pack_size, device)
    units = plan(trials, pack_size, device)
    packs = [len(u) for u in units if len(u) > 1]
    alone: dict[str, list[str]] = {}
    for trial in trials:
        reason = runs_alone(trial.config, pack_size, device)
        if reason:
            alone.setdefault(reason, []).append(trial.variant)
    print(f"packing (cluster.pack_size={pack_size} -> {size}): {sum(packs)} trials in {len(packs)} "
          f"packs (sizes {min(packs, default=0)}-{max(packs, default=0)}), "
          f"{len(units) - len(packs)} alone")
    for reason, variants in alone.items():
        verb = "run alone" if reason.startswith("pack_size=auto") else "cannot pack"
        print(f"  {verb}: {len(variants)} trials ({', '.join(sorted(set(variants)))}): {reason}")


def summarise(ablation: str, store: Store, tracker: Tracker, parent: str, out_dir: Path) -> None:
    """Load the ablation's runs from MLflow, draw the sample-efficiency plot, print a table
    (:func:`sweep_table`: diverged runs counted, never averaged in).

    The plot (PNG, PDF) and the table (CSV) go to ``out_dir`` and are logged as artifacts of the
    parent run ``parent``; the printed plot location is its artifact URI in the store (under a
    Ray job, ``out_dir`` lies in Ray's temporary working directory).
    """
    from analysis.load import load_runs
    from analysis.plots import sample_efficiency, with_error

    df = with_error(load_runs(ablation, store.uri))
    table = sweep_table(df)
    if table.empty or not table["count"].any():
        print("no finished trial with test/rel_mse or test/acc: no plot", file=sys.stderr)
        if not table.empty:
            print(table.to_string(index=False))
        return
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
