"""Every SQL statement the project runs against MLflow's own tables (``experiments``, ``runs``,
``tags``, ``params``, ``latest_metrics``) of a SQLite tracking store, and nothing else.

MLflow's client builds an ORM object per run, param, metric and tag; the listings a sweep and an
analysis need (finished trials, a resume's check, an ablation's runs as a table) read the same
rows by SQL in a fraction of the time (``benchmarks/store_scale.py``). Keeping every statement in
this one module means a change of MLflow's schema (the ``mlflow>=3.17,<3.18`` pin in
``pyproject.toml``) is checked here, against the tests that compare these reads with MLflow's own
search (``tests/test_tracking.py``, ``tests/test_summary.py``).

Every read opens the file read-only (``mode=ro``) and waits out another driver's write (a 30 s
busy timeout) instead of failing on its lock; the one write, :func:`relocate_artifacts`, is an
update MLflow has no API for. Standard library only: no MLflow, no SQLAlchemy.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
import urllib.request
from contextlib import closing
from pathlib import Path
from typing import Collection, Sequence

BUSY_TIMEOUT_S = 30  # wait out another driver's write instead of failing on its lock
# MLflow 3.17's schema head (mlflow.store.db.utils._get_latest_schema_revision(); a test keeps
# the two equal): the table layout this module's SQL and harness.bulk's inserts were checked on
SCHEMA_REVISION = "dc11669786a5"


def read_only(db: Path) -> sqlite3.Connection:
    """A read-only connection to the SQLite file ``db`` (its path percent-encoded as a URI)."""
    return sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)


def quick_check(db: Path) -> list[tuple]:
    """``PRAGMA quick_check``'s rows (``[("ok",)]`` for an undamaged file); reads every page.

    Raises:
        sqlite3.DatabaseError: the file is not a database; sqlite3.OperationalError: locked.
    """
    with closing(read_only(db)) as con:
        return con.execute("PRAGMA quick_check").fetchall()


def schema_revision(db: Path) -> str | None:
    """The Alembic revision of a SQLite store's MLflow schema (None without one)."""
    with closing(read_only(db)) as con:
        try:
            row = con.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError as err:
            if "no such table" in str(err):
                return None
            raise
    return row[0] if row else None


def artifact_locations(db: Path, names: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(experiment id, name, artifact location)`` of the active experiments of ``names``."""
    if not names:
        return []
    with closing(read_only(db)) as con:
        rows = con.execute(f"SELECT experiment_id, name, artifact_location FROM experiments "
                           f"WHERE name IN ({','.join('?' * len(names))}) AND lifecycle_stage = 'active'",
                           list(names)).fetchall()
    return [(str(i), name, location) for i, name, location in rows]


def relocate_artifacts(db: Path, experiment_id: str, old: str, new: str) -> None:
    """Point an experiment's artifact location from ``old`` to ``new`` (MLflow has no API for
    it: one SQL update); its runs whose artifact folders exist under ``new`` (the store's folder
    was moved with its ``mlartifacts/``) are pointed there too, the others keep theirs."""
    with closing(sqlite3.connect(db, timeout=BUSY_TIMEOUT_S)) as con, con:
        con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
                    (new, experiment_id))
        runs = con.execute("SELECT run_uuid, artifact_uri FROM runs WHERE experiment_id = ?",
                           (experiment_id,)).fetchall()
        for run_id, uri in runs:
            if uri and uri.startswith(old.rstrip("/") + "/"):
                moved = new + uri[len(old.rstrip("/")):]
                folder = Path(urllib.request.url2pathname(urllib.parse.urlparse(moved).path))
                if moved.startswith("file:") and folder.is_dir():
                    con.execute("UPDATE runs SET artifact_uri = ? WHERE run_uuid = ?", (moved, run_id))


_FINISHED_TRIALS = ("SELECT t.value, r.run_uuid FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                    "WHERE r.lifecycle_stage = 'active' AND r.status = 'FINISHED' AND t.key = 'trial_id'")


def finished_runs(db: Path, experiment_id: str | None, trial_ids: Collection[str] | None = None,
                  since_ms: int | None = None, not_parent: str | None = None,
                  experiment_name: str | None = None) -> dict[str, list[str]]:
    """``trial_id → run ids`` of the FINISHED, not deleted trial runs of experiment
    ``experiment_id`` (or of the active experiment named ``experiment_name``), restricted to
    ``trial_ids`` if given (a sweep's own trials), to runs that ended at or after ``since_ms``
    (ms since the epoch) and to runs whose parent is not ``not_parent`` (a claim's rivals:
    :mod:`harness.leases`): one query that returns the matching ``trial_id`` tags and run ids
    only. Reading the runs whole through MLflow's search took 1.7 / 13.5 / 79.5 s at 10^2 /
    10^3 / 10^4 runs (``benchmarks/store_scale.py``); with ``trial_ids`` what Python reads grows
    with the sweep, not with the store (SQLite walks the ``trial_id`` tags by their index)."""
    sql, args = _FINISHED_TRIALS, []
    if experiment_name is not None:
        sql += (" AND r.experiment_id = (SELECT experiment_id FROM experiments WHERE name = ? "
                "AND lifecycle_stage = 'active')")
        args.append(experiment_name)
    else:
        sql += " AND r.experiment_id = ?"
        args.append(int(experiment_id))
    if trial_ids is not None:  # one JSON parameter: no limit on the number of ids
        sql += " AND t.value IN (SELECT value FROM json_each(?))"
        args.append(json.dumps(sorted(trial_ids)))
    if since_ms is not None:
        sql += " AND r.end_time >= ?"
        args.append(int(since_ms))
    if not_parent is not None:
        sql += (" AND NOT EXISTS (SELECT 1 FROM tags p WHERE p.run_uuid = r.run_uuid "
                "AND p.key = 'mlflow.parentRunId' AND p.value = ?)")
        args.append(not_parent)
    found: dict[str, list[str]] = {}
    with closing(read_only(db)) as con:
        for trial_id, run_id in con.execute(sql, args):
            found.setdefault(trial_id, []).append(run_id)
    return found


def experiments(db: Path, names: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``name → (experiment id, lifecycle stage)`` of the experiments of ``names`` in ``db``."""
    if not names:
        return {}
    with closing(read_only(db)) as con:
        rows = con.execute(f"SELECT name, experiment_id, lifecycle_stage FROM experiments WHERE name IN "
                           f"({','.join('?' * len(names))})", list(names)).fetchall()
    return {name: (str(experiment_id), stage) for name, experiment_id, stage in rows}


def has_running(db: Path, experiment_id: str) -> bool:
    """Whether experiment ``experiment_id`` holds a RUNNING, not deleted run."""
    with closing(read_only(db)) as con:
        return con.execute("SELECT 1 FROM runs WHERE experiment_id = ? AND status = 'RUNNING' "
                           "AND lifecycle_stage = 'active' LIMIT 1", (int(experiment_id),)).fetchone() is not None


_TRIAL_RUNS = ("SELECT r.run_uuid, r.experiment_id, r.status, r.artifact_uri, r.start_time, r.end_time "
               "FROM runs r WHERE r.experiment_id = ? AND r.lifecycle_stage = 'active' AND EXISTS (SELECT 1 "
               "FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = 'trial_id' AND t.value != '') "
               "ORDER BY r.start_time DESC, r.run_uuid")
_OF_RUNS = "run_uuid IN (SELECT value FROM json_each(?))"


def trial_run_rows(db: Path, experiment_id: str) -> tuple[list[tuple], list[tuple], list[tuple], list[tuple]]:
    """The not deleted trial (child) runs of an experiment, newest first, as four lists of rows:
    runs ``(run id, experiment id, status, artifact URI, start ms, end ms)``, latest metrics
    ``(run id, key, value, is_nan)``, params and tags ``(run id, key, value)``; what
    :func:`analysis.load.search_sqlite` turns into MLflow's ``search_runs`` frame.

    Raises:
        sqlite3.OperationalError: the file's schema is not the one this reads (or it is locked
            past the timeout).
    """
    with closing(read_only(db)) as con:
        runs = con.execute(_TRIAL_RUNS, (int(experiment_id),)).fetchall()
        ids = json.dumps([r[0] for r in runs])
        metrics = con.execute(f"SELECT run_uuid, key, value, is_nan FROM latest_metrics WHERE {_OF_RUNS}",
                              (ids,)).fetchall()
        params = con.execute(f"SELECT run_uuid, key, value FROM params WHERE {_OF_RUNS}", (ids,)).fetchall()
        tags = con.execute(f"SELECT run_uuid, key, value FROM tags WHERE {_OF_RUNS}", (ids,)).fetchall()
    return runs, metrics, params, tags


def tagged_parent_artifacts(db: Path, experiment_id: str, tag: str, value: str) -> list[str]:
    """Artifact URIs of up to 10 not deleted parent runs (tag ``role`` = ``sweep``) of the
    experiment tagged ``tag`` = ``value``, newest first.

    Raises:
        sqlite3.OperationalError: the schema is not the one this reads.
    """
    with closing(read_only(db)) as con:
        rows = con.execute(
            "SELECT r.artifact_uri FROM runs r JOIN tags a ON a.run_uuid = r.run_uuid AND a.key = 'role' "
            "AND a.value = 'sweep' JOIN tags b ON b.run_uuid = r.run_uuid AND b.key = ? AND b.value = ? "
            "WHERE r.experiment_id = ? AND r.lifecycle_stage = 'active' "
            "ORDER BY r.start_time DESC, r.run_uuid LIMIT 10", (tag, value, int(experiment_id))).fetchall()
    return [uri for (uri,) in rows]
