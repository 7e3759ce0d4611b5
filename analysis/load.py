"""Load an ablation's trial runs from MLflow into a tidy pandas DataFrame (one row per run)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from harness import mlflow_sql
from harness.store import Store, deleted_experiment_error, experiments, file_uri_path, sqlite_path

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


def _one_finished_per_trial(raw: pd.DataFrame, parent_of: dict, tracking_uri: str, ablation: str) -> pd.DataFrame:
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
    import mlflow  # only where a trial has two FINISHED runs (rare): its parents' tags

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
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


TRIAL_RUNS = "tags.trial_id != ''"  # the filter of an ablation's trial (child) runs
def search_sqlite(db: Path, experiment_id: str) -> pd.DataFrame:
    """``mlflow.search_runs(experiment_ids=[experiment_id], filter_string=TRIAL_RUNS,
    output_format="pandas")`` on the SQLite store ``db``, read with four read-only SQL queries
    on MLflow's schema (:func:`harness.mlflow_sql.trial_run_rows`): the same rows in the same order, the same values, the same nulls (None
    for params and tags, NaN for metrics) and dtypes. MLflow's search builds an ORM object per
    param, metric and tag (about 1 s for 200 trial runs on 2 cores, most of a no-op resume's
    summary; ``harness.mlflow_sql.finished_runs`` for the same on the resume listing).

    Raises:
        sqlite3.OperationalError: the file's schema is not the one this reads (or it is locked
            past the timeout).
    """
    runs, metrics, params, tags = mlflow_sql.trial_run_rows(db, experiment_id)
    data: dict[str, list] = {
        "run_id": [r[0] for r in runs], "experiment_id": [str(r[1]) for r in runs],
        "status": [r[2] for r in runs], "artifact_uri": [r[3] for r in runs],
        # one value at a time, as MLflow does (a None end time stays None, not NaT)
        "start_time": [pd.to_datetime(r[4], unit="ms", utc=True) for r in runs],
        "end_time": [pd.to_datetime(r[5], unit="ms", utc=True) for r in runs]}
    order = data["run_id"]
    for kind, rows, null in (("metrics", [(r, k, float("nan") if n else v) for r, k, v, n in metrics], np.nan),
                             ("params", params, None), ("tags", tags, None)):
        values: dict[str, dict[str, object]] = {}
        for run_id, key, value in rows:
            values.setdefault(key, {})[run_id] = value
        for key in sorted(values):
            data[f"{kind}.{key}"] = [values[key].get(r, null) for r in order]
    return pd.DataFrame(data)


def stamped_sqlite(tracking_uri: str, experiment_id: str, tag: str, value: str) -> list[tuple[str, set[str]]] | None:
    """``(artifact URI, names of its top-level artifacts)`` of up to 10 not deleted parent runs
    (tag ``role`` = ``sweep``) of experiment ``experiment_id`` tagged ``tag`` = ``value``,
    newest first, in the SQLite store of ``tracking_uri``: the search and listing that
    :func:`analysis.summary.recorded_figures` makes with MLflow's client, read by SQL and from
    the runs' artifact folders. ``None`` where the store is not read so (the schema is not the
    one this reads, or an artifact URI is not a local folder): the caller asks MLflow."""
    db = sqlite_path(tracking_uri)
    try:
        uris = mlflow_sql.tagged_parent_artifacts(db, experiment_id, tag, value)
    except sqlite3.OperationalError:
        return None
    if any(not (uri or "").startswith("file:") for uri in uris):
        return None
    found = []
    for uri in uris:
        folder = file_uri_path(uri)
        found.append((uri, {p.name for p in folder.iterdir()} if folder.is_dir() else set()))
    return found


def load_runs(ablation: str, tracking_uri: str, finished_only: bool = False) -> pd.DataFrame:
    """Every trial (child) run of experiment ``ablation`` as one row.

    Columns: ``run_id``, ``status`` (FINISHED/FAILED/KILLED/RUNNING), ``trial_id``, ``variant``,
    ``node``, ``diverged``, every config param by its dotted name (``task.n_train``, ``seed``,
    ``model.sigma``; numbers typed as numbers) and every metric by its name (``test/rel_mse``).
    A metric that was inf or NaN (named in the run's ``nonfinite`` tag, or stored as ±1.797e308
    by an older harness) is NaN here, and the boolean column ``nonfinite`` marks its run. A trial
    id never has two FINISHED rows: a duplicate is left out and named on stderr
    (:func:`_one_finished_per_trial`).
    The columns come in the same order in every process (the run's fields, then metrics, params
    and tags, each sorted by name).

    Args:
        ablation: the experiment name (= ``ablation.name``).
        tracking_uri: an MLflow tracking URI, e.g. ``sqlite:////abs/mlflow.db``.
        finished_only: keep only FINISHED runs.

    Raises:
        LookupError: if the experiment does not exist in the store.
    """
    db = sqlite_path(tracking_uri)
    if db is not None:  # reading never creates an empty store
        if not db.exists() or db.stat().st_size == 0:
            raise LookupError(f"no MLflow store at {db} (run the sweep first, or set tracking.db_path)")
    found = experiments(Store(tracking_uri, None), [ablation]).get(ablation)
    if found is None:
        raise LookupError(f"no MLflow experiment {ablation!r} in {tracking_uri}")
    if found[1] == "deleted":
        raise LookupError(deleted_experiment_error(ablation, found[0], tracking_uri))
    raw = None
    if db is not None:
        try:
            raw = search_sqlite(db, found[0])
        except sqlite3.OperationalError:  # a schema this query does not know: MLflow's own search
            pass
    if raw is None:
        import mlflow  # a server store (a SQLite one is read by SQL, without MLflow)

        mlflow.set_tracking_uri(tracking_uri)
        raw = mlflow.search_runs(experiment_ids=[found[0]], filter_string=TRIAL_RUNS, output_format="pandas")
    if raw.empty:
        return pd.DataFrame(columns=["run_id", "status", "trial_id", "variant"])
    renamed = {}
    # sorted: MLflow orders the columns of each kind as a set of strings, which differs between
    # processes (hash seed); a stable order keeps the frame, and the digest of its figures
    # (analysis.reuse), the same from one invocation to the next. Metrics < params < tags, as
    # MLflow puts them, so a name that is both still keeps its metric
    for col in sorted(raw.columns):
        for prefix in ("params.", "metrics.", "tags."):
            if col.startswith(prefix):
                renamed[col] = col[len(prefix):]
    if "tags.error" in renamed:  # a failed run's message; ``error`` is the test error metric
        renamed["tags.error"] = "error_message"
    parent_of = dict(zip(raw["run_id"], raw.get("tags.mlflow.parentRunId", pd.Series(index=raw.index))))
    raw = _one_finished_per_trial(raw, parent_of, tracking_uri, ablation)
    df = raw[["run_id", "status", "start_time", "end_time", *renamed]].rename(columns=renamed)
    df = df.loc[:, ~df.columns.duplicated()]
    keep = [c for c in df.columns if not c.startswith("mlflow.")]
    df = df[keep].apply(_typed)
    df = _nonfinite_as_nan(df, [renamed[c] for c in raw.columns if c.startswith("metrics.")])
    if finished_only:
        df = df[df["status"] == "FINISHED"]
    return df.reset_index(drop=True)
