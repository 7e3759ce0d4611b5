"""The lease contract (harness/leases.py) on each store a sweep records into: a SQLite file, an
``mlflow server`` on SQLite and one on PostgreSQL (the store a cluster runs). In one process,
rival drivers are threads, each with its own :class:`Tracker` (its own client) as a driver
process has; a driver "dies" when its heartbeat stops with its runs still RUNNING, as after a
SIGKILL.

On the stores a driver writes directly (SQLite, PostgreSQL) claims and records are batched
transactions (:mod:`harness.bulk`); through a server, MLflow's REST calls.

The contract: rivals that claim overlapping batches together win each trial once; a dead
driver's parent and runs are closed as stale (KILLED, ``closed_by``) once its lease expires, and
only then; the next invocation reruns exactly the trials nobody finished; a driver that wakes
after its lease was lost claims and records nothing. So every trial ends with exactly one
FINISHED run and none RUNNING. The process-level guard (drivers and Ray workers killed by
signals on a PostgreSQL-backed server) is ``tests/test_concurrency.py``'s stress test."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import Counter

import pytest
from mlflow.tracking import MlflowClient

from harness.config import TrackingConfig, TrackingKind
from harness.expansion import compose_trial
from harness.leases import LeaseLost
from harness.records import Outcome
from harness.store import resolve_store
from harness.tracking import Tracker
from harness.trial import run_trial

FAST = ["train.max_steps=10", "train.eval_every=5", "task.n_val=32", "task.n_test=64"]
LEASE_S = 10.0  # short, so that the dead drivers' leases expire within the test; not shorter: at
# load 9-15 on 2 cores a live driver's heartbeat missed a 3-s lease and it lost its claims


def _trials_and_a_result():
    """Six trials and one real result of the first, recorded for every trial."""
    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(6)]
    return trials, run_trial(trials[0].config)


@pytest.mark.integration
def test_rivals_win_each_trial_once_and_a_dead_drivers_trials_are_rerun_once(hydra_conf, tmp_path):
    _contract(resolve_store(TrackingConfig(), tmp_path), *_trials_and_a_result())


def test_rivals_on_the_servers_and_postgresql_win_each_trial_once_and_rerun_a_dead_drivers_once(
        hydra_conf, tmp_path, monkeypatch, postgres_database, shared_mlflow_server,
        shared_postgres_mlflow_server):
    """The contract on the stores that are processes (the test process's shared servers, each
    test in an experiment of its own): an ``mlflow server`` on SQLite and one on PostgreSQL, and
    a database of the session's PostgreSQL written directly (``tracking=postgres``: batched claims
    and records); one real result recorded on all three."""
    trials, result = _trials_and_a_result()
    for uri in (shared_mlflow_server, shared_postgres_mlflow_server):
        _contract(resolve_store(TrackingConfig(kind=TrackingKind.server, uri=uri), tmp_path), trials, result)
    monkeypatch.delenv("PGUSER", raising=False)  # resolve_store moves the URI's user there
    _contract(resolve_store(TrackingConfig(kind=TrackingKind.postgres, uri=postgres_database), tmp_path),
              trials, result)


def _contract(store, trials, result) -> None:
    """Rival drivers (threads) claim overlapping batches of ``trials`` on ``store``, two die,
    the rest record ``result``; the next invocation reruns what nobody finished (module docstring)."""
    name = f"contract-{uuid.uuid4().hex[:8]}"
    drivers = [Tracker(store, lease_s=LEASE_S) for _ in range(4)]
    experiment = drivers[0].experiment(name)
    parents = [d.start_parent(experiment, name, len(trials), 0, []) for d in drivers]
    # overlapping batches: each trial is wanted by two drivers, each driver wants three trials
    batches = [[trials[(i + j) % 6] for j in (0, 1, 3)] for i in range(4)]
    won: list[list[str | None]] = [[] for _ in drivers]
    beats = [d.heartbeat(p) for d, p in zip(drivers, parents)]
    start = threading.Barrier(len(drivers))

    def claim(i: int) -> None:
        start.wait()
        won[i] = drivers[i].claim_batch(experiment, parents[i], name, batches[i])

    for beat in beats:
        beat.__enter__()
    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(drivers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    holder = {}  # trial id → (driver, run id) of every claim won
    for i, (batch, runs) in enumerate(zip(batches, won)):
        assert len(runs) == len(batch)
        for trial, run_id in zip(batch, runs):
            if run_id is not None:
                assert trial.trial_id not in holder, f"trial {trial.trial_id} won twice"
                holder[trial.trial_id] = (i, run_id)
    wanted = {t.trial_id for batch in batches for t in batch}
    assert set(holder) == wanted  # all drivers alive: every wanted trial has its one winner

    # drivers 0 and 1 die: their heartbeats stop, their parents and won runs stay RUNNING;
    # drivers 2 and 3 record what they won and end
    for beat in beats[:2]:
        beat.__exit__(None, None, None)
    died = time.monotonic()
    closer = Tracker(store, lease_s=LEASE_S)
    assert closer.close_stale(experiment) == 0  # within their lease the dead look alive
    for i in (2, 3):
        for trial, run_id in zip(batches[i], won[i]):
            if run_id is not None:
                assert drivers[i].finish_trial(run_id, Outcome(trial, result, None, "node"))
        beats[i].__exit__(None, None, None)
        drivers[i].end_run(parents[i], "FINISHED")
    dead_runs = {run_id for i in (0, 1) for run_id in won[i] if run_id is not None}
    finished = {t for t, (i, _) in holder.items() if i in (2, 3)}

    time.sleep(max(0.0, died + LEASE_S + 1.0 - time.monotonic()))
    assert closer.close_stale(experiment) == 2 + len(dead_runs)  # two parents and their runs

    client = MlflowClient(store.uri)
    for run_id in dead_runs | set(parents[:2]):
        run = client.get_run(run_id)
        assert run.info.status == "KILLED" and "closed_by" in run.data.tags

    # the next invocation reruns exactly what nobody finished
    parent = closer.start_parent(experiment, name, len(trials), 0, [])
    rerun = closer.claim_batch(experiment, parent, name, trials)
    assert {t.trial_id for t, r in zip(trials, rerun) if r is not None} == {t.trial_id for t in trials} - finished
    for trial, run_id in zip(trials, rerun):
        if run_id is not None:
            assert closer.finish_trial(run_id, Outcome(trial, result, None, "node"))
    closer.end_run(parent, "FINISHED")

    # a dead driver that wakes: its lease is lost, it records and claims nothing
    i, run_id = next(v for v in holder.values() if v[0] in (0, 1))
    woken = drivers[i]
    trial = next(t for t, r in zip(batches[i], won[i]) if r == run_id)
    assert woken.finish_trial(run_id, Outcome(trial, result, None, "node")) is False
    with pytest.raises(LeaseLost):
        woken.claim_batch(experiment, parents[i], name, trials)

    runs = client.search_runs([experiment], max_results=1000)
    per_trial = Counter(r.data.tags["trial_id"] for r in runs
                        if "trial_id" in r.data.tags and r.info.status == "FINISHED")
    assert per_trial == Counter({t.trial_id: 1 for t in trials})
    assert [r.info.run_id for r in runs if r.info.status == "RUNNING"] == []
    with contextlib.suppress(Exception):
        client.delete_experiment(experiment)  # a shared server: leave no live experiment behind
