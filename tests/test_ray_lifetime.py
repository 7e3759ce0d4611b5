"""No Ray process of an invocation outlives its SIGKILLed driver by more than 10 s (issue 27,
failure 7): blocked in Ray 2.60, kept as a strict xfail that reproduces it.

Ray's own supervision ends the raylet and GCS at once (kernel fate-sharing, PR_SET_PDEATHSIG)
and the workers within ~3 s, but ``ray::DashboardAgent`` and ``ray::RuntimeEnvAgent`` notice
the raylet's death after ~2 s (``_check_parent``, 5 × 0.4 s) and then, because the raylet died
without SIGTERM, report it to the GCS, which is gone too: ``publish_error_to_driver`` waits for
its hard-coded 60-s timeout (``ray/_private/process_watcher.py``; measured 62 s). Neither
``RAY_gcs_rpc_server_reconnect_timeout_s=5`` nor the pipe-based check changes that path.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import cmdline, descendants, trial_workers


def _started(pid: int) -> str:
    """A process's start time (clock ticks since boot; with its id, names one process), or ''."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return ""


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="Ray 2.60's agents wait 60 s on the dead GCS (module docstring)")
def test_no_ray_process_outlives_a_killed_driver_by_10_s(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "harness", "cluster=local", "cluster.num_cpus=1",
                             "train.max_steps=100000", "train.eval_every=1000"], cwd=tmp_path,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 600
        while not trial_workers(proc.pid):
            assert proc.poll() is None and time.time() < deadline, "no trial started"
            time.sleep(1)
        below = {p: _started(p) for p in descendants(proc.pid)}  # before the kill: only ours
    finally:
        proc.kill()
        proc.wait()
    killed = time.monotonic()
    time.sleep(10)
    alive = [p for p, started in below.items() if started and _started(p) == started and cmdline(p)]
    for pid in alive:  # leave nothing behind (the same process: same id and start time)
        os.kill(pid, signal.SIGKILL)
    assert time.monotonic() - killed < 30  # the check above happened near the 10-s mark
    assert alive == [], [cmdline(p)[:60] for p in alive]
