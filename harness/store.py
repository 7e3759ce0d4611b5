"""Where a sweep's runs go, without MLflow: the store's address (a SQLite file or a tracking
server), the checks that it can be used, and the read-only listing of finished trials a dry run
needs. Kept apart from :mod:`harness.tracking` so that ``--help``, bad input and dry runs do not
import MLflow (about 2 s of a dry run's 7; ``benchmarks/cli_latency.py``).
"""
from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Sequence

from harness.config import TrackingConfig, TrackingKind
from harness.paths import folder_name
from harness.secrets import CredentialsError, mask, move_credentials


class StoreError(ValueError):
    """The configured tracking store cannot be used (found before any trial starts)."""


@dataclass(frozen=True)
class Store:
    """Where runs go: a tracking URI and, for a local store, the artifact root beside it."""

    uri: str
    artifact_root: str | None


def resolve_store(cfg: TrackingConfig, cwd: Path) -> Store:
    """Make the configured store absolute, once, in the driver (relative to ``cwd``).

    ``tracking=local`` gives ``sqlite:////abs/path/mlflow.db`` with artifacts in
    ``mlartifacts/`` beside it (MLflow's default ``./mlruns`` would follow the current directory).

    A server URI's userinfo (``http://USER:PASSWORD@HOST``) is moved to the environment
    variables MLflow sends as basic auth (:func:`harness.secrets.move_credentials`).

    Raises:
        StoreError: for ``tracking=server`` without an ``http(s)://`` ``tracking.uri`` (masked).
    """
    if not cfg.lease_s > 0:
        raise StoreError(f"tracking.lease_s must be positive, got {cfg.lease_s}")
    if cfg.kind is TrackingKind.server:
        if not cfg.uri or not cfg.uri.startswith(("http://", "https://")):
            raise StoreError(f"tracking.uri={mask(cfg.uri or '')!r} cannot be used with tracking=server; "
                             "allowed: an MLflow tracking server, http://HOST:PORT or https://HOST:PORT "
                             "(file stores are not supported: use tracking=local for a SQLite file)")
        try:  # userinfo from a config file (the command line's is moved before Hydra starts)
            uri = move_credentials(cfg.uri)
        except CredentialsError as err:
            raise StoreError(str(err)) from err
        return Store(uri.rstrip("/"), None)
    db = (cwd / cfg.db_path).resolve()
    root = (cwd / cfg.artifact_root).resolve() if cfg.artifact_root else db.parent / "mlartifacts"
    return Store(sqlite_uri(db), root.as_uri())


def sqlite_uri(db: Path) -> str:
    """``sqlite:////abs/path``; a ``%`` that SQLAlchemy would decode (``%41``) is escaped as ``%25``."""
    path = str(db)
    if urllib.parse.unquote(path) != path:
        path = path.replace("%", "%25")
    return f"sqlite:///{path}"


def sqlite_path(uri: str) -> Path | None:
    """The file of a ``sqlite:///`` URI (inverse of :func:`sqlite_uri`), or None for a server."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(urllib.parse.unquote(uri[len("sqlite:///"):]))


def file_uri_path(uri: str) -> Path:
    """The folder of a ``file://`` URI, percent-decoded (spaces, non-ASCII, ``%``)."""
    return Path(urllib.request.url2pathname(urllib.parse.urlparse(uri).path))


def deleted_experiment_error(name: str, experiment_id: str, uri: str) -> str:
    """The message for an ablation whose experiment was deleted, with the ways out."""
    return (f"MLflow experiment {name!r} (id {experiment_id}) in {uri} is deleted; restore it "
            f"(mlflow experiments restore --experiment-id {experiment_id}), purge it for good "
            f"(mlflow gc --backend-store-uri {uri} --experiment-ids {experiment_id}), or record "
            f"under another name (ablation.name=NEW_NAME)")


def check_store(store: Store, names: Sequence[str] = (), relocate: bool = False,
                timeout_s: float = 10.0) -> None:
    """Fail early if the store cannot be used: a missing or read-only folder, a damaged SQLite
    file (:func:`check_sqlite`), an experiment of ``names`` whose artifacts live elsewhere
    (:func:`check_artifacts`; ``relocate``: move them on purpose), or a tracking server that does
    not answer ``/health``.

    Raises:
        StoreError: naming the store and what is wrong with it.
    """
    db = sqlite_path(store.uri)
    if db is not None:
        for folder in (db.parent, file_uri_path(store.artifact_root).parent):
            if not folder.is_dir():
                raise StoreError(f"tracking store folder {folder} does not exist (tracking.db_path)")
            _probe_writable(folder)
        if db.exists():
            try:
                with open(db, "ab"):
                    pass
            except OSError as err:
                raise StoreError(f"tracking store {db} is not writable: {err}") from err
            if db.stat().st_size > 0:  # an empty file is a store still to be created
                check_sqlite(db)
                check_artifacts(db, store, names, relocate)
        return
    try:
        with urllib.request.urlopen(f"{store.uri}/health", timeout=timeout_s) as response:
            if response.status != 200:
                raise StoreError(f"MLflow server {store.uri} answered /health with {response.status}")
    except (urllib.error.URLError, OSError) as err:
        raise StoreError(f"cannot reach the MLflow tracking server at {store.uri}: {err}") from err


def _read_only(db: Path) -> sqlite3.Connection:
    # timeout: wait out another driver's write instead of failing on its lock
    return sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=30)


def check_sqlite(db: Path) -> None:
    """``PRAGMA quick_check`` on the SQLite file ``db``, opened read-only (it reads every page:
    0.8 s on a store of 10^4 trial runs, 143 MB, README "Faults"). A store busy past the timeout is not
    called damaged (its other drivers' writes go on).

    Raises:
        StoreError: for a damaged file (truncated, overwritten pages), naming it and what to do.
    """
    try:
        with closing(_read_only(db)) as con:
            rows = con.execute("PRAGMA quick_check").fetchall()
        problem = "" if rows == [("ok",)] else "; ".join(str(r[0]) for r in rows[:3])
    except sqlite3.OperationalError as err:
        problem = "" if "locked" in str(err) or "busy" in str(err) else str(err)
    except sqlite3.DatabaseError as err:  # "file is not a database", "disk image is malformed"
        problem = str(err)
    if problem:
        problem = " ".join(problem.split())
        raise StoreError(f"tracking store {db} is damaged (PRAGMA quick_check: {problem}); nothing "
                         "was run or written: restore it from a backup, or keep it aside and record "
                         f"in a new store (tracking.db_path=NEW.db); `sqlite3 {db} .recover` may "
                         "rescue its runs")


def check_artifacts(db: Path, store: Store, names: Sequence[str], relocate: bool = False) -> None:
    """Each experiment of ``names`` in ``db`` keeps its artifacts where this store puts them
    (under ``store.artifact_root``); a store that was copied or moved keeps its experiments'
    creation-time locations, so new runs would write into the old folder. With ``relocate``
    (``tracking.relocate_artifacts=true``) such an experiment is pointed here
    (:func:`relocate_artifacts`) instead of refused.

    Raises:
        StoreError: naming the experiment, both folders and the override.
    """
    if not names or store.artifact_root is None:
        return
    root = store.artifact_root.rstrip("/")
    marks = ",".join("?" * len(names))
    with closing(_read_only(db)) as con:
        rows = con.execute(f"SELECT experiment_id, name, artifact_location FROM experiments "
                           f"WHERE name IN ({marks}) AND lifecycle_stage = 'active'",
                           list(names)).fetchall()  # a deleted one: check_experiments says so
    for experiment_id, name, location in rows:
        if (location or "").startswith(root + "/"):
            continue
        here = f"{root}/{folder_name(name)}"
        if not relocate:
            raise StoreError(
                f"experiment {name!r} in {db} keeps its artifacts in {location}, not beside this "
                f"store ({here}): the store was copied or moved, or tracking.artifact_root changed; "
                f"to record its new runs' artifacts in {here}, run with "
                "tracking.relocate_artifacts=true (README, Faults), or use the store where it was")
        relocate_artifacts(db, experiment_id, location, here)
        print(f"experiment {name!r}: new runs' artifacts now go to {here} (were {location})",
              file=sys.stderr)


def relocate_artifacts(db: Path, experiment_id: str, old: str, new: str) -> None:
    """Point an experiment's artifact location from ``old`` to ``new`` (MLflow has no API for
    it: one SQL update); its runs whose artifact folders exist under ``new`` (the store's folder
    was moved with its ``mlartifacts/``) are pointed there too, the others keep theirs."""
    with closing(sqlite3.connect(db, timeout=30)) as con, con:
        con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
                    (new, experiment_id))
        runs = con.execute("SELECT run_uuid, artifact_uri FROM runs WHERE experiment_id = ?",
                           (experiment_id,)).fetchall()
        for run_id, uri in runs:
            if uri and uri.startswith(old.rstrip("/") + "/"):
                moved = new + uri[len(old.rstrip("/")):]
                if moved.startswith("file:") and file_uri_path(moved).is_dir():
                    con.execute("UPDATE runs SET artifact_uri = ? WHERE run_uuid = ?", (moved, run_id))


def _probe_writable(folder: Path) -> None:
    """Create and remove a file in ``folder`` (permission bits alone mislead when run as root)."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as err:
        raise StoreError(f"tracking store folder {folder} is read-only: {err}") from err


def finished_runs(db: Path, experiment_id: str, trial_ids: Collection[str] | None = None,
                  since_ms: int | None = None, not_parent: str | None = None) -> dict[str, list[str]]:
    """``trial_id → run ids`` of the FINISHED, not deleted trial runs of experiment
    ``experiment_id`` in the SQLite store ``db``, restricted to ``trial_ids`` if given (a
    sweep's own trials), to runs that ended at or after ``since_ms`` (ms since the epoch) and
    to runs whose parent is not ``not_parent`` (a claim's rivals: :mod:`harness.leases`): one
    read-only SQL query on MLflow's schema that returns the matching ``trial_id`` tags and run
    ids only. The resume listing of a sweep: reading the runs whole through MLflow's search took
    1.7 / 13.5 / 79.5 s at 10^2 / 10^3 / 10^4 runs (``benchmarks/store_scale.py``); with
    ``trial_ids`` what Python reads grows with the sweep, not with the store (SQLite walks the
    ``trial_id`` tags by their index)."""
    sql = ("SELECT t.value, r.run_uuid FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
           "WHERE r.experiment_id = ? AND r.lifecycle_stage = 'active' AND r.status = 'FINISHED' "
           "AND t.key = 'trial_id'")
    args: list = [int(experiment_id)]
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
    with closing(_read_only(db)) as con:
        for trial_id, run_id in con.execute(sql, args):
            found.setdefault(trial_id, []).append(run_id)
    return found


def experiments(store: Store, names: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``name → (experiment id, lifecycle stage)`` of the experiments of ``names`` that exist in
    the store; read only: a local store that does not exist yet is not created (the answer is
    then empty). A local store is read with one SQL query on MLflow's schema, a server with
    MLflow's client (imported only then)."""
    db = sqlite_path(store.uri)
    if db is not None:
        if not db.exists() or db.stat().st_size == 0 or not names:
            return {}
        with closing(_read_only(db)) as con:
            rows = con.execute(f"SELECT name, experiment_id, lifecycle_stage FROM experiments WHERE name IN "
                               f"({','.join('?' * len(names))})", list(names)).fetchall()
        return {name: (str(experiment_id), stage) for name, experiment_id, stage in rows}
    from mlflow.tracking import MlflowClient  # MLflow only for a server store

    client = MlflowClient(tracking_uri=store.uri)
    found = {name: client.get_experiment_by_name(name) for name in names}
    return {name: (e.experiment_id, e.lifecycle_stage) for name, e in found.items() if e is not None}


def check_experiments(store: Store, names: Sequence[str]) -> None:
    """Fail early if an ablation's experiment exists but is deleted (:func:`experiments`: reads
    only).

    Raises:
        StoreError: naming the experiment and how to restore, purge or avoid it.
    """
    for name, (experiment_id, stage) in experiments(store, names).items():
        if stage == "deleted":
            raise StoreError(deleted_experiment_error(name, experiment_id, store.uri))


def has_running(store: Store, experiment_id: str) -> bool:
    """Whether experiment ``experiment_id`` holds a RUNNING, not deleted run (a live sweep's, or
    a dead driver's that a sweep with trials to run would close as stale); read only, by SQL on
    a local store, by MLflow's client on a server."""
    db = sqlite_path(store.uri)
    if db is not None:
        with closing(_read_only(db)) as con:
            return con.execute("SELECT 1 FROM runs WHERE experiment_id = ? AND status = 'RUNNING' "
                               "AND lifecycle_stage = 'active' LIMIT 1", (int(experiment_id),)).fetchone() is not None
    from mlflow.tracking import MlflowClient  # MLflow only for a server store

    return bool(MlflowClient(tracking_uri=store.uri).search_runs(
        [experiment_id], "attributes.status = 'RUNNING'", max_results=1))


def finished_ids(store: Store, ablation: str) -> set[str]:
    """Trial ids with a FINISHED run in experiment ``ablation``; read only: a local store that
    does not exist yet is not created (the answer is then empty). A local store is read with
    one SQL query on MLflow's schema (a dry run then needs no SQLAlchemy store, ~2 s); a server
    with MLflow's client."""
    db = sqlite_path(store.uri)
    if db is not None:
        if not db.exists():
            return set()
        with closing(_read_only(db)) as con:
            rows = con.execute(
                "SELECT t.value FROM tags t JOIN runs r ON r.run_uuid = t.run_uuid "
                "JOIN experiments e ON e.experiment_id = r.experiment_id WHERE e.name = ? "
                "AND e.lifecycle_stage = 'active' AND r.lifecycle_stage = 'active' "
                "AND r.status = 'FINISHED' AND t.key = 'trial_id'", (ablation,)).fetchall()
        return {value for (value,) in rows}
    from mlflow.tracking import MlflowClient  # MLflow only for a server store

    client = MlflowClient(tracking_uri=store.uri)
    found = client.get_experiment_by_name(ablation)
    if found is None or found.lifecycle_stage != "active":
        return set()
    ids, token = set(), None
    while True:
        page = client.search_runs([found.experiment_id], "attributes.status = 'FINISHED'",
                                  max_results=1000, page_token=token)
        ids.update(r.data.tags["trial_id"] for r in page if "trial_id" in r.data.tags)
        token = page.token
        if not token:
            return ids
