"""Resume, interrupts, killed workers, divergence and bad input (the driver's fault handling)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.paths import folder_name

FAST = ["train.max_steps=40", "train.eval_every=20", "task.n_val=64", "task.n_test=128"]


def _uri(cwd: Path) -> str:
    return f"sqlite:///{cwd / 'mlflow.db'}"


def _popen(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _wait_for(predicate, timeout: float = 900.0, every: float = 0.5, proc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the driver exited early: {proc.communicate()[1][-2000:]}")
        try:
            value = predicate()
        except Exception:  # noqa: BLE001 - the store may be mid-creation; poll again
            value = None
        if value:
            return value
        time.sleep(every)
    raise TimeoutError("condition not reached")


@pytest.mark.slow
def test_interrupted_sweep_resumes_and_every_trial_ends_with_one_finished_run(tmp_path, trial_runs):
    # 6 lone trials (cluster.pack_size=1) of a few seconds each on 2 CPUs; SIGTERM (what Slurm
    # and Kubernetes send) the driver on Ray once one has finished
    args = ["harness", "+ablation=smoke", "model=mlp", "train.max_steps=2000", "cluster.pack_size=1"]
    proc = _popen(args, tmp_path)
    _wait_for(lambda: sum(r.info.status == "FINISHED" for r in trial_runs(_uri(tmp_path), "smoke")) >= 1,
              proc=proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted: running trials cancelled and closed as KILLED" in err
    assert "SIGTERM received" not in err
    first = trial_runs(_uri(tmp_path), "smoke")
    statuses = Counter(r.info.status for r in first)
    assert "RUNNING" not in statuses
    assert 1 <= statuses["FINISHED"] < 6 and statuses["KILLED"] >= 1
    finished_first = statuses["FINISHED"]

    again = subprocess.run([sys.executable, "-m", *args], cwd=tmp_path, capture_output=True, text=True,
                           timeout=1200)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"6 trials: {finished_first} already finished (skipped), {6 - finished_first} finished now" in again.stdout
    runs = trial_runs(_uri(tmp_path), "smoke")
    finished = Counter(r.data.tags["trial_id"] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == 6 and set(finished.values()) == {1}
    assert not any(r.info.status == "RUNNING" for r in runs)
    print(f"resume: first invocation finished {finished_first}, second {6 - finished_first}")


def test_only_runs_whose_driver_lease_expired_are_closed_as_stale(tmp_path, run_cli, trial_runs):
    """A RUNNING run is closed by another invocation only when its driver's heartbeat is older
    than that driver's lease; the runs of a live driver (fresh heartbeat) are left alone."""
    from mlflow.tracking import MlflowClient

    args = ["harness", "cluster=serial", *FAST]
    assert run_cli(args, tmp_path).returncode == 0
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
    proc = run_cli(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 already finished (skipped)" in proc.stdout and "closed 2 stale RUNNING" in proc.stdout
    assert client.get_run(ghost).info.status == "KILLED" and client.get_run(dead).info.status == "KILLED"
    assert client.get_run(busy).info.status == "RUNNING" and client.get_run(live).info.status == "RUNNING"


def test_force_reruns_and_leaves_one_finished_run_per_trial(tmp_path, run_cli, trial_runs):
    args = ["harness", "cluster=serial", *FAST]
    assert run_cli(args, tmp_path).returncode == 0
    proc = run_cli([*args, "force=true"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "0 already finished (skipped), 1 finished now" in proc.stdout
    runs = trial_runs(_uri(tmp_path), "single/teacher/softmax")
    assert [r.info.status for r in runs] == ["FINISHED"]


def test_changed_config_gets_a_new_trial(tmp_path, run_cli, trial_runs):
    args = ["harness", "cluster=serial", *FAST]
    assert run_cli(args, tmp_path).returncode == 0
    proc = run_cli([*args, "train.lr=0.001"], tmp_path)
    assert "0 already finished (skipped), 1 finished now" in proc.stdout
    assert len(trial_runs(_uri(tmp_path), "single/teacher/softmax")) == 2


def test_sigint_closes_the_running_trial_as_killed_and_exits_130(tmp_path, trial_runs):
    proc = _popen(["harness", "cluster=serial", "model=mlp", "train.max_steps=100000"], tmp_path)
    _wait_for(lambda: [r for r in trial_runs(_uri(tmp_path), "single/teacher/mlp") if r.info.status == "RUNNING"],
              proc=proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted: running trials cancelled and closed as KILLED" in err
    assert [r.info.status for r in trial_runs(_uri(tmp_path), "single/teacher/mlp")] == ["KILLED"]


def _kill_running_trials(proc: subprocess.Popen) -> list[int]:
    """SIGKILL the Ray workers executing this test's trials (found below its own driver, never
    by name: other sweeps may run on the machine), once both trials are running."""
    from conftest import trial_workers

    def busy():
        pids = trial_workers(proc.pid)
        return pids if len(pids) >= 2 else None

    # the embedded instance's workers run at cluster.worker_niceness (0), not Ray's own 15
    assert {os.getpriority(os.PRIO_PROCESS, pid) for pid in _wait_for(busy, proc=proc)} == {0}
    time.sleep(2.0)
    pids = busy() or []
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return pids


# two trials of about 15 s each on a quiet core (3,000 steps; 8,000 took 40 s, and the retried
# trials ran all of them again): still running when the kill lands, 2 s after both have started
KILL_ARGS = ["harness", "+ablation=smoke", "model=mlp", "task.n_train=64", "train.max_steps=3000",
             "train.eval_every=1000"]


@pytest.mark.slow
def test_killed_workers_are_retried_and_the_sweep_completes(tmp_path, trial_runs):
    proc = _popen(KILL_ARGS, tmp_path)
    assert len(_kill_running_trials(proc)) == 2
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    runs = trial_runs(_uri(tmp_path), "smoke")
    assert len(runs) == 2 and {r.info.status for r in runs} == {"FINISHED"}


@pytest.mark.slow
def test_retries_spent_records_failed_and_the_sweep_completes(tmp_path, trial_runs):
    proc = _popen([*KILL_ARGS, "cluster.max_retries=0"], tmp_path)
    assert len(_kill_running_trials(proc)) == 2
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err[-3000:]
    assert err.count("FAILED") == 2
    runs = trial_runs(_uri(tmp_path), "smoke")
    assert [r.info.status for r in runs] == ["FAILED", "FAILED"]
    assert all("died" in r.data.tags["error"].lower() or "crash" in r.data.tags["error"].lower()
               for r in runs), [r.data.tags["error"][:200] for r in runs]


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


def test_divergence_is_finished_with_a_tag_and_the_sweep_goes_on(tmp_path, run_cli, trial_runs):
    args = ["harness", "+ablation=smoke", "cluster=serial", *FAST, "model=mlp", "task.n_train=64",
            "seed=0", "train.lr=1e30"]
    proc = run_cli(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 diverged" in proc.stdout and "DIVERGED" in proc.stderr
    runs = trial_runs(_uri(tmp_path), "smoke")
    assert [(r.info.status, r.data.tags["diverged"]) for r in runs] == [("FINISHED", "true")]
    assert "test/rel_mse" in runs[0].data.metrics


@pytest.fixture(scope="module")
def populated(tmp_path_factory, run_cli_module):
    """A folder whose MLflow store holds one finished single-trial sweep (made once per module)."""
    folder = tmp_path_factory.mktemp("populated")
    assert run_cli_module(["harness", "cluster=serial", *FAST], folder).returncode == 0
    return folder


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


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
    ("cluster.cpus_per_trial=64", "no Ray node can run a trial"),
    ("cluster.cpus_per_trial=-1", "cluster.cpus_per_trial must be positive"),
    ("cluster=serial cluster.cpus_per_trial=0", "cluster.cpus_per_trial must be positive"),
    ("cluster.gpus_per_trial=-0.5", "cluster.gpus_per_trial"),
    ("cluster.max_retries=-1", "cluster.max_retries"),
    ("cluster=ray cluster.num_cpus=2", "cluster.num_cpus=2 sizes the Ray instance"),
    ("cluster.address=auto", "cluster.address='auto' is for cluster=ray"),
    ("tracking.lease_s=0", "tracking.lease_s must be positive"),
])
def test_bad_input_exits_2_with_its_message_and_leaves_the_store_unchanged(tmp_path, run_cli, populated,
                                                                          override, message):
    from harness.mlflow_sql import relocate_artifacts

    shutil.copy(populated / "mlflow.db", tmp_path / "mlflow.db")
    shutil.copytree(populated / "mlartifacts", tmp_path / "mlartifacts")
    # the copy keeps its artifacts beside it (else every run stops at the moved-store check)
    relocate_artifacts(tmp_path / "mlflow.db", "1", (populated / "mlartifacts" / folder_name("single/teacher/softmax")).as_uri(),
                       (tmp_path / "mlartifacts" / folder_name("single/teacher/softmax")).as_uri())
    before = _digest(tmp_path / "mlflow.db")
    extra = tmp_path / "extra_conf" / "ablation"
    extra.mkdir(parents=True)
    (extra / "empty.yaml").write_text("# @package _global_\nablation:\n  name: empty\n  grid: {}\n")
    args = ["harness", *override.split(), f"hydra.searchpath=[file://{extra.parent}]"]
    if "cpus_per_trial=64" in override:
        args.append("cluster.num_cpus=2")
    proc = run_cli(args, tmp_path)
    assert proc.returncode == 2, (proc.stdout[-1000:], proc.stderr[-2000:])
    assert message in proc.stderr, proc.stderr[-2000:]
    assert _digest(tmp_path / "mlflow.db") == before


def test_deleted_experiment_exits_2_naming_it_and_the_ways_out(tmp_path, run_cli, populated):
    from mlflow.tracking import MlflowClient

    shutil.copy(populated / "mlflow.db", tmp_path / "mlflow.db")
    shutil.copytree(populated / "mlartifacts", tmp_path / "mlartifacts")
    client = MlflowClient(_uri(tmp_path))
    client.delete_experiment(client.get_experiment_by_name("single/teacher/softmax").experiment_id)
    before = _digest(tmp_path / "mlflow.db")
    proc = run_cli(["harness", "cluster=serial", *FAST], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "'single/teacher/softmax'" in proc.stderr and "is deleted" in proc.stderr
    assert all(way in proc.stderr for way in ("restore", "mlflow gc", "ablation.name="))
    assert "Traceback" not in proc.stderr
    assert _digest(tmp_path / "mlflow.db") == before
    proc = run_cli(["analysis"], tmp_path)
    assert proc.returncode == 2 and "is deleted" in proc.stderr, proc.stderr[-2000:]


def test_analysis_of_a_deleted_experiment_exits_2_naming_it(tmp_path, run_cli, populated):
    """Issue 12: after ``mlflow experiments delete``, ``python -m analysis`` exited 1 with
    ``KeyError: 'task'``. The analysis is run directly on the store with the deleted experiment:
    exit 2 naming the experiment and the ways out, no traceback, the store unchanged."""
    from mlflow.tracking import MlflowClient

    shutil.copy(populated / "mlflow.db", tmp_path / "mlflow.db")
    shutil.copytree(populated / "mlartifacts", tmp_path / "mlartifacts")
    client = MlflowClient(_uri(tmp_path))
    client.delete_experiment(client.get_experiment_by_name("single/teacher/softmax").experiment_id)
    before = _digest(tmp_path / "mlflow.db")
    proc = run_cli(["analysis"], tmp_path)
    assert "Traceback" not in proc.stderr and "KeyError" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "'single/teacher/softmax'" in proc.stderr and "is deleted" in proc.stderr
    assert all(way in proc.stderr for way in ("restore", "mlflow gc", "ablation.name="))
    assert _digest(tmp_path / "mlflow.db") == before


def test_read_only_store_folder_is_rejected(tmp_path, run_cli):
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
        proc = run_cli(["harness", "cluster=serial", "tracking.db_path=ro/mlflow.db"], tmp_path)
        assert proc.returncode == 2
        assert "read-only" in proc.stderr
    finally:
        if made_read_only:
            subprocess.run(["chattr", "-i", str(folder)])
        folder.chmod(0o755)


def test_trial_workers_finds_only_the_workers_a_test_started():
    """Issue 12: test_faults once SIGKILLed every ``ray::execute`` process on the machine,
    another sweep's workers included. ``conftest.trial_workers`` finds workers below one driver
    only: a look-alike started outside it (another researcher's worker) is never returned."""
    import sys
    import time

    from conftest import trial_workers

    fake = 'exec -a "ray::execute_trial" sleep 120'
    driver = subprocess.Popen([sys.executable, "-c", "import subprocess, time; "
                               f"subprocess.Popen(['bash', '-c', {fake!r}]); time.sleep(120)"])
    foreign = subprocess.Popen(["bash", "-c", fake], start_new_session=True)  # not below the driver
    mine: list[int] = []
    try:
        deadline = time.time() + 120
        while not mine and time.time() < deadline:
            time.sleep(0.2)
            mine = trial_workers(driver.pid)
        assert len(mine) == 1 and foreign.pid not in mine, (mine, foreign.pid)
        assert "ray::execute" in open(f"/proc/{foreign.pid}/cmdline").read()  # a real look-alike
    finally:
        for pid in mine:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in (driver, foreign):
            proc.kill()
            proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0.3, 1.0, 2.0, 3.5])
def test_a_signal_while_the_driver_starts_ends_it_at_once_without_an_error(tmp_path, delay_s):
    """SIGTERM at one of several moments of the driver's start (imports, composition, the store
    check): exit status 130 and one line on stderr, never a Traceback or another error. Raised as
    an exception there, the early interrupt came out of a class body as a RuntimeError (a Hydra
    error) or out of OmegaConf as a composition error (exit status 2) in a stress test."""
    proc = _popen(["harness", "+ablation=smoke", "cluster=serial", "train.max_steps=20"], tmp_path)
    time.sleep(delay_s)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=600)
    # -SIGTERM: the signal came before Python ran the harness's first line
    assert proc.returncode in (130, -signal.SIGTERM), err[-2000:]
    assert "Traceback" not in err and "error" not in err.lower(), err[-2000:]
    if proc.returncode == 130:
        assert ("interrupted before any trial started" in err
                or "interrupted: running trials cancelled" in err), err[-2000:]


def test_the_early_handler_ends_the_process_even_inside_a_class_body(tmp_path):
    """The handler ``python -m harness`` installs first, fired inside ``__set_name__`` (where a
    stress test's SIGTERM landed during MLflow's imports): the process ends with 130 and the one
    line. A SystemExit raised there came out as 'RuntimeError: Error calling __set_name__' with a
    Traceback and exit status 1."""
    script = tmp_path / "early.py"
    script.write_text(
        "import os, signal\n"
        "import harness.__main__  # installs the early handlers, as `python -m harness` does\n"
        "class Descriptor:\n"
        "    def __set_name__(self, owner, name):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        sum(range(1000))  # the handler runs in here\n"
        "class Owner:\n"
        "    attr = Descriptor()\n"
        "print('not reached')\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stderr == "interrupted before any trial started: nothing was run or recorded\n"
    assert "not reached" not in proc.stdout
