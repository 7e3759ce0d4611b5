"""Where a sweep's runs go, without MLflow: the store's address (a SQLite file or a tracking
server), the checks that it can be used, and the read-only listing of finished trials a dry run
needs (on a SQLite store by the SQL of :mod:`harness.mlflow_sql`, the one module that reads
MLflow's tables). Kept apart from :mod:`harness.tracking` so that ``--help``, bad input and dry runs do not
import MLflow (about 2 s of a dry run's 7; ``benchmarks/cli_latency.py``).
"""
from __future__ import annotations

import sqlite3
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Sequence

from harness import mlflow_sql
from harness.config import TrackingConfig, TrackingKind
from harness.paths import folder_name
from harness.secrets import CredentialsError, database_credentials, mask, move_credentials


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
    if cfg.kind is TrackingKind.postgres:
        return _postgres_store(cfg, cwd)
    db = (cwd / cfg.db_path).resolve()
    root = (cwd / cfg.artifact_root).resolve() if cfg.artifact_root else db.parent / "mlartifacts"
    return Store(sqlite_uri(db), root.as_uri())


POSTGRES_SCHEMES = ("postgresql://", "postgresql+psycopg://")


def _postgres_store(cfg: TrackingConfig, cwd: Path) -> Store:
    """``tracking=postgres``: the database URI without its userinfo (moved to ``PGUSER`` /
    ``PGPASSWORD``: :func:`harness.secrets.database_credentials`); artifacts in
    ``tracking.artifact_root`` (default ``./mlartifacts``), made absolute.

    Raises:
        StoreError: a ``tracking.uri`` that is not a ``postgresql://`` or
            ``postgresql+psycopg://`` URI (masked).
    """
    if not cfg.uri or not cfg.uri.startswith(POSTGRES_SCHEMES):
        raise StoreError(f"tracking.uri={mask(cfg.uri or '')!r} cannot be used with tracking=postgres; "
                         "allowed: postgresql+psycopg://USER:PASSWORD@HOST:PORT/DATABASE (a database "
                         "in MLflow's schema, written directly; an MLflow server is tracking=server)")
    try:
        uri = database_credentials(cfg.uri)
    except CredentialsError as err:
        raise StoreError(str(err)) from err
    if uri.startswith("postgresql://"):  # SQLAlchemy 2.0 reads a bare scheme as psycopg2
        uri = "postgresql+psycopg://" + uri[len("postgresql://"):]
    root = (cwd / (cfg.artifact_root or "mlartifacts")).resolve()
    return Store(uri, root.as_uri())


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
    if store.uri.startswith(POSTGRES_SCHEMES):
        check_postgres(store, timeout_s)
        return
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
                check_schema(db)
                check_artifacts(db, store, names, relocate)
        return
    try:
        with urllib.request.urlopen(f"{store.uri}/health", timeout=timeout_s) as response:
            if response.status != 200:
                raise StoreError(f"MLflow server {store.uri} answered /health with {response.status}")
    except (urllib.error.URLError, OSError) as err:
        raise StoreError(f"cannot reach the MLflow tracking server at {store.uri}: {err}") from err


def check_schema(db: Path) -> None:
    """A SQLite store's MLflow schema revision is the one this harness writes
    (:data:`harness.mlflow_sql.SCHEMA_REVISION`, MLflow 3.17's); a store busy past the timeout
    is left to the writer's own check.

    Raises:
        StoreError: naming the store and both revisions.
    """
    try:
        found = mlflow_sql.schema_revision(db)
    except sqlite3.OperationalError:
        return
    if found is not None and found != mlflow_sql.SCHEMA_REVISION:
        raise StoreError(f"tracking store {db} has MLflow schema revision {found}, not "
                         f"{mlflow_sql.SCHEMA_REVISION} (MLflow 3.17's, which this harness writes); "
                         "nothing was run or written: use a store of this MLflow version, or migrate "
                         f"it (mlflow db upgrade sqlite:///{db}) if it is older")


def check_postgres(store: Store, timeout_s: float = 10.0) -> None:
    """Connect to a ``tracking=postgres`` database once (psycopg, credentials from the
    environment) and check that its artifact folder's parent exists.

    Raises:
        StoreError: naming the database (masked) and the driver's one-line reason.
    """
    import psycopg  # only for this store kind

    folder = file_uri_path(store.artifact_root).parent
    if not folder.is_dir():
        raise StoreError(f"artifact folder {folder} does not exist (tracking.artifact_root)")
    try:
        psycopg.connect(store.uri.replace("postgresql+psycopg://", "postgresql://", 1),
                        connect_timeout=max(1, int(timeout_s))).close()
    except psycopg.Error as err:
        reason = " ".join(str(err).split())[:300]
        raise StoreError(f"cannot connect to the PostgreSQL tracking store {mask(store.uri)}: {reason}") from err


def check_sqlite(db: Path) -> None:
    """``PRAGMA quick_check`` on the SQLite file ``db``, opened read-only (it reads every page:
    0.8 s on a store of 10^4 trial runs, 143 MB, README "Faults"). A store busy past the timeout is not
    called damaged (its other drivers' writes go on).

    Raises:
        StoreError: for a damaged file (truncated, overwritten pages), naming it and what to do.
    """
    try:
        rows = mlflow_sql.quick_check(db)
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
    (:func:`harness.mlflow_sql.relocate_artifacts`) instead of refused.

    Raises:
        StoreError: naming the experiment, both folders and the override.
    """
    if not names or store.artifact_root is None:
        return
    root = store.artifact_root.rstrip("/")
    # a deleted one is left out: check_experiments says so
    for experiment_id, name, location in mlflow_sql.artifact_locations(db, names):
        if (location or "").startswith(root + "/"):
            continue
        here = f"{root}/{folder_name(name)}"
        if not relocate:
            raise StoreError(
                f"experiment {name!r} in {db} keeps its artifacts in {location}, not beside this "
                f"store ({here}): the store was copied or moved, or tracking.artifact_root changed; "
                f"to record its new runs' artifacts in {here}, run with "
                "tracking.relocate_artifacts=true (README, Faults), or use the store where it was")
        mlflow_sql.relocate_artifacts(db, experiment_id, location, here)
        print(f"experiment {name!r}: new runs' artifacts now go to {here} (were {location})",
              file=sys.stderr)


def _probe_writable(folder: Path) -> None:
    """Create and remove a file in ``folder`` (permission bits alone mislead when run as root)."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as err:
        raise StoreError(f"tracking store folder {folder} is read-only: {err}") from err


def experiments(store: Store, names: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``name → (experiment id, lifecycle stage)`` of the experiments of ``names`` that exist in
    the store; read only: a local store that does not exist yet is not created (the answer is
    then empty). A local store is read with one SQL query on MLflow's schema, a server with
    MLflow's client (imported only then)."""
    db = sqlite_path(store.uri)
    if db is not None:
        if not db.exists() or db.stat().st_size == 0:
            return {}
        return mlflow_sql.experiments(db, names)
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
        return mlflow_sql.has_running(db, experiment_id)
    from mlflow.tracking import MlflowClient  # MLflow only for a server store

    return bool(MlflowClient(tracking_uri=store.uri).search_runs(
        [experiment_id], "attributes.status = 'RUNNING'", max_results=1))


def finished_trials(store: Store, ablation: str, trial_ids: Collection[str] | None = None) -> dict[str, list[str]]:
    """``trial_id → run ids`` of the FINISHED, not deleted trial runs of experiment ``ablation``
    (of ``trial_ids`` only, if given); read only: a local store that does not exist yet is not
    created (the answer is then empty). A local store is read with one SQL query on MLflow's
    schema (:func:`harness.mlflow_sql.finished_runs`; a dry run then needs no SQLAlchemy store,
    ~2 s), a server with MLflow's client. What one invocation reads once: the dry run's "done"
    column, the trials the preflight builds, and the queue's resume plan."""
    db = sqlite_path(store.uri)
    if db is not None:
        if not db.exists() or db.stat().st_size == 0:
            return {}
        return mlflow_sql.finished_runs(db, None, trial_ids, experiment_name=ablation)
    from mlflow.tracking import MlflowClient  # MLflow only for a server store

    client = MlflowClient(tracking_uri=store.uri)
    found = client.get_experiment_by_name(ablation)
    if found is None or found.lifecycle_stage != "active":
        return {}
    wanted = None if trial_ids is None else set(trial_ids)
    runs: dict[str, list[str]] = {}
    token = None
    while True:
        page = client.search_runs([found.experiment_id], "attributes.status = 'FINISHED'",
                                  max_results=1000, page_token=token)
        for run in page:
            trial = run.data.tags.get("trial_id")
            if trial and (wanted is None or trial in wanted):
                runs.setdefault(trial, []).append(run.info.run_id)
        token = page.token
        if not token:
            return runs
