"""Load an ablation's trial runs from MLflow into a tidy pandas DataFrame (one row per run)."""

from __future__ import annotations

import sys
import urllib.parse
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd

_BOOL = {"True": True, "False": False, "true": True, "false": False}
_FLOAT_MAX = np.finfo(np.float64).max  # what MLflow's SQL store once made of ±inf


def _typed(column: pd.Series) -> pd.Series:
    """Numbers as numbers, booleans as booleans, anything else unchanged (times stay times:
    ``pd.to_numeric`` would turn them into integers of an unstated unit)."""
    if pd.api.types.is_datetime64_any_dtype(column):
        return column
    try:
        return pd.to_numeric(column)
    except (ValueError, TypeError):
        pass
    values = set(column.dropna().unique())
    if values and values <= set(_BOOL):
        return column.map(_BOOL).astype("boolean")
    return column


def _nonfinite_as_nan(df: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Metrics named in a run's ``nonfinite`` tag, or stored as ±float max, become NaN; column
    ``nonfinite`` flags the runs that had any."""
    flag = pd.Series(False, index=df.index)
    if "nonfinite" in df:
        named = df["nonfinite"].fillna("").astype(str)
        flag |= named != ""
        for i, text in named.items():
            for item in filter(None, text.split(",")):
                name = item.split("=", 1)[0]
                if name in df:
                    df.loc[i, name] = np.nan
        df = df.drop(columns="nonfinite")
    for name in metrics:
        if name in df and pd.api.types.is_numeric_dtype(df[name]):
            huge = df[name].abs() >= _FLOAT_MAX
            flag |= huge
            df.loc[huge, name] = np.nan
    df["nonfinite"] = flag
    return df


def _one_finished_per_trial(raw: pd.DataFrame, parent_of: dict, client, ablation: str) -> pd.DataFrame:
    """``raw`` (MLflow's ``search_runs`` frame) with one FINISHED run per trial id: where a trial
    has several (a driver that lost its lease recorded it anyway: the lease check is
    check-then-act, harness/leases.py), the run whose parent was not closed by another
    invocation is kept, else the earliest to end (then the smallest run id); each run left out is
    named on stderr, so a duplicate is never pooled as another seed."""
    finished = raw[raw["status"] == "FINISHED"]
    counts = finished["tags.trial_id"].value_counts()
    doubled = counts[counts > 1].index
    if len(doubled) == 0:
        return raw
    closed: dict[str, bool] = {}  # parent run id → closed by another invocation (lease expired)
    for parent in {parent_of.get(r) for r in finished["run_id"]} - {None}:
        if isinstance(parent, str):
            closed[parent] = "closed_by" in client.get_run(parent).data.tags
    drop = []
    for trial in doubled:
        runs = finished[finished["tags.trial_id"] == trial]
        order = sorted(runs.itertuples(), key=lambda r: (closed.get(parent_of.get(r.run_id), False),
                                                         r.end_time, r.run_id))
        kept, left_out = order[0].run_id, [r.run_id for r in order[1:]]
        drop += left_out
        print(f"warning: {ablation}: trial {trial} has {len(order)} FINISHED runs; kept run {kept}, "
              f"left out {', '.join(left_out)} (a driver recorded it after losing its lease)",
              file=sys.stderr)
    return raw[~raw["run_id"].isin(drop)]


def load_runs(ablation: str, tracking_uri: str, finished_only: bool = False) -> pd.DataFrame:
    """Every trial (child) run of experiment ``ablation`` as one row.

    Columns: ``run_id``, ``status`` (FINISHED/FAILED/KILLED/RUNNING), ``trial_id``, ``variant``,
    ``node``, ``diverged``, every config param by its dotted name (``task.n_train``, ``seed``,
    ``model.sigma``; numbers typed as numbers) and every metric by its name (``test/rel_mse``).
    A metric that was inf or NaN (named in the run's ``nonfinite`` tag, or stored as ±1.797e308
    by an older harness) is NaN here, and the boolean column ``nonfinite`` marks its run. A trial
    id never has two FINISHED rows: a duplicate is left out and named on stderr
    (:func:`_one_finished_per_trial`).

    Args:
        ablation: the experiment name (= ``ablation.name``).
        tracking_uri: an MLflow tracking URI, e.g. ``sqlite:////abs/mlflow.db``.
        finished_only: keep only FINISHED runs.

    Raises:
        LookupError: if the experiment does not exist in the store.
    """
    if tracking_uri.startswith("sqlite:///"):  # reading never creates an empty store
        db = Path(urllib.parse.unquote(tracking_uri[len("sqlite:///"):]))
        if not db.exists() or db.stat().st_size == 0:
            raise LookupError(f"no MLflow store at {db} (run the sweep first, or set tracking.db_path)")
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(ablation)
    if found is None:
        raise LookupError(f"no MLflow experiment {ablation!r} in {tracking_uri}")
    if found.lifecycle_stage == "deleted":
        from harness.store import deleted_experiment_error

        raise LookupError(deleted_experiment_error(ablation, found.experiment_id, tracking_uri))
    mlflow.set_tracking_uri(tracking_uri)
    raw = mlflow.search_runs(experiment_names=[ablation], filter_string="tags.trial_id != ''",
                             output_format="pandas")
    if raw.empty:
        return pd.DataFrame(columns=["run_id", "status", "trial_id", "variant"])
    renamed = {}
    for col in raw.columns:
        for prefix in ("params.", "metrics.", "tags."):
            if col.startswith(prefix):
                renamed[col] = col[len(prefix):]
    if "tags.error" in renamed:  # a failed run's message; ``error`` is the test error metric
        renamed["tags.error"] = "error_message"
    parent_of = dict(zip(raw["run_id"], raw.get("tags.mlflow.parentRunId", pd.Series(index=raw.index))))
    raw = _one_finished_per_trial(raw, parent_of, client, ablation)
    df = raw[["run_id", "status", "start_time", "end_time", *renamed]].rename(columns=renamed)
    df = df.loc[:, ~df.columns.duplicated()]
    keep = [c for c in df.columns if not c.startswith("mlflow.")]
    df = df[keep].apply(_typed)
    df = _nonfinite_as_nan(df, [renamed[c] for c in raw.columns if c.startswith("metrics.")])
    if finished_only:
        df = df[df["status"] == "FINISHED"]
    return df.reset_index(drop=True)
