"""Batched writes into MLflow's own tables: a batch of claimed runs, or of finished trials'
records (params, every metric with its step, latest metrics, tags, status and end time), in one
transaction of bulk ``INSERT``\\ s, on a SQLite store or a PostgreSQL database addressed directly.

MLflow's client writes a run through its ORM, one object per row and one transaction per call
(``create_run``, ``log_batch``, ``set_terminated``: three a trial, ~40 ms of driver CPU on the
2-core box); here the rows of a whole batch go in as a few multi-row inserts through SQLAlchemy
Core on MLflow's own table definitions (:mod:`mlflow.store.tracking.dbmodels.models`), so a
reader (``mlflow.search_runs``, ``get_metric_history``, the UI) sees exactly what the client
would have written (``tests/test_bulk.py`` compares both field by field).

The schema is MLflow's: the store's Alembic revision is read when the store is opened and any
other than :data:`SCHEMA_REVISION` (MLflow 3.17's, the version ``pyproject.toml`` pins) is
refused (:class:`~harness.records.SchemaMismatch`, naming both).

The lease is checked inside each transaction (:meth:`BulkStore.transaction`): the parents the
batch writes under are read there (on SQLite the transaction holds the write lock from its
``BEGIN IMMEDIATE``; on PostgreSQL the parent rows are locked ``FOR UPDATE``), and a parent that
is closed, deleted, tagged ``closed_by`` or whose heartbeat is older than its lease makes the
whole batch commit nothing (:class:`~harness.leases.LeaseLost`). A failed write raises a
:class:`~harness.records.StoreWriteError` whose ``cause`` says why (full, locked, unreachable,
conflict, other), after the transaction rolled back: a batch is all or nothing. A SQLite store
that another connection holds write-locked is waited for, up to the lease, the driver saying so
once (:class:`~harness.leases.LockWait`).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Callable, Collection, Iterator, Optional, Sequence, TypeVar

import sqlalchemy as sa
from mlflow.store.tracking.dbmodels.models import (SqlExperiment, SqlLatestMetric, SqlMetric,
                                                   SqlParam, SqlRun, SqlTag)
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME
from mlflow.utils.name_utils import _generate_random_name
from mlflow.utils.uri import append_to_uri_path

from harness.leases import LOCK_TRY_S, LeaseLost, LockWait, lease_lost, now_ms
from harness.mlflow_sql import SCHEMA_REVISION
from harness.records import SchemaMismatch, StoreWriteError, fault_cause
from harness.secrets import mask
from harness.store import sqlite_path

T = TypeVar("T")

# a SQLite writer waits this long for another's lock, as MLflow's reads do; with a LockWait its
# BEGIN IMMEDIATE waits in tries of LOCK_TRY_S instead (up to the lease), its commit this long
BUSY_TIMEOUT_S = 30
READ_ONLY = "harness_read_only"  # a connection's execution option: a single read, no BEGIN IMMEDIATE
RUNS, TAGS, PARAMS = SqlRun.__table__, SqlTag.__table__, SqlParam.__table__
METRICS, LATEST, EXPERIMENTS = SqlMetric.__table__, SqlLatestMetric.__table__, SqlExperiment.__table__
# statements built once (each flush rebuilt them: ~0.3 ms apiece); ``ids`` expands to the run ids
_IDS = sa.bindparam("ids", expanding=True)
_PARENT_ROWS = (sa.select(RUNS.c.run_uuid, RUNS.c.status, RUNS.c.lifecycle_stage)
                .where(RUNS.c.run_uuid.in_(_IDS)).with_for_update(of=RUNS))
_LEASE_TAGS = sa.select(TAGS.c.run_uuid, TAGS.c.key, TAGS.c.value).where(
    TAGS.c.run_uuid.in_(_IDS), TAGS.c.key.in_(("closed_by", "heartbeat_ms", "lease_s")))
_RUNNING = sa.select(RUNS.c.run_uuid).where(RUNS.c.run_uuid.in_(_IDS), RUNS.c.status == "RUNNING",
                                            RUNS.c.lifecycle_stage == "active")
_CLOSE = RUNS.update().where(RUNS.c.run_uuid.in_(_IDS)).values(status=sa.bindparam("status"),
                                                                end_time=sa.bindparam("end"))


def bulk_capable(uri: str) -> bool:
    """Whether ``uri`` is a database this module writes (SQLite file or PostgreSQL), not a server."""
    return sqlite_path(uri) is not None or uri.startswith(("postgresql://", "postgresql+"))


@dataclass(frozen=True)
class Created:
    """A run created by :meth:`BulkStore.create_runs`: its id and where its artifacts go."""

    run_id: str
    artifact_uri: str


@dataclass
class Record:
    """One finished trial's rows for :meth:`BulkStore.record`.

    Attributes:
        run_id: its claimed, RUNNING run.
        status: ``FINISHED`` or ``FAILED``; None: the run stays RUNNING (live curve points).
        metrics: ``(key, value, timestamp ms, step)``, finite values only.
        params: ``(key, value)`` not logged before.
        tags: ``(key, value)``.
    """

    run_id: str
    status: Optional[str]
    metrics: list[tuple[str, float, int, int]]
    params: list[tuple[str, str]]
    tags: list[tuple[str, str]]


def classify(err: BaseException) -> str:
    """The :class:`StoreWriteError` cause of a database error (its message is the DBAPI's): the
    words of :data:`harness.records.FAULT_WORDS`, else ``conflict`` for an integrity error, else
    ``other``."""
    cause = fault_cause(str(getattr(err, "orig", None) or err))
    if cause is not None:
        return cause
    return "conflict" if isinstance(err, sa.exc.IntegrityError) else "other"


class BulkStore:
    """One engine on a SQLite or PostgreSQL tracking store whose schema is MLflow 3.17's.

    Args:
        uri: the SQLAlchemy URI MLflow tracks into (``sqlite:////abs/mlflow.db``,
            ``postgresql+psycopg://USER@HOST:PORT/DB``; a password comes from ``PGPASSWORD``).
        on_lost: told why, when a transaction finds a parent's lease not held
            (:meth:`harness.leases.Leases.lose`); each parent's lease is its own tags'.

    Raises:
        SchemaMismatch: the store's Alembic revision is not :data:`SCHEMA_REVISION`.
        StoreWriteError: the store cannot be reached (cause ``unreachable``) or read.
    """

    def __init__(self, uri: str, on_lost: Callable[[str], None] = lambda reason: None,
                 lock_wait: Optional[LockWait] = None) -> None:
        self.uri, self.on_lost, self.lock_wait = uri, on_lost, lock_wait
        self.sqlite = sqlite_path(uri) is not None
        self.commits = 0  # transactions committed (the tests' write points)
        self.engine = sa.create_engine(uri, **({"connect_args": {"timeout": BUSY_TIMEOUT_S}} if self.sqlite else
                                               {"pool_pre_ping": True, "connect_args": pg_lock_timeout(lock_wait)}))
        if self.sqlite:  # our own BEGIN: pysqlite's implicit one would take the write lock late
            sa.event.listen(self.engine, "connect", _autocommit_driver)
            sa.event.listen(self.engine, "begin", self._begin_immediate)
        self._waiting(self.check_schema)

    def _waiting(self, call: Callable[[], T]) -> T:
        """``call()`` (a whole transaction, or a read), tried again while it finds the store
        locked by another connection, up to the lease (:attr:`lock_wait`; none: once). On
        PostgreSQL a lock another connection holds (a row ``FOR UPDATE``, ``LOCK TABLE``) fails
        a statement after :data:`~harness.leases.LOCK_TRY_S` (:func:`pg_lock_timeout`) and the
        transaction, rolled back, is tried again from its start; on SQLite the transaction's
        ``BEGIN IMMEDIATE`` waits for the lock itself (:meth:`_begin_immediate`), and once it
        gave up after the lease, so does this."""
        return call() if self.lock_wait is None else self.lock_wait.call(call)

    def _begin_immediate(self, conn: sa.Connection) -> None:
        """A SQLite transaction's ``BEGIN IMMEDIATE`` (its write lock taken first). With a
        :attr:`lock_wait`, each try waits :data:`~harness.leases.LOCK_TRY_S` for another
        connection's lock and the tries go on up to the lease (:class:`~harness.leases.LockWait`:
        the driver says it waits); once the lock is held, the commit waits for readers as long
        as before (:data:`BUSY_TIMEOUT_S`)."""
        if conn.get_execution_options().get(READ_ONLY):  # one statement, read in autocommit
            return
        if self.lock_wait is None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            return
        driver = conn.connection.driver_connection  # a PRAGMA that takes no lock: no statement wrapping
        driver.execute(f"PRAGMA busy_timeout = {int(LOCK_TRY_S * 1000)}")
        try:
            self.lock_wait.call(lambda: conn.exec_driver_sql("BEGIN IMMEDIATE"))
        finally:
            driver.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")

    def check_schema(self) -> None:
        """Refuse a store whose MLflow schema revision is not :data:`SCHEMA_REVISION`."""
        try:
            with self.engine.connect() as conn:
                found = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
        except sa.exc.SQLAlchemyError as err:
            raise self._error("reading the schema revision", err) from err
        if found != SCHEMA_REVISION:
            raise SchemaMismatch(
                f"tracking store {mask(self.uri)} has MLflow schema revision {found}, not "
                f"{SCHEMA_REVISION} (MLflow 3.17's, which this harness writes); nothing was written: "
                "use a store of this MLflow version, or migrate it (mlflow db upgrade) if it is older",
                "schema", mask(self.uri))

    def _error(self, what: str, err: BaseException) -> StoreWriteError:
        cause = classify(err)
        detail = " ".join(str(getattr(err, "orig", None) or err).split())[:300]
        return StoreWriteError(f"{what} in tracking store {mask(self.uri)} failed ({cause}): {detail}; "
                               "the batch committed nothing", cause, mask(self.uri), detail)

    @contextlib.contextmanager
    def transaction(self, parents: Collection[str], what: str = "a batched write") -> Iterator[sa.Connection]:
        """One transaction whose first statements check the lease of ``parents`` (the module
        docstring); commits on exit, rolls back on any error.

        Raises:
            LeaseLost: a parent is no longer held (nothing committed; ``on_lost`` told why).
            StoreWriteError: the database refused (nothing committed), ``cause`` set.
        """
        try:
            with self.engine.begin() as conn:
                reason = self._lease_problem(conn, parents)
                if reason is not None:
                    self.on_lost(reason)
                    raise lease_lost(reason)
                yield conn
            self.commits += 1
        except (LeaseLost, StoreWriteError):
            raise
        except sa.exc.SQLAlchemyError as err:
            raise self._error(what, err) from err

    def _lease_problem(self, conn: sa.Connection, parents: Collection[str]) -> Optional[str]:
        """Why the lease of one of ``parents`` is not held now (None when all are), read inside
        the transaction: RUNNING, active, not ``closed_by``, heartbeat younger than the lease."""
        if not parents:
            return None
        ids = {"ids": sorted(parents)}
        rows = conn.execute(_PARENT_ROWS, ids).all()
        tags = conn.execute(_LEASE_TAGS, ids).all()
        held = {run_id: {} for run_id, status, stage in rows if status == "RUNNING" and stage == "active"}
        for run_id, key, value in tags:
            if run_id in held:
                held[run_id][key] = value
        now = now_ms()
        for parent in sorted(parents):
            t = held.get(parent)
            if t is None:
                return f"parent run {parent} is no longer RUNNING (read inside the write's transaction)"
            if "closed_by" in t:
                return f"parent run {parent} was closed by {t['closed_by']}"
            if "heartbeat_ms" in t and now - int(t["heartbeat_ms"]) >= float(t.get("lease_s", 0)) * 1000 > 0:
                return (f"parent run {parent}'s last heartbeat is {(now - int(t['heartbeat_ms'])) / 1000:.0f} s "
                        f"old, past its lease of {t['lease_s']} s")
        return None

    def run_state(self, run_id: str) -> tuple[str, str, Optional[str]]:
        """A run's ``(status, lifecycle stage, closed_by tag or None)``, read in one statement
        outside any transaction (no write lock taken), waited for while the store is locked
        (:meth:`_waiting`); a run not in the store reads as ``("absent", "deleted", None)``.

        Raises:
            StoreWriteError: the read failed (cause set: locked, unreachable, ...).
        """
        query = (sa.select(RUNS.c.status, RUNS.c.lifecycle_stage, TAGS.c.value)
                 .outerjoin(TAGS, sa.and_(TAGS.c.run_uuid == RUNS.c.run_uuid, TAGS.c.key == "closed_by"))
                 .where(RUNS.c.run_uuid == run_id))

        def read():
            try:
                with self.engine.connect().execution_options(**{READ_ONLY: True}) as conn:
                    return conn.execute(query).first()
            except sa.exc.SQLAlchemyError as err:
                raise self._error("reading a run's status", err) from err

        row = self._waiting(read)  # a PostgreSQL table lock blocks this read too: waited for as writes are
        return ("absent", "deleted", None) if row is None else (row[0], row[1], row[2])

    def experiment_location(self, experiment_id: str) -> str:
        """The artifact location of an active experiment.

        Raises:
            StoreWriteError: no such active experiment (cause ``other``), or the read failed.
        """
        try:
            with self.engine.connect() as conn:
                row = conn.execute(sa.select(EXPERIMENTS.c.artifact_location, EXPERIMENTS.c.lifecycle_stage)
                                   .where(EXPERIMENTS.c.experiment_id == int(experiment_id))).first()
        except sa.exc.SQLAlchemyError as err:
            raise self._error("reading an experiment", err) from err
        if row is None or row[1] != "active":
            raise StoreWriteError(f"experiment {experiment_id} is not an active experiment of "
                                  f"{mask(self.uri)}", "other", mask(self.uri))
        return row[0]

    def create_runs(self, experiment_id: str, runs: Sequence[dict[str, str]],
                    parents: Collection[str]) -> list[Created]:
        """Create one RUNNING run per item of ``runs`` (its tags) in one transaction, as
        ``MlflowClient.create_run`` would (run name from the ``mlflow.runName`` tag, else a
        random one; user ``unknown``; source ``UNKNOWN``); its start time is the transaction's.

        Raises:
            LeaseLost, StoreWriteError: as :meth:`transaction`; no run is created.
        """
        location = self._waiting(lambda: self.experiment_location(experiment_id))
        return self._waiting(lambda: self._create_runs(experiment_id, location, runs, parents))

    def _create_runs(self, experiment_id: str, location: str, runs: Sequence[dict[str, str]],
                     parents: Collection[str]) -> list[Created]:
        """:meth:`create_runs`' one transaction (each try makes new run ids)."""
        import uuid

        created, run_rows, tag_rows = [], [], []
        with self.transaction(parents, "creating claimed runs") as conn:
            start = now_ms()
            for tags in runs:
                run_id = uuid.uuid4().hex
                name = tags.get(MLFLOW_RUN_NAME) or _generate_random_name()
                uri = append_to_uri_path(location, run_id, "artifacts")
                run_rows.append(dict(run_uuid=run_id, name=name, source_type="UNKNOWN", source_name="",
                                     entry_point_name="", user_id="unknown", status="RUNNING",
                                     start_time=start, end_time=None, deleted_time=None, source_version="",
                                     lifecycle_stage="active", artifact_uri=uri, experiment_id=int(experiment_id)))
                tag_rows += [dict(key=k, value=v, run_uuid=run_id) for k, v in
                             {**tags, MLFLOW_RUN_NAME: name}.items()]
                created.append(Created(run_id, uri))
            _insert(conn, RUNS, run_rows)
            _insert(conn, TAGS, tag_rows)
        return created

    def record(self, records: Sequence[Record], parents: Collection[str]) -> list[bool]:
        """Write ``records`` in one transaction: each RUNNING run gets its params, metrics,
        latest metrics, tags, and (unless its ``status`` is None) its status and end time (the
        transaction's time); a run no longer
        RUNNING (closed by another invocation) gets nothing. Returns, per record, whether it was
        written.

        Raises:
            LeaseLost, StoreWriteError: as :meth:`transaction`; nothing is written.
        """
        return self._waiting(lambda: self._record(records, parents))

    def _record(self, records: Sequence[Record], parents: Collection[str]) -> list[bool]:
        """:meth:`record`'s one transaction."""
        ids = [r.run_id for r in records]
        with self.transaction(parents, f"recording {len(records)} trials") as conn:
            running = {run_id for (run_id,) in conn.execute(_RUNNING, {"ids": ids})}
            todo = [r for r in records if r.run_id in running]
            _insert_tuples(conn, PARAMS, [(k, v, r.run_id) for r in todo for k, v in r.params])
            _insert_tuples(conn, TAGS, [(k, v, r.run_id) for r in todo for k, v in r.tags])
            _insert_tuples(conn, METRICS, [(k, v, ts, step, False, r.run_id)
                                           for r in todo for k, v, ts, step in _unique(r.metrics)])
            _latest(conn, todo)
            end = now_ms()
            for status in sorted({r.status for r in todo if r.status is not None}):
                conn.execute(_CLOSE, {"ids": [r.run_id for r in todo if r.status == status], "status": status,
                                      "end": end})
        return [run_id in running for run_id in ids]


def pg_lock_timeout(lock_wait: Optional[LockWait]) -> dict[str, str]:
    """psycopg's connection arguments for a PostgreSQL store whose writes wait for other
    connections' locks (``lock_wait``): every statement waits at most
    :data:`~harness.leases.LOCK_TRY_S` for a lock (``lock_timeout``; PostgreSQL's default waits
    for ever), then fails with ``canceling statement due to lock timeout`` and the driver tries
    again, saying it waits (:class:`~harness.leases.LockWait`). None: no timeout."""
    return {} if lock_wait is None else {"options": f"-c lock_timeout={int(LOCK_TRY_S * 1000)}"}


def _autocommit_driver(dbapi_conn, _record) -> None:
    """pysqlite's own transaction handling off: :class:`BulkStore` emits ``BEGIN IMMEDIATE``."""
    dbapi_conn.isolation_level = None


def _insert(conn: sa.Connection, table: sa.Table, rows: list[dict]) -> None:
    """``rows`` into ``table``: one ``insert()`` statement, compiled once (and cached) and
    executed for every row by the driver (``executemany``; SQLAlchemy sends PostgreSQL
    multi-row ``VALUES`` pages of up to 1,000). A statement with the rows as literal ``VALUES``
    cost ~0.07 ms of compilation per bound value: 9 s for 64 records of 30 curve points. On
    SQLite, rows that give every column go to the driver's ``executemany`` as tuples
    (:func:`_sqlite_insert`): SQLAlchemy's per-row parameter processing was about a third of a
    live-curve flush's CPU."""
    if not rows:
        return
    if conn.dialect.name == "sqlite" and len(rows[0]) == len(table.c):
        sql, keys = _sqlite_insert(table)
        conn.exec_driver_sql(sql, [tuple(row[k] for k in keys) for row in rows])
    else:
        conn.execute(table.insert(), rows)


def _insert_tuples(conn: sa.Connection, table: sa.Table, rows: list[tuple]) -> None:
    """``rows`` into ``table``, each a tuple of every column in the table's order (``table.c``):
    on SQLite straight to the driver's ``executemany`` (no dict per row: building one and
    reading it back was a third of a live-curve flush's CPU), elsewhere as :func:`_insert`."""
    if not rows:
        return
    sql, keys = _sqlite_insert(table)
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(sql, rows)
    else:
        conn.execute(table.insert(), [dict(zip(keys, row)) for row in rows])


@functools.cache
def _sqlite_insert(table: sa.Table) -> tuple[str, tuple[str, ...]]:
    """``INSERT INTO table (every column) VALUES (?, ...)`` and the column keys in its order.
    Every column is given, so no Python-side column default is left out; the values need no
    conversion for SQLite (text, numbers, None; a bool is stored as 1 or 0, as SQLAlchemy's
    ``Boolean`` stores it)."""
    keys = tuple(c.key for c in table.c)
    columns = ", ".join(f'"{c.name}"' for c in table.c)
    return f'INSERT INTO "{table.name}" ({columns}) VALUES ({", ".join("?" * len(keys))})', keys


def _unique(metrics: list[tuple[str, float, int, int]]) -> list[tuple[str, float, int, int]]:
    """``metrics`` without repeats (MLflow's ``log_batch`` drops a repeated point too)."""
    return list(dict.fromkeys(metrics))


def _latest(conn: sa.Connection, records: Sequence[Record]) -> None:
    """MLflow's ``latest_metrics`` of the runs of ``records``: per key the point with the largest
    ``(step, timestamp, value)``, merged with the row there (points logged live) in one upsert
    (:func:`_latest_upsert`): a row is replaced only by a larger point, as MLflow's
    ``_update_latest_metrics_if_necessary`` does."""
    best: dict[tuple[str, str], tuple[int, int, float]] = {}
    for r in records:
        for key, value, ts, step in r.metrics:
            if (r.run_id, key) not in best or (step, ts, value) > best[(r.run_id, key)]:
                best[(r.run_id, key)] = (step, ts, value)
    if not best:
        return
    rows = [(key, value, ts, step, False, run_id) for (run_id, key), (step, ts, value) in best.items()]
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(_latest_upsert(), rows)
    else:  # one key per row: PostgreSQL refuses a multi-row upsert that touches a row twice
        keys = [c.key for c in LATEST.c]
        conn.execute(_pg_latest_upsert(), [dict(zip(keys, row)) for row in rows])


@functools.cache
def _latest_upsert() -> str:
    """SQLite's upsert of a ``latest_metrics`` row (every column, the table's order): inserted,
    or replacing the row of its ``(key, run_uuid)`` where its ``(step, timestamp, value)`` is
    larger. Replaces a read of the runs' rows, a delete and an insert: about 40% of a
    live-curve flush's CPU."""
    sql, _ = _sqlite_insert(LATEST)
    return (f"{sql} ON CONFLICT (key, run_uuid) DO UPDATE SET value = excluded.value, "
            "timestamp = excluded.timestamp, step = excluded.step, is_nan = excluded.is_nan "
            "WHERE (excluded.step, excluded.timestamp, excluded.value) > "
            "(latest_metrics.step, latest_metrics.timestamp, latest_metrics.value)")


@functools.cache
def _pg_latest_upsert() -> sa.Insert:
    """:func:`_latest_upsert` as PostgreSQL's ``INSERT ... ON CONFLICT DO UPDATE ... WHERE``."""
    from sqlalchemy.dialects.postgresql import insert

    stmt = insert(LATEST)
    new, old = stmt.excluded, LATEST.c
    return stmt.on_conflict_do_update(
        index_elements=[old.key, old.run_uuid],
        set_={"value": new.value, "timestamp": new.timestamp, "step": new.step, "is_nan": new.is_nan},
        where=sa.tuple_(new.step, new.timestamp, new.value) > sa.tuple_(old.step, old.timestamp, old.value))
