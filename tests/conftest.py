"""Shared fixtures: compose the real config (conf/) with Hydra's compose API."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from harness.config import register_configs
from harness.naming import UI_ENV

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"

register_configs()
# One torch thread in every test process, as the scheduler runs a trial: pytest-xdist runs three
# test processes on a 2-core machine beside the drivers the tests start, and torch's default (a
# thread per core in each) only adds threads that wait for a core. Measured on the in-process test
# files under -n 3: 194 -> 154 CPU-s, 101 -> 81 s (benchmarks/RESULTS.md, issue 26, eighth pass).
torch.set_num_threads(1)


@pytest.fixture()
def hydra_conf():
    """Hydra initialised on ``conf/`` for the duration of a test (``hydra.compose`` works)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield CONF
    GlobalHydra.instance().clear()


def _compose(command, args: list[str], sweeps: list[str], cwd: Path):
    """``(cfg, runtime)`` as the shell's ``@hydra.main`` gives them to ``run``: ``args`` (the
    shell's :func:`harness.shell.prepare` done) composed with Hydra's compose API,
    ``hydra.run.dir`` resolved against ``cwd`` (Hydra's config set while it resolves)."""
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict

    from harness.cli import Runtime

    cfg = compose(command.config, overrides=args, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    output_dir = cwd / OmegaConf.to_container(cfg.hydra.run, resolve=True)["dir"]
    runtime = Runtime(cwd=cwd, output_dir=output_dir.resolve(),
                      overrides=tuple(o for o in args if not o.startswith("hydra")),
                      sweeps=tuple(sweeps),
                      searchpath=tuple(o for o in args if o.startswith("hydra.searchpath=")))
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, runtime


# The end-of-sweep summary (its table, plot and artifacts: 1-1.5 CPU-s a sweep in a test process)
# is tested where it is what a test asserts, which passes summary=true (tests/test_summary.py, the
# README's smoke run, the UI test); a sweep called in-process without a word on it skips it.
QUIET_SUMMARY = ("summary=false",)


def invoke_command(command: str, args: list[str], cwd: Path) -> tuple[int, str, str]:
    """``python -m COMMAND *args`` in this process, from ``cwd``: the shell's own checks
    (:func:`harness.shell.prepare`), the config composed with Hydra's compose API, then the
    shell's :func:`harness.shell.call` of the command; returns ``(exit status, stdout, stderr)``.
    A config Hydra cannot compose is 2 with Hydra's message, as the shell answers. Hydra's global
    state, the working directory and the credentials the shell moved to the environment are
    restored after.

    Interrupts (``os._exit(130)``) and what the process itself does (signals, Hydra's own output
    folder and logging) are not covered: those stay process tests (``run_cli``, marked ``e2e``)."""
    import io
    import sys
    from contextlib import redirect_stderr, redirect_stdout

    from hydra.core.hydra_config import HydraConfig

    from harness import shell
    from harness.secrets import PASSWORD, USERNAME

    out, err = io.StringIO(), io.StringIO()
    saved_hydra, saved_cwd = HydraConfig.instance().cfg, Path.cwd()
    saved_env = {k: os.environ.get(k) for k in (USERNAME, PASSWORD)}
    GlobalHydra.instance().clear()
    os.chdir(cwd)
    entry = shell.COMMANDS[command]
    if command == "harness" and not any(a.split("=", 1)[0] in ("summary", "+summary") for a in args):
        args = [*args, *QUIET_SUMMARY]
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                argv, sweeps = shell.prepare(entry, args)
            except SystemExit as exit_:
                return exit_.code, out.getvalue(), err.getvalue()
            with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
                try:
                    cfg, runtime = _compose(entry, argv, sweeps, Path(cwd).resolve())
                except Exception as composing:  # noqa: BLE001 - the shell's exit 2 with Hydra's text
                    print(f"error: {composing}", file=sys.stderr)
                    if composing.__cause__ is not None:  # as Hydra prints it: OmegaConf's reason
                        print(composing.__cause__, file=sys.stderr)
                    code = 2
                else:
                    code = shell.call(entry, cfg, runtime)
    finally:
        os.chdir(saved_cwd)
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = saved_hydra
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def invoke():
    """``invoke("harness", ["+ablation=smoke", "dry_run=true"], cwd) -> (code, out, err)``: a
    command called in-process (:func:`invoke_command`)."""
    return invoke_command


def _in_process(args: list[str], cwd: Path):
    """``run_cli``'s call, in this process: ``(["harness", *args], cwd)`` →
    ``subprocess.CompletedProcess`` with the exit status and the captured output
    (:func:`invoke_command`), so a converted test keeps its assertions."""
    import subprocess

    code, out, err = invoke_command(args[0], list(args[1:]), Path(cwd))
    return subprocess.CompletedProcess(["python", "-m", *args], code, out, err)


@pytest.fixture()
def run_in_process():
    """:func:`run_cli`'s signature, called in-process (:func:`_in_process`)."""
    return _in_process


@pytest.fixture(scope="module")
def run_in_process_module():
    """:func:`run_in_process` for module-scoped fixtures."""
    return _in_process


POPULATED_ARGS = ["harness", "cluster=serial", "train.max_steps=40", "train.eval_every=20",
                  "task.n_val=64", "task.n_test=128"]


@pytest.fixture(scope="module")
def populated(tmp_path_factory, run_in_process_module):
    """A folder whose MLflow store holds one finished single-trial sweep (experiment
    ``single/teacher/softmax``), made once per module; tests work on copies
    (:func:`copy_populated`)."""
    folder = tmp_path_factory.mktemp("populated")
    assert run_in_process_module(POPULATED_ARGS, folder).returncode == 0
    return folder


def digest(path: Path) -> str:
    """SHA-256 of a file's bytes, ``"absent"`` if there is none: a store unchanged by a command."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def copy_populated(populated: Path, folder: Path) -> str:
    """Copy :func:`populated`'s store and artifacts into ``folder``, its artifacts relocated
    beside the copy (else every run stops at the moved-store check); returns the copy's
    :func:`digest`."""
    import shutil

    from harness.mlflow_sql import relocate_artifacts
    from harness.paths import folder_name

    shutil.copy(populated / "mlflow.db", folder / "mlflow.db")
    shutil.copytree(populated / "mlartifacts", folder / "mlartifacts")
    experiment = folder_name("single/teacher/softmax")
    relocate_artifacts(folder / "mlflow.db", "1", (populated / "mlartifacts" / experiment).as_uri(),
                       (folder / "mlartifacts" / experiment).as_uri())
    return digest(folder / "mlflow.db")


class _SchemaCopy:
    """MLflow's ``_initialize_tables`` on a new SQLite store, in a test process: the schema
    MLflow itself created and migrated on this process's first new store, copied page for page
    (``sqlite3``'s backup) instead of running its ~60 alembic migrations again, about 0.9 CPU-s
    a store (MLflow's own suite caches its migrated store the same way). The suite creates ~100
    stores, three in four of them in test processes that already made one (counted on the whole
    suite, 2026-12-07); this replaces the ``migrated_store`` fixture two tests called by hand. Only SQLite files; PostgreSQL and the
    drivers the tests start as processes create their stores as MLflow does. Installed once
    MLflow is imported (``_install_schema_copy``), so a test process that never opens a store
    never imports MLflow for it."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.template = None  # an in-memory sqlite3 copy of MLflow's fresh schema

    def __call__(self, engine) -> None:
        import sqlite3
        import tempfile

        import sqlalchemy

        from mlflow.store.db import utils

        path = engine.url.database
        if engine.dialect.name != "sqlite" or not path or path == ":memory:":
            return self.real(engine)
        with self.lock:
            if self.template is None:
                with tempfile.TemporaryDirectory() as folder:
                    fresh = sqlalchemy.create_engine(f"sqlite:///{folder}/schema.db")
                    self.real(fresh)
                    fresh.dispose()
                    self.template = sqlite3.connect(":memory:", check_same_thread=False)
                    with contextlib.closing(sqlite3.connect(f"{folder}/schema.db")) as source:
                        source.backup(self.template)
            with contextlib.closing(sqlite3.connect(path)) as target:
                self.template.backup(target)
        assert utils._all_tables_exist(engine)


_SCHEMA_COPY = _SchemaCopy()


@pytest.fixture(autouse=True)
def _install_schema_copy():
    """:class:`_SchemaCopy` in place of MLflow's table creation, from the first test after this
    process imported MLflow's store utilities (a test that imports them creates its first store
    as MLflow does)."""
    import sys

    utils = sys.modules.get("mlflow.store.db.utils")
    if utils is not None and utils._initialize_tables is not _SCHEMA_COPY:
        _SCHEMA_COPY.real = utils._initialize_tables
        utils._initialize_tables = _SCHEMA_COPY
    yield


@pytest.fixture(scope="session")
def shared_ray():
    """One local Ray instance (a head with 2 CPUs, its own processes, stopped by this fixture)
    for the tests of a test process that need *a* Ray but do not test Ray's lifetime; yields its
    address for ``cluster=ray cluster.address=ADDRESS``."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.wait_for_nodes()
    try:
        yield cluster.address
    finally:
        cluster.shutdown()


@pytest.fixture(scope="session")
def shared_mlflow_server(tmp_path_factory):
    """One ``mlflow server`` on SQLite for the tests of a test process that need *a* server (each
    test uses its own experiment names); yields its URI."""
    folder = tmp_path_factory.mktemp("shared-server")
    with mlflow_server(f"sqlite:///{folder / 'server.db'}", folder / "artifacts") as uri:
        yield uri


@pytest.fixture(scope="session")
def shared_postgres_mlflow_server(postgres, tmp_path_factory):
    """One ``mlflow server`` on the session's PostgreSQL (the cluster recipe's backend), shared as
    :func:`shared_mlflow_server`; yields its URI."""
    folder = tmp_path_factory.mktemp("shared-pg-server")
    with mlflow_server(postgres.create_database("shared_server"), folder / "artifacts") as uri:
        yield uri


# The tests that start processes because a process is what they test (a driver's exit status,
# signals, imports before torch, Ray's and Slurm's lifetimes, concurrent drivers): marked ``e2e``
# here, every test of these modules and every test that asks for a driver process, so that
# ``pytest -m "not e2e"`` is the in-process tier whatever a new test forgets to mark.
E2E_MODULES = {"test_cluster_recipe", "test_concurrency", "test_ray_lifetime", "test_faults"}
# the fixtures that start a driver process, a server or a Ray instance: a test asking for one
# (itself or through another fixture) starts processes, so it is e2e; ``slurm``, ``mlflow_ui``
# and ``chromium`` are test_slurm's and test_mlflow_ui's own (their other tests run in-process)
E2E_FIXTURES = {"run_cli", "run_cli_module", "run_shells", "shared_ray", "shared_mlflow_server",
                "shared_postgres_mlflow_server", "mlflow_server_uri", "postgres", "postgres_database",
                "postgres_mlflow_server_uri", "slurm", "mlflow_ui", "chromium"}
# the fixtures that open a store or call a command in-process: a test asking for one is
# integration (marked here, never by hand: a hand-kept list drifted, 47 marked and ~58 not)
INTEGRATION_FIXTURES = {"invoke", "run_in_process", "run_in_process_module", "populated", "trial_runs", *E2E_FIXTURES}


# The tests that take longest on the CI machine (wall seconds, the mean of two fresh-clone runs
# under four workers, 2026-12-06; a parametrised test by its function's name): they are dealt to
# the workers' first tests so that they run side by side from the start, and the run ends on short
# tests. A ``slow`` test not listed counts as 15 s (what those took); equal estimates keep file order.
LONG_TESTS = {
    "test_slurm.py::test_sbatch_script_runs_the_sweep_on_ray_across_the_allocation_and_resumes": 159,
    "test_report.py::test_tiny_report_is_a_path_check_and_regenerates_from_its_bundle": 152,
    "test_concurrency.py::test_stress_four_drivers_with_kills_on_a_postgresql_backed_mlflow_server": 140,
    "test_cluster.py::test_sweep_on_a_two_node_cluster_logs_through_an_mlflow_server": 139,
    "test_slurm.py::test_sbatch_script_runs_the_report_with_gpu_requests_and_a_long_tmpdir": 118,
    "test_cluster_recipe.py::test_readme_cluster_recipe_on_a_local_head": 97,
    "test_command.py::test_a_sweep_in_process_on_the_shared_ray_through_the_shared_server": 87,
    "test_faults.py::test_interrupted_sweep_resumes_and_every_trial_ends_with_one_finished_run": 82,
    "test_concurrency.py::test_cluster_local_starts_its_own_ray_beside_a_running_cluster_or_an_address_pointing_nowhere": 80,
    "test_zoo.py::test_tiny_zoo_regenerates_and_resumes": 77,
    "test_concurrency.py::test_stress_four_drivers_with_kills_on_a_postgresql_database_written_directly": 75,
    "test_lease_contract.py::test_rivals_on_the_servers_and_postgresql_win_each_trial_once_and_rerun_a_dead_drivers_once": 72,
    "test_cli.py::test_smoke_ablation_end_to_end_on_ray": 69,
    "test_external.py::test_module_travels_to_a_cluster": 68,
    "test_cli.py::test_any_folder_and_hydra_job_chdir_keep_one_store_where_the_command_started": 58,
    "test_faults.py::test_killed_workers_are_retried_and_the_sweep_completes": 57,
    "test_concurrency.py::test_drivers_started_together_share_one_store": 55,
    "test_scorecard.py::test_scorecards_of_both_examples": 49,
    "test_secrets.py::test_credentials_in_the_uri_work_and_reach_no_file_or_log": 49,
    "test_expansion.py::test_the_full_scale_paper_suite_passes_preflight": 48,
    "test_cluster.py::test_load_200_trials_on_busy_cpus_lose_no_run": 40,
    "test_mlflow_ui.py::test_mlflow_ui_shows_the_sweep_in_the_training_runs_view": 38,
    "test_plugins.py::test_plugin_runs_on_ray_by_name_and_prints_no_ray_token_line_and_no_matplotlib_info": 37,
    "test_secrets.py::test_a_postgres_password_reaches_no_file_or_log": 36,
    "test_report_values.py::test_the_report_values_are_the_same_whatever_the_render_modules_words": 35,
    "test_bulk.py::test_the_batched_writer_keeps_its_contract_on_postgresql": 35,
    "test_external.py::test_external_task_module_on_pythonpath": 33,
    "test_pack.py::test_a_compiled_pack_matches_the_eager_pack_within_1e_5_for_20_steps": 33,
    "test_report_reader.py::test_regeneration_prints_only_its_results_and_writes_only_into_its_folder": 31,
    "test_faults.py::test_retries_spent_records_failed_and_the_sweep_completes": 31,
    "test_ray_lifetime.py::test_no_ray_process_outlives_a_killed_driver_by_10_s": 30,
}


def expected_seconds(item) -> float:
    """A test's expected wall seconds on the CI machine: :data:`LONG_TESTS`, else 15 for a
    ``slow`` test, else 0 (short)."""
    key = f"{Path(str(item.path)).name}::{getattr(item, 'originalname', item.name)}"
    return LONG_TESTS.get(key, 15.0 if "slow" in item.keywords else 0.0)


def long_tests_first(items: list, workers: int) -> list:
    """``items`` reordered so that each of ``workers`` pytest-xdist workers starts on long tests.

    The ``worksteal`` scheduler (pyproject's addopts) gives each worker one contiguous share of
    the collection (the k-th of n: what is left // (n - k) tests) and moves work by taking tests
    from the end of a share. The long tests (:func:`expected_seconds` > 0) go, longest first, to
    the head of the share with the least expected seconds so far, each followed by the short
    tests of its file where they fit: a long test pulled away alone split its file in two, and
    each half built the file's module-scoped fixtures (a report, a store) again. The other short
    tests fill the shares in their file order. With one worker (``-n 0``) this is longest first,
    each with its file's short tests, then file order. Returns a new list of the same items."""
    sizes, left = [], len(items)
    for k in range(workers):
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    long = sorted((item for item in items if expected_seconds(item) > 0), key=expected_seconds, reverse=True)
    mates: dict = {}  # each file's short tests, in file order, until a long test of the file takes them
    for item in items:
        if expected_seconds(item) == 0:
            mates.setdefault(item.path, []).append(item)
    heads: list[list] = [[] for _ in sizes]
    load = [0.0] * len(sizes)
    for item in long:
        unit = [item] + mates.get(item.path, [])
        fits = [k for k in range(len(sizes)) if len(heads[k]) + len(unit) <= sizes[k]]
        if fits:
            mates.pop(item.path, None)
        else:  # its file's short tests do not fit beside it: they stay in file order
            unit, fits = [item], [k for k in range(len(sizes)) if len(heads[k]) < sizes[k]]
        share = min(fits, key=lambda k: load[k])
        heads[share] += unit
        load[share] += expected_seconds(item)
    taken = {id(item) for head in heads for item in head}
    short = iter([item for item in items if id(item) not in taken])
    return [item for k, head in enumerate(heads) for item in head + [next(short) for _ in range(sizes[k] - len(head))]]


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Mark the process tests ``e2e`` (:data:`E2E_MODULES`, :data:`E2E_FIXTURES`) and the tests
    of a store, server, Ray or command ``integration`` (:data:`INTEGRATION_FIXTURES`), before
    ``-m`` selects; skip tests marked ``gpu`` where CUDA is unavailable; and, once every other
    plugin has selected, start each xdist worker on its share of the long tests
    (:func:`long_tests_first`), so that they overlap instead of ending the run on one worker."""
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if getattr(item, "module", None) else ""
        fixtures = set(getattr(item, "fixturenames", ()))
        if module in E2E_MODULES or E2E_FIXTURES & fixtures:
            item.add_marker(pytest.mark.e2e)
        if INTEGRATION_FIXTURES & fixtures or "e2e" in item.keywords:
            item.add_marker(pytest.mark.integration)
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
    result = yield
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = long_tests_first(items, workers)
    return result


# What a test outside the e2e tier may not start (harness.shell's commands, Ray, an MLflow
# server, PostgreSQL, Slurm, a browser): matched on a started process's command line. Short
# helpers (git, uname) and torch's compile workers are not what the tier is about.
PROCESS_WORDS = ("-m harness", "-m analysis", "-m benchmarks", "-m mlflow", "mlflow server", "mlflow ui", "raylet",
                 "gcs_server", "ray/_private", "-m ray", "postgres", "initdb", "srun", "sbatch", "slurm",
                 "chrom", "gunicorn", "uvicorn")


def started_processes(argv) -> str | None:
    """The command line of a started process if it is one of :data:`PROCESS_WORDS`', else None."""
    line = " ".join(map(str, argv)) if isinstance(argv, (list, tuple)) else str(argv)
    return line if any(word in line for word in PROCESS_WORDS) else None


@pytest.fixture(autouse=True)
def _processes_only_in_e2e(request, monkeypatch):
    """Fail a test outside the ``e2e`` tier that starts a driver, Ray, a server or a daemon (a
    test leaves that tier only by moving in-process); Ray's own ``ray.init`` counts as a start."""
    if "e2e" in request.node.keywords:
        yield
        return
    import subprocess

    started: list[str] = []
    popen_init = subprocess.Popen.__init__

    def watched(self, args, *rest, **kwargs):
        line = started_processes(args)
        if line:
            started.append(line)
        popen_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", watched)
    yield
    if started:
        pytest.fail(f"{request.node.nodeid} is not marked e2e but started {started[0][:200]!r} "
                    f"({len(started)} processes): move it in-process or into the e2e tier (tests/conftest.py)")


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


# One fresh interpreter runs each case through the shell's entry function, as ``python -m NAME``
# runs it (harness/__main__.py and analysis/*'s shells are one line: harness.shell.main), its
# stdout and stderr caught at the file descriptors (what C code and Hydra's logging write too).
_SHELLS = r"""
import json, os, sys, traceback
from harness import shell

cases, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
results = []
for case in cases:
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(case["out"], "w") as out, open(case["err"], "w") as err:
        os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
        os.chdir(case["cwd"])
        try:
            shell.main(case["command"], case["args"])
            code = 0
        except SystemExit as exit_:  # what the interpreter makes of it
            code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
            if not isinstance(exit_.code, (int, type(None))):
                print(exit_.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - as the interpreter ends on it: a traceback, 1
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
    results.append({"code": code, "loaded": sorted(m for m in heavy if m in sys.modules)})
print(json.dumps(results))
"""
HEAVY = ("torch", "ray", "mlflow", "pandas")


@dataclass
class ShellRun:
    """One command line of :func:`run_shells`: its exit status and output, and which of
    :data:`HEAVY` the interpreter had imported once it was answered."""

    returncode: int
    stdout: str
    stderr: str
    loaded: list[str]


def _shells(cases: list[tuple[list[str], Path]]) -> list[ShellRun]:
    """``[(["harness", *args], cwd), ...]`` run one after another in one fresh interpreter, each
    through :func:`harness.shell.main` as ``python -m harness *args`` from ``cwd`` runs it: what a
    process is needed for (the imports an answer takes, Hydra's own ``@hydra.main``: ``--cfg``,
    ``--config-dir``, its output folder) at the cost of one interpreter for all of them. A case
    sees what the ones before it imported: put those that must import nothing first."""
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="shells-") as logs:
        spec = [{"command": args[0], "args": list(args[1:]), "cwd": str(cwd), "out": f"{logs}/{i}.out",
                 "err": f"{logs}/{i}.err"} for i, (args, cwd) in enumerate(cases)]
        proc = subprocess.run([sys.executable, "-c", _SHELLS, json.dumps(spec), json.dumps(HEAVY)],
                              capture_output=True, text=True, timeout=1200, cwd=ROOT,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        return [ShellRun(r["code"], Path(c["out"]).read_text(), Path(c["err"]).read_text(), r["loaded"])
                for r, c in zip(found, spec)]


@pytest.fixture()
def run_shells():
    """``run_shells([(["harness", "--help"], cwd), ...])``: command lines in one fresh
    interpreter (:func:`_shells`)."""
    return _shells


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


def missing(message: str) -> None:
    """A test's external dependency (PostgreSQL, Slurm, a browser) is missing: under CI
    (``CI=true``, set by ``.ci/run``, which installs them) the test fails, elsewhere it is skipped
    with ``message``, which says how to get it."""
    import os

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# as the README's recipe starts a server: without MLflow's job runner (harness.naming.UI_ENV)
SERVER_ENV = UI_ENV


def wait_healthy(url: str, proc, timeout_s: float) -> bool:
    """Poll ``url``/health (every 0.5 s) until it answers 200: True; False as soon as ``proc``
    (the server this test started) has exited, or after ``timeout_s`` seconds (a bound on a hang,
    not a speed check). The one wait for an MLflow server or ``mlflow ui`` of the tests."""
    import time
    import urllib.request

    deadline = time.time() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                if response.status == 200:
                    return True
        except OSError:  # not listening yet, or a 5xx while it starts
            pass
        if time.time() > deadline or proc.poll() is not None:
            return False
        time.sleep(0.5)


@contextlib.contextmanager
def mlflow_server(backend_store_uri: str, artifacts: Path):
    """A real ``mlflow server`` on 127.0.0.1 and a free port (one worker, proxied artifacts in
    ``artifacts``) on ``backend_store_uri``; yields its URI once ``/health`` answers, stops it
    (this process's child, by its pid) afterwards."""
    import subprocess
    import sys

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1", "--backend-store-uri", backend_store_uri,
         "--artifacts-destination", artifacts.as_uri()],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **SERVER_ENV})
    uri = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(uri, proc, timeout_s=300):  # a PostgreSQL store runs MLflow's migrations first
            pytest.fail(f"mlflow server on {backend_store_uri.split('@')[-1]} did not start"
                        f" (exit {proc.poll()})")
        yield uri
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture()
def mlflow_server_uri(tmp_path):
    """A real ``mlflow server`` on 127.0.0.1 (SQLite backend, proxied artifacts); yields its URI."""
    store = tmp_path / "server"
    store.mkdir()
    with mlflow_server(f"sqlite:///{store / 'server.db'}", store / "artifacts") as uri:
        yield uri


POSTGRES_HOW = ("PostgreSQL is not installed (no initdb on PATH or under /usr/lib/postgresql/*/bin):"
                " `apt-get install postgresql` on Debian (.ci/run does it), and"
                " `pip install -e '.[test]'` for its driver psycopg")


class Postgres:
    """A private PostgreSQL cluster for the tests: its own data and socket folder under /tmp, a
    free port on 127.0.0.1 only, trust authentication for its superuser ``postgres``, fsync off.
    Never the machine's own cluster (the machine is shared). ``initdb`` and ``postgres`` refuse
    to run as root, so as root they run as the ``postgres`` user that Debian's package creates.
    The server is this process's child and is stopped by its pid."""

    def __init__(self) -> None:
        import glob
        import os
        import shutil
        import tempfile

        bins = [Path(p).resolve().parent for p in [shutil.which("initdb")] if p]  # beside psql
        bins += [Path(p).parent for p in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)]
        try:
            import psycopg  # noqa: F401  (the driver of MLflow's postgresql+psycopg:// store)
        except ImportError:
            bins = []
        if not bins:
            missing(POSTGRES_HOW)
        self.bin = bins[0]
        self.user = "postgres" if os.geteuid() == 0 else None
        self.dir = Path(tempfile.mkdtemp(prefix="pg-", dir="/tmp"))  # short: the socket's path
        if self.user:
            shutil.chown(self.dir, self.user, self.user)
        self.port = free_port()
        self.proc = None

    def _run(self, *args: str, **kw):
        import subprocess

        return subprocess.Popen([str(self.bin / args[0]), *args[1:]], user=self.user,
                                group=self.user, extra_groups=[] if self.user else None,
                                cwd=self.dir, **kw)

    def start(self) -> "Postgres":
        import subprocess
        import time

        init = self._run("initdb", "-D", str(self.dir / "data"), "--auth=trust", "-U", "postgres",
                         "-E", "UTF8", "--no-sync", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
        out, _ = init.communicate(timeout=300)
        if init.returncode:
            pytest.fail(f"initdb failed (exit {init.returncode}): {out[-2000:]}")
        self.log = open(self.dir / "postgres.log", "w")  # written through the inherited fd
        self.proc = self._run("postgres", "-D", str(self.dir / "data"), "-p", str(self.port),
                              "-k", str(self.dir), "-c", "listen_addresses=127.0.0.1",
                              "-c", "fsync=off", "-c", "full_page_writes=off",
                              stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while True:
            try:
                self.connect("postgres").close()
                return self
            except Exception:  # psycopg.OperationalError until it accepts connections
                if time.time() > deadline or self.proc.poll() is not None:
                    self.stop()
                    pytest.fail("postgres did not start: " + (self.dir / "postgres.log").read_text()[-2000:])
                time.sleep(0.3)

    def connect(self, database: str):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=database,
                               autocommit=True)  # CREATE DATABASE refuses a transaction

    def create_database(self, name: str) -> str:
        """A new, empty database; returns its SQLAlchemy URI. The driver is named
        (``postgresql+psycopg``): a bare ``postgresql://`` means psycopg2 to SQLAlchemy 2.0 and
        psycopg 3 to 2.1."""
        with self.connect("postgres") as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        import shutil
        import signal
        import subprocess

        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres():
    """A private PostgreSQL server for this test session (:class:`Postgres`); each test that
    needs a store gets its own database from it (:func:`postgres_database`). Missing PostgreSQL:
    skipped, saying how to get it; under CI a failure."""
    server = Postgres().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def postgres_database(postgres, request):
    """A fresh, empty database on the session's PostgreSQL; yields its ``postgresql://`` URI."""
    import re
    import uuid

    name = re.sub(r"\W", "_", request.node.name)[:40].lower() + "_" + uuid.uuid4().hex[:8]
    yield postgres.create_database(name)


@pytest.fixture()
def postgres_mlflow_server_uri(postgres_database, tmp_path):
    """A real ``mlflow server`` backed by PostgreSQL (:func:`postgres_database`, proxied
    artifacts), as a cluster runs it; yields its URI."""
    artifacts = tmp_path / "pg-artifacts"
    artifacts.mkdir()
    with mlflow_server(postgres_database, artifacts) as uri:
        yield uri


@pytest.fixture(scope="module")
def zoo_examples_on_path():
    """``examples/`` first on ``sys.path`` for a module's tests (where a user's ``PYTHONPATH``
    would put it), the ``zoo`` package imported afresh and forgotten after, so that no other
    module sees the examples' ``zoo``."""
    import sys

    def forget() -> None:
        for name in [m for m in sys.modules if m.split(".")[0] == "zoo"]:
            del sys.modules[name]

    forget()
    sys.path.insert(0, str(ROOT / "examples"))
    yield
    sys.path.remove(str(ROOT / "examples"))
    forget()
