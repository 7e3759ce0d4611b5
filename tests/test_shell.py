"""The one shell of the five commands (:mod:`harness.shell`), in-process through the ``invoke``
fixture, which calls the shell's own :func:`harness.shell.prepare` and :func:`harness.shell.call`:
every command moves a tracking URI's password out of the command line before anything sees it,
and every command's ``dry_run=true`` prints its plan and writes nothing."""

from __future__ import annotations

import ast
import sqlite3
import sys
from pathlib import Path

import pytest

from harness import shell

ROOT = Path(__file__).resolve().parent.parent
SECRET = "S3cr3t-pa55-7d1c"
URI = f"tracking.uri=http://alice:{SECRET}@127.0.0.1:9"  # recorded as an override, never used: tracking=local
TINY = ["cluster=serial", "train.max_steps=20", "train.eval_every=10", "task.n_val=32", "task.n_test=64",
        "task.n_train=64", "seed=0"]
ONE_ARM = 'zoo.arms=[{name: gla, target: "zoo.gla:GatedLinearAttention", kwargs: {causal: true}, paper: x}]'
# each command at its smallest: a plan of a few trials; a real run of at most six
ARGS = {"harness": ["+ablation=smoke", *TINY],
        "analysis": ["+ablation=smoke", *TINY],
        "analysis.report": ["scale=tiny", "report.suite=smoke", *TINY],
        "analysis.scorecard": ["model=deepsets", "scale=tiny", "task=nearest", *TINY[:-2], "report.extend_lr=0"],
        "analysis.zoo": ["scale=tiny", ONE_ARM, "task=nearest", *TINY[:-2], "report.extend_lr=0"]}


def test_the_table_has_the_five_commands_and_each_module_runs_its_entry():
    """Each command's ``python -m`` module hands its command line to the one shell, under its
    own name, and its ``run`` is the table's."""
    assert set(shell.COMMANDS) == set(ARGS)
    for name, command in shell.COMMANDS.items():
        path = ROOT / (name.replace(".", "/") + ("/__main__.py" if "." not in name else ".py"))
        calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", None) == "main"]
        assert [ast.literal_eval(c.args[0]) for c in calls] == [name], path
        assert callable(command.function())
        # Hydra writes no folder of its own (.hydra/, a log) on a dry run, nor ever for the
        # commands that write their own (the compose API of the fixture writes none anyway)
        quiet = set(shell.QUIET_HYDRA)
        assert quiet <= set(shell.prepare(command, ["dry_run=true"])[0])
        assert (quiet <= set(shell.prepare(command, [])[0])) == (name not in ("harness", "analysis"))


@pytest.fixture()
def seen(monkeypatch):
    """What each command's ``run`` was given: ``[(cfg, runtime)]``."""
    calls = []
    original = shell.Command.function

    def recording(self):
        run = original(self)

        def wrapped(cfg, runtime):
            calls.append((cfg, runtime))
            return run(cfg, runtime)
        return wrapped

    monkeypatch.setattr(shell.Command, "function", recording)
    return calls


@pytest.mark.parametrize("command", list(ARGS))
def test_a_dry_run_prints_the_plan_writes_nothing_and_never_sees_the_password(tmp_path, invoke, seen, command):
    from omegaconf import OmegaConf

    code, out, err = invoke(command, [*ARGS[command], URI, "dry_run=true"], tmp_path)
    assert code == 0, err[-3000:]
    assert "== " in out and " trials" in out, out[-2000:]  # the trials it would run or read
    assert "dry run" in out or command == "harness", out[-2000:]  # and what it would do
    assert list(tmp_path.iterdir()) == []  # no store, no output folder, no page
    assert SECRET not in out + err
    (cfg, runtime), = seen
    assert SECRET not in OmegaConf.to_yaml(cfg) + repr(runtime)


@pytest.fixture(scope="module")
def secret_folder(tmp_path_factory, run_in_process_module):
    """A folder where ``python -m harness`` ran one tiny trial with a password in tracking.uri."""
    folder = tmp_path_factory.mktemp("secret")
    proc = run_in_process_module(["harness", *TINY, URI], folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder, proc


def _with_secret(folder: Path) -> list[str]:
    """Files under ``folder`` holding the secret, and the store's params and tags holding it."""
    found = [str(p) for p in folder.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    with sqlite3.connect(folder / "mlflow.db") as con:
        for table in ("params", "tags", "experiment_tags"):
            found += [f"{table}: {key}" for key, in con.execute(
                f"SELECT key FROM {table} WHERE value LIKE ?", (f"%{SECRET}%",))]
    return found


@pytest.mark.parametrize("command", list(ARGS))
def test_a_password_in_the_uri_reaches_no_file_param_tag_or_line_on_the_success_path(secret_folder, invoke, command):
    """Each command run for real (the trials of the scorecard and the zoo at their smallest, the
    report from the store without running its suite) with ``tracking.uri=http://USER:PASSWORD@…``
    on its command line: exit 0, and the password is nowhere: not printed, not in a file (the
    page's command line, ``plan.json``, ``.hydra/``), not in a run's params or tags (the parent
    run's ``overrides``)."""
    folder, proc = secret_folder
    if command == "harness":
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    else:
        args = [a for a in ARGS[command] if a != "+ablation=smoke"]
        args += ["report.run=false"] if command == "analysis.report" else []
        code, out, err = invoke(command, [*args, URI], folder)
    assert code == 0, err[-3000:]
    assert SECRET not in out + err
    assert _with_secret(folder) == []
    written = {"analysis.report": "report-tiny/report.md", "analysis.scorecard": "scorecard.md",
               "analysis.zoo": "docs/zoo/plan.json"}.get(command)
    assert written is None or any(str(p).endswith(written) for p in folder.rglob("*")), written


BAD = [("model=softmax,sofmax", "no model 'sofmax'; did you mean softmax?"),
       ("seed=interval(0,1)", "interval() is a range for Hydra's optimiser sweepers"),
       ("model=glob(soft*)", "glob() is not expanded by the harness; name them: model=softmax,"),
       ("+ablation=smoke,load", "one ablation per command"),
       ("train.max_steps=abc", "train.max_steps takes an integer, not 'abc'"),
       ("seed=0,x", "seed takes an integer, not 'x'"),
       ("train.optimizer=adm", "did you mean adam?"),
       ("+ablation=twice", "twice.yaml:4: YAML error: duplicate key 'seed' (first on line 3)")]


@pytest.mark.parametrize("command", list(ARGS))
@pytest.mark.parametrize("bad, said", BAD, ids=[b for b, _ in BAD])
def test_bad_input_is_one_line_and_exit_2_before_the_command_runs(tmp_path, invoke, seen, command, bad, said):
    """Each command refuses a misspelled value inside a sweep, a sweep function it cannot run,
    a sweep over the ablation (which ran one default trial per name and exited 0), a value of
    the wrong type and a key given twice in an ablation file: one line, exit 2, nothing written,
    from the shell's checks alone (the command's ``run`` is never reached)."""
    conf = tmp_path / "conf" / "ablation"
    conf.mkdir(parents=True)
    (conf / "twice.yaml").write_text("name: twice\ngrid:\n  seed: range(2)\n  seed: range(3)\n")
    work = tmp_path / "work"
    work.mkdir()
    args = [bad, f"hydra.searchpath=[file://{tmp_path / 'conf'}]"]
    code, out, err = invoke(command, args, work)
    assert code == 2 and err.strip().splitlines() == [err.strip()] and said in err, err[-2000:]
    assert list(work.iterdir()) == [] and seen == []


MIXER = [("model.target=zoo.linear_attention:LinearAtention", "did you mean 'LinearAttention'?"),
         ("model.target=zoo.linear_atention:LinearAttention", "cannot import 'zoo.linear_atention'"),
         ("model.kwargs.causl=true", "has no parameter 'causl'; did you mean model.kwargs.causal?")]


@pytest.mark.parametrize("command", ["harness", "analysis.scorecard"])
@pytest.mark.parametrize("bad, said", MIXER, ids=["class", "module", "keyword"])
def test_a_misspelled_mixer_is_refused_before_any_trial_is_composed(tmp_path, invoke, seen, monkeypatch,
                                                                    command, bad, said):
    """The mixer's module, class and constructor keyword are checked by importing the mixer
    alone, before the command composes its trials (the scorecard composed its 648 first)."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    args = ["model=external", "model.target=zoo.linear_attention:LinearAttention", bad, "scale=tiny"]
    code, _, err = invoke(command, args, tmp_path)
    assert code == 2 and err.strip().splitlines() == [err.strip()] and said in err, err[-2000:]
    assert seen == [] and list(tmp_path.iterdir()) == []


DAMAGED = {"harness": [*TINY, "dry_run=true"], "analysis": TINY,
           "analysis.report": ["scale=tiny", "report.suite=smoke", "report.run=false", *TINY],
           "analysis.scorecard": ["model=deepsets", "scale=tiny", "task=nearest", "dry_run=true", *TINY[:-2]],
           "analysis.zoo": ["scale=tiny", ONE_ARM, "task=nearest", "dry_run=true", *TINY[:-2]]}


@pytest.mark.parametrize("command", list(DAMAGED))
def test_a_damaged_store_is_one_line_and_exit_2_for_every_command(tmp_path, populated, invoke, command):
    """A store whose pages are overwritten (``database disk image is malformed``): the sweep
    said so in one line, but ``python -m analysis``, the report from the store and every dry
    run ended in SQLite's traceback; now every command names the store and what to do."""
    from conftest import copy_populated

    copy_populated(populated, tmp_path)
    db = tmp_path / "mlflow.db"
    data = bytearray(db.read_bytes())
    for page in range(2 * 4096, len(data), 4096):  # every page past the first two: its cells overwritten
        data[page + 100:page + 400] = b"\xff" * 300
    db.write_bytes(bytes(data))
    before = db.read_bytes()
    code, out, err = invoke(command, DAMAGED[command], tmp_path)
    assert code == 2 and err.strip().splitlines() == [err.strip()], err[-3000:]
    assert f"tracking store {db} is damaged" in err and "database disk image is malformed" in err
    assert db.read_bytes() == before and not (tmp_path / "outputs").exists()


def _as_ray_job(monkeypatch, runtime_env: dict) -> None:
    """This process as a Ray job's driver: the variable Ray's job supervisor sets."""
    import json

    from harness.ray_job import JOB_CONFIG_ENV

    monkeypatch.setenv(JOB_CONFIG_ENV, json.dumps({"runtime_env": runtime_env,
                                                   "metadata": {"job_submission_id": "raysubmit_x"}}))


@pytest.mark.parametrize("command", list(DAMAGED))
def test_a_store_in_a_ray_jobs_working_dir_copy_is_refused_before_any_trial(tmp_path, invoke, seen,
                                                                             monkeypatch, command):
    """Under ``ray job submit --working-dir .`` the default store was created inside Ray's copy
    of the folder (``…/runtime_resources/working_dir_files/…/mlflow.db``): results nobody finds,
    an empty store after any resubmission, deleted by Ray. Now every command refuses it in one
    line naming the fixes; a store at an absolute path outside the copy, or a bundle, is used."""
    _as_ray_job(monkeypatch, {"working_dir": "gcs://_ray_pkg_0123.zip"})
    copy = tmp_path / "runtime_resources" / "working_dir_files" / "_ray_pkg_0123"
    copy.mkdir(parents=True)
    code, _, err = invoke(command, DAMAGED[command], copy)
    assert code == 2 and err.strip().splitlines() == [err.strip()], err[-2000:]
    assert f"tracking store {copy / 'mlflow.db'} lies in this Ray job's copy" in err
    assert "tracking=server" in err and "tracking.db_path=/shared/mlflow.db" in err
    assert seen == [] and list(copy.iterdir()) == []
    shared = tmp_path / "shared"
    shared.mkdir()
    code, _, err = invoke(command, [*DAMAGED[command], f"tracking.db_path={shared / 'mlflow.db'}",
                                    f"tracking.artifact_root={shared / 'mlartifacts'}"], copy)
    assert code == (2 if command == "analysis" else 0), err[-2000:]  # analysis: no runs there yet
    assert "lies in this Ray job's copy" not in err


def test_a_ray_jobs_py_modules_and_the_drivers_merge_without_the_override_variable(monkeypatch):
    """``ray job submit --runtime-env-json '{"py_modules": [...]}'`` with a user mixer: Ray
    refused the driver's own ``py_modules`` (exit 2 naming RAY_OVERRIDE_JOB_RUNTIME_ENV=1); the
    driver now passes both lists and sets the variable itself, only in that case."""
    from ray.runtime_env.runtime_env import _merge_runtime_env

    from harness.ray_job import OVERRIDE_ENV, driver_runtime_env

    own = {"py_modules": ["/work/examples/my_mixers"]}
    environ: dict[str, str] = {}
    assert driver_runtime_env(own, environ) == own and environ == {}  # not a job
    _as_ray_job(monkeypatch, {"py_modules": ["gcs://_ray_pkg_job.zip"], "working_dir": "gcs://_ray_pkg_w.zip"})
    environ = dict(__import__("os").environ)
    job = {"py_modules": ["gcs://_ray_pkg_job.zip"], "working_dir": "gcs://_ray_pkg_w.zip"}
    assert _merge_runtime_env(job, own) is None  # what Ray does with the driver's list alone
    merged = driver_runtime_env(own, environ)
    assert merged == {"py_modules": ["gcs://_ray_pkg_job.zip", "/work/examples/my_mixers"]}
    assert environ[OVERRIDE_ENV] == "1"
    assert _merge_runtime_env(job, merged, override=environ[OVERRIDE_ENV] == "1") == {**job, **merged}
    assert driver_runtime_env(None, environ) is None  # no user module: nothing passed, nothing set


def test_an_artifact_folder_turned_read_only_mid_sweep_is_one_line_and_the_resume_completes(tmp_path, invoke,
                                                                                           monkeypatch):
    """An ``OSError`` (read-only file system) out of a claim ended the driver in a traceback;
    now one ``error:`` line and exit 1, the parent closed KILLED, and the same command, once the
    folder is writable, runs both trials."""
    import errno

    from harness import tracking

    claim = tracking.Tracker.claim_batch

    def read_only(self, *args, **kwargs):
        raise PermissionError(errno.EROFS, "Read-only file system", str(tmp_path / "mlartifacts"))

    args = [*TINY[:-1], "task.n_train=16", "train.max_steps=4", "train.eval_every=2", "seed=0,1", "summary=false"]
    monkeypatch.setattr(tracking.Tracker, "claim_batch", read_only)
    code, out, err = invoke("harness", args, tmp_path)
    errors = [line for line in err.splitlines() if line.startswith("error:") or "Traceback" in line]
    assert code == 1 and errors == [f"error: cannot write {tmp_path / 'mlartifacts'}: Read-only file system; the "
                                    "sweep stopped (the trials it recorded stay; the rest run when the same command "
                                    "is run again once that folder is writable)"], err[-3000:]
    with sqlite3.connect(tmp_path / "mlflow.db") as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("KILLED",)]  # the parent, closed
    monkeypatch.setattr(tracking.Tracker, "claim_batch", claim)
    code, out, err = invoke("harness", args, tmp_path)
    assert code == 0 and "2 trials: 0 already finished (skipped), 2 finished now" in out, err[-3000:]


@pytest.mark.parametrize("bad, said", [
    ("task.target=my_tasks:RuningMean", "did you mean 'RunningMean'?"),
    ("task.kwargs.nn=6", "has no parameter 'nn'; did you mean task.kwargs.n?")], ids=["class", "keyword"])
def test_a_misspelled_task_class_or_keyword_is_refused_before_any_trial_is_composed(tmp_path, invoke, seen,
                                                                                    monkeypatch, bad, said):
    """A user task's class and constructor keywords are checked as a mixer's are."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    code, _, err = invoke("harness", ["task=external", "task.target=my_tasks:RunningMean", bad], tmp_path)
    assert code == 2 and err.strip().splitlines() == [err.strip()] and said in err, err[-2000:]
    assert seen == [] and list(tmp_path.iterdir()) == []


def test_the_refusal_benchmark_times_every_command_against_its_baseline(tmp_path):
    """benchmarks/refusal_cpu.py (run by hand: it starts processes) covers the five commands of
    the table and holds each case to the baseline its budget names."""
    from benchmarks import refusal_cpu

    cases = refusal_cpu.cases(tmp_path)
    assert set(refusal_cpu.COMMANDS) == set(shell.COMMANDS)
    assert sum(against == "pass" for _, against in cases.values()) == 5 * len(refusal_cpu.REFUSALS)
    assert sum(against == "torch" for _, against in cases.values()) == 2 * len(refusal_cpu.MIXER)
    assert set(refusal_cpu.BUDGET_S) == {"pass", "torch"}


@pytest.mark.parametrize("bad", ["task.n_train=many", "task.n_train=64,x", "+task.n_train=abc"])
def test_a_presets_value_of_the_wrong_type_is_one_line(tmp_path, invoke, seen, bad):
    """A task or model preset's field is typed by its family's schema: Hydra's 7-line error,
    after the imports, was what a wrong type there got."""
    code, _, err = invoke("harness", ["+ablation=smoke", bad], tmp_path)
    assert code == 2 and err.strip().splitlines() == [err.strip()] and "task.n_train takes an integer, not '" in err
    assert seen == [] and list(tmp_path.iterdir()) == []


def test_the_end_of_sweep_summary_is_imported_at_its_first_call(tmp_path, monkeypatch):
    """A dry run or a run with ``summary=false`` does not import the summary's modules (pandas,
    scipy.stats): ``python -m harness`` gets the summary as a function that
    imports its module when first called."""
    (tmp_path / "late_summary.py").write_text("def summarise(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "late_summary", raising=False)
    summarise = shell._imported_when_called("late_summary:summarise")
    assert "late_summary" not in sys.modules
    assert summarise(1) == 2 and "late_summary" in sys.modules
    assert shell.COMMANDS["harness"].summary == "analysis.summary:summarise"
