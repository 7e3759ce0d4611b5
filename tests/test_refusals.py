"""Bad input known before any trial (issue 47, item 4): one line, exit status 2, no store, no
MLflow run. In-process: each check is a function the entry points call before the suite."""

from __future__ import annotations

import gzip

import pytest

from harness.cli import HARNESS_USAGE, ablation_question, check_keys, precheck


def _refused(capsys, call) -> str:
    """``call()`` exits 2 with one line on stderr; returns that line."""
    with pytest.raises(SystemExit) as exit_:
        call()
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("arg, named, hint", [
    ("task.n_trian=64", "n_trian", "did you mean n_train?"),
    ("+task.n_trian=64", "n_trian", "did you mean n_train?"),
    ("model.sigm=relu", "sigm", "did you mean sigma?"),
    ("+model.sigm=relu", "sigm", "did you mean sigma?"),
])
def test_a_mistyped_key_of_a_task_or_model_preset_is_refused_with_or_without_plus(capsys, arg, named, hint):
    """Before: ``task.n_trian=64`` got Hydra's six lines advising ``+task.n_trian=64``, which then
    exited 0 with the default n_train and a dead key stored; the same for ``model.sigm``."""
    err = _refused(capsys, lambda: precheck(HARNESS_USAGE, ["+ablation=smoke", arg]))
    assert f"'{named}'" in err and hint in err and "allowed:" in err


def test_keys_of_the_chosen_presets_pass(capsys):
    for args in (["task.n_train=64"], ["+ablation=tasks", "task.V=8"], ["task=argmax", "task.n_train=3"],
                 ["model=external", "model.kwargs.k=3"], ["model.sigma=relu"]):
        assert check_keys(args) is None, args


@pytest.mark.parametrize("name, problem", [
    ("ab\udcffc", "is not UTF-8 text (byte 0xff"),
    ("x" * 501, "is 501 characters long; allowed: 1 to 500"),
])
def test_an_ablation_name_that_cannot_be_stored_is_refused_before_hydra(capsys, name, problem):
    """Before: a non-UTF-8 byte gave a 109-line traceback from folder_name while Hydra resolved
    hydra.run.dir; a name over 500 characters MLflow's length error after a store and an
    output folder were made."""
    err = _refused(capsys, lambda: precheck(HARNESS_USAGE, ["+ablation=smoke", f"ablation.name={name}"]))
    assert err.startswith("error: ablation.name=") and problem in err


def test_a_long_ablation_name_has_no_question_file_and_no_error():
    """251–500 characters: ``OSError: File name too long`` from ablation_question before."""
    assert ablation_question("q" * 300) == ""


@pytest.fixture()
def no_suite(monkeypatch, tmp_path):
    """The report's suite must not start: it fails the test if it does."""
    import analysis.reporting as reporting

    def started(*args, **kwargs):
        raise AssertionError("the suite started")

    monkeypatch.setattr(reporting, "run_suite", started)
    monkeypatch.chdir(tmp_path)
    return reporting


def _refused_command(invoke, args, cwd) -> str:
    """``python -m analysis.report *args`` (in-process) exits 2 with one line; returns it."""
    code, _, err = invoke("analysis.report", args, cwd)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.mark.integration
def test_a_report_out_that_cannot_be_written_exits_2_before_the_suite(no_suite, tmp_path, invoke):
    """Before: ``report.out`` on a read-only file system ran the whole suite (232 trials at
    scale=tiny) and died in write_bundle with a traceback."""
    err = _refused_command(invoke, ["scale=tiny", "report.out=/proc/wt47-report"], tmp_path)
    assert "report.out='/proc/wt47-report' cannot be written" in err
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("content", ["folder", "text", "gzip-no-bundle"])
@pytest.mark.integration
def test_a_report_runs_that_is_no_bundle_exits_2(no_suite, tmp_path, invoke, content):
    """Before: a 27–44-line traceback and exit status 1."""
    path = tmp_path / "runs.csv.gz"
    if content == "folder":
        path.mkdir()
    elif content == "text":
        path.write_text("not a bundle\n")
    else:
        path.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    err = _refused_command(invoke, ["scale=tiny", f"report.runs={path}", f"report.out={tmp_path / 'out'}"],
                           tmp_path)
    assert f"report.runs='{path}' cannot be read as a results bundle" in err
    assert not (tmp_path / "mlflow.db").exists()


NAN_TASK = '''
import torch
from tasks.base import Batch, RegressionTask


class NanTargets(RegressionTask):
    """Targets with a NaN in one example in eight (a user's bug in sample())."""

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__(cfg, dtype)
        self.d = 4
        self.set_lengths([3])

    def sample(self, g, size, n):
        x = torch.randn(size, n, self.d, generator=g, dtype=self.dtype)
        y = x.clone()
        y[::8, 0, 0] = float("nan")
        return Batch(x=x, y=y)
'''


def test_a_task_whose_data_is_not_finite_is_refused_by_the_preflight(hydra_conf, tmp_path, monkeypatch):
    """Before: trained on, reported as "diverged", exit status 0, no word about the data."""
    from harness.expansion import SweepError, compose_trial
    from harness.validate import preflight

    (tmp_path / "wt47_nan_task.py").write_text(NAN_TASK)
    monkeypatch.syspath_prepend(str(tmp_path))
    trial = compose_trial(["task=external", "task.target=wt47_nan_task:NanTargets", "task.n_train=16",
                           "task.n_val=8", "task.n_test=8"], [])
    with pytest.raises(SweepError) as err:
        preflight([trial], "cpu")
    message = str(err.value)
    assert "not finite" in message and "the data, not the training, is at fault" in message
    assert len(message.splitlines()) == 1
    good = compose_trial(["task.n_train=16", "task.n_val=8", "task.n_test=8"], [])
    preflight([good], "cpu")  # a task of the paper passes


LATE_NAN_TASK = '''
import torch
from tasks.base import Batch, RegressionTask


class LateNan(RegressionTask):
    """Finite in the first 256 examples of a set (all the preflight draws), a NaN target in
    example 300 of a larger one (a user's bug in sample() that the sample does not reach)."""

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__(cfg, dtype)
        self.d = 4
        self.set_lengths([3])

    def sample(self, g, size, n):
        x = torch.randn(size, n, self.d, generator=g, dtype=self.dtype)
        y = x.clone()
        if size > 300:
            y[300, 0, 0] = float("nan")
        return Batch(x=x, y=y)
'''


@pytest.mark.integration
@pytest.mark.parametrize("split", ["task.n_train", "task.n_test"])
def test_a_nan_beyond_the_preflights_sample_is_named_as_the_datas_fault(tmp_path, invoke, monkeypatch, split):
    """Before: trained on and reported as DIVERGED with exit 0 (a NaN in the training set), or
    as ``KeyError: metrics have neither 'rel_mse' nor 'acc'`` (in the test set). Now the trial
    fails (exit 1) naming the data, the split and the tensor."""
    (tmp_path / "late_nan_task.py").write_text(LATE_NAN_TASK)
    monkeypatch.syspath_prepend(str(tmp_path))
    sizes = {"task.n_train": 32, "task.n_val": 16, "task.n_test": 16, split: 512}
    code, out, err = invoke("harness", ["cluster=serial", "task=external", "task.target=late_nan_task:LateNan",
                                        "train.max_steps=4", "train.eval_every=2", "summary=false",
                                        *(f"{k}={v}" for k, v in sizes.items())], tmp_path)
    where = "train y" if split == "task.n_train" else "test y"
    assert code == 1, (out + err)[-3000:]
    assert f"of its {where} (shape" in err and "the data, not the training, is at fault" in err, err[-3000:]
    assert "KeyError" not in err and "diverged" not in (out + err).lower().replace("0 diverged", "")
