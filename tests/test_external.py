"""Code from outside the package (issue 30): ``model=external`` and ``task=external`` composed,
validated before any trial (exit 2), tracked, packed or run alone, symmetries measured on
re-drawn weights, and run through Ray with the module in a folder outside the clone
(examples/ copied to a temporary folder)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

from harness.models import build_model
from harness.models import external
from harness import external_check
from tasks import user_code
from harness.pack import cannot_pack
from harness.expansion import SweepError, compose_trial
from harness.validate import preflight

ROOT = Path(__file__).resolve().parent.parent
LINEAR, POSITIONAL = "my_mixers.linear:LinearAttention", "my_mixers.positional:PositionalAttention"
FALSE = "my_mixers.positional:FalselyEquivariant"

BAD = '''
import torch
from torch import nn

class WrongShape(nn.Module):
    def __init__(self, d, n_max, generator):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, 2 * d, generator=generator))
    def forward(self, x):
        return x @ self.w  # (B, n, 2d)

class NoGenerator(nn.Module):
    def __init__(self, d):
        super().__init__()

class Undeclared(nn.Module):  # token-wise: permutation equivariant, declares nothing
    def __init__(self, d, n_max, generator):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d, generator=generator))
    def forward(self, x):
        return torch.tanh(x @ self.w)

class Recurrent(nn.Module):  # nn.GRU: no vmap rule, so it runs alone
    def __init__(self, d, n_max, generator):
        super().__init__()
        self.gru = nn.GRU(d, d, batch_first=True)
    def forward(self, x):
        return self.gru(x)[0]

NotAModule = 3
'''

NO_METRIC = '''
import torch
from tasks.base import Batch, RegressionTask

class NoMetric(RegressionTask):
    def __init__(self, cfg, dtype=torch.float32):
        super().__init__(cfg, dtype)
        self.d = 4
        self.set_lengths([3])
    def sample(self, g, size, n):
        x = torch.randn(size, n, 4, generator=g)
        return Batch(x=x, y=x)
    def metric_sums(self, out, batch):
        return {"mse": ((out - batch.y).pow(2).sum(), batch.y.numel())}
'''


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """examples/ copied to a folder outside the clone, plus two modules of broken classes, on
    ``sys.path`` for this module's tests."""
    folder = tmp_path_factory.mktemp("outside") / "mixers"
    shutil.copytree(ROOT / "examples", folder)
    (folder / "bad_mixers.py").write_text(BAD)
    (folder / "bad_tasks.py").write_text(NO_METRIC)
    _forget_modules()  # another test of this process may have imported examples/'s copy
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))
    _forget_modules()


def _forget_modules() -> None:
    for name in [m for m in sys.modules if m.split(".")[0] in ("my_mixers", "my_tasks", "bad_mixers", "bad_tasks")]:
        del sys.modules[name]


def _trial(*overrides: str):
    return compose_trial(["model=external", *overrides], [])


def test_composed_tracked_and_named_by_class(hydra_conf, outside):
    trial = _trial(f"model.target={LINEAR}", "model.kwargs.k=4")
    assert trial.variant == "LinearAttention[kwargs.k=4]"
    # the display name model.variant is not identity (issue 63): one class and kwargs, one trial
    assert trial.identity["model"] == {"name": "external", "target": LINEAR, "kwargs": {"k": 4}}
    assert _trial(f"model.target={LINEAR}", "model.kwargs.k=8").trial_id != trial.trial_id
    named = _trial(f"model.target={LINEAR}", "model.kwargs.k=4", "model.variant=lin")
    assert named.variant == "lin[kwargs.k=4]" and named.trial_id == trial.trial_id
    model = build_model(trial.config.model, 16, 8, torch.Generator().manual_seed(0))
    assert model.W_Q.shape == (4, 16)  # the kwarg reached the constructor
    with pytest.raises(SweepError, match="model.targt"):  # a typo in the schema's keys
        _trial("model.targt=x:Y")


@pytest.mark.parametrize("target,extra,message", [
    ("", (), "needs model.target"),
    ("my_mixers.linear", (), "expected 'package.module:ClassName'"),
    ("no_such_module:X", (), "cannot import 'no_such_module'"),
    ("my_mixers.linear:Nope", (), "has no 'Nope'"),
    ("bad_mixers:NotAModule", (), "not an nn.Module class"),
    ("bad_mixers:NoGenerator", (), r"constructor NoGenerator\(d\) cannot take"),
    (LINEAR, ("model.kwargs.width=3",), "unexpected keyword argument 'width'"),
    ("bad_mixers:WrongShape", (), r"to the same shape, got \(3, 5, 32\)"),
    (FALSE, (), r"declares \['permutation'\] but the measured relative error on re-drawn float64"),
])
def test_bad_target_fails_the_preflight_naming_it(hydra_conf, outside, target, extra, message):
    trial = _trial(f"model.target={target}", *extra)
    with pytest.raises(SweepError, match=message) as err:
        preflight([trial], "cpu")
    assert f"model.target={target!r}" in str(err.value) or not target


def test_symmetries_measured_on_redrawn_weights(outside):
    linear = external.load_target(LINEAR)(16, 8, torch.Generator().manual_seed(0))
    positional = external.load_target(POSITIONAL)(16, 8, torch.Generator().manual_seed(0))
    errs, dtype = external_check.measure_redrawn(linear, 16, 8)
    assert dtype is torch.float64
    assert errs["symmetry/permutation_err"] < 1e-12 and errs["symmetry/rotation_knowledge_err"] < 1e-12
    assert errs["symmetry/rotation_err"] > 1e-3
    errs, _ = external_check.measure_redrawn(positional, 16, 8)
    assert errs["symmetry/permutation_err"] > 1e-3 and errs["symmetry/rotation_knowledge_err"] < 1e-12
    # at initialisation its positional table is zero: measured as built, it looks equivariant
    from harness.symmetry import measure

    x = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(3))
    assert measure(positional, x, torch.Generator().manual_seed(4))["symmetry/permutation_err"] < 1e-5
    table = external_check.symmetry_table(errs, torch.float64, frozenset({"orthogonal_knowledge"}))
    assert table["permutation"] == "does not hold" and table["orthogonal_knowledge"] == "holds (declared)"


def test_undeclared_symmetry_that_holds_is_reported_found(hydra_conf, outside, capsys):
    preflight([_trial("model.target=bad_mixers:Undeclared")], "cpu")
    line = capsys.readouterr().err
    assert "bad_mixers:Undeclared" in line and "permutation" in line
    assert "holds (found, not declared)" in line and "orthogonal_knowledge not measured" in line


def test_packed_where_vmap_runs_it_alone_otherwise(hydra_conf, outside):
    assert cannot_pack(_trial(f"model.target={LINEAR}").config) is None
    reason = cannot_pack(_trial("model.target=bad_mixers:Recurrent").config)
    assert reason.startswith("model external bad_mixers:Recurrent: torch.func.vmap cannot run it")


def test_runtime_env_ships_the_module_folder(outside):
    external.load_target(LINEAR)
    env = user_code.runtime_env()
    assert str(outside / "my_mixers") in env["py_modules"]
    assert not any("site-packages" in p for p in env["py_modules"])


def test_external_regression_task(hydra_conf, outside):
    from tasks import build_task

    trial = compose_trial(["task=external", "task.target=my_tasks:RunningMean", "task.kwargs.n=4",
                           "task.n_train=8", "task.n_val=4", "task.n_test=4"], [])
    task = build_task(trial.config.task)
    assert (task.d, task.n_max) == (16, 4)
    a, b = task.train_set(0)[0], task.train_set(0)[0]
    assert torch.equal(a.x, b.x) and not torch.equal(a.x, task.train_set(1)[0].x)
    assert torch.allclose(a.y[:, 1], (a.x[:, 0] + a.x[:, 1]) / 2)
    out = task.metrics(a.y, a)
    assert out["rel_mse"] == 0.0 and "uniform_rel_mse" in task.reference_sums(a)
    for target, message in [("bad_tasks:NoMetric", "metric_sums must report 'rel_mse' or 'acc'"),
                            ("bad_mixers:WrongShape", "not a subclass of tasks.base.TaskBase")]:
        bad = compose_trial(["task=external", f"task.target={target}"], [])
        with pytest.raises(SweepError, match=message):
            preflight([bad], "cpu")


def _examples(tmp_path: Path) -> Path:
    folder = tmp_path / "my folder"  # outside the clone (and a space in the path)
    shutil.copytree(ROOT / "examples", folder)
    return folder


SHORT = ["task.n_train=64", "train.max_steps=10", "train.eval_every=5"]


@pytest.mark.slow
def test_examples_run_on_ray_with_their_symmetries_logged(tmp_path, run_cli, trial_runs):
    """Both example mixers through a local Ray instance, the module found in the driver's
    current directory (sys.path), which is outside the clone."""
    folder = _examples(tmp_path)
    proc = run_cli(["harness", "+ablation=smoke", "model=external", f"model.target={LINEAR},{POSITIONAL}",
                    "model.kwargs.k=4", "seed=0,1", *SHORT, "cluster.num_cpus=2"], folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"model {POSITIONAL}: symmetries measured on re-drawn float64 weights" in proc.stderr
    assert "permutation 2e-01 does not hold" in proc.stderr
    runs = trial_runs(f"sqlite:///{folder / 'mlflow.db'}", "smoke")
    by_variant: dict[str, list] = {}
    for run in runs:
        assert run.info.status == "FINISHED"
        by_variant.setdefault(run.data.tags["variant"], []).append(run)
    assert sorted(by_variant) == ["LinearAttention[kwargs.k=4]", "PositionalAttention[kwargs.k=4]"]
    for variant, group in by_variant.items():
        assert len(group) == 2
        for run in group:
            assert run.data.params["model.target"] in (LINEAR, POSITIONAL)
            assert run.data.params["model.kwargs.k"] == "4"
            m = run.data.metrics
            assert m["symmetry/rotation_knowledge_err"] < 1e-4 and m["symmetry/rotation_err"] > 1e-2
            if variant.startswith("Linear"):
                assert m["symmetry/permutation_err"] < 1e-4
            else:  # trained: its positional table is no longer zero
                assert m["symmetry/permutation_err"] > 1e-3


@pytest.mark.slow
def test_external_task_module_on_pythonpath(tmp_path, run_cli, trial_runs):
    """A task and a mixer from a folder on PYTHONPATH (not the current directory): the local
    Ray instance's workers import them too."""
    folder, elsewhere = _examples(tmp_path), tmp_path / "run"
    elsewhere.mkdir()
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(folder)) if p)
    proc = run_cli(["harness", "task=external", "task.target=my_tasks:RunningMean", "task.kwargs.n=6",
                    "model=external", f"model.target={POSITIONAL}", *SHORT, "cluster.num_cpus=1"],
                   elsewhere, env={"PYTHONPATH": path})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = trial_runs(f"sqlite:///{elsewhere / 'mlflow.db'}", "single/external/PositionalAttention")
    assert run.info.status == "FINISHED" and run.data.params["task.target"] == "my_tasks:RunningMean"
    assert 0 < run.data.metrics["test/rel_mse"] and "test/uniform_rel_mse" in run.data.metrics


def test_false_declaration_exits_2_before_any_trial(tmp_path, outside, run_in_process, monkeypatch):
    """The command, in-process, with the module on ``sys.path`` as ``python -m`` from its folder
    gives it (the shell's own exit-2 line: tests/test_cli_help.py)."""
    monkeypatch.setattr(user_code, "_LOADED", {})
    folder = tmp_path / "run"
    folder.mkdir()
    proc = run_in_process(["harness", "model=external", f"model.target={FALSE}", "cluster=serial"], folder)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"model.target={FALSE!r} declares ['permutation']" in proc.stderr
    assert "Traceback" not in proc.stderr and not (folder / "mlflow.db").exists()


@pytest.fixture()
def two_node_cluster():
    """A two-node Ray cluster on localhost (one CPU per node), started by this test process,
    whose environment lacks the examples' folder; yields its address."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster.address
    cluster.shutdown()


@pytest.mark.slow
def test_module_travels_to_a_cluster(tmp_path, two_node_cluster, run_cli, trial_runs):
    """cluster=ray: the nodes' workers have neither the driver's PYTHONPATH nor its current
    directory with the module; the runtime_env (py_modules) ships it."""
    folder, elsewhere = _examples(tmp_path), tmp_path / "run"
    elsewhere.mkdir()
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(folder)) if p)
    proc = run_cli(["harness", "+ablation=smoke", "model=external", f"model.target={LINEAR}", "seed=0,1",
                    *SHORT, "cluster=ray", f"cluster.address={two_node_cluster}", "cluster.pack_size=1"],
                   elsewhere, env={"PYTHONPATH": path})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 nodes" in proc.stderr
    runs = trial_runs(f"sqlite:///{elsewhere / 'mlflow.db'}", "smoke")
    assert len(runs) == 2 and {r.info.status for r in runs} == {"FINISHED"}
