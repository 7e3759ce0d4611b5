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
