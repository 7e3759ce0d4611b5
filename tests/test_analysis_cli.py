"""``python -m analysis`` reads exactly the trials its ablation and overrides compose to
(paper.md §13: no silent pooling), in subprocesses from a folder outside the repository."""

from __future__ import annotations

import pytest

ONE = ["model=softmax", "task.n_train=64", "train.max_steps=20", "train.eval_every=5", "cluster=serial"]


@pytest.mark.integration
@pytest.mark.slow
def test_analysis_never_mixes_in_runs_made_with_other_overrides(tmp_path, run_in_process):
    for seed in (0, 1):
        proc = run_in_process(["harness", "+ablation=smoke", *ONE, f"seed={seed}"], tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    only_seed0 = run_in_process(["analysis", "+ablation=smoke", *ONE, "seed=0"], tmp_path)
    assert only_seed0.returncode == 0, only_seed0.stderr[-3000:]
    assert "1 trial runs" in only_seed0.stdout  # the seed-1 run is in the experiment, not in this ablation
    both = run_in_process(["analysis", "+ablation=smoke", *ONE], tmp_path)
    assert both.returncode == 0 and "2 trial runs" in both.stdout
    # an override that composes to trials nobody ran is said, not silently ignored
    other = run_in_process(["analysis", "+ablation=smoke", "train.max_steps=1000"], tmp_path)
    assert other.returncode == 2
    assert "none of the 18 trials of 'smoke'" in other.stderr
    suite = run_in_process(["analysis", "+ablation=paper"], tmp_path)
    assert suite.returncode == 2 and "is a suite" in suite.stderr
