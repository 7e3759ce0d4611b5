"""analysis/zoo.py: a tiny zoo of two arms in-process (scale=tiny, cluster=serial, one task),
its leaderboard regenerated offline from the bundle identically and quietly, writing nothing
outside the output folder; a second run resumes with nothing to run; an arm whose declared
symmetries differ from the measured ones is refused before any trial, with no store."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# 18 trials of 10 steps: 7 references + 2 mixers, 2 seeds; a confirmation block of 2 seeds (conf/zoo.yaml registers 10)
BASE = ["scale=tiny", "cluster=serial", "task=nearest", "zoo.confirm_seeds='range(6000,6002)'"]
# two arms, one with kwargs (as a bidirectional form is given: its variant has them in brackets,
# its rows the arm's name)
ARMS = ("zoo.arms=[{name:gla_k4,target:'my_mixers.gated:GatedLinearAttention',kwargs:{k:4},paper:'Yang et al. 2023'},"
        "{name:linear_attention,target:'my_mixers.linear:LinearAttention'}]")


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*.md"))}


@pytest.mark.integration
def test_tiny_zoo_regenerates_and_resumes(tmp_path, invoke, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    code, out, err = invoke("analysis.zoo", [*BASE, ARMS, "zoo.out=out"], run)
    assert code == 0, err[-3000:]
    # the scorecard's 5 reference arms and the two registered references it lacks (softmax_causal, softmax_pos)
    assert "zoo: expected references 14 of 14 trials" in out and "the 2 mixers 4 of 4 trials" in out
    board = (run / "out" / "zoo.md").read_text()
    lines = board.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| arm"))  # the leaderboard, not the expectations
    rows = [line for line in lines[start + 2:] if line.startswith("| ")]
    # two mixers; the three registered references (conf/zoo.yaml), then W_V, best σ and the MLP
    assert len(rows) == 2 + 6
    assert [r.split(" | ")[0] for r in rows[2:5]] == [
        "| softmax (M4a) with a causal mask", "| softmax (M4a)", "| softmax (M4a) with learned positions"]
    assert "| orthogonal with knowledge, permutation | `softmax`, `softmax_pos` |" in rows[1]  # measured at init
    # GLA's causality, declared and measured: its verdicts are against the causal mask alone
    assert "| orthogonal with knowledge, causal | `softmax_causal` |" in rows[0]
    assert "vs `softmax" not in rows[0] and "vs `softmax`: " in rows[1] and "vs `softmax_pos`: " in rows[1]
    assert "| orthogonal with knowledge, causal | `softmax_causal` |" in rows[2]  # measured, as it serves
    gla, linear = ((run / "out" / "zoo" / f"{a}.md").read_text() for a in ("gla_k4", "linear_attention"))
    assert "Its leaderboard rows (`auc over n_train`) are against `softmax_causal` (softmax (M4a) with a causal " \
           "mask): `gla_k4` is measured causal." in gla
    assert "are against `softmax` (softmax (M4a)) and `softmax_pos` (softmax (M4a) with learned positions)" in linear
    _budget_round_ran(run / "out", linear, board)
    assert {p.name for p in (run / "out" / "zoo").iterdir()} == {
        "runs.csv.gz", "symmetry.csv", "plan.json", "gla_k4.md", "linear_attention.md"}
    # two blocks (conf/zoo.yaml), each: the mixer's W_Q, W_K, W_V, W_α (4 × 16) and W_O (16 × 4) = 320, and
    # the MLP's 16 × 32 + 32 + 32 × 16 + 16 = 1072
    assert rows[0].startswith("| [`gla_k4`](zoo/gla_k4.md) | Yang et al. 2023 | 2784 |")

    offline = tmp_path / "offline"  # another folder: no store, no outputs/, nothing but zoo.out
    offline.mkdir()
    code, out2, err2 = invoke("analysis.zoo", [f"zoo.runs={run / 'out' / 'zoo' / 'runs.csv.gz'}", "zoo.out=again"], offline)
    assert code == 0 and err2 == "", err2[-2000:]
    assert out2.strip() == f"zoo: {offline / 'again' / 'zoo.md'} (2 mixer pages)"
    assert _files(offline / "again") == _files(run / "out")  # identical Markdown, every page
    assert sorted(p.name for p in offline.iterdir()) == ["again"]
    # zoo.runs naming a file reads that file, not the runs.csv.gz of its folder (there is none)
    import shutil

    shutil.copytree(run / "out" / "zoo", offline / "b")
    (offline / "b" / "runs.csv.gz").rename(offline / "b" / "other.csv.gz")
    code, out4, err4 = invoke("analysis.zoo", ["zoo.runs=b/other.csv.gz", "zoo.out=named"], offline)
    assert code == 0 and err4 == "", err4[-2000:]
    assert _files(offline / "named") == _files(run / "out")

    # the resume, which also runs issue 63's confirmation block (_confirmation_block_ran): every
    # trial of the grid and its rounds is found finished, only the block's run
    out3 = _confirmation_block_ran(run, invoke, monkeypatch)
    assert "18 trials: 18 already finished (skipped), 0 finished now" in out3
    assert "references in the store (14 trials); the 2 mixers 0 of 4 trials" in out3
    # the ×4 reruns too (how many rows are budget-limited at 10 steps depends on the depth: conf/zoo.yaml)
    resumed = re.findall(r"(\d+) trials: (\d+) already finished \(skipped\), 0 finished now", out3)
    assert len(resumed) >= 2 and all(a == b for a, b in resumed), resumed
    # what the resume rendered is what its bundle says, block included (before the resume ran the
    # block, a no-op resume's pages were compared with the first render's)
    code, _, err5 = invoke("analysis.zoo", [f"zoo.runs={run / 'confirmed' / 'zoo' / 'runs.csv.gz'}",
                                            "zoo.out=again_confirmed"], offline)
    assert code == 0 and err5 == "", err5[-2000:]
    assert _files(offline / "again_confirmed") == _files(run / "confirmed")


def _confirmation_block_ran(run: Path, invoke, monkeypatch) -> str:
    """Issue 63's confirmation block, resuming on the same store: at 10 steps no row is open on the
    seeds alone (each is budget-limited), so the rows still budget-limited at ×4 are counted as open
    on the seeds here. The block reruns each such row's arms and its positive control's on the
    registered seeds, at ×4 steps (the budget the row was decided at), at the lrs the exploratory
    seeds chose (the ×4 reruns' own), on the grid's test set, tagged phase confirmation; the page
    decides those rows on the block and says so in the cell. Returns what the resume printed."""
    from analysis import scorecard
    from analysis.bundle import read_bundle
    from analysis.decision import Open

    monkeypatch.setattr(scorecard, "CONFIRMABLE", (*scorecard.CONFIRMABLE, Open.BUDGET_X4))
    code, out, err = invoke("analysis.zoo", [*BASE, ARMS, "zoo.out=confirmed"], run)
    assert code == 0, err[-2000:]
    out += err
    said = re.search(r"scorecard: (\d+) trials of the confirmation block \(seeds 6000–6001; (\d+) rows", out)
    assert said and int(said[1]) > 0, out[-2000:]
    runs = read_bundle(run / "confirmed" / "zoo" / "runs.csv.gz")
    block, longer = runs[runs["phase"] == "confirmation"], runs[runs["phase"] == "budget"]
    assert len(block) == int(said[1]) and sorted(set(block["seed"].astype(int))) == [6000, 6001]
    assert set(block["train.max_steps"].astype(float)) == {40.0}
    assert "task.eval_seed" not in block or block["task.eval_seed"].isna().all()  # the grid's one set (0, left out)
    frozen = longer.groupby(["arm", "task.n_train"])["train.lr"].first().astype(float)
    for (arm, n), lr in block.groupby(["arm", "task.n_train"])["train.lr"].first().astype(float).items():
        assert lr == frozen[(arm, n)], (arm, n)
    assert {"mlp", "softmax"} <= set(block["arm"])  # the positive control's arms
    page = (run / "confirmed" / "zoo" / "linear_attention.md").read_text()
    assert "confirmation block at ×4 steps" in page and "seeds 6000–6001" in page
    return out


def _budget_round_ran(out: Path, linear: str, board: str) -> None:
    """At 10 steps the budget binds (too few evaluations to judge): linear attention's rows on
    `nearest` are rerun at ×4 steps with their reference arms (tagged phase budget, same seeds and
    size), decided on those and, still limited there, read as the render module words it; the page
    says which inconclusive rows more runs of this design cannot decide."""
    from analysis.bundle import read_bundle
    from analysis.decision import Open
    from analysis.render_tables import OPEN_WORDS, budget_limited

    runs = read_bundle(out / "zoo" / "runs.csv.gz")
    longer = runs[runs["train.max_steps"].astype(float) == 40]
    assert set(longer["phase"]) == {"budget"}
    assert {"linear_attention", "softmax", "relu_attention", "mlp"} <= set(longer["arm"])  # arm, references, control
    for arm, seeds in longer.groupby("arm")["seed"]:
        assert sorted(seeds.astype(int)) == [0, 1] and set(longer["task.n_train"].astype(float)) == {64}, arm
    assert f"| **inconclusive** | {budget_limited(4)}: " in linear
    assert "More runs of this design cannot decide these" in linear and OPEN_WORDS[Open.BUDGET_X4] in linear
    assert "## Inconclusive rows" in board and OPEN_WORDS[Open.RUNS] in board


BAD = '''
    import torch
    from torch import nn


    class Undeclared(nn.Module):
        """Equivariant under permutations (a per-token map) but declares nothing."""

        symmetries = frozenset()

        def __init__(self, d, n_max, generator):
            super().__init__()
            self.w = nn.Parameter(torch.randn(d, d, generator=generator))

        def forward(self, x):
            return torch.tanh(x @ self.w)


    class Overclaimed(Undeclared):
        """Declares the orthogonal symmetry, which a tanh of a fixed map does not have (refused by the
        route's own check, harness.external_check.check)."""

        symmetries = frozenset({"permutation", "orthogonal"})
'''


@pytest.mark.integration
@pytest.mark.parametrize("cls, said", [("Undeclared", "found, not declared: ['permutation']"),
                                       ("Overclaimed", "declares ['orthogonal']")])
def test_refused_arm_exits_2_before_any_trial(tmp_path, invoke, cls, said):
    mixers = tmp_path / "mixers"
    mixers.mkdir()
    module = f"zoo_bad_{cls.lower()}"  # one module per case: the process imports each once
    (mixers / f"{module}.py").write_text(textwrap.dedent(BAD))
    arms = f"zoo.arms=[{{name:bad,target:'{module}:{cls}'}}]"
    code, out, err = invoke("analysis.zoo", [*BASE, arms, f"zoo.examples={mixers}",
                                             "zoo.out=out"], tmp_path)
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "zoo arm 'bad'" in lines[0] and said in lines[0], err
    assert "trials" not in out  # refused before the expected-time line and the sweep
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mixers"]  # no store, no output


def test_a_pipe_in_a_leaderboard_cell_is_escaped_and_keeps_the_rows_columns():
    """RetNet's bidirectional decay γ^|n−m| in the paper cell split the cell and shifted every
    later column of its row one to the right."""
    import re

    from analysis.zoo_page import _row

    row = _row(["`retnet_bidir`", "Sun et al. 2023, decay γ^|n−m| (bidirectional)", "512"])
    assert row == "| `retnet_bidir` | Sun et al. 2023, decay γ^\\|n−m\\| (bidirectional) | 512 |"
    assert len(re.split(r"(?<!\\)\|", row.strip("|"))) == 3


@pytest.mark.parametrize("out", ["afile", "afile/below"])
def test_a_zoo_out_that_is_a_file_is_refused_before_any_trial(tmp_path, invoke, out):
    """``zoo.out`` naming a file (or a folder under one) ran the whole sweep, then ended in
    ``NotADirectoryError``; now one line and exit 2 before the store is opened or an arm built."""
    (tmp_path / "afile").write_text("")
    code, out_, err = invoke("analysis.zoo", [*BASE, ARMS, f"zoo.out={out}"], tmp_path)
    assert code == 2 and err.strip().splitlines() == [
        f"error: zoo.out='{out}' cannot be written: {tmp_path / 'afile'} is a file where a folder goes; "
        "name a folder (the leaderboard is zoo.md inside it)"], err[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_two_names_for_one_mixer_are_refused_before_any_trial():
    """A name is not part of a trial's id (issue 63 item 5): two arms of one class and kwargs
    would be one set of trials shown as two rows."""
    from omegaconf import OmegaConf

    from analysis.zoo import ZooInputError, arms_of

    arm = {"target": "my_mixers.gated:GatedLinearAttention", "kwargs": {"k": 4}}
    twice = OmegaConf.create({"zoo": {"arms": [{"name": "gla", **arm}, {"name": "gla_again", **arm}]}})
    with pytest.raises(ZooInputError, match=r"zoo.arms\[1\]: 'gla_again' is 'gla' again"):
        arms_of(twice)
    other = OmegaConf.create({"zoo": {"arms": [{"name": "gla", **arm}, {"name": "gla_k8", **arm, "kwargs": {"k": 8}}]}})
    assert [a["name"] for a in arms_of(other)] == ["gla", "gla_k8"]
