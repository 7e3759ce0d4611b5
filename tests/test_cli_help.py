"""The command line before anything heavy: --help, a misspelled preset or ablation (did you mean),
no ``*_schema`` entries in any list, a dry run that writes nothing, and where CUDA is checked."""

from __future__ import annotations

import pytest

from harness.cli import check_choices, help_text, HARNESS_USAGE
from harness.config import ClusterConfig, SchedulerKind


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


@pytest.mark.e2e  # the Ray scheduler's check runs on the instance it starts
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
def test_unknown_key_is_refused_with_or_without_plus(arg):
    """Hydra answered ``train.max_step=50`` after the imports with "use +train.max_step=50", and
    the hinted ``+train.max_step=50`` ran with max_steps unchanged; both are refused up front
    (before the heavy imports: :func:`test_the_shells_answer_bad_input_in_one_line_and_typos_without_heavy_imports`)."""
    from harness.cli import check_keys

    error = check_keys([arg])
    assert error is not None and "did you mean max_steps?" in error
    assert check_keys(["train.max_steps=50", "+ablation=smoke", "model.sigma=relu", "task.n_train=8",
                       "seed=1", "ablation.grid.seed=range(2)", "cluster.num_cpus=2", "~seed"]) is None
    assert "did you mean seed?" in check_keys(["sed=1"])


def test_the_shells_answer_bad_input_in_one_line_and_typos_without_heavy_imports(tmp_path, run_shells):
    """The shells' answers in one fresh interpreter, each command line through the shell's entry
    function as ``python -m NAME`` runs it: ``--help``; a misspelled choice or key (with or
    without ``+``) with "did you mean"; a sweep value, a sweep function, an ablation sweep, a
    type and a key twice in a file, for each of the five commands; a preset's YAML error named
    by file and line before Hydra; a tracking URI with a token and no password, masked. All
    exit 2 (``--help`` 0) in one line without loading torch, Ray, MLflow or pandas
    (benchmarks/refusal_cpu.py measures what that costs), and write nothing. Then ``python -m analysis.scorecard`` without ``model.target``, refused by its
    ``run`` under Hydra (``analysis/scorecard.py``): exit 2, one line, nothing written."""
    from harness.shell import COMMANDS

    SECRET = "S3cr3t-pa55-9f2e"
    work = tmp_path / "work"
    work.mkdir()
    conf = tmp_path / "extra" / "ablation"
    conf.mkdir(parents=True)
    (conf / "twice.yaml").write_text("name: twice\ngrid:\n  seed: 0\n  seed: 1\n")
    (conf / "broken.yaml").write_text("# @package _global_\nablation:\n  name: broken\n  grid:\n    seed: [0, 1\n")
    search = f"hydra.searchpath=[file://{conf.parent}]"
    typos = [(["harness", "--help"], 0, "+ablation=NAME"),
             (["harness", "model=sofmax"], 2, "did you mean softmax?"),
             (["analysis", "+ablation=smok"], 2, "did you mean smoke?"),
             (["analysis.report", "+ablation=smok"], 2, "did you mean smoke?"),
             (["harness", "train.max_step=50"], 2, "did you mean max_steps?"),
             (["harness", "+train.max_step=50"], 2, "did you mean max_steps?"),
             (["harness", "+ablation=broken", search], 2, "broken.yaml:5"),
             # a token without a password (tests/test_secrets.py): masked, before Hydra writes
             (["harness", "tracking=server", f"tracking.uri=http://{SECRET}@127.0.0.1:9"], 2,
              "MLFLOW_TRACKING_PASSWORD")]
    bad = ["model=softmax,sofmax", "seed=interval(0,1)", "+ablation=smoke,load", "train.max_steps=abc",
           "model=glob(soft*)", "+ablation=twice"]
    refusals = [([name, value, search], 2, "error: ") for name in COMMANDS for value in bad]
    cases = typos + refusals + [(["analysis.scorecard", "scale=tiny"], 2, "model")]
    runs = run_shells([(args, work) for args, _, _ in cases])
    for (args, code, expected), run in zip(cases, runs):
        assert run.returncode == code, (args, run.stdout[-1000:], run.stderr[-2000:])
        shown = run.stdout if code == 0 else run.stderr
        assert expected in shown and "_schema" not in shown and "Traceback" not in run.stderr, (args, shown[-2000:])
        if code == 2:
            assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: "), (args, run.stderr[-2000:])
        assert SECRET not in run.stdout + run.stderr
    assert len(refusals) == 30
    # neither torch, Ray, MLflow nor pandas is loaded to answer any of them (the scorecard's
    # refusal comes from its run, after the imports: the last case)
    assert [run.loaded for run in runs[:-1]] == [[]] * (len(cases) - 1)
    assert sorted(p.name for p in work.iterdir()) == []
