"""Leases and claims: how many drivers share one store without a trial running twice or a result
recorded twice (README, "Many invocations, one store").

* **Leases.** Each driver keeps a heartbeat on its parent run (tags ``heartbeat_ms`` and
  ``lease_s``, renewed every ``lease_s / 4``: :class:`Heartbeat`). A RUNNING run is *stale* only
  when the heartbeat of its driver is older than that driver's lease, or its parent run is
  closed, and it is still RUNNING when read again after its parent (a driver closes its runs
  before its parent); stale runs are closed as KILLED, tagged ``closed_by``, by whichever
  invocation finds them (:meth:`Leases.close_stale`). A parent that cannot be read for any reason
  but its absence (a busy store) counts as alive. Clocks of the drivers' machines must agree to
  well within the lease.
* **A lost lease stops its driver.** A driver paused for longer than its lease (a laptop lid
  closed, a preempted VM, ``kill -STOP``) finds, when it goes on, that another invocation has
  closed its parent. Before every claim and before recording an outcome the driver confirms that
  its own parent run is still RUNNING (:meth:`Leases.confirm`); once it is not, the lease is lost
  for good: it claims nothing more, records nothing more, and never reopens or re-closes a run
  that another driver closed (its driver ends with :class:`LeaseLost`, exit status 1). That
  check is check-then-act (another driver can close the parent right after it), so the analysis
  is the final guard: :func:`analysis.load.load_runs` never pools two FINISHED runs of one trial.
* **Claims.** MLflow has no atomic test-and-set, so trials are claimed with Lamport's bakery
  algorithm (:meth:`Leases.claim`), one round for a whole batch of trials (a pack, or several
  lone trials), so that its reads and writes are paid once per batch, not once per trial. The
  driver marks its parent run ``choosing`` (tag ``choosing`` = ``1:<round>``), reads the batch's
  live rival runs, creates its runs with ``ticket`` = 1 + the largest ticket seen, clears the mark
  (``0:<round>``), waits while any live rival driver that was choosing when it looked is still
  in that same round, reads the rivals again, and wins a trial only if no rival run of it is
  FINISHED and none holds a smaller ``(ticket, run id)``. A loser closes and deletes its run and
  skips the trial. So at most one live run of a trial runs at a time and no trial gets two
  FINISHED runs. A rival run without a ticket (a driver of the older per-run protocol, still
  choosing) is waited for. The rivals of a batch are the other drivers' RUNNING runs of its
  trials and their runs FINISHED since ``since_ms`` (the sweep's plan, less the lease: what
  finished before the plan was skipped by it), so the reads grow with the other drivers' work
  in flight, not with the store; on a SQLite store the finished ones are one SQL query of the
  batch's trial ids, which grows with the batch only (MLflow's search returned every run any
  other driver finished within the window, whole: after a sweep of a few hundred trials, reading
  them cost more than the claims did); on a server, where MLflow's search cannot ask for a list
  of trial ids, each round reads only what finished since the previous round, less the lease.

Below :mod:`harness.tracking` (which opens runs and records results); imports no scheduling.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Collection, Optional, Sequence, TypeVar

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID
from tqdm import tqdm

from harness.records import StoreWriteError, TrackingError, fault_cause, store_fault
from harness.mlflow_sql import finished_runs

T = TypeVar("T")
MAX_EXCLUDED = 500  # run ids a server read of finished rivals leaves out (Leases._finished_since)
LEASE_S = 120.0  # default lease of a driver's runs (tracking.lease_s), seconds
CHOOSING = "choosing"  # tag of a parent run: "1:<round>" while it picks tickets, then "0:<round>"
# how long a read that found the lease held is trusted (seconds, at most this share of the lease):
# one read of the parent a second instead of one per claim and per record
FRESH_S, FRESH_SHARE = 1.0, 0.125


def _clocks() -> tuple[float, float]:
    """``(wall, monotonic)`` seconds: the two clocks :meth:`Leases._fresh` reads."""
    return time.time(), time.monotonic()


class LeaseLost(TrackingError):
    """This driver's parent run was closed by another invocation (its lease expired while the
    driver was paused): the driver claims and records nothing more (module docstring)."""


def lease_lost(reason: str) -> LeaseLost:
    """The error a driver that lost its lease ends with: one line, saying why and what to do."""
    return LeaseLost(f"lease lost ({reason}): another invocation closed this driver's runs as "
                     "stale (it was paused for longer than tracking.lease_s?); this one claimed "
                     "and recorded nothing more, and the same command resumes what is left")


def now_ms() -> int:
    """Wall-clock time in milliseconds since the epoch (what heartbeats and MLflow store)."""
    return int(time.time() * 1000)


# how long one try of a write waits for a SQLite store's write lock before the driver says it is
# waiting (the busy timeout of a batched write's BEGIN IMMEDIATE): rivals hold it for milliseconds
LOCK_TRY_S = 1.0


def is_locked(err: BaseException) -> bool:
    """Whether ``err`` (or what it wraps) says the store is locked by another connection: a
    SQLite store's ``database is locked`` (its busy timeout ran out), PostgreSQL's lock timeout
    (the words: :data:`harness.records.FAULT_WORDS`), or a batched write that failed so
    (:class:`~harness.records.StoreWriteError` of cause ``locked``)."""
    if isinstance(err, StoreWriteError):
        return err.cause == "locked"
    return fault_cause(f"{getattr(err, 'orig', '')} {err}") == "locked"


class LockWait:
    """How a driver's writes wait for a SQLite store that another process or connection holds
    write-locked (another driver suspended inside its transaction, a ``sqlite3`` shell left in
    ``BEGIN IMMEDIATE``), or for a PostgreSQL row or table that another connection holds locked
    (``SELECT ... FOR UPDATE``, ``LOCK TABLE``; each statement gives up after ``lock_timeout`` =
    :data:`LOCK_TRY_S`): each write is tried again while it finds the store locked, and the
    driver says once on stderr that it waits for that store's write lock; after ``wait_s``
    seconds (the lease) of one write's waiting it gives up: ``on_fault(err)`` is told and the
    error re-raised. Longer is no use: a driver that cannot write cannot renew its heartbeat, so
    after a lease its runs are any other invocation's to close as stale.

    Args:
        store: the store as the message names it (its URI, a password masked).
        wait_s: the longest one write waits, seconds (``tracking.lease_s``).
        on_fault: told the error a write gave up on.
        db: the store's SQLite file, for :meth:`free`.
    """

    def __init__(self, store: str, wait_s: float, on_fault: Callable[[BaseException], None] = lambda err: None,
                 db: Optional[Path] = None) -> None:
        self.store, self.wait_s, self.on_fault, self.db = store, wait_s, on_fault, db
        self.told = False  # the waiting line was printed (once a driver)

    def free(self) -> None:
        """Wait up to :data:`LOCK_TRY_S` for the store's write lock, then let go of it at once.
        MLflow's client waits 20 s for the lock in silence before it fails (its own busy
        timeout); a write through it asks here first, so that the driver says it waits.

        Raises:
            sqlite3.OperationalError: ``database is locked``: another connection holds it.
        """
        con = sqlite3.connect(self.db, timeout=LOCK_TRY_S, isolation_level=None)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("ROLLBACK")
        finally:
            con.close()

    def call(self, write: Callable[[], "T"], ask_first: bool = False) -> "T":
        """``write()``, tried again while it raises a locked error (:func:`is_locked`), for up to
        :attr:`wait_s` seconds from the start of its first try; ``ask_first``: each try
        first waits for the lock in :meth:`free` (a write whose own wait is silent and long).

        Raises:
            whatever ``write`` raised: another error at once, a locked one once the wait is over.
        """
        started = time.monotonic()
        while True:
            try:
                if ask_first and self.db is not None:
                    self.free()
                return write()
            except Exception as err:
                if not is_locked(err):
                    raise
                if time.monotonic() - started >= self.wait_s:
                    self.on_fault(err)
                    raise
                if not self.told:
                    self.told = True
                    # on a line of its own below the sweep's progress bar (tqdm's, on stderr)
                    tqdm.write(f"waiting for the write lock of tracking store {self.store}: another process or "
                               f"connection holds it; giving up after tracking.lease_s={self.wait_s:g} s",
                               file=sys.stderr)
                time.sleep(min(0.1, self.wait_s / 10))  # a try that failed at once (an MLflow write) paces itself


def search_all(client: MlflowClient, experiment_id: str, filter_string: str) -> list:
    """Every run of ``experiment_id`` matching ``filter_string`` (MLflow's pages of 1,000 read
    through to the end)."""
    runs, token = [], None
    while True:
        page = client.search_runs([experiment_id], filter_string, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


class Heartbeat:
    """A daemon thread that renews a driver's lease: tag ``heartbeat_ms`` on its parent run every
    ``lease_s / 4`` seconds (a context manager; own client, so the driver's calls never wait).
    It stops beating once the parent is closed (by another invocation: the lease is lost, and
    ``on_lost(reason)`` is told) so that it never writes into a run another driver closed."""

    def __init__(self, uri: str, run_id: str, lease_s: float,
                 on_lost: Optional[Callable[[str], None]] = None,
                 held: Callable[[], bool] = lambda: True) -> None:
        self.client = MlflowClient(tracking_uri=uri)
        self.run_id, self.every, self.on_lost, self.held = run_id, lease_s / 4, on_lost, held
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="harness-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            if not self.beat():
                return

    def beat(self) -> bool:
        """One beat: renew the lease if the parent is still RUNNING; else tell ``on_lost`` (unless
        the heartbeat is stopping) and answer False (no more beats). A failed read or write (a
        busy store) is a warning: the next beat tries again. Once the driver knows its lease lost
        (``held()`` False) it beats no more."""
        if not self.held():
            return False
        try:
            run = self.client.get_run(self.run_id)
            if run.info.status != "RUNNING":
                if self.on_lost is not None and not self._stop.is_set():
                    self.on_lost(_closed_reason(run))
                return False
            self.client.set_tag(self.run_id, "heartbeat_ms", str(now_ms()))
        except Exception as err:  # noqa: BLE001 - a busy store: try again next beat
            if not self.held():  # the driver stopped writing (a lost lease, a store fault): it says why
                return False
            if not is_locked(err):  # a locked store: the driver's own writes say that they wait
                print(f"warning: heartbeat not written ({type(err).__name__}); retrying", file=sys.stderr)
        return True

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _closed_reason(run) -> str:
    """Why a parent run is no longer this driver's: its status and who closed it."""
    by = run.data.tags.get("closed_by")
    return (f"parent run {run.info.run_id} is {run.info.status}"
            + (f", closed by {by}" if by else ""))


class Leases:
    """The leases of one store as one driver sees them: its own parent runs (:meth:`hold`,
    :meth:`confirm`), whose runs are alive or stale, and the bakery claim of a trial.

    ``client``: the driver's ``MlflowClient`` (shared with its tracker); ``db``: the store's
    SQLite file, if it is one (the rivals' finished runs are then read by SQL). Thread-safe: the
    writer thread confirms before recording, the driver's thread before claiming.
    """

    def __init__(self, client: MlflowClient, lease_s: float = LEASE_S, db: Optional[Path] = None) -> None:
        self.lease_s, self.db = lease_s, db
        self.client = LeasedClient(client, self)  # every write confirms the lease first
        self.own: set[str] = set()  # parent runs this driver opened
        self.closed: set[str] = set()  # own parents this driver closed itself (their lease ended)
        self.children: dict[str, str] = {}  # run id → its own parent, for the runs this driver created
        self.clock: Callable[[], tuple[float, float]] = _clocks  # (wall, monotonic) s; tests fake it
        self.lost: Optional[str] = None  # why the lease is lost (None while it is held)
        self.fault: Optional[BaseException] = None  # the store fault it was lost to (give_up)
        # a SQLite store: writes wait for another connection's write lock, up to the lease
        self.lock_wait: Optional[LockWait] = None
        self._read: dict[str, tuple[float, float]] = {}  # parent id → when a read found it held
        self._round = 0  # bakery rounds of this driver (the parent's ``choosing`` mark)
        # a server store's rivals finished, read so far: (experiment, own parent, since_ms) →
        # (where the next read starts, ms; trial id → other drivers' FINISHED run ids seen)
        self._finished: dict[tuple[str, str, int], tuple[int, dict[str, set[str]]]] = {}
        # a server store's FINISHED runs any read returned, kept while they are in a read's window:
        # experiment → run id → (trial id, parent id, end ms); a read leaves them out by run id
        self._known: dict[str, dict[str, tuple[str, str, int]]] = {}
        # a SQLite or PostgreSQL store written in batches (harness.bulk.BulkStore; set by the
        # tracker): claimed runs are created in one transaction that checks the lease inside it
        self.bulk = None

    def hold(self, parent_id: str) -> None:
        """Count ``parent_id`` (just opened by this driver) as its own."""
        self.own.add(parent_id)

    def lose(self, reason: str) -> None:
        """Note that the lease is lost (for good; the first reason is kept)."""
        if self.lost is None:
            self.lost = reason

    def give_up(self, fault: BaseException) -> None:
        """A write met a fault of the store that outlasts the lease (locked for a whole lease,
        a server away past MLflow's retries): this driver's heartbeat could not be written
        either, so it writes nothing more, as after a lost lease; every later write raises
        :class:`LeaseLost` caused by ``fault`` (its runs left RUNNING are closed as stale by the
        next invocation)."""
        if self.lost is None:
            self.fault = fault
            self.lose("this driver stopped writing to its tracking store, which it could not write")

    def _lost(self) -> LeaseLost:
        error = lease_lost(self.lost)
        error.__cause__ = self.fault  # a store fault: the one line names it (harness.sweep)
        return error

    def holds(self, parent_id: str) -> bool:
        """Whether ``parent_id`` is this driver's own parent and still RUNNING (one read, or none
        within :meth:`_fresh` of the last read that found it so); once not, the lease is lost for
        good (:attr:`lost`). A read that fails for a busy store raises (the caller's write would
        fail the same way)."""
        if self.lost is not None:
            return False
        if parent_id not in self.own:
            self.lose(f"parent run {parent_id} is not this invocation's")
            return False
        if self._fresh(parent_id):
            return True
        if self.bulk is not None:  # one SQL row, not MLflow's whole run (its params, metrics, inputs)
            status, stage, by = self.bulk.run_state(parent_id)  # waits out a locked store itself
            reason = f"parent run {parent_id} is {status}" + (f", closed by {by}" if by else "")
        else:
            run = self.client.get_run(parent_id)
            status, stage, by = run.info.status, run.info.lifecycle_stage, run.data.tags.get("closed_by")
            reason = _closed_reason(run)
        if status != "RUNNING" or stage != "active" or by is not None:
            self.lose(reason)
            return False
        self._read[parent_id] = self.clock()
        return True

    def _fresh(self, parent_id: str) -> bool:
        """Whether a read that found ``parent_id`` held is recent enough to trust again: younger
        than ``min(FRESH_S, FRESH_SHARE · lease_s)`` by both the wall clock and the monotonic one
        (the monotonic clock stops while a machine sleeps, the wall clock can step back), so a
        driver paused for longer than its lease always reads its parent again."""
        if parent_id not in self._read:
            return False
        (wall, mono), (wall_now, mono_now) = self._read[parent_id], self.clock()
        limit = min(FRESH_S, FRESH_SHARE * self.lease_s)
        return 0 <= wall_now - wall < limit and 0 <= mono_now - mono < limit

    def confirm(self, parent_id: str) -> None:
        """Raise :class:`LeaseLost` unless :meth:`holds` (before a claim)."""
        if not self.holds(parent_id):
            raise self._lost()

    def guard(self, run_id: Optional[str], parent_id: Optional[str] = None) -> None:
        """Before any write of this driver to run ``run_id`` (None: a new run under ``parent_id``):
        raise :class:`LeaseLost` if the lease is lost, or if the run's parent is one of this
        driver's own and is no longer held (:meth:`holds`: read at most once a second). A run
        under no parent of this driver (another driver's stale run, a parent not yet held) needs
        only the lease not lost; an own parent this driver closed itself needs no read."""
        if self.lost is not None:
            raise self._lost()
        if parent_id is None and run_id is not None:
            parent_id = run_id if run_id in self.own else self.children.get(run_id)
        if parent_id is not None and parent_id in self.own and parent_id not in self.closed:
            self.confirm(parent_id)

    def heartbeat(self, uri: str, parent_id: str) -> Heartbeat:
        """The heartbeat that keeps ``parent_id``'s lease (use as a context manager); it stops
        once the lease is known lost."""
        return Heartbeat(uri, parent_id, self.lease_s, on_lost=self.lose, held=lambda: self.lost is None)

    # ------------------------------------------------------------------ other drivers' runs
    def _alive(self, run, parents: dict, now: int) -> bool:
        """Whether a RUNNING run's driver still holds its lease (module docstring).
        ``parents`` caches parent runs by id for one pass."""
        parent_id = run.data.tags.get(MLFLOW_PARENT_RUN_ID)
        holder = run
        if parent_id is not None:
            if parent_id not in parents:
                try:
                    parents[parent_id] = self.client.get_run(parent_id)
                except MlflowException as err:
                    if err.error_code != "RESOURCE_DOES_NOT_EXIST":
                        return True  # a busy store (database locked, timeout): not known dead
                    parents[parent_id] = None
            holder = parents[parent_id]
            if holder is None or holder.info.status != "RUNNING" or holder.info.lifecycle_stage != "active":
                return False
        lease_ms = float(holder.data.tags.get("lease_s", LEASE_S)) * 1000
        beat = holder.data.tags.get("heartbeat_ms")
        last = int(beat) if beat is not None else holder.info.start_time
        return now - last < lease_ms

    def _orphaned(self, run, parents: dict, now: int):
        """None if the driver of ``run`` (read as RUNNING by a search) holds its lease; else the
        run read again, after its parent: a driver closes its runs before its parent, so a run
        that its driver finished before closing the parent between the two reads reads FINISHED
        here (the search had it RUNNING), and only a run still RUNNING is stale."""
        if self._alive(run, parents, now):
            return None
        return self.client.get_run(run.info.run_id)

    def close_stale(self, experiment_id: str) -> int:
        """Close the experiment's RUNNING runs whose driver's lease has expired (it died, or its
        parent run is closed) as KILLED, tagged ``closed_by``; runs of live drivers are left
        alone. Returns how many."""
        parents: dict = {}
        now = now_ms()
        stale = []
        for run in search_all(self.client, experiment_id, "attributes.status = 'RUNNING'"):
            now_run = self._orphaned(run, parents, now)
            if now_run is not None and now_run.info.status == "RUNNING":
                stale.append(run)
        for run in stale:
            self.client.set_tag(run.info.run_id, "closed_by", "another invocation (lease expired)")
            self.client.set_terminated(run.info.run_id, "KILLED")
        return len(stale)

    def held_elsewhere(self, experiment_id: str, trial_ids: Collection[str], own_parent: str) -> set[str]:
        """The ``trial_ids`` that another driver, still holding its lease, has a RUNNING run of
        (claimed, or running now): what a sweep that skipped them waits for before its summary.
        A rival that died or was interrupted holds nothing (its runs are stale, or closed)."""
        parents: dict = {}
        now = now_ms()
        return {r.data.tags["trial_id"] for r in self._running_rivals(experiment_id, trial_ids, own_parent, ())
                if self._alive(r, parents, now)}

    # ------------------------------------------------------------------ the batch bakery
    def _running_rivals(self, experiment_id: str, trial_ids: Collection[str], own_parent: str,
                        ignore: Collection[str]) -> list:
        """Other drivers' RUNNING runs of ``trial_ids``, ``ignore`` left out: a search whose answer
        holds only other drivers' work in flight, never the store's history."""
        runs = search_all(self.client, experiment_id, f"attributes.status = 'RUNNING' AND {_others(own_parent)}")
        return [r for r in runs if r.data.tags.get("trial_id") in trial_ids and r.info.run_id not in ignore]

    def _finished_rivals(self, experiment_id: str, trial_ids: Collection[str], own_parent: str,
                         ignore: Collection[str], since_ms: int) -> set[str]:
        """The ``trial_ids`` with a run of another driver FINISHED since ``since_ms``, ``ignore``
        left out. On a SQLite store one SQL query of the batch's ``trial_id`` tags (flat: MLflow's
        search returns whole runs, and every run another driver finished within the window, of
        any trial: after a sweep of a few hundred trials it cost more than the claims); on a
        server MLflow's search, which cannot ask for a list of trial ids: each read asks only for
        the runs finished since the previous read less the lease (clocks agree within a lease, as
        the heartbeats assume) and adds them to what earlier reads found, so that a round reads a
        lease's worth of the other drivers' work, however long the sweep has run."""
        if self.db is not None:
            found = finished_runs(self.db, experiment_id, trial_ids, since_ms=since_ms, not_parent=own_parent)
        else:
            found = self._finished_since(experiment_id, own_parent, since_ms)
        return {t for t in trial_ids if t in found and not set(found[t]) <= set(ignore)}

    def _finished_since(self, experiment_id: str, own_parent: str, since_ms: int) -> dict[str, set[str]]:
        """Trial id → run ids of other drivers' runs FINISHED since ``since_ms`` (a server store:
        MLflow's search from where the previous read of this sweep left off, less the lease).

        Each read overlaps the previous one by the lease (a rival stamps its run's end before the
        store commits it), so every read would return again every run finished in the last lease,
        and so would the first read of the next sweep on the same experiment (a report's rounds):
        the runs an earlier read returned are left out of the search by run id (``NOT IN``, the one
        list MLflow's search takes; at most :data:`MAX_EXCLUDED`, whose parsing costs the server
        about 30 ms) and taken from what that read found."""
        key = (experiment_id, own_parent, int(since_ms))
        start, seen = self._finished.get(key, (int(since_ms), {}))
        known = self._known.setdefault(experiment_id, {})
        for run_id in [r for r, (_, _, end) in known.items() if end < start]:
            del known[run_id]  # out of this read's window: kept only in the sweeps' ``seen``
        held = [r for r, (_, parent, _) in known.items() if parent != own_parent][-MAX_EXCLUDED:]
        query = f"attributes.status = 'FINISHED' AND attributes.end_time >= {start} AND {_others(own_parent)}"
        if held:
            query += " AND attributes.run_id NOT IN ({})".format(", ".join(f"'{r}'" for r in held))
        read_at = now_ms()
        for r in search_all(self.client, experiment_id, query):
            if "trial_id" in r.data.tags:
                known[r.info.run_id] = (r.data.tags["trial_id"], r.data.tags.get(MLFLOW_PARENT_RUN_ID, ""),
                                        r.info.end_time or start)
        for run_id, (trial_id, parent, _) in known.items():
            if parent != own_parent:
                seen.setdefault(trial_id, set()).add(run_id)
        self._finished[key] = (max(int(since_ms), read_at - int(self.lease_s * 1000)), seen)
        return seen

    def _live_rivals(self, experiment_id: str, trial_ids: Collection[str], own_parent: str,
                     ignore: Collection[str], since_ms: int, poll_s: float,
                     stop: Callable[[], bool]) -> tuple[list, set[str]]:
        """The rivals that count: the RUNNING runs under a live lease (read again after their
        parent, as :meth:`close_stale` reads them), and the trial ids with a FINISHED rival run;
        waits while a live one has no ticket yet (a driver of the per-run protocol, still
        choosing). The running runs are read first: one that finishes between the two reads is
        in the second."""
        while True:
            running = self._running_rivals(experiment_id, trial_ids, own_parent, ignore)
            finished = self._finished_rivals(experiment_id, trial_ids, own_parent, ignore, since_ms)
            parents: dict = {}
            now = now_ms()
            live = []
            for r in running:
                now_r = self._orphaned(r, parents, now)
                if now_r is None:  # its driver lives
                    live.append(r)
                elif now_r.info.status == "FINISHED":
                    finished.add(r.data.tags["trial_id"])
            if all("ticket" in r.data.tags for r in live):
                return live, finished
            _pause(poll_s, stop)

    def _await_choosers(self, experiment_id: str, own_parent: str, poll_s: float, stop: Callable[[], bool]) -> None:
        """Wait until every live rival driver that is choosing its tickets now has left that
        round (Lamport's ``while choosing[j]``): a rival's round number, not a flag, so that a
        driver claiming batch after batch never starves this one."""
        query = f"tags.role = 'sweep' AND attributes.status = 'RUNNING' AND tags.{CHOOSING} LIKE '1:%'"
        first: Optional[dict[str, str]] = None
        while True:
            now = now_ms()
            choosing = {r.info.run_id: r.data.tags[CHOOSING] for r in search_all(self.client, experiment_id, query)
                        if r.info.run_id != own_parent and self._alive(r, {}, now)}
            first = choosing if first is None else first
            if not any(choosing.get(run_id) == mark for run_id, mark in first.items()):
                return
            _pause(poll_s, stop)

    def _create(self, experiment_id: str, runs: Sequence[dict[str, str]], ticket: int) -> list:
        """Create the batch's runs (tags ``runs[i]`` and the ticket): in one transaction on a
        store written in batches (:attr:`bulk`; all or none), else one ``create_run`` each; on
        any error close and delete those already created, so that a failed claim leaves no
        RUNNING run behind."""
        if self.bulk is not None:  # one transaction, the lease checked inside it
            parent_id = runs[0].get(MLFLOW_PARENT_RUN_ID) if runs else None
            self.guard(None, parent_id)
            infos = self.bulk.create_runs(experiment_id, [{**tags, "ticket": str(ticket)} for tags in runs],
                                          [parent_id] if parent_id in self.own else [])
            if parent_id in self.own:
                self.children.update((info.run_id, parent_id) for info in infos)
            return infos
        created = []
        try:
            for tags in runs:
                created.append(self.client.create_run(experiment_id, tags={**tags, "ticket": str(ticket)}).info)
        except BaseException:
            for info in created:
                with contextlib.suppress(Exception):
                    self.drop(info.run_id, "lost: the claim failed")
            raise
        return created

    def drop(self, run_id: str, why: str) -> None:
        """Close a claimed run that never ran (a lost claim, a claim the sweep no longer needs)
        KILLED and delete it (MLflow's soft delete), tagged ``claim`` with why."""
        self.client.set_tag(run_id, "claim", why)
        self.client.set_terminated(run_id, "KILLED")
        self.client.delete_run(run_id)

    def claim(self, experiment_id: str, parent_id: str, runs: Sequence[dict[str, str]],
              ignore: Collection[str] = frozenset(), since_ms: int = 0, poll_s: float = 0.25,
              stop: Callable[[], bool] = lambda: False) -> list:
        """Claim a batch of trials in one bakery round (module docstring): one new RUNNING run per
        item of ``runs`` (its tags; ``trial_id`` among them, each trial once), under
        ``parent_id``. Returns, per item, the won run's ``RunInfo`` or None where the trial is
        another driver's (that run is then closed KILLED and deleted).

        ``ignore``: FINISHED runs that do not count (the old runs of a forced rerun).
        ``since_ms``: rival runs FINISHED before this time (ms since the epoch) are not read (the
        caller skipped their trials); 0 reads them all.
        ``stop``: asked while waiting for a rival (it can take up to a lease for a dead one);
        True ends the claim with ``KeyboardInterrupt``, its runs closed and deleted.

        Raises:
            LeaseLost: ``parent_id`` is no longer this driver's RUNNING parent: nothing is claimed.
            KeyboardInterrupt: ``stop()`` answered True while waiting.
        """
        self.confirm(parent_id)
        trial_ids = {tags["trial_id"] for tags in runs}
        self._round += 1
        self.client.set_tag(parent_id, CHOOSING, f"1:{self._round}")
        try:
            # the ticket outnumbers the live rivals' (a FINISHED rival wins whatever the tickets)
            seen = self._running_rivals(experiment_id, trial_ids, parent_id, ignore)
            ticket = 1 + max((_ticket(r) for r in seen), default=0)
            created = self._create(experiment_id, runs, ticket)  # each create confirms the lease
        finally:
            with contextlib.suppress(LeaseLost):  # lost meanwhile: the closed parent stays as it is
                self.client.set_tag(parent_id, CHOOSING, f"0:{self._round}")
        try:
            self._await_choosers(experiment_id, parent_id, poll_s, stop)
            live, finished = self._live_rivals(experiment_id, trial_ids, parent_id, ignore, since_ms, poll_s, stop)
        except BaseException:
            for info in created:
                with contextlib.suppress(Exception):
                    self.drop(info.run_id, "lost: interrupted while claiming")
            raise
        won = []
        for tags, info in zip(runs, created):
            mine = (ticket, info.run_id)
            if tags["trial_id"] in finished or any(
                    r.data.tags.get("trial_id") == tags["trial_id"] and (_ticket(r), r.info.run_id) < mine
                    for r in live):
                self.drop(info.run_id, "lost: another invocation has this trial")
                won.append(None)
            else:
                won.append(info)
        return won


class LeasedClient:
    """A driver's ``MlflowClient`` whose every write to a run first confirms the lease
    (:meth:`Leases.guard`): the one door through which the driver writes, so that no write point
    of :mod:`harness.tracking`, :mod:`harness.writer` or :mod:`harness.loop` can write after the
    lease is lost (module docstring). Reads need no lease; on a store that another connection
    holds locked they wait as writes do (:class:`LockWait`)."""

    WRITES = ("set_tag", "log_batch", "log_metric", "log_param", "set_terminated", "delete_run",
              "log_artifact", "log_artifacts", "log_text", "log_dict", "delete_tag")

    def __init__(self, client: MlflowClient, leases: "Leases") -> None:
        self._client, self._leases = client, leases

    def __getattr__(self, name: str):
        attr = getattr(self._client, name)
        if name not in self.WRITES:
            if not callable(attr):
                return attr

            def read(*args, **kwargs):  # a PostgreSQL table lock blocks reads too: waited for as writes are
                wait = self._leases.lock_wait
                return attr(*args, **kwargs) if wait is None else wait.call(lambda: attr(*args, **kwargs))
            return read

        def write(run_id, *args, **kwargs):
            self._leases.guard(run_id)
            answer = self._write(lambda: attr(run_id, *args, **kwargs))
            if name == "set_terminated" and run_id in self._leases.own:
                self._leases.closed.add(run_id)  # this driver closed its own parent: its lease ended
            return answer
        return write

    def _write(self, call: Callable[[], T]) -> T:
        """One write: on a SQLite store write-locked by another connection it waits up to the
        lease (:class:`LockWait`); a server away past MLflow's retries (``Max retries
        exceeded``) ends this driver's writes (:meth:`Leases.give_up`)."""
        try:
            return call() if self._leases.lock_wait is None else self._leases.lock_wait.call(call, ask_first=True)
        except MlflowException as err:
            if (store_fault(err) or ("",))[0] == "unreachable":
                self._leases.give_up(err)
            raise

    def create_experiment(self, name: str, *args, **kwargs) -> str:
        """MLflow's ``create_experiment``, waiting as every write does (:meth:`_write`); no
        lease to guard yet: the driver's parent run is opened in the experiment afterwards."""
        return self._write(lambda: self._client.create_experiment(name, *args, **kwargs))

    def create_run(self, experiment_id: str, *args, tags: Optional[dict] = None, **kwargs):
        """MLflow's ``create_run``, after :meth:`Leases.guard` of its parent (tag
        ``mlflow.parentRunId``); a child of an own parent is remembered as its."""
        parent_id = (tags or {}).get(MLFLOW_PARENT_RUN_ID)
        self._leases.guard(None, parent_id)
        run = self._write(lambda: self._client.create_run(experiment_id, *args, tags=tags, **kwargs))
        if parent_id in self._leases.own:
            self._leases.children[run.info.run_id] = parent_id
        return run


def _others(own_parent: str) -> str:
    """The search filter of runs another driver opened (their parent is not ``own_parent``)."""
    return f"tags.`{MLFLOW_PARENT_RUN_ID}` != '{own_parent}'"


def _pause(seconds: float, stop: Callable[[], bool]) -> None:
    """Sleep between two reads of a wait, unless the claim should stop (``KeyboardInterrupt``)."""
    if stop():
        raise KeyboardInterrupt("interrupt requested while claiming")
    time.sleep(seconds)


def _ticket(run) -> int:
    """A run's bakery ticket (0 while it has none)."""
    return int(run.data.tags.get("ticket", 0))
