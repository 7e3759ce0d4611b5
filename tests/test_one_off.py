"""One-off runs (``python -m harness`` without ``+ablation``) go to an experiment per task and
model preset, ``single/<task>/<model>`` (issue 29, Deliver 5): the ``single`` experiment pooled
unrelated one-off runs in one runs table and one end-of-sweep plot."""

from __future__ import annotations

import pytest

from harness.paths import one_off_experiment
from harness.paths import folder_name

FAST = ["cluster=serial", "train.max_steps=20", "train.eval_every=10", "task.n_train=32",
        "task.n_val=32", "task.n_test=64", "seed=0"]


def test_the_experiment_names_its_task_and_model_presets():
    assert one_off_experiment(["teacher"], ["softmax"]) == "single/teacher/softmax"
    # a command-line sweep over presets: every preset, once, in natural order
    assert one_off_experiment(["teacher"] * 3, ["softmax", "mlp", "softmax"]) == "single/teacher/mlp,softmax"
    with pytest.raises(ValueError):
        one_off_experiment([], ["softmax"])
    assert "/" not in folder_name("single/teacher/softmax")


def test_expand_names_one_off_runs_by_preset_and_ablations_by_their_name(hydra_conf):
    from hydra import compose

    from harness.expansion import expand_suite

    def names(overrides):
        cfg = compose(config_name="config", overrides=overrides)
        return [name for name, _ in expand_suite(cfg, overrides)]

    assert names([]) == ["single/teacher/softmax"]
    assert names(["model=mlp", "task=nearest"]) == ["single/nearest/mlp"]
    assert names(["model=softmax_free", "model.k=4"]) == ["single/teacher/softmax_free"]  # the preset
    assert names(["+ablation=smoke", "seed=0"]) == ["smoke"]
    cfg = compose(config_name="config", overrides=["model=mlp", "task=nearest"], return_hydra_config=True)
    assert cfg.hydra.run.dir.split("/")[:2] == ["outputs", folder_name("single/nearest/mlp")]


@pytest.mark.integration
@pytest.mark.slow
def test_one_off_runs_of_two_models_get_two_experiments_the_analysis_finds(tmp_path, run_in_process, trial_runs):
    from mlflow.tracking import MlflowClient

    for model in ("softmax", "mlp"):
        proc = run_in_process(["harness", f"model={model}", *FAST, "summary=true"], tmp_path)  # writes outputs/
        assert proc.returncode == 0, proc.stderr[-3000:]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    assert client.get_experiment_by_name("single") is None
    folders = set()
    for model in ("softmax", "mlp"):
        name = f"single/teacher/{model}"
        (run,) = trial_runs(uri, name)  # one trial each, not pooled
        assert run.data.tags["variant"] == model
        experiment = client.get_experiment_by_name(name)
        assert experiment.artifact_location == (tmp_path / "mlartifacts" / folder_name(name)).as_uri()
        folders.add(folder_name(name))
    assert {p.name for p in (tmp_path / "outputs").iterdir()} == folders  # hydra.run.dir per experiment
    proc = run_in_process(["analysis", "model=mlp", *FAST], tmp_path)  # the same overrides find the run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 trial runs" in proc.stdout
