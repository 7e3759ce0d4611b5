"""The driver's fault handling where no process is what is tested, each command called in-process
(``run_in_process``, conftest.py): forced reruns and changed configs, stale runs of expired
leases, a trial that raises or diverges, bad input (exit status 2, the store unchanged), a
deleted experiment and a read-only store. What needs a process of its own (signals, killed Ray
workers, resuming an interrupted sweep on Ray, a trial no Ray node can run) is
``tests/test_faults.py``."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from conftest import copy_populated, digest

FAST = ["train.max_steps=40", "train.eval_every=20", "task.n_val=64", "task.n_test=128"]


def _uri(cwd: Path) -> str:
    return f"sqlite:///{cwd / 'mlflow.db'}"


def test_only_runs_whose_driver_lease_expired_are_closed_as_stale(tmp_path, run_in_process, trial_runs):
    """A RUNNING run is closed by another invocation only when its driver's heartbeat is older
    than that driver's lease; the runs of a live driver (fresh heartbeat) are left alone."""
    from mlflow.tracking import MlflowClient

    args = ["harness", "cluster=serial", *FAST]
    assert run_in_process(args, tmp_path).returncode == 0
    client = MlflowClient(_uri(tmp_path))
    exp = client.get_experiment_by_name("single/teacher/softmax").experiment_id
    now_ms = int(time.time() * 1000)
    dead = client.create_run(exp, tags={"role": "sweep", "lease_s": "60",
                                        "heartbeat_ms": str(now_ms - 600_000)}).info.run_id
    live = client.create_run(exp, tags={"role": "sweep", "lease_s": "3600",
                                        "heartbeat_ms": str(now_ms)}).info.run_id
    ghost = client.create_run(exp, tags={"trial_id": "deadbeef",  # its driver died 10 min ago
                                         "mlflow.parentRunId": dead}).info.run_id
    busy = client.create_run(exp, tags={"trial_id": "cafebabe",  # another sweep's running trial
                                        "mlflow.parentRunId": live}).info.run_id
    proc = run_in_process(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 already finished (skipped)" in proc.stdout and "closed 2 stale RUNNING" in proc.stdout
    assert client.get_run(ghost).info.status == "KILLED" and client.get_run(dead).info.status == "KILLED"
    assert client.get_run(busy).info.status == "RUNNING" and client.get_run(live).info.status == "RUNNING"


def test_force_reruns_and_leaves_one_finished_run_per_trial(tmp_path, run_in_process, trial_runs):
    args = ["harness", "cluster=serial", *FAST]
    assert run_in_process(args, tmp_path).returncode == 0
    proc = run_in_process([*args, "force=true"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "0 already finished (skipped), 1 finished now" in proc.stdout
    runs = trial_runs(_uri(tmp_path), "single/teacher/softmax")
    assert [r.info.status for r in runs] == ["FINISHED"]


def test_changed_config_gets_a_new_trial(tmp_path, run_in_process, trial_runs):
    args = ["harness", "cluster=serial", *FAST]
    assert run_in_process(args, tmp_path).returncode == 0
    proc = run_in_process([*args, "train.lr=0.001"], tmp_path)
    assert "0 already finished (skipped), 1 finished now" in proc.stdout
    assert len(trial_runs(_uri(tmp_path), "single/teacher/softmax")) == 2


def test_raising_trial_is_failed_with_its_error_and_the_sweep_goes_on(hydra_conf, tmp_path, monkeypatch):
    """A trial that raises at run time (here: its data set cannot be drawn) is recorded FAILED
    with the error text; the other trials of the sweep still finish."""
    from harness.config import ClusterConfig, SchedulerKind, TrackingConfig
    from harness.loop import run_sweep
    from harness.scheduler import SerialScheduler
    from harness.expansion import compose_trial
    from harness.store import resolve_store
    from harness.tracking import Tracker
    import harness.trial as trial_module

    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(3)]
    original = trial_module.run_trial

    def flaky(cfg, device="cpu", progress=None):
        if cfg.seed == 1:
            raise RuntimeError("boom: cannot draw the data")
        return original(cfg, device, progress)

    monkeypatch.setattr("harness.scheduler.run_trial", flaky)
    store = resolve_store(TrackingConfig(), tmp_path)
    # lone trials (pack_size=1): a pack would not call run_trial
    with SerialScheduler(ClusterConfig(scheduler=SchedulerKind.serial, pack_size="1")) as scheduler:
        summary = run_sweep(trials, scheduler, Tracker(store), "unit", [])
    assert summary.finished == 2 and len(summary.failed) == 1
    assert "boom" in summary.failed[0] and trials[1].trial_id in summary.failed[0]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store.uri)
    runs = client.search_runs([client.get_experiment_by_name("unit").experiment_id])
    failed = [r for r in runs if r.info.status == "FAILED"]
    assert len(failed) == 1 and "boom" in failed[0].data.tags["error"]


def test_divergence_is_finished_with_a_tag_and_the_sweep_goes_on(tmp_path, run_in_process, trial_runs):
    args = ["harness", "+ablation=smoke", "cluster=serial", *FAST, "model=mlp", "task.n_train=64",
            "seed=0", "train.lr=1e30"]
    proc = run_in_process(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 diverged" in proc.stdout and "DIVERGED" in proc.stderr
    runs = trial_runs(_uri(tmp_path), "smoke")
    assert [(r.info.status, r.data.tags["diverged"]) for r in runs] == [("FINISHED", "true")]
    assert "test/rel_mse" in runs[0].data.metrics


@pytest.mark.parametrize("override, message", [
    ("+ablation=nope", "no ablation 'nope'"),
    ("model=nope", "no model 'nope'"),
    ("task=nope", "no task 'nope'"),
    ("model.sigma=foo", "expected one of"),
    ("train.lr=abc", "train.lr"),
    ("seed=x", "seed"),
    ("task.n_train=0", "n_train"),
    ("task.d=0", "'d': 0"),
    ("model.d1=0", "d1=0"),
    ("train.max_steps=0", "train.max_steps"),
    ("+ablation=empty", "empty grid"),
    ("tracking=server tracking.uri=file:///tmp/mlruns", "file stores are not supported"),
    ("tracking.db_path=missing/sub/mlflow.db", "does not exist"),
    ("cluster.cpus_per_trial=-1", "cluster.cpus_per_trial must be positive"),
    ("cluster=serial cluster.cpus_per_trial=0", "cluster.cpus_per_trial must be positive"),
    ("cluster.gpus_per_trial=-0.5", "cluster.gpus_per_trial"),
    ("cluster.max_retries=-1", "cluster.max_retries"),
    ("cluster=ray cluster.num_cpus=2", "cluster.num_cpus=2 sizes the Ray instance"),
    ("cluster.address=auto", "cluster.address='auto' is for cluster=ray"),
    ("tracking.lease_s=0", "tracking.lease_s must be positive"),
])
def test_bad_input_exits_2_with_its_message_and_leaves_the_store_unchanged(tmp_path, run_in_process, populated,
                                                                          override, message):
    before = copy_populated(populated, tmp_path)
    extra = tmp_path / "extra_conf" / "ablation"
    extra.mkdir(parents=True)
    (extra / "empty.yaml").write_text("# @package _global_\nablation:\n  name: empty\n  grid: {}\n")
    args = ["harness", *override.split(), f"hydra.searchpath=[file://{extra.parent}]"]
    proc = run_in_process(args, tmp_path)
    assert proc.returncode == 2, (proc.stdout[-1000:], proc.stderr[-2000:])
    assert message in proc.stderr, proc.stderr[-2000:]
    assert digest(tmp_path / "mlflow.db") == before


def test_deleted_experiment_exits_2_naming_it_and_the_ways_out(tmp_path, run_in_process, populated):
    from mlflow.tracking import MlflowClient

    copy_populated(populated, tmp_path)
    client = MlflowClient(_uri(tmp_path))
    client.delete_experiment(client.get_experiment_by_name("single/teacher/softmax").experiment_id)
    before = digest(tmp_path / "mlflow.db")
    proc = run_in_process(["harness", "cluster=serial", *FAST], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "'single/teacher/softmax'" in proc.stderr and "is deleted" in proc.stderr
    assert all(way in proc.stderr for way in ("restore", "mlflow gc", "ablation.name="))
    assert "Traceback" not in proc.stderr
    assert digest(tmp_path / "mlflow.db") == before
    proc = run_in_process(["analysis"], tmp_path)
    assert proc.returncode == 2 and "is deleted" in proc.stderr, proc.stderr[-2000:]


def test_analysis_of_a_deleted_experiment_exits_2_naming_it(tmp_path, run_in_process, populated):
    """Issue 12: after ``mlflow experiments delete``, ``python -m analysis`` exited 1 with
    ``KeyError: 'task'``. The analysis is run directly on the store with the deleted experiment:
    exit 2 naming the experiment and the ways out, no traceback, the store unchanged."""
    from mlflow.tracking import MlflowClient

    copy_populated(populated, tmp_path)
    client = MlflowClient(_uri(tmp_path))
    client.delete_experiment(client.get_experiment_by_name("single/teacher/softmax").experiment_id)
    before = digest(tmp_path / "mlflow.db")
    proc = run_in_process(["analysis"], tmp_path)
    assert "Traceback" not in proc.stderr and "KeyError" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "'single/teacher/softmax'" in proc.stderr and "is deleted" in proc.stderr
    assert all(way in proc.stderr for way in ("restore", "mlflow gc", "ablation.name="))
    assert digest(tmp_path / "mlflow.db") == before


def test_read_only_store_folder_is_rejected(tmp_path, run_in_process):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    made_read_only = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    try:
        try:
            (folder / "probe").touch()
            pytest.skip("cannot make a folder read-only here")
        except OSError:
            pass
        proc = run_in_process(["harness", "cluster=serial", "tracking.db_path=ro/mlflow.db"], tmp_path)
        assert proc.returncode == 2
        assert "read-only" in proc.stderr
    finally:
        if made_read_only:
            subprocess.run(["chattr", "-i", str(folder)])
        folder.chmod(0o755)
