"""MLflow recording: one experiment per ablation, one parent run per invocation, one child run
per trial. Only the driver process writes, so a SQLite store never sees two writers, and the
experiment and parent run are created once, by the driver, before any trial starts.

A child run is opened (RUNNING) when its trial starts and closed when its outcome arrives:
FINISHED (tag ``diverged``), FAILED (tag and artifact ``error``), or KILLED on an interrupt.
Runs left RUNNING by a driver that died are closed as KILLED by the next invocation.
"""

from __future__ import annotations

import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from harness.config import TrackingConfig, TrackingKind
from harness.scheduler import Outcome
from harness.sweep import Trial, identity_dict

_BATCH = {"metrics": 1000, "params": 100, "tags": 100}  # MLflow's log_batch limits


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

    Raises:
        StoreError: for ``tracking=server`` without an ``http(s)://`` ``tracking.uri``.
    """
    if cfg.kind is TrackingKind.server:
        if not cfg.uri or not cfg.uri.startswith(("http://", "https://")):
            raise StoreError(f"tracking.uri={cfg.uri!r} cannot be used with tracking=server; allowed: "
                             "an MLflow tracking server, http://HOST:PORT or https://HOST:PORT "
                             "(file stores are not supported: use tracking=local for a SQLite file)")
        return Store(cfg.uri.rstrip("/"), None)
    db = (cwd / cfg.db_path).resolve()
    root = (cwd / cfg.artifact_root).resolve() if cfg.artifact_root else db.parent / "mlartifacts"
    return Store(f"sqlite:///{db}", root.as_uri())


def check_store(store: Store, timeout_s: float = 10.0) -> None:
    """Fail early if the store cannot be written: a missing or read-only folder for a SQLite
    file, or a tracking server that does not answer ``/health``.

    Raises:
        StoreError: naming the store and what is wrong with it.
    """
    if store.uri.startswith("sqlite:///"):
        db = Path(store.uri[len("sqlite:///"):])
        for folder in (db.parent, Path(store.artifact_root[len("file://"):]).parent):
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

    def _search(self, experiment_id: str, filter_string: str) -> list:
        runs, token = [], None
        while True:
            page = self.client.search_runs([experiment_id], filter_string, max_results=1000,
                                           page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def finished_trials(self, experiment_id: str) -> dict[str, list[str]]:
        """``trial_id → run ids`` of the experiment's FINISHED trial runs."""
        found: dict[str, list[str]] = {}
        for run in self._search(experiment_id, "attributes.status = 'FINISHED'"):
            if "trial_id" in run.data.tags:
                found.setdefault(run.data.tags["trial_id"], []).append(run.info.run_id)
        return found

    def close_stale(self, experiment_id: str) -> int:
        """Close the experiment's runs left RUNNING (a driver that died) as KILLED; returns how many."""
        stale = self._search(experiment_id, "attributes.status = 'RUNNING'")
        for run in stale:
            self.client.set_tag(run.info.run_id, "closed_by", "next invocation (stale RUNNING)")
            self.client.set_terminated(run.info.run_id, "KILLED")
        return len(stale)

    def start_parent(self, experiment_id: str, ablation: str, n_trials: int, n_skipped: int,
                     overrides: list[str]) -> str:
        """Open the invocation's parent run; returns its run id."""
        run = self.client.create_run(experiment_id, run_name=f"{ablation}-sweep", tags={
            "ablation": ablation, "git_commit": self.commit, "role": "sweep"})
        self.client.log_batch(run.info.run_id, params=[
            Param("n_trials", str(n_trials)), Param("n_skipped_finished", str(n_skipped)),
            Param("overrides", " ".join(overrides)[:6000])])
        return run.info.run_id

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        """Close a run with ``status`` (FINISHED, FAILED or KILLED)."""
        self.client.set_terminated(run_id, status)

    def start_trial(self, experiment_id: str, parent_id: str, ablation: str, trial: Trial) -> str:
        """Open a RUNNING child run for ``trial`` with its tags and params; returns its run id."""
        tags = {MLFLOW_PARENT_RUN_ID: parent_id, MLFLOW_RUN_NAME: f"{trial.variant}-{trial.trial_id[:8]}",
                "trial_id": trial.trial_id, "ablation": ablation, "variant": trial.variant,
                "task": trial.task, "git_commit": self.commit, "overrides": " ".join(trial.overrides)}
        run_id = self.client.create_run(experiment_id, tags=tags).info.run_id
        params = [Param(k, str(v)) for k, v in flatten(trial.identity or identity_dict(trial.config)).items()]
        for chunk in _chunks(params, _BATCH["params"]):
            self.client.log_batch(run_id, params=chunk)
        return run_id

    def finish_trial(self, run_id: str, outcome: Outcome, supersede: list[str] = ()) -> None:
        """Record an outcome in its run and close it FINISHED or FAILED.

        ``supersede``: older FINISHED runs of the same trial (a forced rerun); they are deleted
        (MLflow's soft delete, recoverable) once this one is FINISHED, so that no trial ever has
        two FINISHED runs.
        """
        self.client.set_tag(run_id, "node", outcome.node)
        result = outcome.result
        if result is None:
            self.client.set_tag(run_id, "error", outcome.error[-5000:])
            self.client.log_text(run_id, outcome.error, "error.txt")
            self.client.set_terminated(run_id, "FAILED")
            return
        self._log_result(run_id, result)
        self.client.set_terminated(run_id, "FINISHED", end_time=result.end_ms)
        for old in supersede:
            self.client.delete_run(old)

    def _log_result(self, run_id: str, result) -> None:
        ts = result.end_ms
        metrics = [Metric(k, float(v), ts, 0) for k, v in result.metrics.items()]
        metrics.append(Metric("n_params", float(result.n_params), ts, 0))
        for point in result.curve:  # each point carries the time it was measured
            step, when = int(point["step"]), int(point.get("time_ms", ts))
            metrics += [Metric(k, float(v), when, step) for k, v in point.items()
                        if k not in ("step", "time_ms")]
        for chunk in _chunks(metrics, _BATCH["metrics"]):
            self.client.log_batch(run_id, metrics=chunk)
        self.client.log_batch(run_id, tags=[RunTag("diverged", str(result.diverged).lower()),
                                            RunTag("device", result.info.get("device", ""))])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "model_state.pt"
            torch.save(result.state_dict, path)
            self.client.log_artifact(run_id, str(path))

    def log_trial(self, experiment_id: str, parent_id: str, ablation: str, outcome: Outcome) -> str:
        """Open and close a child run for an outcome in one go; returns its run id."""
        run_id = self.start_trial(experiment_id, parent_id, ablation, outcome.trial)
        self.finish_trial(run_id, outcome)
        return run_id

    def log_artifact(self, run_id: str, path: Path) -> None:
        """Attach a file (a plot, a table) to a run."""
        self.client.log_artifact(run_id, str(path))
