"""The results bundle: the report's runs as one tidy, compressed table, so the report can be
regenerated offline (``python -m analysis.report report.runs=docs/report/runs.csv.gz``).

One row per run: every trial run of the suite's ablations (restricted to the trials each
ablation composes to, :func:`analysis.trials.restrict`, with ``ablation`` and ``arm``) with
every param, metric (final values, including the best-so-far validation summary that the
budget precondition reads) and tag; plus one row per sweep (parent) run with ``role = sweep``
and its start and end time; and one row per ablation with ``role = plan`` and ``n_trials``, the
number of trials the ablation composes to (so a partial store is visible as such). The report is always written from the bundle *as read back from
disk*, whether it was just exported from the store or given on the command line, so both give
the same report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from analysis.load import _typed, load_runs
from analysis.trials import restrict
from harness.sweep import Trial

COMPRESSION = {"method": "gzip", "mtime": 0}  # byte-identical for identical data


def _sweeps(name: str, uri: str) -> pd.DataFrame:
    """The ablation's ended sweep (parent) runs: ``run_id``, ``start_time``, ``end_time``."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(name)
    if exp is None:
        return pd.DataFrame()
    runs = client.search_runs([exp.experiment_id], "tags.role = 'sweep'", max_results=50000)
    rows = [{"run_id": r.info.run_id, "role": "sweep", "ablation": name, "status": r.info.status,
             "start_time": pd.Timestamp(r.info.start_time, unit="ms", tz="UTC"),
             "end_time": pd.Timestamp(r.info.end_time, unit="ms", tz="UTC")}
            for r in runs if r.info.end_time]
    return pd.DataFrame(rows)


def collect(uri: str, ablations: Mapping[str, Sequence[Trial]]) -> pd.DataFrame:
    """The suite's runs from the store at ``uri``: per ablation, the runs of exactly its trials
    (and of their lr-edge extensions) and its sweep runs. An ablation with no experiment yet
    contributes nothing."""
    parts = [pd.DataFrame([{"ablation": name, "role": "plan", "n_trials": len(trials)}
                           for name, trials in ablations.items()])]
    for name, trials in ablations.items():
        try:
            runs = load_runs(name, uri)
        except LookupError:
            continue
        if not runs.empty:
            parts.append(restrict(runs, trials, name).assign(role="trial"))
        parts.append(_sweeps(name, uri))
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["ablation", "role"])


def write_bundle(df: pd.DataFrame, path: Path) -> Path:
    """Write ``df`` as a gzip-compressed CSV with sorted rows and columns (deterministic bytes).
    Returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = [c for c in ("ablation", "role", "trial_id", "run_id") if c in df]
    out = df.sort_values(keys, kind="stable") if keys else df
    out = out[sorted(out.columns)]
    out.to_csv(path, index=False, compression=COMPRESSION)
    return path


def read_bundle(path: Path) -> pd.DataFrame:
    """A bundle as a typed table (numbers as numbers, booleans as booleans).

    Raises:
        FileNotFoundError: no bundle at ``path``.
    """
    df = pd.read_csv(path, compression="gzip", low_memory=False, dtype=str, keep_default_na=False,
                     na_values=[""])
    return df.apply(_typed)


def planned(bundle: pd.DataFrame) -> dict[str, int]:
    """``{ablation: trials it composes to}`` from the bundle's plan rows (empty if none)."""
    if "role" not in bundle or "n_trials" not in bundle:
        return {}
    rows = bundle[bundle["role"] == "plan"]
    return {str(a): int(n) for a, n in zip(rows["ablation"], rows["n_trials"])}


def split(bundle: pd.DataFrame) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """``({ablation: its trial runs}, sweep runs)`` of a bundle."""
    role = bundle["role"] if "role" in bundle else pd.Series("trial", index=bundle.index)
    trials = bundle[role == "trial"]
    runs = {name: grp.dropna(axis=1, how="all").reset_index(drop=True)
            for name, grp in trials.groupby("ablation", sort=False)}
    return runs, bundle[role == "sweep"].reset_index(drop=True)
