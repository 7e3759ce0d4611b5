"""One trial end to end into MLflow in tmp_path, read back through the analysis loader."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient

from analysis.load import load_runs
from analysis.plots import sample_efficiency
from harness.config import TrackingConfig, TrackingKind
from harness.scheduler import Outcome, SerialScheduler
from harness.sweep import compose_trial
from harness.tracking import Tracker, resolve_store

FAST = ["train.max_steps=30", "train.eval_every=10", "task.n_train=32", "task.n_val=32",
        "task.n_test=64", "cluster=serial"]


def test_store_is_made_absolute_with_artifacts_beside_it(tmp_path):
    store = resolve_store(TrackingConfig(db_path="sub/runs.db"), tmp_path)
    assert store.uri == f"sqlite:///{tmp_path}/sub/runs.db"
    assert store.artifact_root == (tmp_path / "sub" / "mlartifacts").as_uri()
    with pytest.raises(ValueError, match="tracking.uri"):
        resolve_store(TrackingConfig(kind=TrackingKind.server, uri=None), tmp_path)


def test_trial_recorded_in_mlflow_and_read_back_typed(hydra_conf, tmp_path):
    trials = [compose_trial(FAST, ["seed=0"]), compose_trial(FAST, ["seed=1"])]
    store = resolve_store(TrackingConfig(), tmp_path)
    tracker = Tracker(store)
    experiment = tracker.experiment("unit")
    parent = tracker.start_parent(experiment, "unit", len(trials), 0, FAST)
    with SerialScheduler(trials[0].config.cluster) as scheduler:
        outcomes = list(scheduler.run(trials))
    assert all(o.error is None for o in outcomes)
    failed = Outcome(trials[0], None, "Traceback ...\nRuntimeError: boom", "here")
    for outcome in [*outcomes, failed]:
        tracker.log_trial(experiment, parent, "unit", outcome)
    tracker.end_run(parent)

    df = load_runs("unit", store.uri)
    assert len(df) == 3
    assert sorted(df["status"]) == ["FAILED", "FINISHED", "FINISHED"]
    ok = df[df["status"] == "FINISHED"].sort_values("seed")
    assert ok["seed"].tolist() == [0, 1]
    for column in ("seed", "task.n_train", "train.lr", "test/rel_mse", "n_params"):
        assert pd.api.types.is_numeric_dtype(df[column]), column
    assert df["model.residual"].dtype == "boolean"
    assert set(df["trial_id"]) == {t.trial_id for t in trials}
    assert (ok["test/rel_mse"].to_numpy() == [o.result.metrics["test/rel_mse"]
                                               for o in sorted(outcomes, key=lambda o: o.trial.config.seed)]).all()

    client = MlflowClient(store.uri)
    child = client.get_run(ok["run_id"].iloc[0])
    assert child.data.tags["mlflow.parentRunId"] == parent
    assert {"trial_id", "ablation", "variant", "task", "git_commit", "node"} <= set(child.data.tags)
    assert child.data.tags["task"] == "teacher"
    assert "symmetry/permutation_err" in child.data.metrics
    history = client.get_metric_history(child.info.run_id, "val/loss")
    assert [m.step for m in history] == [10, 20, 30]
    local = Path(client.download_artifacts(child.info.run_id, "model_state.pt", str(tmp_path)))
    state = torch.load(local)
    assert {"W_Q", "W_K"} <= set(state)
    bad = client.get_run(df[df["status"] == "FAILED"]["run_id"].iloc[0])
    assert "boom" in bad.data.tags["error"]
    assert str(tmp_path) in client.get_experiment(experiment).artifact_location
    assert not (Path.cwd() / "mlruns").exists()

    paths = sample_efficiency(df, tmp_path / "plot")
    assert all(p.stat().st_size > 1000 for p in paths)
