"""The real command line, in subprocesses, from a working directory outside the repo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_smoke_ablation_end_to_end_on_ray(tmp_path):
    proc = _run(["harness", "+ablation=smoke"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    db = tmp_path / "mlflow.db"
    assert db.exists()
    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("smoke")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 18
    assert {r.info.status for r in children} == {"FINISHED"}
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert len({r.data.tags["trial_id"] for r in children}) == 18
    # the real effect the smoke run exists to show: attention learns its teacher, the MLP doesn't
    largest = [r for r in children if r.data.params["task.n_train"] == "1024"]
    err = {v: max(r.data.metrics["test/rel_mse"] for r in largest if r.data.tags["variant"] == v)
           for v in ("softmax", "mlp")}
    assert err["softmax"] < 0.1 * err["mlp"]
    pngs = list(tmp_path.glob("outputs/smoke/*/sample_efficiency.png"))
    assert len(pngs) == 1
    artifacts = {f.path for f in client.list_artifacts(parents[0].info.run_id)}
    assert "sample_efficiency.png" in artifacts
    # nothing written anywhere but the configured store and the output folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlartifacts", "mlflow.db", "outputs"]
    assert not (ROOT / "mlflow.db").exists() and not (ROOT / "mlruns").exists()

    proc = _run(["analysis", "+ablation=smoke"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "18 trial runs" in proc.stdout


def test_dry_run_lists_trials_and_records_nothing(tmp_path):
    proc = _run(["harness", "+ablation=smoke", "seed=0", "dry_run=true"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[:2] == ["== smoke", "9 trials"]
    assert any("mlp" in line and "task.n_train=1024" in line for line in lines[2:])
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlartifacts").exists()


def test_single_trial_of_the_defaults_serially(tmp_path):
    proc = _run(["harness", "cluster=serial", "train.max_steps=20", "train.eval_every=10"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("single")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 2  # parent + one child


def test_bad_value_is_rejected_before_any_trial_with_exit_2(tmp_path):
    proc = _run(["harness", "+ablation=smoke", "task.n_train=0"], tmp_path)
    assert proc.returncode == 2
    assert "n_train" in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()
