"""Names are names (issue 27, failure 6): an ablation's name is its MLflow experiment's name,
stored as given, and every folder made from it is one safe path component."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.paths import folder_name

FAST = ["train.max_steps=40", "train.eval_every=20", "task.n_val=64", "task.n_test=128"]
ONE = ["+ablation=smoke", "model=softmax", "task.n_train=64", "seed=0", "cluster=serial", *FAST]


@pytest.mark.parametrize("name", ["smoke", "sigma_vs_softmax", "single", "run-2"])
def test_a_plain_name_is_its_own_folder(name):
    assert folder_name(name) == name


@pytest.mark.parametrize("name", ["a/b", "../../escaped", "..", ".", "/abs", "a b", "Smoke",
                                  "x" * 300, "é", "a\\b", "-rf", "smoke-0123abcd"])
def test_any_other_name_is_one_safe_component(name):
    folder = folder_name(name)
    assert "/" not in folder and "\\" not in folder and folder not in (".", "..", "")
    assert folder != name and not folder.startswith(("-", "."))
    assert len(folder) <= 64 and folder.isascii()


def test_names_with_one_slug_get_different_folders():
    names = ["a/b", "a_b", "a b", "a.b", "a__b", "A_b", folder_name("a/b")]  # the last looks mapped
    folders = [folder_name(n) for n in names]
    assert len(set(folders)) == len(names), folders
    assert len({f.lower() for f in folders}) == len(names)  # also where folders ignore case


def _written(root: Path) -> set[str]:
    return {str(p.relative_to(root)).split("/")[0] for p in root.iterdir()}


@pytest.mark.integration
@pytest.mark.parametrize("name", ["../../escaped", "a/b"])
def test_an_unsafe_ablation_name_writes_only_below_the_working_folder(tmp_path, run_in_process, name):
    from mlflow.tracking import MlflowClient

    work = tmp_path / "top" / "work"
    work.mkdir(parents=True)
    proc = run_in_process(["harness", *ONE, f"ablation.name={name}", "summary=true"], work)  # its outputs/ too
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _written(tmp_path) == {"top"} and _written(tmp_path / "top") == {"work"}
    assert _written(work) == {"outputs", "mlflow.db", "mlartifacts"}
    runs = list((work / "outputs").iterdir())
    assert [p.name for p in runs] == [folder_name(name)]  # one component, no nesting
    assert all(len(list(p.iterdir())) == 1 for p in runs)
    experiment = MlflowClient(f"sqlite:///{work / 'mlflow.db'}").get_experiment_by_name(name)
    assert experiment is not None  # the experiment keeps the name as given
    assert experiment.artifact_location == (work / "mlartifacts" / folder_name(name)).as_uri()
    assert [p.name for p in (work / "mlartifacts").iterdir()] == [folder_name(name)]


def test_hydra_run_dir_uses_the_folder_name(hydra_conf):
    from hydra import compose

    cfg = compose(config_name="config", overrides=["+ablation=smoke", "ablation.name=a/b"],
                  return_hydra_config=True)
    run_dir = cfg.hydra.run.dir
    assert run_dir.split("/")[:2] == ["outputs", folder_name("a/b")]
