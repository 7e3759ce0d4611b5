"""The command line before anything heavy: --help, a misspelled preset or ablation (did you mean),
no ``*_schema`` entries in any list, a dry run that writes nothing, and where CUDA is checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import check_choices, help_text, HARNESS_USAGE
from harness.config import ClusterConfig, SchedulerKind


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_help_lists_ablations_and_presets_without_schemas():
    text = help_text(HARNESS_USAGE)
    assert "_schema" not in text
    assert "smoke" in text and "does attention learn an attention teacher" in text
    assert "relu_attention" in text and "teacher_quartic" in text


@pytest.mark.parametrize("args, expected", [
    (["model=sofmax"], "did you mean softmax?"),
    (["+ablation=smok"], "did you mean smoke?"),
    (["task=teachr", "seed=2"], "did you mean teacher?"),
])
def test_misspelled_choice_is_named_with_the_closest(args, expected):
    error = check_choices(args)
    assert error is not None and expected in error and "_schema" not in error
    assert check_choices(["model=softmax", "+ablation=smoke", "train.lr=0.1"]) is None


def test_cli_answers_help_and_typos_without_heavy_imports(tmp_path):
    proc = _run(["harness", "--help"], tmp_path)
    assert proc.returncode == 0 and "_schema" not in proc.stdout and "+ablation=NAME" in proc.stdout
    proc = _run(["harness", "model=sofmax"], tmp_path)
    assert proc.returncode == 2 and "did you mean softmax?" in proc.stderr
    for module in ("analysis", "analysis.report"):
        proc = _run([module, "+ablation=smok"], tmp_path)
        assert proc.returncode == 2 and "did you mean smoke?" in proc.stderr
    # neither torch, Ray nor MLflow is loaded to answer
    probe = ("import sys; from harness.cli import precheck, HARNESS_USAGE\n"
             "try:\n    precheck(HARNESS_USAGE, ['model=sofmax'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('torch', 'ray', 'mlflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().endswith("[]"), out.stdout + out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # the one shell (harness.shell.prepare) of each of the five commands refuses a sweep value, a
    # sweep function, an ablation sweep, a type and a key twice in a file without loading torch,
    # Ray, MLflow or pandas (benchmarks/refusal_cpu.py measures what that costs)
    conf = tmp_path.parent / f"{tmp_path.name}-conf" / "ablation"
    conf.mkdir(parents=True)
    (conf / "twice.yaml").write_text("name: twice\ngrid:\n  seed: 0\n  seed: 1\n")
    bad = ["model=softmax,sofmax", "seed=interval(0,1)", "+ablation=smoke,load", "train.max_steps=abc",
           "model=glob(soft*)", "+ablation=twice"]
    probe = ("import sys; from harness import shell\n"
             f"for name in shell.COMMANDS:\n    for bad in {bad!r}:\n"
             f"        try:\n            shell.prepare(shell.COMMANDS[name], [bad, 'hydra.searchpath=[file://{conf.parent}]'])\n"
             "        except SystemExit as e:\n            print(e.code)\n"
             "print(sorted(m for m in ('torch', 'ray', 'mlflow', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.stdout.split() == ["2"] * 30 + ["[]"], out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 30 and "Traceback" not in out.stderr


def test_cuda_is_checked_where_trials_run(hydra_conf):
    from harness.scheduler import RayScheduler, SerialScheduler
    from harness.expansion import compose_trial
    from harness.validate import preflight

    trial = compose_trial(["train.max_steps=2", "cluster.device=cuda"], [])
    preflight([trial], "cuda")  # the driver need not have a GPU (a CPU-only head)
    if not __import__("torch").cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            SerialScheduler(ClusterConfig(scheduler=SchedulerKind.serial, device="cuda")).__enter__()
    with pytest.raises(ValueError, match="gpus_per_trial > 0"):
        RayScheduler(ClusterConfig(num_cpus=1, device="cuda")).__enter__()


@pytest.mark.parametrize("arg", ["train.max_step=50", "+train.max_step=50"])
def test_unknown_key_is_refused_before_heavy_imports_with_or_without_plus(tmp_path, arg):
    """Hydra answered ``train.max_step=50`` after the imports with "use +train.max_step=50", and
    the hinted ``+train.max_step=50`` ran with max_steps unchanged; both are refused up front."""
    from harness.cli import check_keys

    error = check_keys([arg])
    assert error is not None and "did you mean max_steps?" in error
    assert check_keys(["train.max_steps=50", "+ablation=smoke", "model.sigma=relu", "task.n_train=8",
                       "seed=1", "ablation.grid.seed=range(2)", "cluster.num_cpus=2", "~seed"]) is None
    assert "did you mean seed?" in check_keys(["sed=1"])
    proc = _run(["harness", arg], tmp_path)
    assert proc.returncode == 2 and "did you mean max_steps?" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    probe = ("import sys; from harness.cli import precheck, HARNESS_USAGE\n"
             f"try:\n    precheck(HARNESS_USAGE, [{arg!r}])\nexcept SystemExit as e:\n    print(e.code)\n"
             "print(sorted(m for m in ('torch', 'ray', 'mlflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["2", "[]"], out.stdout + out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_shells_answer_a_broken_yaml_and_a_missing_mixer_with_exit_2_and_one_line(tmp_path):
    """The shells' own lines, which the in-process fixture does not run: ``python -m harness``
    names a preset's YAML error by file and line before Hydra (``harness/__main__.py``), and
    ``python -m analysis.scorecard`` without ``model.target`` is refused by its ``run`` under
    Hydra (``analysis/scorecard.py``'s ``cli``); each exits 2 with one line, writing nothing."""
    conf = tmp_path / "extra" / "ablation"
    conf.mkdir(parents=True)
    (conf / "broken.yaml").write_text("# @package _global_\nablation:\n  name: broken\n  grid:\n    seed: [0, 1\n")
    proc = _run(["harness", "+ablation=broken", f"hydra.searchpath=[file://{conf.parent}]"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "broken.yaml:5" in proc.stderr, proc.stderr[-2000:]
    proc = _run(["analysis.scorecard", "scale=tiny"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1 and "model" in proc.stderr, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["extra"]
