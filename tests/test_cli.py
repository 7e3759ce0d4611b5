"""The real command line, in subprocesses, from a working directory outside the repo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import _cli as _run

ROOT = Path(__file__).resolve().parent.parent


def _state(path: Path) -> tuple:
    """What a test may not change in the checkout: whether ``path`` exists, its size and mtime."""
    return (path.exists(), *((path.stat().st_size, path.stat().st_mtime_ns) if path.exists() else ()))


@pytest.mark.e2e  # starts a driver process (tests/conftest.py fails a test outside e2e that does)
@pytest.mark.slow
def test_smoke_ablation_end_to_end_on_ray(tmp_path):
    # the README's first command may have left a store in the checkout: it must stay untouched
    before = {name: _state(ROOT / name) for name in ("mlflow.db", "mlruns", "mlartifacts")}
    proc = _run(["harness", "+ablation=smoke"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    db = tmp_path / "mlflow.db"
    assert db.exists()
    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("smoke")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 18
    assert {r.info.status for r in children} == {"FINISHED"}
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert len({r.data.tags["trial_id"] for r in children}) == 18
    # the real effect the smoke run exists to show: attention learns its teacher, the MLP doesn't
    largest = [r for r in children if r.data.params["task.n_train"] == "1024"]
    err = {v: max(r.data.metrics["test/rel_mse"] for r in largest if r.data.tags["variant"] == v)
           for v in ("softmax", "mlp")}
    assert err["softmax"] < 0.1 * err["mlp"]
    pngs = list(tmp_path.glob("outputs/smoke/*/sample_efficiency.png"))
    assert len(pngs) == 1
    artifacts = {f.path for f in client.list_artifacts(parents[0].info.run_id)}
    assert "sample_efficiency.png" in artifacts
    # nothing written anywhere but the configured store and the output folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlartifacts", "mlflow.db", "outputs"]
    assert {name: _state(ROOT / name) for name in before} == before

    proc = _run(["analysis", "+ablation=smoke"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "18 trial runs" in proc.stdout


@pytest.mark.integration
def test_single_trial_of_the_defaults_serially(tmp_path, run_in_process):
    proc = run_in_process(["harness", "cluster=serial", "train.max_steps=20", "train.eval_every=10"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("single/teacher/softmax")  # one-off runs: an experiment per task/model
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 2  # parent + one child


@pytest.mark.integration
def test_bad_value_is_rejected_before_any_trial_with_exit_2(tmp_path, invoke):
    code, _, err = invoke("harness", ["+ablation=smoke", "task.n_train=0"], tmp_path)
    assert code == 2
    assert "n_train" in err
    assert not (tmp_path / "mlflow.db").exists()


TINY = ["cluster=serial", "train.max_steps=20", "train.eval_every=10", "task.n_val=32", "task.n_test=64"]


@pytest.mark.integration
def test_command_line_sweeps_are_axes_of_the_sweep(tmp_path, invoke):
    """``-m`` with ``seed=0,1,2`` (Hydra's multirun) runs every value, in one invocation; the
    next invocation resumes (in-process: the shell's argv handling is the same function)."""
    code, out, err = invoke("harness", ["-m", "+ablation=smoke", "model=mlp", "task.n_train=64", "seed=0,1,2",
                                        "dry_run=true"], tmp_path)
    assert code == 0, err[-3000:]
    assert out.splitlines()[:2] == ["== smoke", "3 trials"]
    assert {f"seed={s}" for s in range(3)} <= set(out.split())
    code, out, err = invoke("harness", ["-m", "seed=0,1", *TINY], tmp_path)
    assert code == 0, err[-3000:]
    assert "2 trials: 0 already finished (skipped), 2 finished now" in out
    code, out, err = invoke("harness", ["seed=range(3)", *TINY], tmp_path)  # without -m too; 0, 1 are done
    assert "3 trials: 2 already finished (skipped), 1 finished now" in out, err[-3000:]


def test_dry_runs_and_cfg_hydra_resolve_through_hydras_own_main(tmp_path, run_shells):
    """Hydra's own ``@hydra.main`` (``tests/test_command.py`` runs the listings in-process), the
    command lines in one fresh interpreter: a dry run lists the trials and writes nothing (no
    store, and no output folder of Hydra's: the shell switches it off); an ablation found on
    ``hydra.searchpath``; ``--cfg hydra --resolve`` prints Hydra's config with the output folder
    resolved to the ablation's name, with or without ``hydra.searchpath`` (issue 12: it failed on
    ``hydra.run.dir``, whose ``${ablation.name}`` did not resolve), writing nothing."""
    extra = tmp_path / "myconf"
    (extra / "ablation").mkdir(parents=True)
    (extra / "ablation" / "mine.yaml").write_text(
        "# @package _global_\nablation:\n  name: mine\n  grid:\n    model: softmax,mlp\n    seed: range(2)\n")
    search = f"hydra.searchpath=[file://{extra}]"
    work = tmp_path / "work"
    work.mkdir()
    dry, mine, smoke_cfg, mine_cfg = run_shells([
        (["harness", "+ablation=smoke", "seed=0", "dry_run=true"], work),
        (["harness", "+ablation=mine", search, "dry_run=true"], work),
        *((["harness", *args, "--cfg", "hydra", "--resolve"], work)
          for args in (["+ablation=smoke"], ["+ablation=mine", search]))])
    assert dry.returncode == 0, dry.stderr[-3000:]
    lines = dry.stdout.strip().splitlines()
    assert lines[:2] == ["== smoke", "9 trials"]
    assert any("mlp" in line and "task.n_train=1024" in line for line in lines[2:])
    assert mine.returncode == 0, mine.stderr[-3000:]
    assert mine.stdout.splitlines()[:2] == ["== mine", "4 trials"]
    for proc, name in ((smoke_cfg, "smoke"), (mine_cfg, "mine")):
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"dir: outputs/{name}/" in proc.stdout, proc.stdout[-2000:]
        assert "${" not in proc.stdout  # every interpolation resolved
    assert sorted(p.name for p in work.iterdir()) == []  # no store, no outputs/


@pytest.mark.e2e  # starts a driver process (tests/conftest.py fails a test outside e2e that does)
# one folder with all three (it was two cases, one sweep and two analyses each: 55 CPU-s a case)
@pytest.mark.parametrize("folder", ["My Experiments é 100%41 sure"])
def test_any_folder_and_hydra_job_chdir_keep_one_store_where_the_command_started(tmp_path, folder):
    """Spaces, non-ASCII and ``%`` (a URI escape, ``%41`` is ``A``) in the path;
    ``hydra.job.chdir=True`` moves the job into its output folder, but the store stays in the
    folder the command started from (so the second invocation resumes, and the analysis finds the
    runs); the analysis never creates a store."""
    cwd = tmp_path / folder
    cwd.mkdir()
    args = ["harness", *TINY, "hydra.job.chdir=True"]
    first = _run(args, cwd)
    assert first.returncode == 0, first.stderr[-3000:]
    again = _run(args, cwd)
    assert "1 trials: 1 already finished (skipped), 0 finished now" in again.stdout, again.stderr[-3000:]
    assert sorted(p.name for p in cwd.iterdir()) == ["mlartifacts", "mlflow.db", "outputs"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder]  # no stray folder beside it
    proc = _run(["analysis", *TINY, "hydra.job.chdir=True"], cwd)  # the same trial's runs
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 trial runs" in proc.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _run(["analysis", "+ablation=smoke", "hydra.job.chdir=True"], empty)
    assert proc.returncode == 2 and "no MLflow store" in proc.stderr, proc.stderr[-2000:]
    assert not list(empty.rglob("mlflow.db"))


_RUN_DIR = r"""
import sys
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from harness.config import register_configs
register_configs()
with initialize_config_dir(config_dir=sys.argv[1], version_base="1.3"):
    OmegaConf.register_new_resolver("now", lambda fmt: "2026-01-01_00-00-00", replace=True)  # one second
    cfg = compose(config_name="config", overrides=["+ablation=smoke"], return_hydra_config=True)
    print(OmegaConf.to_container(cfg.hydra.run, resolve=True)["dir"])
"""


def test_two_invocations_in_the_same_second_get_their_own_output_folder():
    """Issue 12 (1c): two launches in the same second wrote into one output folder. Two
    processes whose clock reads the same second resolve ``hydra.run.dir`` to two folders."""
    dirs = [subprocess.run([sys.executable, "-c", _RUN_DIR, str(ROOT / "conf")], capture_output=True,
                           text=True, cwd=ROOT, timeout=600).stdout.strip() for _ in range(2)]
    assert all(d.startswith("outputs/smoke/2026-01-01_00-00-00") for d in dirs), dirs
    assert dirs[0] != dirs[1], dirs


def test_subprocesses_of_tests_fail_on_silence_not_on_slowness(tmp_path):
    """The tests' CLI runner (conftest ``_cli``) lets a run take as long as it keeps printing,
    and kills one that falls silent for ``stall_s``."""
    ticking = "import time\nfor i in range(8):\n    print(i, flush=True); time.sleep(0.4)\n"
    (tmp_path / "ticking.py").write_text(ticking)
    (tmp_path / "silent.py").write_text("import time\nprint('start', flush=True)\ntime.sleep(60)\n")
    proc = _run(["ticking"], tmp_path, stall_s=1.5)  # 3.2 s in all, never 1.5 s silent
    assert proc.returncode == 0 and proc.stdout.split() == [str(i) for i in range(8)]
    with pytest.raises(subprocess.TimeoutExpired):
        _run(["silent"], tmp_path, stall_s=1.5)


@pytest.mark.e2e
def test_a_listing_piped_to_a_reader_that_stops_ends_without_a_traceback(tmp_path):
    """``python -m harness +ablation=smoke dry_run=true | head -1``: the reader closes the pipe
    after one line; the command ends with 141 (SIGPIPE, as a shell reports it) and no traceback."""
    import fcntl

    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)  # the listing (540 trials) outgrows the pipe
    proc = subprocess.Popen([sys.executable, "-m", "harness", "+ablation=smoke", "seed=range(60)", "dry_run=true"],
                            cwd=tmp_path, stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    proc.stdout = os.fdopen(read, "rb", buffering=0)
    assert proc.stdout.read(8) == b"== smoke"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=600) == 141 and "Traceback" not in err, err[-2000:]
