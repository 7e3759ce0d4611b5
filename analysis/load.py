"""Load an ablation's trial runs from MLflow into a tidy pandas DataFrame (one row per run)."""

from __future__ import annotations

import mlflow
import pandas as pd

_BOOL = {"True": True, "False": False, "true": True, "false": False}


def _typed(column: pd.Series) -> pd.Series:
    """Numbers as numbers, booleans as booleans, anything else unchanged."""
    try:
        return pd.to_numeric(column)
    except (ValueError, TypeError):
        pass
    values = set(column.dropna().unique())
    if values and values <= set(_BOOL):
        return column.map(_BOOL).astype("boolean")
    return column


def load_runs(ablation: str, tracking_uri: str, finished_only: bool = False) -> pd.DataFrame:
    """Every trial (child) run of experiment ``ablation`` as one row.

    Columns: ``run_id``, ``status`` (FINISHED/FAILED/KILLED/RUNNING), ``trial_id``, ``variant``,
    ``node``, ``diverged``, every config param by its dotted name (``task.n_train``, ``seed``,
    ``model.sigma``; numbers typed as numbers) and every metric by its name (``test/rel_mse``).

    Args:
        ablation: the experiment name (= ``ablation.name``).
        tracking_uri: an MLflow tracking URI, e.g. ``sqlite:////abs/mlflow.db``.
        finished_only: keep only FINISHED runs.

    Raises:
        LookupError: if the experiment does not exist in the store.
    """
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    if client.get_experiment_by_name(ablation) is None:
        raise LookupError(f"no MLflow experiment {ablation!r} in {tracking_uri}")
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
    df = raw[["run_id", "status", "start_time", "end_time", *renamed]].rename(columns=renamed)
    df = df.loc[:, ~df.columns.duplicated()]
    keep = [c for c in df.columns if not c.startswith("mlflow.")]
    df = df[keep].apply(_typed)
    if finished_only:
        df = df[df["status"] == "FINISHED"]
    return df.reset_index(drop=True)
