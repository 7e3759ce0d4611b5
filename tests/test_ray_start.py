"""Ray's start-up timeout on a busy machine (issue 47, item 2): tried once more, then one line
naming the cause and what to do, exit status 1, nothing recorded. The timeout is injected (Ray
raises it after waiting 30 s for its raylet; the same command a minute later works)."""

from __future__ import annotations

import pytest

from harness.config import ClusterConfig, SchedulerKind, TrackingConfig
from harness.scheduler import RayScheduler, RayStartError

TIMEOUT = Exception("The current node timed out during startup. This could happen because some of "
                    "the raylet failed to startup or the GCS has become overloaded.")


@pytest.fixture()
def fake_ray(monkeypatch):
    """``ray.init`` failing with Ray's start-up timeout ``fails`` times, then succeeding."""
    import ray

    calls = {"init": 0, "shutdown": 0, "fails": 1}

    def init(**kwargs):
        calls["init"] += 1
        if calls["init"] <= calls["fails"]:
            raise TIMEOUT

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1))
    return calls


def test_a_start_up_timeout_is_tried_once_more(fake_ray, capsys):
    RayScheduler(ClusterConfig(scheduler=SchedulerKind.local))._start_local()
    assert (fake_ray["init"], fake_ray["shutdown"]) == (2, 1)
    assert "timed out at start-up (a busy machine); starting it once more" in capsys.readouterr().err


def test_a_second_timeout_is_one_line_and_exit_status_1(fake_ray, hydra_conf, tmp_path, capsys):
    """Before: rc 1 and a 30-line traceback from ray._private.node."""
    from harness.expansion import compose_trial
    from harness.store import resolve_store
    from harness.sweep import Sweep

    fake_ray["fails"] = 2
    with pytest.raises(RayStartError, match="nothing was run or recorded"):
        RayScheduler(ClusterConfig(scheduler=SchedulerKind.local))._start_local()
    assert fake_ray["shutdown"] == 2
    capsys.readouterr()
    fake_ray["init"] = 0
    trials = [compose_trial(["train.max_steps=2", "train.eval_every=1"], [])]
    store = resolve_store(TrackingConfig(), tmp_path)
    sweep = Sweep([("unit", trials)], ClusterConfig(scheduler=SchedulerKind.local), store, [], 120.0)
    assert sweep.main() == 1
    text = capsys.readouterr().err
    assert "Traceback" not in text
    err = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "Ray's local instance did not start" in err[0] and "cluster=serial" in err[0]


def test_a_long_tmpdir_gets_a_short_ray_folder(fake_ray, monkeypatch):
    """A Slurm job's TMPDIR of more than 32 characters: before, Ray refused its socket path
    (AF_UNIX path length cannot exceed 107 bytes) in a 37-line traceback."""
    import os

    import ray

    from harness.scheduler import ray_temp_dir

    seen = {}
    fake_ray["fails"] = 0
    monkeypatch.setattr(ray, "init", lambda **kwargs: seen.update(kwargs))
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", "/scratch/local/slurm-job-123456789/tmp-of-this-job")
    RayScheduler(ClusterConfig(scheduler=SchedulerKind.local))._start_local()
    assert seen["_temp_dir"] == f"/tmp/ray-{os.getuid()}"
    assert len(seen["_temp_dir"]) + 80 < 107
    monkeypatch.setenv("TMPDIR", "/tmp")
    assert ray_temp_dir() is None  # a short one: Ray's own choice
