"""Run trials: on Ray (an embedded local instance or a running cluster) or serially in-process.

Trials that can share a process run as packs (:mod:`harness.pack`, ``cluster.pack_size``): a
pack is one unit of work (one Ray task, one slot) and yields one outcome per trial.

A scheduler yields one :class:`Outcome` per trial as trials finish, in completion order. A trial
that raises, or whose worker dies after its retries are spent, yields an outcome with ``error``
set; the sweep goes on. Workers never touch MLflow: the driver records every outcome.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import socket
import sys
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable, Iterator, Optional, Sequence

import torch

from harness.config import ClusterConfig, SchedulerKind
from harness.ray_job import driver_runtime_env
from tasks.user_code import runtime_env
from harness.pack import pack_key, resolve_pack_size, run_pack, runs_alone
from harness.points import Points
from harness.records import Outcome, Trial
from harness.trial import run_trial
from tasks.base import split_evenly

PROGRESS_SEND_S = 2.0  # a unit sends its buffered learning-curve points at most this often
# How often the window's width is re-read from Ray (seconds). It was read at each wake-up of the
# loop (up to once a second and at each finished unit): a call to Ray's control store, 0.18 ms of
# the driver's CPU and 0.34 ms of wall time on a local instance, and GCS work besides. A node that
# joins a cluster is used within this time.
SLOTS_EVERY_S = 5.0


class Progress:
    """A unit's learning-curve channel to the driver: :meth:`callbacks` gives each trial's
    ``progress`` callback (``run_trial(progress=…)``, ``run_pack(progress=…)``); the points are
    buffered as ``(index, point)`` pairs, ``index`` being the trial's place in the scheduler's
    list (a trial id can recur there: one trial in two ablations), and put in the driver's
    :class:`Points` actor as one list at most every ``every_s`` seconds and by :meth:`flush`
    (called before the unit's outcomes return, so a trial's points reach the driver before its
    outcome). One put is a blocking actor call; a pack of 16 evaluated every 20 steps made one
    per trial per evaluation. A lost point is logged at the end with the curve."""

    def __init__(self, points, indices: Sequence[int], every_s: float = PROGRESS_SEND_S) -> None:
        self.points, self.indices, self.every_s = points, list(indices), every_s
        self._buffer: list[tuple[int, dict]] = []
        self._sent: Optional[float] = None  # this process's monotonic clock (set in the worker)

    def callbacks(self) -> list[Callable[[dict], None]]:
        """One callback per trial of the unit, in order."""
        return [functools.partial(self._add, index) for index in self.indices]

    def _add(self, index: int, point: dict) -> None:
        self._buffer.append((index, point))
        now = time.monotonic()
        if self._sent is None:
            self._sent = now
        elif now - self._sent >= self.every_s:
            self.flush()

    def flush(self) -> None:
        """Put the buffered points in the driver's actor (best effort: the trial goes on)."""
        self._sent = time.monotonic()
        if not self._buffer:
            return
        batch, self._buffer = self._buffer, []
        try:
            _put(self.points, batch)
        except Exception:  # noqa: BLE001 - progress is best effort; the trial goes on
            pass


def _put(points, batch: list[tuple[int, dict]]) -> None:
    """Put ``batch`` in the :class:`Points` actor ``points``, waited for (so that a unit's last
    points are in before its outcomes return)."""
    import ray

    ray.get(points.put.remote(batch))


def _node() -> str:
    node = socket.gethostname()
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():  # a Ray worker: name the node, not the host
        node = f"{node}/{ray.get_runtime_context().get_node_id()[:12]}"
    return node


def execute(trial: Trial, device: str, num_threads: int,
            progress: Optional[Callable[[dict], None]] = None) -> Outcome:
    """Run one trial in this process with ``num_threads`` torch threads; never raises.
    ``progress`` receives each learning-curve point as it is measured."""
    torch.set_num_threads(num_threads)
    node = _node()
    try:
        return Outcome(trial, run_trial(trial.config, device, progress), None, node)
    except Exception:  # noqa: BLE001 - any trial error is recorded, and the sweep goes on
        return Outcome(trial, None, traceback.format_exc(), node)


def execute_pack(trials: Sequence[Trial], device: str, num_threads: int,
                 progress: Optional[Sequence[Optional[Callable[[dict], None]]]] = None,
                 ) -> list[Outcome]:
    """Run trials as one pack (:func:`harness.pack.run_pack`) in this process; one outcome per
    trial, in order; never raises. A pack that runs out of CUDA memory is split in halves; a pack
    that fails otherwise falls back to its trials one by one (each then fails or not alone).
    ``progress``: one callback (or None) per trial, given each of its learning-curve points (a
    trial re-run alone after a failed pack may send its first points twice)."""
    progress = list(progress) if progress is not None else [None] * len(trials)
    if len(trials) == 1:
        return [execute(trials[0], device, num_threads, progress[0])]
    torch.set_num_threads(num_threads)
    try:
        results = run_pack([t.config for t in trials], device, progress=progress)
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        half = len(trials) // 2
        return [*execute_pack(trials[:half], device, num_threads, progress[:half]),
                *execute_pack(trials[half:], device, num_threads, progress[half:])]
    except Exception:  # noqa: BLE001 - the pack failed: its trials run (and fail) one by one
        return [execute(t, device, num_threads, p) for t, p in zip(trials, progress)]
    members = ",".join(t.trial_id for t in trials)  # a packed result reproduces given its pack
    for r in results:
        r.info["pack_members"] = members
    node = _node()
    return [Outcome(t, r, None, node) for t, r in zip(trials, results)]


def _ready() -> None:
    """A task that does nothing: the worker that runs it has imported this module, and with it
    the trial code (:meth:`RayScheduler._warm`)."""


def _cuda_seen() -> tuple[str, str, bool]:
    """On a Ray worker: its node's host name, its torch's version and whether that torch sees a
    CUDA device (:meth:`RayScheduler._check_feasible`)."""
    import socket

    import torch

    return socket.gethostname(), torch.__version__, torch.cuda.is_available()


def execute_unit(trials: Sequence[Trial], device: str, num_threads: int,
                 progress: Optional[Progress] = None) -> list[Outcome]:
    """:func:`execute_pack` in a Ray worker, its learning-curve points sent through
    ``progress`` and flushed before the outcomes return; never raises. The outcomes come back
    without their trials (``trial`` None): the driver sets its own objects, and a trial's config
    was most of an outcome's bytes to serialize and read back."""
    try:
        outcomes = execute_pack(trials, device, num_threads, progress.callbacks() if progress else None)
    finally:
        if progress is not None:
            progress.flush()
    for outcome in outcomes:  # the driver has the trials (RayScheduler._collect): not sent back
        outcome.trial = None
    return outcomes


def plan(trials: Sequence[Trial], pack_size: str | int, device: str = "cpu",
         min_units: int = 1) -> list[list[Trial]]:
    """Group trials into packs (trials that share :func:`harness.pack.pack_key`, split into
    near-equal packs of at most :func:`harness.pack.resolve_pack_size` each) and run alone the
    trials :func:`harness.pack.runs_alone` names; packs are split further until there are at
    least ``min_units`` units (free slots) where possible. Longest units first (packs, then lone
    trials), so the last to finish is short; units of one length keep the order of their first
    trials.

    Args:
        pack_size: ``cluster.pack_size`` (``auto`` or a positive integer).
        device: ``cluster.device`` (``auto`` resolves per device and model family).

    Raises:
        ValueError: a ``pack_size`` that is neither ``auto`` nor a positive integer.
    """
    if resolve_pack_size(pack_size, device) <= 1:
        return [[t] for t in trials]
    groups: dict[int | str, list[Trial]] = {}  # a trial that runs alone: a group of its own
    for index, trial in enumerate(trials):
        alone = runs_alone(trial.config, pack_size, device)
        groups.setdefault(index if alone else pack_key(trial.config), []).append(trial)
    units: list[list[Trial]] = []
    for members in groups.values():  # in the order of their first trial
        count = -(-len(members) // resolve_pack_size(pack_size, device, members[0].config))
        bounds = [0, *itertools.accumulate(split_evenly(len(members), count))]
        units += [members[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    while len(units) < min_units and units and max(len(u) for u in units) > 1:
        big = max(units, key=len)
        units.remove(big)
        units += [big[:len(big) // 2], big[len(big) // 2:]]
    return sorted(units, key=lambda u: -len(u) * u[0].config.train.max_steps)


# Called just before a trial is started; returning False skips the trial (no outcome is yielded).
OnStart = Optional[Callable[[Trial], Optional[bool]]]
OnProgress = Optional[Callable[[Trial, dict], None]]  # (trial, learning-curve point)
# Called with trials about to be started (a batch of whole units), before their ``on_start``:
# the claim of a batch, done ahead of the slots on a thread of its own (:class:`Ahead`).
Prepare = Optional[Callable[[list[Trial]], None]]
CLAIM_BATCH = 32  # units are prepared (claimed) together up to this many trials: two packs of 16


class Ahead:
    """The units of a plan prepared (claimed) in order on one background thread, ahead of the
    slots that will run them, so that the store's latency is off the path that feeds the
    workers: :meth:`wait` for unit ``i`` asks for the units up to ``i + lookahead`` and returns
    once unit ``i`` is prepared. Consecutive small units are prepared together, up to
    ``batch`` trials (one claim round for 32 lone trials, or two packs of 16). A context manager: on exit nothing
    more is prepared and the batch in flight is waited for, so that the caller can close what
    was claimed.
    """

    def __init__(self, units: Sequence[Sequence[Trial]], prepare: Callable[[list[Trial]], None],
                 lookahead: int, batch: int = CLAIM_BATCH) -> None:
        self.units, self.prepare, self.lookahead, self.batch = units, prepare, lookahead, batch
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-claims")
        self._futures: dict[int, Future] = {}  # unit index → the future of the batch preparing it
        self._next = 0  # the first unit not yet asked for

    def __enter__(self) -> "Ahead":
        return self

    def __exit__(self, *exc) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _ask(self, until: int) -> None:
        while self._next <= min(until, len(self.units) - 1):
            start, size = self._next, 0
            while self._next < len(self.units) and (size == 0 or size + len(self.units[self._next]) <= self.batch):
                size += len(self.units[self._next])
                self._next += 1
            future = self._executor.submit(self.prepare, [t for u in self.units[start:self._next] for t in u])
            for i in range(start, self._next):
                self._futures[i] = future

    def wait(self, i: int, should_stop: Optional[Callable[[], bool]] = None) -> None:
        """Block until unit ``i`` is prepared (re-raising what its preparation raised), asking
        each second whether to stop (``KeyboardInterrupt``)."""
        self._ask(i + self.lookahead)
        future = self._futures.pop(i)
        while True:
            try:
                future.result(timeout=1.0)
                return
            except FutureTimeout:
                if should_stop is not None and should_stop():
                    raise KeyboardInterrupt("interrupt requested")


RAY_START_TRIES = 2  # ray.init of a local instance: a start-up timeout is tried once more
# What the embedded instance does not record: its task events (the state API's and dashboard's
# task table), its metrics and its event-loop statistics, none of which the harness reads; each
# is work on the driver's own Ray threads for every task and actor call.
LOCAL_QUIET = {"task_events_report_interval_ms": 0, "enable_metrics_collection": False, "event_stats": False}


# the longest folder for Ray's session files whose socket paths (…/session_<date>_<pid>/sockets/
# …) stay within AF_UNIX's 107 bytes: a TMPDIR of up to 32 characters, plus "/ray"
RAY_TEMP_MAX = 36


class RayStartError(RuntimeError):
    """Ray's local instance did not start (it timed out at start-up on every try, or it has no
    short temporary folder): exit status 1, nothing run or recorded
    (:meth:`RayScheduler._start_local`)."""


def ray_temp_dir() -> Optional[str]:
    """The folder for a local Ray instance's session files: None (Ray's own, ``$RAY_TMPDIR`` or
    ``$TMPDIR`` or ``/tmp``, plus ``/ray``) where that is at most :data:`RAY_TEMP_MAX` bytes,
    else ``/tmp/ray-<uid>``: a per-job ``TMPDIR`` of a Slurm site (often longer) made Ray refuse
    its socket path ("AF_UNIX path length cannot exceed 107 bytes") in a 37-line traceback.

    Raises:
        RayStartError: the default is too long and ``/tmp`` cannot be written (one line).
    """
    from ray._common.utils import get_default_ray_temp_dir

    default = get_default_ray_temp_dir()
    if len(default.encode()) <= RAY_TEMP_MAX:
        return None
    if not os.access("/tmp", os.W_OK | os.X_OK):
        raise RayStartError(f"Ray's temporary folder {default} is too long for its sockets (at most "
                            f"{RAY_TEMP_MAX} bytes) and /tmp cannot be written: set RAY_TMPDIR to a short "
                            "writable folder (e.g. RAY_TMPDIR=/dev/shm/$USER)")
    return f"/tmp/ray-{os.getuid()}"


class SerialScheduler:
    """Trials one after another in the driver process (``cluster=serial``)."""

    def __init__(self, cfg: ClusterConfig) -> None:
        self.cfg = cfg

    def __enter__(self) -> "SerialScheduler":
        from harness.trial import resolve_device

        resolve_device(self.cfg.device)  # trials run here: CUDA must be here (ValueError if not)
        return self

    def __exit__(self, *exc) -> None:
        return None

    def run(self, trials: Sequence[Trial], on_start: OnStart = None,
            on_progress: OnProgress = None, prepare: Prepare = None) -> Iterator[Outcome]:
        """Yield each trial's outcome in order; ``prepare(unit)`` (the claim) and then
        ``on_start(trial)`` are called before each unit (False skips a trial), just in time: the
        trials run in this process, so nothing is claimed ahead; ``on_progress(trial, point)``
        with each learning-curve point as it is measured."""
        threads = max(1, round(self.cfg.cpus_per_trial))
        for unit in plan(trials, self.cfg.pack_size, self.cfg.device):
            if prepare is not None:
                prepare(list(unit))
            unit = [t for t in unit if not on_start or on_start(t) is not False]  # vetoed: dropped
            if not unit:
                continue
            progress = ([(lambda point, t=trial: on_progress(t, point)) for trial in unit]
                        if on_progress else None)
            yield from execute_pack(unit, self.cfg.device, threads, progress)


class RayScheduler:
    """Trials as Ray tasks with ``cpus_per_trial``/``gpus_per_trial`` resources each.

    ``cluster=local`` starts an embedded instance on entry and stops it on exit;
    ``cluster=ray`` connects to ``cluster.address`` and leaves the cluster running.
    A worker that dies is retried ``max_retries`` times by Ray; a trial's own exception is not
    retried (it is deterministic) and comes back as a failed outcome.

    Trials are submitted in a window as wide as the cluster's free slots (its CPUs divided by
    ``cpus_per_trial``, likewise for GPUs; a pack of trials takes one slot), so a submitted trial
    is a running trial: ``on_start`` marks it, and an interrupt cancels only what really runs. The window is re-read as trials
    finish (at most every :data:`SLOTS_EVERY_S` seconds), so nodes that join a cluster are used.
    """

    def __init__(self, cfg: ClusterConfig, should_stop: Optional[Callable[[], bool]] = None) -> None:
        self.cfg, self.should_stop = cfg, should_stop
        self._pending: list = []
        self._drained = 0.0  # time.monotonic() of the last look into the learning-curve channel
        self._width: Optional[tuple[float, int]] = None  # (time.monotonic(), slots) last read

    def __enter__(self) -> "RayScheduler":
        import ray

        # Ray's "token authentication is enabled/disabled" warning, printed on every ray.init
        logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
        if self.cfg.scheduler is SchedulerKind.local:
            if os.environ.get("RAY_ADDRESS"):
                print(f"cluster=local starts its own Ray instance; RAY_ADDRESS="
                      f"{os.environ['RAY_ADDRESS']} is not used (cluster=ray joins a cluster)",
                      file=sys.stderr)
            # "local": always a new instance, never one that `ray start` left on this machine;
            # its workers at cluster.worker_niceness, not Ray's 15 (harness/config.py says why)
            self._start_local()
        else:
            ray.init(address=self.cfg.address or "auto", log_to_driver=False,
                     runtime_env=driver_runtime_env(runtime_env()))  # merged with a Ray job's own
            total = ray.cluster_resources()
            print(f"joined Ray cluster at {ray.get_runtime_context().gcs_address} "
                  f"({sum(1 for n in ray.nodes() if n.get('Alive'))} nodes, "
                  f"{total.get('CPU', 0):g} CPUs, {total.get('GPU', 0):g} GPUs)", file=sys.stderr)
        self._check_feasible()
        self._warm()
        return self

    def _start_local(self) -> None:
        """``ray.init`` of a new local instance; where it times out at start-up (Ray waits 30 s
        for its raylet: on a loaded machine it sometimes needs more, and a minute later the same
        command works) the half-started instance is shut down and started once more; nothing
        has been recorded yet, so the retry is safe.

        Raises:
            RayStartError: it timed out twice: one line naming the cause and what to do.
        """
        import ray

        for attempt in range(1, RAY_START_TRIES + 1):
            try:
                ray.init(address="local", num_cpus=self.cfg.num_cpus, include_dashboard=False,
                         log_to_driver=False, configure_logging=False, _temp_dir=ray_temp_dir(),
                         _system_config={"worker_niceness": self.cfg.worker_niceness, **LOCAL_QUIET})
                return
            except Exception as err:  # noqa: BLE001 - Ray raises a bare Exception for this
                if "timed out during startup" not in str(err):
                    raise
                ray.shutdown()  # the processes it did start
                if attempt == RAY_START_TRIES:
                    raise RayStartError(
                        f"Ray's local instance did not start ({attempt} tries, each waiting 30 s for its "
                        "raylet: the machine is too busy); nothing was run or recorded: run the same "
                        "command again when the load is lower, or with cluster=serial (no Ray)") from None
                print("Ray's local instance timed out at start-up (a busy machine); starting it once more",
                      file=sys.stderr)

    def _warm(self) -> None:
        """Start one worker per slot now, so that while the driver plans and claims, each
        imports the trial code (torch, the models: seconds on a small machine) instead of after
        the first unit arrives; Ray reuses these workers for the units. Not waited for."""
        import ray

        ready = ray.remote(_ready).options(num_cpus=self.cfg.cpus_per_trial, num_gpus=self.cfg.gpus_per_trial)
        self._warming = [ready.remote() for _ in range(self._slots())]
        # the learning-curve channel's actor starts (a process of its own: seconds) with the
        # workers, not when the first run begins (its points are drained at each run's start)
        self._points = ray.remote(Points).options(num_cpus=0).remote()

    def _check_feasible(self) -> None:
        """Refuse, before any trial is claimed, a cluster that cannot run one: a CUDA device
        without GPUs per trial, no node with a trial's CPUs and GPUs, or (``cluster.device=cuda``)
        a node whose torch sees no CUDA device. Ray is shut down first.

        Raises:
            ValueError: one line naming the setting and what the cluster has.
        """
        import ray

        need = {"CPU": self.cfg.cpus_per_trial, "GPU": self.cfg.gpus_per_trial}
        if self.cfg.device.startswith("cuda") and self.cfg.gpus_per_trial <= 0:
            ray.shutdown()
            raise ValueError(f"cluster.device={self.cfg.device!r} needs cluster.gpus_per_trial > 0 "
                             "(e.g. 1 or 0.25) so that Ray places each trial on a GPU of the cluster")
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
        if not any(all(res.get(k, 0) >= v for k, v in need.items() if v > 0) for res in nodes):
            have = [{k: res.get(k, 0) for k in need} for res in nodes]
            ray.shutdown()
            raise ValueError(f"no Ray node can run a trial asking for cluster.cpus_per_trial="
                             f"{need['CPU']}, cluster.gpus_per_trial={need['GPU']}; nodes have {have}")
        if self.cfg.device.startswith("cuda"):
            # Ray counts the GPUs `ray start --num-gpus` was given, not what torch sees: on a node
            # with the CPU build of torch every trial would fail (and be recorded) one by one, so
            # one task in a trial's slot asks torch first (before the tracker opens any run)
            probe = ray.remote(_cuda_seen).options(num_cpus=self.cfg.cpus_per_trial, num_gpus=self.cfg.gpus_per_trial)
            node, version, seen = ray.get(probe.remote())
            if not seen:
                ray.shutdown()
                raise ValueError(f"cluster.device={self.cfg.device!r}, but torch {version} on the Ray node "
                                 f"{node} sees no CUDA device: install the CUDA build of torch on the GPU "
                                 "nodes (README, \"On a Slurm cluster\", has the check), or use cluster.device=cpu")

    def __exit__(self, *exc) -> None:
        import ray

        for ref in self._pending:  # interrupted: stop what still runs
            ray.cancel(ref, force=True)
        ray.shutdown()

    def _slots(self) -> int:
        """The window's width: the cluster's CPUs over ``cpus_per_trial`` (GPUs likewise), at
        least 1; read from Ray at most every :data:`SLOTS_EVERY_S` seconds."""
        import ray

        now = time.monotonic()
        if self._width is None or now - self._width[0] >= SLOTS_EVERY_S:
            total = ray.cluster_resources()
            slots = total.get("CPU", 0) / self.cfg.cpus_per_trial if self.cfg.cpus_per_trial > 0 else 1e9
            if self.cfg.gpus_per_trial > 0:
                slots = min(slots, total.get("GPU", 0) / self.cfg.gpus_per_trial)
            self._width = (now, max(1, int(slots + 1e-9)))
        return self._width[1]

    def run(self, trials: Sequence[Trial], on_start: OnStart = None,
            on_progress: OnProgress = None, prepare: Prepare = None) -> Iterator[Outcome]:
        """Run every trial, at most a cluster's worth at once; yield outcomes as they complete,
        each holding the very trial object given (the caller may key on ``id(trial)``).
        ``prepare`` (the claim) runs on a thread of its own ahead of the slots (:class:`Ahead`:
        the next ``slots`` units), ``on_start`` on this thread as each trial is submitted.
        Learning-curve points come back through a :class:`Points` actor and go to ``on_progress`` while the
        driver waits, and all of a trial's points before its outcome."""
        points = self._points if on_progress and trials else None
        if points is not None:  # a previous run's points (an interrupted one's) are not this run's
            self._take(points)
        index = {id(t): i for i, t in enumerate(trials)}
        units = plan(trials, self.cfg.pack_size, self.cfg.device, self._slots())
        by_ref: dict = {}
        remote, threads = self._remote(), max(1, round(self.cfg.cpus_per_trial))
        with Ahead(units, prepare or (lambda batch: None), lookahead=self._slots()) as ahead:
            taken = 0
            while taken < len(units) or self._pending:
                slots = self._slots()
                while taken < len(units) and len(self._pending) < slots:
                    ahead.wait(taken, self.should_stop)
                    unit = [t for t in units[taken] if not on_start or on_start(t) is not False]  # vetoed: dropped
                    taken += 1
                    if unit:
                        progress = Progress(points, [index[id(t)] for t in unit]) if points is not None else None
                        ref = remote.remote(unit, self.cfg.device, threads, progress)
                        by_ref[ref] = unit
                        self._pending.append(ref)
                if self._pending:  # else every remaining trial was skipped
                    yield from self._collect(by_ref, points, trials, on_progress)

    def _drain(self, points, trials: Sequence[Trial], on_progress: OnProgress) -> None:
        """Pass on the learning-curve points put since the last look. Each look is one blocking
        call to the :class:`Points` actor: the driver looks as often as a unit sends
        (:data:`PROGRESS_SEND_S`), and when a unit finishes (its last points are in before its
        outcomes return), not at every wake-up of its wait."""
        self._drained = time.monotonic()
        for batch in self._take(points):
            for i, point in batch:
                on_progress(trials[i], point)

    @staticmethod
    def _take(points) -> list[list[tuple[int, dict]]]:
        import ray

        return ray.get(points.take.remote())

    def _remote(self):
        """:func:`execute_unit` as a Ray task with this cluster's resources per unit."""
        import ray

        return ray.remote(execute_unit).options(num_cpus=self.cfg.cpus_per_trial, num_gpus=self.cfg.gpus_per_trial,
                                                max_retries=self.cfg.max_retries, retry_exceptions=False)

    def _collect(self, by_ref: dict, points, trials: Sequence[Trial], on_progress: OnProgress) -> Iterator[Outcome]:
        """Wait up to a second for a unit to finish: pass on the learning-curve points that came
        meanwhile (:meth:`_drain`: when a unit finished, else at most every
        :data:`PROGRESS_SEND_S`), then yield the finished unit's outcomes (failed ones if its
        worker died and its retries are spent)."""
        import ray

        done, self._pending = ray.wait(self._pending, num_returns=1, timeout=1.0)
        if self.should_stop is not None and self.should_stop():  # within a second of a signal
            raise KeyboardInterrupt("interrupt requested")
        if points is not None and (done or time.monotonic() - self._drained >= PROGRESS_SEND_S):
            self._drain(points, trials, on_progress)
        if not done:
            return
        ref = done[0]
        try:
            outcomes = ray.get(ref)
            for trial, outcome in zip(by_ref[ref], outcomes):  # the caller's own objects
                outcome.trial = trial
            yield from outcomes
        except Exception as err:  # noqa: BLE001 - the worker died and its retries are spent
            for trial in by_ref[ref]:
                yield Outcome(trial, None, f"{type(err).__name__}: {err}", "unknown")
        del by_ref[ref]


def make_scheduler(cfg: ClusterConfig, should_stop: Optional[Callable[[], bool]] = None,
                   ) -> SerialScheduler | RayScheduler:
    """The scheduler that ``cfg.scheduler`` names (a context manager with ``run(trials)``).
    ``should_stop``: asked each second of a wait for Ray; True stops the run with
    ``KeyboardInterrupt`` (the sweep's interrupt, :class:`harness.sweep.Sweep`). The serial
    scheduler's safe points are its caller's (each trial's start and learning-curve point)."""
    if cfg.scheduler is SchedulerKind.serial:
        return SerialScheduler(cfg)
    return RayScheduler(cfg, should_stop)
