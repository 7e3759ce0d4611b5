"""analysis/scorecard.py: Holm's adjustment, and the scorecard page for both examples at
scale=tiny from a folder outside the clone, the second reusing the reference arms by trial id."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parent.parent
VERDICTS = {"better", "worse", "equivalent within δ", "inconclusive"}


def _rows(page: str) -> list[list[str]]:
    body = page.split("## Against the reference arms", 1)[1].split("## Positive control", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in body.splitlines()
            if line.startswith("| ") and not line.startswith("| task")]


@pytest.mark.slow
@pytest.mark.integration
def test_scorecards_of_both_examples(tmp_path, run_in_process, monkeypatch):
    import sys

    from tasks import user_code

    folder = tmp_path / "mine"
    shutil.copytree(ROOT / "examples", folder)
    # ``python -m`` from that folder has it on sys.path; in-process the same, restored after, and
    # the user modules it loads are forgotten after (the scorecard on Ray: tests/test_external.py)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(user_code, "_LOADED", {})
    try:
        _both_examples(folder, run_in_process)
    finally:
        for name in [m for m in sys.modules if m == "my_mixers" or m.startswith("my_mixers.")]:
            del sys.modules[name]


def _both_examples(folder: Path, run_cli) -> None:
    base = ["analysis.scorecard", "model=external", "scale=tiny", "cluster=serial"]
    first = run_cli([*base, "model.target=my_mixers.linear:LinearAttention"], folder)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "48 trials: 0 already finished" in first.stdout + first.stderr
    page = (folder / "outputs" / "scorecard-LinearAttention-tiny" / "scorecard.md").read_text()
    assert "| permutation | 1e-16 | holds (declared) |" in page or re.search(r"\| permutation \| \S+ \| holds \(declared\) \|", page)
    rows = _rows(page)
    assert len(rows) == 16 and {r[8].strip("*") for r in rows} <= VERDICTS
    assert {r[0] for r in rows} == {"nearest", "teacher_general", "repeated", "teacher_length"}
    assert (folder / "outputs" / "scorecard-LinearAttention-tiny" / "length_generalisation.png").exists()

    second = run_cli([*base, "model.target=my_mixers.positional:PositionalAttention"], folder)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "48 trials: 40 already finished (skipped), 8 finished now" in second.stdout + second.stderr  # references reused
    page = (folder / "outputs" / "scorecard-PositionalAttention-tiny" / "scorecard.md").read_text()
    assert re.search(r"\| permutation \| \S+ \| does not hold \|", page)  # not equivariant, measured
    trained = re.search(r"\| \*\*`PositionalAttention`\*\* \(the mixer\) \| (\S+) \| (\S+) \| (\S+) \|", page)
    assert float(trained.group(3)) > 1e-3 and float(trained.group(1)) < 1e-4
    assert len(_rows(page)) == 16


def test_a_task_sentence_names_each_reference_once_and_says_why_the_control_does_not_hold():
    """The zoo adds to each task a row against softmax by area over n_train: the sentence names
    softmax once with both readings, and a positive control that is inconclusive (not
    contradicted) reads so, both barring any equivalence."""
    import pandas as pd

    from analysis.scorecard import summary_sentences

    names = ["selection vs softmax (M4a)", "selection vs W_V (M5)", "selection vs softmax (M4a), auc over n_train"]
    table = pd.DataFrame({"task": "nearest", "name": names, "n_train": 1024, "reason": "", "not_learned": False,
                          "verdict": ["inconclusive", "worse", "inconclusive"]})
    control = pd.DataFrame({"task": ["nearest"], "a": ["softmax"], "b": ["mlp"], "verdict": ["inconclusive"]})
    [sentence] = summary_sentences(table, control, "gla")
    assert sentence == ("* **selection** (`nearest`, n_train = 1024): `gla` is worse than W_V (M5); inconclusive "
                        "against softmax (M4a) (at n_train = 1024 and by auc over n_train); the positive control "
                        "(softmax beats mlp) is inconclusive (see Positive control): read no equivalence here.")
    table["verdict"] = ["worse", "worse", "better"]
    control["verdict"] = "contradicted"
    [sentence] = summary_sentences(table, control, "gla")
    assert sentence.startswith("* **selection** (`nearest`, n_train = 1024): `gla` is better than softmax (M4a) "
                               "by auc over n_train; worse than softmax (M4a) and W_V (M5)")
    assert sentence.endswith("(softmax beats mlp) is contradicted: read no equivalence here.")
