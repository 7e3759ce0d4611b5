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
    """Run the ``slow`` end-to-end tests first (under ``-n 2`` the long ones then overlap instead
    of ending the run on one worker); skip tests marked ``gpu`` where CUDA is unavailable."""
    items.sort(key=lambda item: "slow" not in item.keywords)  # stable: file order otherwise
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


STALL_S = 600  # a subprocess of a test fails after this long without a byte of new output


def wait_while_progressing(proc, logs: list[Path], stall_s: float = STALL_S) -> int:
    """Wait for ``proc`` to exit while it makes progress: raise ``subprocess.TimeoutExpired`` only
    after ``stall_s`` seconds in which none of ``logs`` (its stdout/stderr files) grew. A loaded
    machine makes a run slow, not silent: the drivers print a progress bar per finished trial, so
    the tests fail on a hang, never on a slow machine."""
    import subprocess
    import time

    seen, last = -1, time.monotonic()
    while proc.poll() is None:
        size = sum(log.stat().st_size for log in logs if log.exists())
        if size != seen:
            seen, last = size, time.monotonic()
        elif time.monotonic() - last > stall_s:
            proc.kill()
            proc.wait()
            raise subprocess.TimeoutExpired(proc.args, stall_s)
        time.sleep(0.5)
    return proc.returncode


def _cli(args: list[str], cwd: Path, stall_s: float = STALL_S, env: dict[str, str] | None = None):
    """``python -m *args`` in ``cwd``; its output goes through files (no pipe to fill) and it may
    run as long as it keeps printing (:func:`wait_while_progressing`)."""
    import os
    import subprocess
    import sys
    import tempfile

    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    with tempfile.TemporaryDirectory(prefix="cli-") as logs:
        out, err = Path(logs) / "out", Path(logs) / "err"
        with open(out, "w") as fout, open(err, "w") as ferr:
            proc = subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, env=full_env,
                                    stdout=fout, stderr=ferr, text=True)
            try:
                code = wait_while_progressing(proc, [out, err], stall_s)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        return subprocess.CompletedProcess(proc.args, code, out.read_text(), err.read_text())


@pytest.fixture()
def run_cli():
    """``run_cli(["harness", "+ablation=smoke"], cwd)``: the real CLI in a subprocess."""
    return _cli


@pytest.fixture(scope="module")
def run_cli_module():
    """:func:`run_cli` for module-scoped fixtures."""
    return _cli


def _trial_runs(uri: str, experiment: str) -> list:
    from harness.tracking import Store, open_client, sqlite_path

    db = sqlite_path(uri)
    if db is not None and not db.exists():  # never create a store a driver is about to create
        return []
    client = open_client(Store(uri, None))  # under the drivers' creation lock
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    return [r for r in runs if "trial_id" in r.data.tags]


@pytest.fixture()
def trial_runs():
    """``trial_runs(uri, experiment)``: the experiment's child (trial) runs."""
    return _trial_runs


def descendants(pid: int) -> list[int]:
    """Process ids below ``pid`` (children, grandchildren, ...), read from /proc: how a test finds
    the processes it started (its driver's Ray workers), never by name across the machine."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> str:
    """A process's command line ('' if it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def trial_workers(driver_pid: int) -> list[int]:
    """The Ray workers executing a trial for the driver ``driver_pid`` (its embedded instance)."""
    return [p for p in descendants(driver_pid) if cmdline(p).startswith("ray::execute")]


@pytest.fixture()
def mlflow_server_uri(tmp_path):
    """A real ``mlflow server`` on 127.0.0.1 (SQLite backend, proxied artifacts); yields its URI."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = tmp_path / "server"
    store.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1", "--backend-store-uri", f"sqlite:///{store / 'server.db'}",
         "--artifacts-destination", (store / "artifacts").as_uri()],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=5) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail("mlflow server did not start")
        time.sleep(0.5)
    yield uri
    proc.terminate()
    proc.wait(timeout=60)
