"""The results bundle: the report's runs as one tidy, compressed table, so the report can be
regenerated offline (``python -m analysis.report report.runs=docs/report/runs.csv.gz``).

One row per run: every trial run of the suite's ablations (restricted to the trials each
ablation composes to, :func:`analysis.trials.restrict`, with ``ablation`` and ``arm``) with
every param, metric (final values, including the best-so-far validation summary that the
budget precondition reads) and tag; plus one row per sweep (parent) run with ``role = sweep``
and its start and end time; and one row per ablation with ``role = plan`` and ``n_trials``, the
number of trials the ablation composes to (so a partial store is visible as such); plus the
exact checks' float64 measurements, made once at export time so that a regeneration reads
them back instead of recomputing them (issue 28 item 7: the E rows of a fresh clone's report
then match the committed ones digit for digit, whatever the processor): one row per preset with
``role = preset`` (:func:`harness.variant_table.measure_presets`) and one per identity with
``role = identity`` (:mod:`harness.counterexample`), their fields under ``measure.``. Times are
ISO 8601 strings (``2026-11-30T17:44:51.741+00:00``). The report is always written from the
bundle *as read back from disk*, whether it was just exported from the store or given on the
command line, so both give the same report.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from analysis.load import _typed, load_runs
from analysis.trials import restrict
from harness.expansion import Trial

COMPRESSION = {"method": "gzip", "mtime": 0}  # byte-identical for identical data
MEASURE = "measure."  # the prefix of the exact checks' measurement fields
TIMES = ("start_time", "end_time")


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


def measurements() -> pd.DataFrame:
    """The exact checks' float64 measurements as bundle rows (module docstring): every preset's
    ``id, preset, family, formula, params, symmetries`` (sorted, comma-separated) and
    ``symmetry/*`` errors, and every identity of :mod:`harness.counterexample` as ``key, value``."""
    from harness.counterexample import measure_counterexample, measure_gram_identity
    from harness.variant_table import measure_presets

    presets = [{"role": "preset", **{MEASURE + k: (",".join(sorted(v)) if k == "symmetries" else v)
                                     for k, v in row.items()}} for row in measure_presets()]
    identities = [{"role": "identity", f"{MEASURE}key": k, f"{MEASURE}value": v}
                  for k, v in {**measure_counterexample(), **measure_gram_identity()}.items()]
    return pd.DataFrame(presets + identities)


def read_measurements(bundle: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float]] | None:
    """``(presets, identities)`` as :func:`measurements` stored them (``symmetries`` as a
    frozenset again), or ``None`` for a bundle exported before they were stored."""
    role = bundle["role"] if "role" in bundle else pd.Series("", index=bundle.index)
    if not (role == "preset").any():
        return None
    fields = [c for c in bundle.columns if c.startswith(MEASURE)]
    presets = bundle.loc[role == "preset", fields].dropna(axis=1, how="all").reset_index(drop=True)
    presets.columns = [c[len(MEASURE):] for c in presets.columns]
    presets["symmetries"] = presets["symmetries"].fillna("").map(lambda s: frozenset(filter(None, str(s).split(","))))
    presets["params"] = presets["params"].astype(int)
    rows = bundle[role == "identity"]
    return presets, dict(zip(rows[f"{MEASURE}key"].astype(str), rows[f"{MEASURE}value"].astype(float)))


def _iso(column: pd.Series) -> pd.Series:
    """Times as ISO 8601 strings, to the millisecond MLflow records: timestamps and time strings
    (an older bundle's ``2026-11-30 17:44:51.741000+00:00``); numbers, an older bundle's
    microseconds, and empty cells are left as they are."""
    def one(value: object) -> object:
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return value  # an older bundle's microseconds, read as text beside time strings
        if isinstance(value, (pd.Timestamp, datetime, str)) and not pd.isna(value):
            when = pd.Timestamp(value)
            when = when.tz_localize("UTC") if when.tzinfo is None else when.tz_convert("UTC")
            return when.isoformat(timespec="milliseconds")
        return value

    return column.map(one)


def write_bundle(df: pd.DataFrame, path: Path, measured: bool = True) -> Path:
    """Write ``df`` as a gzip-compressed CSV with sorted rows and columns (deterministic bytes),
    times as ISO 8601 strings, with the exact checks' measurements (:func:`measurements`) added
    unless ``measured`` is false or ``df`` has them. Returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if measured and read_measurements(df) is None:
        df = pd.concat([df, measurements()], ignore_index=True)
    df = df.assign(**{t: _iso(df[t]) for t in TIMES if t in df})
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
    # text as Python strings (object), as pandas 2 reads dtype=str: pandas 3's arrow-backed strings
    # cost every filter of a decision a conversion, a fifth of a regeneration's CPU, for no change
    # in any value (the typed columns below are numbers and booleans either way)
    df = pd.read_csv(path, compression="gzip", low_memory=False, dtype=object, keep_default_na=False,
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
            for name, grp in trials.groupby("ablation", sort=False, dropna=False)}
    return runs, bundle[role == "sweep"].reset_index(drop=True)
