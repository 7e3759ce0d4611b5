"""Credentials in a tracking URI (issue 27, failure 5): sent as MLflow sends them (basic auth
from MLFLOW_TRACKING_USERNAME/PASSWORD), never printed, never in a file a run writes."""

from __future__ import annotations

import base64
import http.server
import os
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.secrets import CredentialsError, mask, move_credentials, scrub_argv, split_credentials

FAST = ["train.max_steps=40", "train.eval_every=20", "task.n_val=64", "task.n_test=128"]
USER, SECRET = "alice", "S3cr3t-pa55-9f2e"


def test_mask_hides_userinfo_only():
    assert mask("at http://alice:pw@host:5000/x and https://tok@h") == "at http://***@host:5000/x and https://***@h"
    assert mask("http://host:5000") == "http://host:5000"


def test_split_credentials_decodes_and_keeps_the_rest():
    assert split_credentials("http://a%40b:p%3Aw@h:1/p?q=1") == ("http://h:1/p?q=1", "a@b", "p:w")
    assert split_credentials("http://h:1") == ("http://h:1", None, None)


def test_scrub_argv_moves_the_credentials_to_the_environment():
    env: dict[str, str] = {}
    argv = scrub_argv(["prog", "tracking=server", f"tracking.uri='http://{USER}:{SECRET}@h:1'",
                       "seed=1"], env)
    assert argv == ["prog", "tracking=server", "tracking.uri='http://h:1'", "seed=1"]
    assert env == {"MLFLOW_TRACKING_USERNAME": USER, "MLFLOW_TRACKING_PASSWORD": SECRET}


def test_a_token_without_password_is_refused_masked():
    with pytest.raises(CredentialsError) as err:
        move_credentials(f"http://{SECRET}@h:1", {})
    assert SECRET not in str(err.value) and "MLFLOW_TRACKING_TOKEN" in str(err.value)


class _BasicAuthProxy(http.server.BaseHTTPRequestHandler):
    """In front of a plain ``mlflow server``: what MLflow's basic-auth app checks (every route
    but /health needs ``Authorization: Basic``), then forwarded."""

    upstream = ""
    expected = "Basic " + base64.b64encode(f"{USER}:{SECRET}".encode()).decode()
    seen = {"authorized": 0, "refused": 0}

    def _forward(self) -> None:
        if not self.path.startswith("/health"):
            if self.headers.get("Authorization") != self.expected:
                self.seen["refused"] += 1
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.seen["authorized"] += 1
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "authorization")}
        request = urllib.request.Request(self.upstream + self.path, data=body, headers=headers,
                                         method=self.command)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, payload, items = response.status, response.read(), response.getheaders()
        except urllib.error.HTTPError as err:
            status, payload, items = err.code, err.read(), list(err.headers.items())
        self.send_response(status)
        for key, value in items:
            if key.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def auth_uri(mlflow_server_uri):
    """``http://127.0.0.1:PORT`` of a basic-auth proxy in front of a real MLflow server."""
    handler = type("Proxy", (_BasicAuthProxy,), {"upstream": mlflow_server_uri,
                                                  "seen": {"authorized": 0, "refused": 0}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.seen
    server.shutdown()


def _files_with(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()
            and needle in p.read_bytes()]


# on the embedded Ray instance only: its driver records as a serial one does, and its workers
# and Ray's own logs are where a serial run has nothing more to leak (a serial case, 16 CPU-s,
# covered no path this one lacks)
@pytest.mark.parametrize("cluster", [pytest.param("local", marks=pytest.mark.slow)])
def test_credentials_in_the_uri_work_and_reach_no_file_or_log(tmp_path, run_cli, auth_uri, cluster):
    uri, seen = auth_uri
    work = tmp_path / "work"
    work.mkdir()
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs", dir="/tmp"))  # Ray's sockets need a short path
    host = uri.split("://", 1)[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    env["RAY_TMPDIR"] = str(ray_tmp)
    extra = ["cluster.num_cpus=1"] if cluster == "local" else []
    try:
        proc = run_cli(["harness", f"cluster={cluster}", *extra, "tracking=server",
                        f"tracking.uri=http://{USER}:{SECRET}@{host}", *FAST], work, env=env)
        assert SECRET not in proc.stdout + proc.stderr
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert seen["authorized"] > 0 and seen["refused"] == 0  # sent, as basic auth
        assert list((work / "outputs").rglob(".hydra/overrides.yaml"))  # Hydra wrote its files
        # outputs/ with .hydra/, and the server's store: params, tags, config.yaml artifact
        assert _files_with(tmp_path, SECRET.encode()) == []
        if cluster == "local":
            assert list(ray_tmp.rglob("*.log"))  # Ray's session logs are there to grep
        assert _files_with(ray_tmp, SECRET.encode()) == []
    finally:
        import shutil

        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_token_only_uri_exits_2_masked_before_hydra_writes(tmp_path, run_in_process):
    """Refused by the shell's first step (:func:`harness.shell.prepare`, which ``python -m
    harness`` runs before ``@hydra.main``), called in-process."""
    proc = run_in_process(["harness", "cluster=serial", "tracking=server",
                           f"tracking.uri=http://{SECRET}@127.0.0.1:9", *FAST], tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert SECRET not in proc.stdout + proc.stderr and "MLFLOW_TRACKING_PASSWORD" in proc.stderr
    assert _files_with(tmp_path, SECRET.encode()) == []
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_postgres_uris_user_and_password_go_to_libpqs_environment():
    """``tracking=postgres``: the URI's userinfo moves to PGUSER / PGPASSWORD (what psycopg reads),
    off the command line before Hydra sees it and off a config file's URI when the store is
    resolved; a user alone (trust, ~/.pgpass) is allowed; another scheme is refused masked."""
    from harness.config import TrackingConfig, TrackingKind
    from harness.secrets import database_credentials
    from harness.store import StoreError, resolve_store

    env: dict[str, str] = {}
    argv = scrub_argv(["prog", "tracking=postgres", f"tracking.uri=postgresql+psycopg://{USER}:{SECRET}@h:5432/db"], env)
    assert argv == ["prog", "tracking=postgres", "tracking.uri=postgresql+psycopg://h:5432/db"]
    assert env == {"PGUSER": USER, "PGPASSWORD": SECRET}
    env = {}
    assert database_credentials("postgresql://bob@h/db", env) == "postgresql://h/db" and env == {"PGUSER": "bob"}
    with pytest.raises(StoreError) as err:
        resolve_store(TrackingConfig(kind=TrackingKind.postgres, uri=f"http://{USER}:{SECRET}@h:1"), Path("/tmp"))
    assert SECRET not in str(err.value) and "postgresql+psycopg://" in str(err.value)


def test_a_postgres_password_reaches_no_file_or_log(tmp_path, run_cli, postgres):
    """A sweep recorded into a PostgreSQL database directly (``tracking=postgres``, batched
    claims and records) with the password in ``tracking.uri``: it runs, its runs are in the
    database, and the password is in no output, file or log."""
    from mlflow.tracking import MlflowClient

    with postgres.connect("postgres") as conn:
        conn.execute(f"CREATE ROLE {USER} LOGIN SUPERUSER PASSWORD '{SECRET}'")
    uri = postgres.create_database("secret_sweep").replace("postgres@", f"{USER}:{SECRET}@")
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_TRACKING_", "PG"))}
    proc = run_cli(["harness", "cluster=serial", "tracking=postgres", f"tracking.uri={uri}", *FAST], work, env=env)
    assert SECRET not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list((work / "outputs").rglob(".hydra/overrides.yaml"))
    assert _files_with(tmp_path, SECRET.encode()) == []
    client = MlflowClient(uri)
    (experiment,) = [e for e in client.search_experiments() if e.name != "Default"]
    runs = client.search_runs([experiment.experiment_id], "attributes.status = 'FINISHED'")
    assert any("trial_id" in r.data.tags for r in runs)
