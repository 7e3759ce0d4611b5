"""Printed durations hold on a busy machine (issue 62, item 6): an estimate says it assumes
free cores and, where the load average is above the cores, says so with the load; once a tenth
of a sweep's trials are back, one line gives the measured rate and the time left."""

from __future__ import annotations

import os

import pytest

from harness.console import load_note, measured_line, rate


def test_the_load_is_named_only_above_the_cores():
    assert load_note(2, load=1.9) == ""
    assert load_note(2, load=16.4) == "; the load average is 16.4 on 2 cores: expect longer"


def test_the_measured_line_gives_the_rate_and_the_time_left():
    line = measured_line("scorecard", 65, 648, 240.0, 2, load=16.0)
    assert line.startswith("scorecard: measured 65 of 648 trials in 4.0 min (16.2 trials/min")
    assert "≈ 35.9 min left, replacing the estimate above; the load average is 16.0 on 2 cores" in line


def test_a_sweeps_rate_reads_per_minute_below_a_tenth_a_second():
    assert rate(270, 141.0) == "1.9 trials/s"
    assert rate(10, 3052.0) == "0.197 trials/min"  # printed "0.0 trials/s" at one decimal


def test_the_scorecards_estimate_says_free_cores_and_the_load(monkeypatch, capsys, hydra_conf):
    from analysis import scorecard
    from harness.expansion import compose_trial

    trials = [compose_trial(["+ablation=scorecard", "scale=tiny", "task=nearest", f"seed={s}"], []) for s in range(2)]
    monkeypatch.setattr(os, "getloadavg", lambda: (25.0, 20.0, 15.0))
    scorecard.print_expected(trials, [], set(), "MIXER", 2)
    line = capsys.readouterr().out
    assert "min wall if 2 cores are free" in line and f"the load average is 25.0 on {os.cpu_count()} cores" in line


@pytest.mark.integration
def test_a_sweep_prints_its_measured_rate_once_a_tenth_is_back(tmp_path, invoke, monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    args = ["cluster=serial", "train.max_steps=4", "train.eval_every=2", "task.n_val=16", "task.n_test=16",
            "task.n_train=16", "summary=false", "seed=range(10)"]
    code, out, err = invoke("harness", args, tmp_path)
    assert code == 0, err[-3000:]
    lines = [line for line in out.splitlines() if " measured " in line]
    assert len(lines) == 1 and lines[0].startswith("single/teacher/softmax: measured 1 of 10 trials in "), out[-2000:]
    assert "min left, replacing the estimate above" in lines[0] and "load average" not in lines[0]
