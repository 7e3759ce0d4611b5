"""Where a sweep's runs go, without MLflow: the store's address (a SQLite file or a tracking
server), the checks that it can be used, and the read-only listing of finished trials a dry run
needs. Kept apart from :mod:`harness.tracking` so that ``--help``, bad input and dry runs do not
import MLflow (about 2 s of a dry run's 7; ``benchmarks/cli_latency.py``).
"""
from __future__ import annotations

import sqlite3
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from harness.config import TrackingConfig, TrackingKind
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


def _file_uri_path(uri: str) -> Path:
    """The folder of a ``file://`` URI, percent-decoded (spaces, non-ASCII, ``%``)."""
    return Path(urllib.request.url2pathname(urllib.parse.urlparse(uri).path))


def deleted_experiment_error(name: str, experiment_id: str, uri: str) -> str:
    """The message for an ablation whose experiment was deleted, with the ways out."""
    return (f"MLflow experiment {name!r} (id {experiment_id}) in {uri} is deleted; restore it "
            f"(mlflow experiments restore --experiment-id {experiment_id}), purge it for good "
            f"(mlflow gc --backend-store-uri {uri} --experiment-ids {experiment_id}), or record "
            f"under another name (ablation.name=NEW_NAME)")


def check_store(store: Store, timeout_s: float = 10.0) -> None:
    """Fail early if the store cannot be written: a missing or read-only folder for a SQLite
    file, or a tracking server that does not answer ``/health``.

    Raises:
        StoreError: naming the store and what is wrong with it.
    """
    db = sqlite_path(store.uri)
    if db is not None:
        for folder in (db.parent, _file_uri_path(store.artifact_root).parent):
            if not folder.is_dir():
                raise StoreError(f"tracking store folder {folder} does not exist (tracking.db_path)")
            _probe_writable(folder)
        if db.exists():
            try:
                with open(db, "ab"):
                    pass
            except OSError as err:
                raise StoreError(f"tracking store {db} is not writable: {err}") from err
        return
    try:
        with urllib.request.urlopen(f"{store.uri}/health", timeout=timeout_s) as response:
            if response.status != 200:
                raise StoreError(f"MLflow server {store.uri} answered /health with {response.status}")
    except (urllib.error.URLError, OSError) as err:
        raise StoreError(f"cannot reach the MLflow tracking server at {store.uri}: {err}") from err


def _probe_writable(folder: Path) -> None:
    """Create and remove a file in ``folder`` (permission bits alone mislead when run as root)."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as err:
        raise StoreError(f"tracking store folder {folder} is read-only: {err}") from err


def finished_ids(store: Store, ablation: str) -> set[str]:
    """Trial ids with a FINISHED run in experiment ``ablation``; read only: a local store that
    does not exist yet is not created (the answer is then empty). A local store is read with
    one SQL query on MLflow's schema (a dry run then needs no SQLAlchemy store, ~2 s)."""
    if store.uri.startswith("sqlite:///"):
        db = Path(store.uri[len("sqlite:///"):])
        if not db.exists():
            return set()
        with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as con:
            rows = con.execute(
                "SELECT t.value FROM tags t JOIN runs r ON r.run_uuid = t.run_uuid "
                "JOIN experiments e ON e.experiment_id = r.experiment_id WHERE e.name = ? "
                "AND e.lifecycle_stage = 'active' AND r.lifecycle_stage = 'active' "
                "AND r.status = 'FINISHED' AND t.key = 'trial_id'", (ablation,)).fetchall()
        return {value for (value,) in rows}
    from harness.tracking import Tracker  # MLflow only for a server store

    tracker = Tracker(store)
    found = tracker.client.get_experiment_by_name(ablation)
    return set(tracker.finished_trials(found.experiment_id)) if found is not None else set()
