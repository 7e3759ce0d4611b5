"""``python -m benchmarks.store_scale [--sizes 100,1000,10000] [--trials 30] [--dir DIR]``: the
per-trial tracking cost as the store grows (issue 26, item 3: "flat with the store").

For each size N, an experiment holding N finished trial runs (each with trial tags, 40 params
and 50 metrics: the shape of a real trial run), filled once through MLflow's client
(``create_run``, one ``log_batch``, ``set_terminated``) and reused by later invocations (the
fill of 10^4 runs takes many minutes); then ``--trials`` new trials are tracked as the sweep does
it: claimed in rounds of ``--trials`` (one bakery round, :meth:`harness.tracking.Tracker.claim_batch`)
and recorded (:func:`track_round`, the one place this benchmark calls the tracker's trial API). The floor is one bare record in an experiment of
its own: ``create_run``, one ``log_batch`` with 40 params and 50 metrics, ``set_terminated``.
Each figure is per trial, the median over 3 rounds, wall and CPU (``getrusage`` of this process: the SQLite
store runs in it). Also timed once per size: the resume listing (``Tracker.finished_trials``),
of every finished trial and of a sweep's 200 trial ids (half finished), as a resume reads it
(medians of 5 reads).
The tracked trials stay in the store (each invocation's count is printed), so sizes drift up by
``--trials`` per invocation. Prints a Markdown table; paste it into ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import sqlite3
import statistics
import tempfile
import time
import uuid
from contextlib import closing
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")

ROOT = Path(__file__).resolve().parent.parent
N_PARAMS, N_METRICS = 40, 50
SWEEP = 200  # trial ids of the resumed sweep (+ablation=load's size), half of them finished


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def track_round(tracker, experiment_id: str, parent_id: str, trials, outcomes, since_ms: int) -> tuple[float, float]:
    """One claim round as a sweep makes it (:meth:`harness.tracking.Tracker.claim_batch` of the
    trials, one bakery round; ``since_ms`` as a sweep's plan sets it), then each outcome recorded
    and its run closed; returns the wall seconds of the claim and of the records."""
    start = time.perf_counter()
    run_ids = tracker.claim_batch(experiment_id, parent_id, "bench", trials, since_ms=since_ms)
    claimed = time.perf_counter()
    assert all(run_ids), "a fresh trial id was claimed elsewhere"
    for run_id, outcome in zip(run_ids, outcomes):
        tracker.finish_trial(run_id, outcome)
    return claimed - start, time.perf_counter() - claimed


def bare_record(client, experiment_id: str, params: list, metrics: list) -> None:
    """The floor: one run, created, given 40 params and 50 metrics in one batch, closed."""
    run_id = client.create_run(experiment_id).info.run_id
    client.log_batch(run_id, metrics=metrics, params=params)
    client.set_terminated(run_id)


def _payload():
    from mlflow.entities import Metric, Param

    now = int(time.time() * 1000)
    params = [Param(f"p{i:02d}", str(i)) for i in range(N_PARAMS)]
    metrics = [Metric(f"m{i:02d}", i / 7, now, 0) for i in range(N_METRICS)]
    return params, metrics


def count_runs(client, experiment_id: str) -> int:
    """The experiment's active runs: one read-only SQL count on a SQLite store (MLflow's search
    would read 10^4 whole runs, minutes under load), MLflow's search elsewhere."""
    from harness.store import sqlite_path

    db = sqlite_path(client.tracking_uri)
    if db is None:
        return len(client.search_runs([experiment_id], max_results=50000))
    with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=30)) as con:
        return con.execute("SELECT COUNT(*) FROM runs WHERE experiment_id = ? "
                           "AND lifecycle_stage = 'active'", (int(experiment_id),)).fetchone()[0]


def _listing_ms(tracker, experiment_id: str, trial_ids=None, repeat: int = 5) -> float:
    """Median wall ms of the resume listing over ``repeat`` reads."""
    walls = []
    for _ in range(repeat):
        wall = time.perf_counter()
        tracker.finished_trials(experiment_id, trial_ids)
        walls.append(time.perf_counter() - wall)
    return _median_ms(walls)


def fill(client, experiment_id: str, parent_id: str, n: int) -> int:
    """Top the experiment up to ``n`` runs shaped like finished trial runs (MLflow's client:
    ``create_run`` with the trial tags, one ``log_batch``, ``set_terminated``); returns the count
    it had before."""
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    have = count_runs(client, experiment_id)
    params, metrics = _payload()
    for i in range(have, n):
        tags = {MLFLOW_PARENT_RUN_ID: parent_id, "trial_id": uuid.uuid4().hex[:16],
                "ablation": "bench", "variant": "softmax", "task": "teacher", "ticket": "1"}
        run_id = client.create_run(experiment_id, tags=tags).info.run_id
        client.log_batch(run_id, metrics=metrics, params=params)
        client.set_terminated(run_id)
        if (i + 1) % 1000 == 0:
            print(f"  filled {i + 1}/{n}", flush=True)
    return have


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _fresh(trial, outcome):
    """The trial under a new id (never finished in the store), and its outcome."""
    from harness.scheduler import Outcome

    fresh = dataclasses.replace(trial, trial_id=uuid.uuid4().hex[:16])
    return fresh, Outcome(fresh, outcome.result, None, "bench")


def measure(tracker, experiment_id: str, parent_id: str, trial, outcome, n_trials: int, rounds: int = 3):
    """Median over ``rounds`` claim rounds of ``n_trials`` fresh trial ids (:func:`track_round`),
    per trial: wall ms, CPU ms, and the wall ms of its share of the claim and of its record."""
    from harness.leases import now_ms

    since_ms = now_ms() - 120_000  # a sweep planned now, with the default lease
    walls, cpus, claims, records = [], [], [], []
    for _ in range(rounds):
        fresh = [_fresh(trial, outcome) for _ in range(n_trials)]
        wall, cpu = time.perf_counter(), _cpu()
        claim_s, record_s = track_round(tracker, experiment_id, parent_id, [t for t, _ in fresh],
                                        [o for _, o in fresh], since_ms)
        walls.append((time.perf_counter() - wall) / n_trials)
        cpus.append((_cpu() - cpu) / n_trials)
        claims.append(claim_s / n_trials)
        records.append(record_s / n_trials)
    return _median_ms(walls), _median_ms(cpus), _median_ms(claims), _median_ms(records)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store_scale",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="runs already in the experiment")
    parser.add_argument("--trials", type=int, default=32, help="trials per claim round (3 rounds per size)")
    parser.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "harness-store-scale"),
                        help="folder of the SQLite store, kept and reused (the fill is slow)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    import torch
    from hydra import initialize_config_dir

    from harness.config import register_configs
    from harness.scheduler import Outcome
    from harness.expansion import compose_trial
    from harness.tracking import Store, Tracker
    from harness.trial import run_trial

    torch.set_num_threads(1)
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        trial = compose_trial(["train.max_steps=2", "train.eval_every=1", "task.n_val=8",
                               "task.n_test=8"], ["seed=0"])
    outcome = Outcome(trial, run_trial(trial.config), None, "bench")
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    store = Store(f"sqlite:///{folder / 'mlflow.db'}", (folder / "mlartifacts").as_uri())
    tracker = Tracker(store)
    client = tracker.client
    rows = []

    floor_exp = tracker.experiment("floor")
    params, metrics = _payload()
    bare_record(client, floor_exp, params, metrics)  # warm-up
    walls, cpus = [], []
    for _ in range(args.trials):
        wall, cpu = time.perf_counter(), _cpu()
        bare_record(client, floor_exp, params, metrics)
        walls.append(time.perf_counter() - wall)
        cpus.append(_cpu() - cpu)
    floor = (_median_ms(walls), _median_ms(cpus))
    rows.append(("floor: bare record (create_run, log_batch 40 params + 50 metrics, set_terminated)",
                 "-", *floor, None, None, None, None))

    for n in sizes:
        experiment_id = tracker.experiment(f"scale-{n}")
        parent_id = tracker.start_parent(experiment_id, "bench", n, 0, [])
        print(f"experiment scale-{n}: filling to {n} runs", flush=True)
        have = fill(client, experiment_id, parent_id, n)
        count = count_runs(client, experiment_id)
        listing_ms = _listing_ms(tracker, experiment_id)
        every = tracker.finished_trials(experiment_id)
        sweep_ids = sorted(every)[:SWEEP // 2] + [uuid.uuid4().hex[:16] for _ in range(SWEEP // 2)]
        sweep_ms = _listing_ms(tracker, experiment_id, sweep_ids)  # what a resume of SWEEP trials reads
        measure(tracker, experiment_id, parent_id, trial, outcome, 4, rounds=1)  # warm-up
        figures = measure(tracker, experiment_id, parent_id, trial, outcome, args.trials)
        tracker.end_run(parent_id)
        rows.append((f"claim + record (had {have} runs before the fill)", count, *figures, listing_ms,
                     sweep_ms))
        print(rows[-1], flush=True)

    print(f"\nstore: {store.uri.split('/')[-1]} (SQLite, in-process); 3 claim rounds of {args.trials} trials per size,"
          " medians\n")
    print("| what | runs in experiment | wall ms/trial | CPU ms/trial | claim wall ms | record wall ms"
          f" | listing: every finished trial ms | listing: a sweep's {SWEEP} trial ids ms |")
    print("|---|---|---|---|---|---|---|---|")
    for what, count, *figures in rows:
        cells = ["-" if v is None else f"{v:.1f}" for v in figures]
        print(f"| {what} | {count} | " + " | ".join(cells) + " |")
    base = rows[1][2] if len(rows) > 1 else float("nan")
    for _, count, wall_ms, cpu_ms, *_ in rows[1:]:
        print(f"{count} runs: {wall_ms / base:.2f}× the smallest size's wall, "
              f"{wall_ms / floor[0]:.2f}× the floor's wall, {cpu_ms / floor[1]:.2f}× its CPU")


if __name__ == "__main__":
    main()
