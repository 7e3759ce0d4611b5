"""The README's cluster recipe, followed as written: its commands are read from the README's
"On a Ray cluster" section and run with the placeholders filled in (HEAD_NODE, MLFLOW_HOST,
TOKEN, DB_HOST, PASSWORD, the server's data folder): the role and database made on a private
PostgreSQL (conftest's ``postgres``; missing, the test skips saying how to get it, and fails under
CI); a real ``mlflow server`` backed by it; a real Ray head (``ray start --head``
from the activated venv, with token authentication, plus this test's own temp dir and ports so
that it never meets another Ray on the machine); ``ray job submit`` of the smoke ablation
(shortened) with the README's runtime environment. Only processes this test started are
stopped, by their process group.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAST = ["train.max_steps=30", "train.eval_every=15", "task.n_val=32", "task.n_test=64"]


def _recipe() -> list[str]:
    """The shell commands of the README's cluster section (continuation lines joined, comments
    dropped), in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## On a Ray cluster", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line:
                commands.append(re.sub(r"\s+", " ", line))
    return commands


def _one(commands: list[str], start: str) -> str:
    found = [c for c in commands if c.startswith(start)]
    assert found, f"the README's cluster section has no command starting {start!r}"
    return found[0]


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process this test started, and its process group (``start_new_session``)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group (Ray's daemons)
    except ProcessLookupError:
        pass


def _wait_http(url: str, proc: subprocess.Popen, what: str, timeout_s: float = 180) -> None:
    deadline = time.time() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers (e.g. 401 without a token): it is up
        except OSError:
            pass
        if time.time() > deadline or proc.poll() is not None:
            pytest.fail(f"{what} did not start (exit {proc.poll()})")
        time.sleep(1)


@pytest.mark.slow
def test_readme_cluster_recipe_on_a_local_head(tmp_path, postgres):
    from mlflow.tracking import MlflowClient

    commands = _recipe()
    activate = _one(commands, "source ")
    assert activate == "source .venv/bin/activate"
    activate = f"source {Path(sys.prefix) / 'bin' / 'activate'}"  # this checkout's venv
    token, password = secrets.token_hex(32), secrets.token_hex(8)
    export = _one(commands, "export RAY_AUTH_MODE=").replace("TOKEN", token)
    mlflow_port, ray_port, dashboard_port, client_port, *agent_ports = _free_ports(8)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RAY_", "VIRTUAL_ENV"))}  # nothing inherited from the caller
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not p.startswith(sys.prefix))  # no venv until `source`
    started: list[subprocess.Popen] = []

    def shell(line: str, **kw) -> subprocess.Popen:
        proc = subprocess.Popen(["bash", "-c", line], cwd=ROOT, env=env, start_new_session=True,
                                **kw)
        started.append(proc)
        return proc

    ray_tmp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # short: Ray's socket paths
    try:
        database = f"127.0.0.1:{postgres.port}"
        for step in ("sudo -u postgres psql ", "sudo -u postgres createdb "):
            # the role and database, made on this test's private PostgreSQL as its superuser
            line = _one(commands, step).replace("sudo -u postgres ", f"{postgres.bin}/", 1)
            line = line.replace("'PASSWORD'", f"'{password}'")
            made = subprocess.run(f"{line} -h 127.0.0.1 -p {postgres.port} -U postgres",
                                  shell=True, capture_output=True, text=True, timeout=120)
            assert made.returncode == 0, made.stderr
        server = _one(commands, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false mlflow server")  # no job runner
        server = server.replace("/data/mlflow", str(tmp_path / "store"))
        assert "--backend-store-uri postgresql+psycopg://mlflow:PASSWORD@DB_HOST:5432/mlflow" in server
        server = server.replace("mlflow:PASSWORD@DB_HOST:5432", f"mlflow:{password}@{database}")
        server = server.replace("--host 0.0.0.0", "--host 127.0.0.1").replace(
            "--port 5000", f"--port {mlflow_port}")
        (tmp_path / "store").mkdir()
        mlflow = shell(f"{activate} && exec env {server}", stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        _wait_http(f"http://127.0.0.1:{mlflow_port}/health", mlflow, "mlflow server", 300)

        head = _one(commands, "ray start --head")
        head += (f" --dashboard-host=127.0.0.1 --port={ray_port} --dashboard-port={dashboard_port}"
                 f" --ray-client-server-port={client_port} --node-manager-port={agent_ports[0]}"
                 f" --object-manager-port={agent_ports[1]} --dashboard-agent-listen-port={agent_ports[2]}"
                 f" --runtime-env-agent-port={agent_ports[3]} --temp-dir={ray_tmp} --num-cpus=2"
                 " --disable-usage-stats --block")
        ray_head = shell(f"{activate} && {export} && exec {head}", stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        _wait_http(f"http://127.0.0.1:{dashboard_port}/api/version", ray_head, "ray head")

        submit = _one(commands, "ray job submit")
        submit = submit.replace("HEAD_NODE:8265", f"127.0.0.1:{dashboard_port}").replace(
            "MLFLOW_HOST:5000", f"127.0.0.1:{mlflow_port}")
        assert "cluster=ray" in submit and "tracking=server" in submit
        job = shell(f"{activate} && {export} && {submit} {' '.join(FAST)}",
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log, _ = job.communicate(timeout=1200)
        print(log[-4000:])
        assert job.returncode == 0, log[-4000:]
        assert "succeeded" in log, log[-4000:]
        assert "No module named" not in log and "AuthenticationError" not in log
        assert "View run" not in log  # MLflow's per-run console link is silenced
        plot = re.search(r"^plot: (\S+)$", log, re.MULTILINE)
        assert plot and plot.group(1).startswith("mlflow-artifacts:/"), log[-2000:]

        client = MlflowClient(f"http://127.0.0.1:{mlflow_port}")
        experiment = client.get_experiment_by_name("smoke")
        runs = client.search_runs([experiment.experiment_id], max_results=100)
        parent = next(r for r in runs if r.data.tags.get("role") == "sweep")
        children = [r for r in runs if "trial_id" in r.data.tags]
        assert len(children) == 18 and {r.info.status for r in children} == {"FINISHED"}
        assert plot.group(1) == f"{parent.info.artifact_uri}/sample_efficiency.png"
        assert "sample_efficiency.png" in {f.path for f in client.list_artifacts(parent.info.run_id)}
        for child in children[:3]:  # the curve came back through Ray's queue, each point once
            steps = [m.step for m in client.get_metric_history(child.info.run_id, "val/loss")]
            assert steps == [15, 30]
        with postgres.connect("mlflow") as conn:  # the runs are in PostgreSQL, the role's own
            (count,) = conn.execute("SELECT count(*) FROM runs").fetchone()
            (owner,) = conn.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'runs'").fetchone()
        assert count == len(runs) and owner == "mlflow"

        # the same job with the default store: it would record into Ray's copy of the working
        # folder, which Ray deletes; refused before any trial, naming the fixes (harness.ray_job)
        local = submit.split(" -- ", 1)[0] + " -- python -m harness +ablation=smoke dry_run=true"
        job = shell(f"{activate} && {export} && {local}", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log, _ = job.communicate(timeout=600)
        assert "lies in this Ray job's copy of its working folder" in log and "tracking=server" in log, log[-4000:]
        assert job.returncode != 0 and "succeeded" not in log, log[-4000:]
    finally:
        for proc in reversed(started):
            _stop(proc)
        shutil.rmtree(ray_tmp, ignore_errors=True)
