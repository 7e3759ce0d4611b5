"""analysis/scorecard.py's command line: sweeps as axes, bad input as one line with exit 2
(with "did you mean"), a page folder per setting, the expected CPU time from the cost table,
and the page's per-task sentences. In-process, no trial runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from analysis import scorecard
from analysis.scorecard import out_folder
from harness.cli import Runtime

ROOT = Path(__file__).resolve().parent.parent
GLA = ["model=external", "model.target=my_mixers.gated:GatedLinearAttention"]


@pytest.fixture()
def composed(tmp_path, monkeypatch):
    """Hydra initialised on conf/ with the examples importable, in an empty folder."""
    from hydra import initialize_config_dir

    from harness.config import register_configs

    register_configs()
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.chdir(tmp_path)
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        yield tmp_path


def test_page_folder_per_setting(tmp_path):
    one = out_folder(tmp_path, "GLA", "quick", ["seed=0,1,2"])
    assert one != out_folder(tmp_path, "GLA", "quick", ["seed=0,1"])
    assert one == out_folder(tmp_path, "GLA", "quick", ["seed=0,1,2", "cluster.num_cpus=2", "tracking=local"])
    assert out_folder(tmp_path, "GLA", "quick", []).name == "scorecard-GLA-quick"
    assert out_folder(tmp_path, "GLA", "tiny", []) != out_folder(tmp_path, "GLA", "quick", [])


def test_sweeps_are_axes_and_cost_is_printed(composed, capsys):
    sc, refs, mine, _, _ = scorecard._expand([*GLA, "scale=tiny"], ["task.n_train=64,256", "seed=0,1,2"])
    assert len(refs) == 5 * 4 * 2 * 3 and len(mine) == 4 * 2 * 3
    assert {t.config.task.n_train for t in mine} == {64, 256} and {t.config.seed for t in mine} == {0, 1, 2}
    scorecard.print_expected(refs, mine, set(), mine[0].variant, 2)
    line = capsys.readouterr().out
    assert "references 120 of 120 trials" in line and "the mixer 24 of 24 trials" in line
    assert scorecard.expected_cpu_s(mine, mine[0].variant) > 0


@pytest.mark.integration
@pytest.mark.parametrize("overrides, sweeps, said", [
    ([*GLA, "scale=tiny"], ["task.n_trian=64,128"], "did you mean n_train?"),
    ([*GLA, "model.kwargs.kk=4", "scale=tiny", "task=nearest", "seed=0"], [], "did you mean model.kwargs.k?"),
    (["scale=tiny"], [], "name the mixer"),
    (["model=external", "scale=tiny"], ["model.target=a:B,c:D"], "scores one mixer"),
])
def test_bad_input_exits_2_with_one_line(composed, capsys, overrides, sweeps, said):
    from hydra import compose

    cfg = compose(config_name="config", overrides=overrides)
    assert scorecard.run(cfg, Runtime(cwd=composed, output_dir=composed, overrides=tuple(overrides),
                                        sweeps=tuple(sweeps))) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and said in errors[0], errors
    assert not (composed / "outputs").exists()  # nothing written, no one-off folder


def test_sentences_say_each_task_in_words():
    table = pd.DataFrame({"task": ["nearest"] * 3, "n_train": [1024] * 3,
                          "name": ["selection vs softmax (M4a)", "selection vs W_V (M5)", "selection vs the MLP (B1)"],
                          "verdict": ["worse", "worse", "equivalent within δ"], "reason": ["", "", ""]})
    control = pd.DataFrame({"task": ["nearest"], "a": ["softmax"], "b": ["mlp"], "verdict": ["supported"]})
    (line,) = scorecard.summary_sentences(table, control, "GLA")
    assert line == ("* **selection** (`nearest`, n_train = 1024): `GLA` is equivalent within δ to the MLP (B1); "
                    "worse than softmax (M4a) and W_V (M5); the positive control (softmax beats mlp) holds.")


def test_class_name_did_you_mean():
    import sys

    from harness.models.external import load_target

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        with pytest.raises(ValueError, match=r"has no 'GatedLinearAtention'; did you mean 'GatedLinearAttention'\?"):
            load_target("my_mixers.gated:GatedLinearAtention")
    finally:
        sys.path.remove(str(ROOT / "examples"))


def test_sentence_for_a_mixer_that_did_not_learn():
    table = pd.DataFrame({"task": ["repeated"] * 2, "n_train": [1024] * 2, "verdict": ["inconclusive"] * 2,
                          "name": ["repeated tokens vs softmax (M4a)", "repeated tokens vs the MLP (B1)"],
                          "reason": ["not learned: `GLA` 0.27 vs uniform mixing 0.25 (needs ≤ 0.23)"] * 2,
                          "not_learned": [True] * 2})
    control = pd.DataFrame({"task": ["repeated"], "a": ["softmax"], "b": ["mlp"], "verdict": ["inconclusive"]})
    (line,) = scorecard.summary_sentences(table, control, "GLA")
    assert "`GLA` is not learned: no better than the task's trivial predictor" in line
    assert "positive control (softmax beats mlp) is inconclusive (see Positive control): read no equivalence" in line


def test_a_resume_extends_the_lr_grid_no_further_than_the_cap(monkeypatch):
    """Round r of the lr-edge extension reads the grid and rounds < r only: the extensions an
    earlier invocation ran, found in the store, are not read in round 1 (else each resume
    extended one ×√10 step past ``report.extend_lr``; found on a resumed zoo run)."""
    from types import SimpleNamespace

    import pandas as pd
    from omegaconf import OmegaConf

    from analysis import scorecard

    # the grid's top lr 0.3: two ×√10 rounds reach the cap 3.0 (analysis.rounds.steps_to)
    grid = [SimpleNamespace(trial_id="g", config=SimpleNamespace(train=SimpleNamespace(lr=0.3)))]
    earlier = ["x1", "x2"]  # two rounds an earlier invocation ran, in the store
    read: list[set] = []
    monkeypatch.setattr(scorecard, "_runs", lambda trials, store: pd.DataFrame({"trial_id": ["g", *earlier]}))

    def decide(df, spec):
        read.append(set(df["trial_id"]))
        return SimpleNamespace(edges=[len(read)])

    monkeypatch.setattr(scorecard.protocol, "decide_part", decide)
    monkeypatch.setattr("analysis.rounds.extension_trials",
                        lambda edges, known, cli, lr_max: [SimpleNamespace(trial_id=f"x{edges[0]}")])
    monkeypatch.setattr(scorecard, "_sweep", lambda sc, new, cli, store: 0)
    sc = OmegaConf.create({"scale": {"name": "default"}, "report": {"extend_lr": 2}, "train": {"max_steps": 10}})
    added, status = scorecard.extend_lr(sc, [{"a": "softmax"}], [(grid, [])], "m", store=None)
    assert read == [{"g"}, {"g", "x1"}]  # round 2 reads round 1's extension, never round 3's
    assert [t.trial_id for t in added] == ["x1", "x2"] and status == 0
    # from 0.03 the rounds go on to 3.0 (0.0949, 0.3, 0.949, 3): four, past report.extend_lr
    read.clear()
    earlier[:] = ["x1", "x2", "x3", "x4", "x5"]
    low = [SimpleNamespace(trial_id="g", config=SimpleNamespace(train=SimpleNamespace(lr=0.03)))]
    added, _ = scorecard.extend_lr(sc, [{"a": "softmax"}], [(low, [])], "m", store=None)
    assert [t.trial_id for t in added] == ["x1", "x2", "x3", "x4"]
