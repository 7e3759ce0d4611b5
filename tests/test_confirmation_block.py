"""The report's run path end to end with a confirmation block (paper.md §13; analysis/confirm.py,
analysis/phases.py, analysis/verdicts.py): one small ablation at the tiny scale, serial (no Ray),
through ``python -m analysis.report``."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis import phases

CONFIRM = (1000, 1001)  # scale=tiny's confirm_seeds


@pytest.mark.slow
def test_the_block_runs_on_confirm_seeds_with_fresh_eval_sets_from_the_frozen_lrs(tmp_path, run_in_process):
    proc = run_in_process(["analysis.report", "scale=tiny", "report.suite=knowledge_size", "report.confirm=true",
                    "cluster=serial"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "outputs" / "report-tiny" / "report"
    frozen = pd.read_csv(folder / "frozen.csv")
    bundle = pd.read_csv(folder / "runs.csv.gz")
    runs = bundle[bundle["role"] == "trial"]
    block = runs[runs["seed"].isin(CONFIRM)]
    # every deciding part's arms and its positive control's (k=2 vs 4), once per confirmation seed
    assert set(frozen["role"]) == {"deciding", "control"}
    # (k=4 vs 2 on teacher; k=8 vs 4 and its control k=4 vs 2 on teacher_noisy2: five task × arm pairs)
    pairs = frozen[["task", "arm"]].drop_duplicates()
    assert set(block["variant"]) == set(frozen["arm"]) and len(block) == len(pairs) * len(CONFIRM)
    assert (block["task.eval_seed"] == block["seed"]).all()  # fresh evaluation sets per seed
    explore = runs[~runs["seed"].isin(CONFIRM)]
    # the exploratory seeds are evaluated on their own sets too (seed 0's are the shared ones)
    # (seed 0's eval_seed 0 is identity-neutral: left out of its params, read back as NaN)
    eval_seed = pd.to_numeric(explore["task.eval_seed"]).fillna(0)
    assert (eval_seed == explore["seed"]).all() and set(explore["seed"]) == {0, 1}
    # the block's lr per task and arm is the frozen file's
    lr = frozen.drop_duplicates(["task", "arm"]).set_index(["task", "arm"])["lr"]
    assert (block["train.lr"].to_numpy() == lr.reindex(list(zip(block["task"], block["variant"]))).to_numpy()).all()
    # one phase per run; nothing of the block in the exploratory decision
    which = phases.phase_column(runs.reset_index(drop=True), steps=10, confirm_seeds=CONFIRM)
    assert which.value_counts().to_dict() == {"exploratory": len(explore), "confirmation": len(block)}
    table = pd.read_csv(folder / "stability.csv")
    assert len(table) == 2  # the ablation's deciding parts
    assert set(table["exploratory_seeds"]) == {"0–1 (2 of 2)"} and set(table["confirmation_seeds"]) == {"1000–1001 (2 of 2)"}
    assert set(table["decided_on"]) == {"confirmation"} and (table["confirmation_runs"] == 4).all()
    assert "frozen.csv" in proc.stdout and "confirmation block" in proc.stdout
