"""``examples/slurm/sweep.sbatch`` on a real, one-node Slurm (Debian's ``slurm-wlm`` and
``munge``) that this test configures and starts in a private folder: its own munge key and
socket, its own ``slurm.conf`` (private ports, state and spool folders, no cgroups), and
``munged``, ``slurmctld`` and ``slurmd`` as this test's children, stopped by their pids. The
script is submitted twice with ``sbatch --wait``: the first job runs the sweep and exits with
its status, the second resumes it (nothing left to run). Missing Slurm, munge or root: skipped,
saying how to get them; under CI (``CI=true``) a failure."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import cmdline, free_port, missing

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "slurm" / "sweep.sbatch"
TINY = ["+ablation=smoke", "seed=0", "train.max_steps=20", "train.eval_every=10", "task.n_val=32",
        "task.n_test=64"]
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo")

SLURM_CONF = """\
ClusterName=harnesstest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge/munge.socket
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
# one GPU, /dev/null as its device file (gres.conf): the node has none, but Slurm schedules --gpus-per-node
# and sets SLURM_GPUS_ON_NODE as on a GPU node, so the script's GPU requests are exercised
GresTypes=gpu
# no cgroups: a shared machine's (or a container's) cgroup tree is not this test's to change
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=10
# never purge a finished job's record (0), which also keeps `sbatch --wait` polling every 2 s: with a
# MinJobAge over 4 s its poll backs off 2 -> 8 -> 32 s, and a job's end was noticed up to 32 s late
# (a 12 s job returned after 42 s, 14 s with 0)
MinJobAge=0
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 Gres=gpu:1 State=UNKNOWN
PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


class Slurm:
    """A private one-node Slurm cluster under a fresh /tmp folder (short: munge's socket path)."""

    def __init__(self) -> None:
        absent = [name for name in DAEMONS if shutil.which(name) is None]
        if absent:
            missing(f"Slurm is not installed (no {', '.join(absent)} on PATH): `apt-get install"
                    " slurm-wlm munge` on Debian (.ci/run does it)")
        if os.geteuid() != 0:
            missing("a private slurmd runs jobs as their user only as root: run the Slurm test as root")
        self.dir = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
        self.node = socket.gethostname().split(".")[0]
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen] = []

    def _daemon(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.dir / f"{name}.out", "w")
        proc = subprocess.Popen([name, *args], stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                cwd=self.dir)
        self.procs.append(proc)
        return proc

    def log(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(self.dir.glob("*.out"))
                         if p.is_file())

    def start(self) -> "Slurm":
        munge = self.dir / "munge"
        for folder in (munge, self.dir / "state", self.dir / "spool"):
            folder.mkdir(mode=0o700)
        for folder in (self.dir, munge):  # munged insists that every user can reach its socket
            folder.chmod(0o711)  # (search only; the key itself is 0600)
        subprocess.run(["mungekey", "--create", f"--keyfile={munge / 'munge.key'}"], check=True)
        self._daemon("munged", "--foreground", f"--socket={munge / 'munge.socket'}",
                     f"--key-file={munge / 'munge.key'}", f"--pid-file={munge / 'munged.pid'}",
                     f"--seed-file={munge / 'munged.seed'}", f"--log-file={munge / 'munged.log'}")
        self._wait(lambda: (munge / "munge.socket").exists(), "munged")
        self.conf.write_text(SLURM_CONF.format(node=self.node, dir=self.dir, cpus=os.cpu_count(),
                                               ctld_port=free_port(), slurmd_port=free_port()))
        # beside slurm.conf, where Slurm reads it; slurmd counts a GPU by its device file, and
        # /dev/null stands in for one (no cgroups: nothing constrains the device)
        (self.dir / "gres.conf").write_text(f"NodeName={self.node} Name=gpu File=/dev/null\n")
        self._daemon("slurmctld", "-D", "-f", str(self.conf))
        self._daemon("slurmd", "-D", "-f", str(self.conf), "-N", self.node)
        self._wait(self._idle, "the node (sinfo: idle)")  # registered: jobs can start
        return self

    def _idle(self) -> bool:
        state = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env,
                               capture_output=True, text=True)
        return state.stdout.strip() == "idle"

    def _wait(self, ready, what: str, timeout_s: float = 120) -> None:
        deadline = time.time() + timeout_s
        while not ready():
            if time.time() > deadline or any(p.poll() is not None for p in self.procs):
                log = self.log()
                self.stop()
                pytest.fail(f"private Slurm did not start: {what} not ready\n{log}")
            time.sleep(0.5)

    def sbatch(self, args: list[str], env: dict[str, str], timeout_s: float, cwd: Path | None = None) -> int:
        """``sbatch --wait`` from ``cwd`` (the job's ``SLURM_SUBMIT_DIR``; default: the cluster's
        folder); its exit status is the job's."""
        proc = subprocess.run(["sbatch", "--wait", *args], env={**self.env, **env}, cwd=cwd or self.dir,
                              capture_output=True, text=True, timeout=timeout_s)
        return proc.returncode

    def stop(self) -> None:
        for proc in reversed(self.procs):  # slurmd, slurmctld, munged: this test's children only
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture()
def slurm():
    cluster = Slurm().start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _ray_ports() -> str:
    """Every port a one-node Ray opens, free ones: the machine may run other Ray instances (the
    head-only ones too: this allocation has no worker node)."""
    names = ["dashboard-port", "node-manager-port", "object-manager-port", "runtime-env-agent-port",
             "dashboard-agent-listen-port", "dashboard-agent-grpc-port", "metrics-export-port",
             "ray-client-server-port"]
    return " ".join(f"--{name}={free_port()}" for name in names)


def _ray_processes(tmp: Path) -> list[str]:
    """Command lines of live processes that name ``tmp/ray-`` (the job's Ray keeps its session
    in ``$TMPDIR/ray-JOBID``, and ``TMPDIR`` is this test's ``tmp``): daemons the job left."""
    return _naming(f"{tmp}/ray-")


def _naming(text: str) -> list[str]:
    """Command lines of live processes that contain ``text`` (a folder of one job's own)."""
    return [line for entry in Path("/proc").iterdir() if entry.name.isdigit()
            if text in (line := cmdline(int(entry.name)))]


@pytest.mark.slow
def test_sbatch_script_runs_the_sweep_on_ray_across_the_allocation_and_resumes(
        slurm, mlflow_server_uri, trial_runs, tmp_path):
    env = {"MLFLOW_TRACKING_URI": mlflow_server_uri, "VENV": sys.prefix,
           "RAY_PORT": str(free_port()), "RAY_START_ARGS": _ray_ports(),
           "PYTHONUNBUFFERED": "1", "TMPDIR": str(slurm.dir)}  # short: Ray's socket paths
    submit = tmp_path / "submit"
    submit.mkdir()
    # from the submit folder (the job's working directory): its output lands there
    args = ["--nodes=1", f"--cpus-per-task={min(2, os.cpu_count())}", f"--chdir={submit}",
            f"--output={submit}/job-%j.out", str(SCRIPT), *TINY]
    first = slurm.sbatch(args, env, timeout_s=1500)
    logs = sorted(submit.glob("job-*.out"))
    text = logs[0].read_text() if logs else slurm.log()
    assert first == 0, text[-4000:]
    # the driver joined the job's Ray (the head's port; Ray picks the node's address itself)
    assert re.search(rf"joined Ray cluster at \S+:{env['RAY_PORT']} \(1 nodes", text), text[-3000:]
    assert "9 finished now" in text, text[-3000:]
    runs = trial_runs(mlflow_server_uri, "smoke")
    assert len(runs) == 9 and {r.info.status for r in runs} == {"FINISHED"}
    assert not (submit / "mlflow.db").exists()  # recorded through the server only
    assert _ray_processes(slurm.dir) == []  # the job stopped its Ray (every node's) ...
    assert slurm.sbatch(args, env, timeout_s=1500) == 0  # ... and resubmitting resumes
    second = sorted(submit.glob("job-*.out"))[-1].read_text()
    assert "9 already finished (skipped), 0 finished now" in second, second[-3000:]
    assert len(trial_runs(mlflow_server_uri, "smoke")) == 9

    # a bad override: the job exits with the sweep's status (2), not the script's
    assert slurm.sbatch([*args, "model=nope"], env, timeout_s=900) == 2


TWO = """\
# @package _global_
ablation:
  name: two
  suite: [knowledge_size, higher_order]
"""


@pytest.mark.e2e
def test_sbatch_script_runs_the_report_with_gpu_requests_and_a_long_tmpdir(slurm, tmp_path):
    """The report path of the script (first argument ``report``) on a suite of two ablations at
    ``scale=tiny``, with the SQLite default store, a per-job ``TMPDIR`` longer than Ray's socket
    paths allow and the GPU flags: the job asks Slurm for the node's GPU (/dev/null stands in), ``ray
    start`` gets its count, and trials ask for half of it. ``cluster.device=cuda`` cannot run on
    this node's CPU build of torch: refused in one line before any run is recorded; the same job
    with ``cluster.device=cpu`` runs the whole report."""
    submit = tmp_path / "submit"
    (submit / "conf" / "ablation").mkdir(parents=True)
    (submit / "conf" / "ablation" / "two.yaml").write_text(TWO)
    tmp = tmp_path / ("a-per-job-tmpdir-as-slurm-sites-set-it-" + "x" * 24)  # > 60 characters
    tmp.mkdir()
    assert len(str(tmp)) > 60
    env = {"VENV": sys.prefix, "RAY_PORT": str(free_port()), "RAY_START_ARGS": _ray_ports(),
           "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp),
           "PYTHONPATH": str(ROOT)}  # this checkout's code, wherever the environment's install points
    out = submit / "report"
    args = ["--nodes=1", "--gpus-per-node=1", f"--cpus-per-task={min(2, os.cpu_count())}", f"--chdir={submit}",
            f"--output={submit}/job-%j.out", str(SCRIPT), "report", "scale=tiny", "report.suite=two",
            f"hydra.searchpath=[file://{submit / 'conf'}]", f"report.out={out}", "cluster.gpus_per_trial=0.5"]
    ray_folders: list[Path] = []

    def job(extra: list[str]) -> tuple[int, str]:
        before = set(submit.glob("job-*.out"))
        status = slurm.sbatch([*args, *extra], env, timeout_s=900, cwd=submit)  # submitted from there
        log = set(submit.glob("job-*.out")) - before
        text = log.pop().read_text() if log else slurm.log()
        # Ray's folder: short, under /tmp, of this job's own (not $TMPDIR/ray-JOBID)
        found = re.findall(r"TMPDIR is too long for Ray's socket paths; Ray's folder is (/tmp/ray-\S+)", text)
        ray_folders.extend(Path(f) for f in found)
        assert len(found) == 1, text[-3000:]
        assert _naming(found[0]) == [], text[-3000:]  # the job stopped its Ray
        return status, text

    try:
        status, text = job(["cluster.device=cuda"])
        assert status == 2, text[-3000:]
        assert re.search(r"joined Ray cluster at \S+:%s \(1 nodes, \d+ CPUs, 1 GPUs\)" % env["RAY_PORT"], text), text[-3000:]
        refusal = [line for line in text.splitlines() if line.startswith("error:")]
        assert refusal == [f"error: cluster.device='cuda', but torch {_torch_version()} on the Ray node "
                           f"{slurm.node} sees no CUDA device: install the CUDA build of torch on the GPU "
                           'nodes (README, "On a Slurm cluster", has the check), or use cluster.device=cpu'], text[-3000:]
        assert "Traceback" not in text and not out.exists()
        assert sorted(p.name for p in submit.iterdir()) == ["conf", "job-1.out"]  # no store, no report

        status, text = job([])  # cluster.device=cpu (the default), still half a GPU per trial
        assert status == 0, text[-4000:]
        assert "Traceback" not in text, text[-4000:]
        assert f"report: {out / 'report.md'}" in text
        assert "knowledge_size: 16 trials" in text and "higher_order: 10 trials" in text, text[-3000:]
        assert (submit / "mlflow.db").is_file()  # the SQLite default, in the submit folder
        import pandas as pd

        bundle = pd.read_csv(out / "report" / "runs.csv.gz")  # the bundle beside report.md
        trials = bundle[bundle["role"] == "trial"]
        assert trials.groupby("ablation").size().to_dict() == {"higher_order": 10, "knowledge_size": 16}
        assert set(trials["status"]) == {"FINISHED"}
        assert not any(tmp.iterdir())  # nothing of Ray's in the long TMPDIR
    finally:
        for folder in ray_folders:  # the jobs' Ray folders under /tmp: this test's to remove
            shutil.rmtree(folder, ignore_errors=True)


def _torch_version() -> str:
    import torch

    return torch.__version__


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_missing_slurm_fails_under_ci_and_skips_elsewhere(monkeypatch, ci, outcome):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="apt-get install slurm-wlm munge"):
        Slurm()
