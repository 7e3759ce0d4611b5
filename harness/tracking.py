"""MLflow recording: one experiment per ablation, one parent run per invocation, one child run
per trial. Only the driver process writes, so a SQLite store never sees two writers.

Child runs are created when a trial's outcome arrives, with the trial's own start and end times,
and are closed in the same call: nothing half-written stays in the store.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from harness.config import TrackingConfig, TrackingKind
from harness.scheduler import Outcome
from harness.sweep import identity_dict

_BATCH = {"metrics": 1000, "params": 100, "tags": 100}  # MLflow's log_batch limits


@dataclass(frozen=True)
class Store:
    """Where runs go: a tracking URI and, for a local store, the artifact root beside it."""

    uri: str
    artifact_root: str | None


def resolve_store(cfg: TrackingConfig, cwd: Path) -> Store:
    """Make the configured store absolute, once, in the driver (relative to ``cwd``).

    ``tracking=local`` gives ``sqlite:////abs/path/mlflow.db`` with artifacts in
    ``mlartifacts/`` beside it (MLflow's default ``./mlruns`` would follow the current directory).

    Raises:
        ValueError: for ``tracking=server`` without ``tracking.uri``.
    """
    if cfg.kind is TrackingKind.server:
        if not cfg.uri:
            raise ValueError("tracking=server needs tracking.uri, e.g. http://127.0.0.1:5000")
        return Store(cfg.uri, None)
    db = (cwd / cfg.db_path).resolve()
    root = (cwd / cfg.artifact_root).resolve() if cfg.artifact_root else db.parent / "mlartifacts"
    return Store(f"sqlite:///{db}", root.as_uri())


def git_commit() -> str:
    """The harness checkout's commit (with ``+dirty`` if it has local changes), or ``unknown``."""
    repo = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}} → {"a.b": 1}``."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _chunks(items: list, size: int):
    for i in range(0, len(items), size):
        yield items[i:i + size]


class Tracker:
    """Records an invocation and its trials in MLflow through one ``MlflowClient``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.client = MlflowClient(tracking_uri=store.uri)
        self.commit = git_commit()

    def experiment(self, name: str) -> str:
        """The id of experiment ``name``, created (with artifacts beside the store) if missing."""
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        location = f"{self.store.artifact_root}/{name}" if self.store.artifact_root else None
        return self.client.create_experiment(name, artifact_location=location)

    def start_parent(self, experiment_id: str, ablation: str, n_trials: int,
                     overrides: list[str]) -> str:
        """Open the invocation's parent run; returns its run id."""
        run = self.client.create_run(experiment_id, run_name=f"{ablation}-sweep", tags={
            "ablation": ablation, "git_commit": self.commit, "role": "sweep"})
        self.client.log_batch(run.info.run_id, params=[
            Param("n_trials", str(n_trials)), Param("overrides", " ".join(overrides)[:6000])])
        return run.info.run_id

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        """Close a run with ``status`` (FINISHED, FAILED or KILLED)."""
        self.client.set_terminated(run_id, status)

    def log_trial(self, experiment_id: str, parent_id: str, ablation: str, outcome: Outcome) -> str:
        """Record one trial as a child run (FINISHED or FAILED); returns its run id."""
        trial, result = outcome.trial, outcome.result
        start = result.start_ms if result else None
        tags = {MLFLOW_PARENT_RUN_ID: parent_id, MLFLOW_RUN_NAME: f"{trial.variant}-{trial.trial_id[:8]}",
                "trial_id": trial.trial_id, "ablation": ablation, "variant": trial.variant,
                "git_commit": self.commit, "node": outcome.node,
                "overrides": " ".join(trial.overrides)}
        run_id = self.client.create_run(experiment_id, start_time=start, tags=tags).info.run_id
        params = [Param(k, str(v)) for k, v in flatten(identity_dict(trial.config)).items()]
        for chunk in _chunks(params, _BATCH["params"]):
            self.client.log_batch(run_id, params=chunk)
        if result is None:
            self.client.set_tag(run_id, "error", outcome.error[-5000:])
            self.client.log_text(run_id, outcome.error, "error.txt")
            self.client.set_terminated(run_id, "FAILED")
            return run_id
        self._log_result(run_id, result)
        self.client.set_terminated(run_id, "FINISHED", end_time=result.end_ms)
        return run_id

    def _log_result(self, run_id: str, result) -> None:
        ts = result.end_ms
        metrics = [Metric(k, float(v), ts, 0) for k, v in result.metrics.items()]
        metrics.append(Metric("n_params", float(result.n_params), ts, 0))
        for point in result.curve:
            step = int(point["step"])
            metrics += [Metric(k, float(v), ts, step) for k, v in point.items() if k != "step"]
        for chunk in _chunks(metrics, _BATCH["metrics"]):
            self.client.log_batch(run_id, metrics=chunk)
        self.client.log_batch(run_id, tags=[RunTag("diverged", str(result.diverged).lower()),
                                            RunTag("device", result.info.get("device", ""))])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "model_state.pt"
            torch.save(result.state_dict, path)
            self.client.log_artifact(run_id, str(path))

    def log_artifact(self, run_id: str, path: Path) -> None:
        """Attach a file (a plot, a table) to a run."""
        self.client.log_artifact(run_id, str(path))
