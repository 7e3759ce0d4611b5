"""Shared fixtures: compose the real config (conf/) with Hydra's compose API."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from harness.config import register_configs

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"

register_configs()


@pytest.fixture()
def hydra_conf():
    """Hydra initialised on ``conf/`` for the duration of a test (``hydra.compose`` works)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield CONF
    GlobalHydra.instance().clear()


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``gpu`` where CUDA is unavailable."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _cli(args: list[str], cwd: Path, timeout: int = 600, **env):
    import os
    import subprocess
    import sys

    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **env}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def run_cli():
    """``run_cli(["harness", "+ablation=smoke"], cwd)``: the real CLI in a subprocess."""
    return _cli


@pytest.fixture(scope="module")
def run_cli_module():
    """:func:`run_cli` for module-scoped fixtures."""
    return _cli


def _trial_runs(uri: str, experiment: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    return [r for r in runs if "trial_id" in r.data.tags]


@pytest.fixture()
def trial_runs():
    """``trial_runs(uri, experiment)``: the experiment's child (trial) runs."""
    return _trial_runs
