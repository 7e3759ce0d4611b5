"""The end-of-sweep summary is the analysis's own (:mod:`analysis.summary`): the same table as
``python -m analysis`` with the same overrides, on the same runs; ``python -m analysis`` takes the
sweeps and the search path ``python -m harness`` takes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# the README's example in small: a longer run, then the same sweep at another step budget in the
# same store; 3 steps with eval_every=5 is one evaluation, so val/best_error_at_80/90 are NaN
SWEEP = ["+ablation=smoke", "model=softmax,mlp", "task.n_train=64", "seed=0", "train.eval_every=5",
         "cluster=serial"]
TABLE_HEAD = re.compile(r"^ *task +arm +metric .*$", re.MULTILINE)


def _table(stdout: str) -> str:
    """The printed summary table: its header line and the rows below it up to the next line
    that is not a row (a path, ``plot:``)."""
    head = TABLE_HEAD.search(stdout)
    assert head, stdout[-3000:]
    lines = [head.group(0)]
    for line in stdout[head.end() + 1:].splitlines():
        if line.startswith(("plot:", "records:", "/", "browse:")) or not line.strip():
            break
        lines.append(line)
    return "\n".join(lines)


def test_undefined_budget_summary_is_no_divergence():
    """A run whose only non-finite values are undefined budget summaries (``nonfinite`` tag, one
    evaluation) is used, not counted as diverged (the old table read every ``nonfinite`` as
    divergence: ``mean NaN, count 0, diverged 1``)."""
    from analysis.summary import summary_table

    rows = [dict(run_id=str(s), trial_id=str(s), status="FINISHED", task="teacher", variant="mlp",
                 seed=s, **{"task.n_train": 64, "train.lr": 0.01, "test/rel_mse": 0.2 + s,
                            "val/best_error": 0.3, "val/best_error_at_80": float("nan")},
                 diverged="false", nonfinite=True) for s in (0, 1)]
    table = summary_table(pd.DataFrame(rows)).iloc[0]
    assert table["used"] == 2 and table["diverged"] == 0
    assert table["error_n64"] == pytest.approx((0.2 * 1.2) ** 0.5)  # geometric mean over seeds
    assert table["error_n64_n"] == 2 and pd.isna(table["error_n64_lo"])  # 2 seeds: no interval
    assert table["metric"] == "test relative MSE"


def test_summary_counts_diverged_runs_and_never_averages_them_in():
    """Moved from the old ``harness.console.sweep_table`` test: a run with another learning rate
    is never pooled in silently (the lr is chosen on validation), a diverged run is counted, not
    averaged."""
    from analysis.summary import summary_table

    rows = [dict(run_id=str(i), trial_id=str(i), status="FINISHED", task="teacher", variant="mlp",
                 seed=s, **{"task.n_train": 64, "train.lr": lr, "test/rel_mse": err,
                            "val/best_error": val}, diverged=div)
            for i, (s, lr, err, val, div) in enumerate([
                (0, 0.01, 0.2, 0.2, "false"), (1, 0.01, 0.4, 0.4, "false"),
                (0, 1e6, 1e30, 1e30, "true"), (1, 1e6, 0.1, 5.0, "false")])]
    table = summary_table(pd.DataFrame(rows)).iloc[0]
    assert table["lr"] == 0.01 and table["error_n64"] == pytest.approx((0.2 * 0.4) ** 0.5)
    assert table["used"] == 2 and table["diverged"] == 0  # counted at the chosen lr


def test_the_printed_ui_command_is_the_readmes_and_a_server_gives_its_own_page():
    """The sweep's last line: for a file store the README's ``mlflow ui`` command (its job runner
    off), for a tracking server the server's own page; both open the training-runs view."""
    from analysis.summary import ui_link
    from harness.naming import VIEW_KEY
    from harness.store import Store

    page = f"#/experiments/3/runs?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
    line = ui_link(Store("sqlite:////data/mlflow.db", "/data/mlartifacts"), "3")
    env, mlflow, rest = line.split(" ", 2)
    assert env == "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false" and rest == (
        f"ui --backend-store-uri sqlite:////data/mlflow.db --port 5000, then http://127.0.0.1:5000/{page}")
    # the venv's mlflow (issue 47: a bare `mlflow` fails outside the venv), as the README's command
    assert (Path(mlflow) if Path(mlflow).is_absolute() else Path.cwd() / mlflow).is_file()
    assert Path(mlflow).parent.samefile(Path(sys.executable).parent)
    assert ui_link(Store("http://mlflow.example:5000", None), "3") == f"http://mlflow.example:5000/{page}"


@pytest.mark.integration
@pytest.mark.slow
def test_sweep_summary_is_the_analysis_and_analysis_takes_the_sweep(tmp_path, run_in_process):
    longer = run_in_process(["harness", *SWEEP, "train.max_steps=20", "summary=true"], tmp_path)
    assert longer.returncode == 0, longer.stderr[-3000:]
    short = run_in_process(["harness", *SWEEP, "train.max_steps=3", "summary=true"], tmp_path)
    assert short.returncode == 0, short.stderr[-3000:]
    assert "2 finished now, 0 failed, 0 diverged" in short.stdout
    summary = _table(short.stdout)
    rows = summary.splitlines()[1:]
    assert len(rows) == 2 and all(re.search(r"\s0$", row) for row in rows), summary  # diverged 0
    assert "test relative MSE" in summary and "max_steps" not in summary  # the 20-step runs are not in
    analysis = run_in_process(["analysis", *SWEEP, "train.max_steps=3"], tmp_path)
    assert analysis.returncode == 0, analysis.stderr[-3000:]
    assert "2 trial runs" in analysis.stdout
    assert _table(analysis.stdout) == summary
    assert "matplotlib.category" not in short.stdout + short.stderr + analysis.stderr

    # the two budgets as one sweep (with and without -m): one analysis, split by max_steps
    for multirun in ([], ["-m"]):
        both = run_in_process(["analysis", *multirun, *SWEEP, "train.max_steps=3,20"], tmp_path)
        assert both.returncode == 0, both.stderr[-3000:]
        assert "4 trial runs" in both.stdout and both.stdout.count("sample_efficiency.png") == 1
        table = _table(both.stdout)
        assert len(table.splitlines()) == 5 and "max_steps=3" in table and "max_steps=20" in table


@pytest.mark.slow
def test_analysis_finds_ablations_on_the_search_path_and_refuses_what_does_not_compose(tmp_path, run_shells):
    """``--config-dir`` is Hydra's own argument (its ``@hydra.main``): the command lines in one
    fresh interpreter. (Ray's token line and matplotlib's INFO lines of an ordinary run:
    tests/test_plugins.py's one-trial run.)"""
    from harness.tracking import Store, open_client

    open_client(Store(f"sqlite:///{tmp_path / 'mlflow.db'}", str(tmp_path / "mlartifacts")))  # an empty store
    conf = tmp_path / "myconf"
    (conf / "ablation").mkdir(parents=True)
    (conf / "ablation" / "mine.yaml").write_text(
        "# @package _global_\nablation:\n  name: mine\n  grid:\n    seed: range(2)\n")
    *found, bad = run_shells([(["analysis", *where, "+ablation=mine"], tmp_path)
                              for where in (["--config-dir", str(conf)], [f"hydra.searchpath=[file://{conf}]"])]
                             + [(["analysis", "+ablation=smoke", "task.n_train=many"], tmp_path)])
    for proc in found:
        # composed: the ablation was found, and has no runs yet
        assert proc.returncode == 2 and "no MLflow experiment 'mine'" in proc.stderr, proc.stderr[-2000:]
    assert bad.returncode == 2, bad.stderr[-2000:]
    assert "Traceback" not in bad.stderr


def _runs_rows(db) -> int:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT count(*) FROM runs").fetchone()[0]


def test_a_no_op_resume_prints_the_recorded_figures_and_draws_only_when_the_runs_changed(
        tmp_path, hydra_conf, monkeypatch, capsys):
    """The sweep that recorded the trials logs its figures, their stamp and the stamp's tag to its
    parent run; a no-op resume (``parent`` empty) whose runs digest the same prints that run's
    plot and draws nothing, writing nothing to the store; once a run changed (or with another
    set of trials) it draws into its own folder (the old summary redrew on every resume)."""
    import os
    import subprocess
    import sys

    from analysis import outputs, reuse, summary
    from analysis.load import load_runs
    from harness.config import ClusterConfig, SchedulerKind
    from harness.sweep import run_suite
    from harness.expansion import compose_trial
    from harness.tracking import Store, Tracker

    trials = [compose_trial(["train.max_steps=4", "train.eval_every=2", "task.n_val=16",
                             "task.n_test=16"], [f"seed={s}"]) for s in range(2)]
    db = tmp_path / "mlflow.db"
    store = Store(f"sqlite:///{db}", (tmp_path / "mlartifacts").as_uri())
    assert run_suite([("unit", trials)], ClusterConfig(scheduler=SchedulerKind.serial), store, [], 60.0) is False
    tracker = Tracker(store)
    experiment = tracker.client.get_experiment_by_name("unit").experiment_id
    (parent,) = tracker.client.search_runs([experiment], "tags.role = 'sweep'")
    drawn = []
    real = outputs.write_all
    monkeypatch.setattr(outputs, "write_all", lambda *a, **k: drawn.append(a[1]) or real(*a, **k))

    summary.summarise("unit", trials, store, parent.info.run_id, tmp_path / "sweep")
    recorded = f"{parent.info.artifact_uri}/sample_efficiency.png"
    # the file the README names (outputs/… of the sweep's folder), and where the store keeps it
    shown = f"plot: {tmp_path / 'sweep' / 'sample_efficiency.png'} (logged to the parent run: {recorded})\n"
    assert drawn == [tmp_path / "sweep"] and shown in capsys.readouterr().out
    logged = {f.path for f in tracker.client.list_artifacts(parent.info.run_id)}
    assert {reuse.STAMP, "sample_efficiency.png"} <= logged
    assert tracker.client.get_run(parent.info.run_id).data.tags[summary.STAMP_TAG] == \
        (tmp_path / "sweep" / reuse.STAMP).read_text().splitlines()[0]

    # the same runs load as the same frame in another process (MLflow's column order follows the
    # hash seed): the digest a later invocation computes is this one
    other = subprocess.run([sys.executable, "-c", "import sys; from analysis.load import load_runs; "
                            "print(list(load_runs('unit', sys.argv[1]).columns))", store.uri],
                           capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "1"})
    assert other.stdout.strip() == str(list(load_runs("unit", store.uri).columns)), other.stderr[-2000:]

    rows = _runs_rows(db)
    monkeypatch.delitem(sys.modules, "matplotlib")  # what a no-op that reuses its figures imports
    summary.summarise("unit", trials, store, "", tmp_path / "resume")
    out = capsys.readouterr().out
    assert drawn == [tmp_path / "sweep"] and "matplotlib" not in sys.modules  # nothing drawn
    assert f"plot: {recorded}\n" in out and "nothing new recorded" in out and TABLE_HEAD.search(out)
    assert (tmp_path / "resume" / "sample_efficiency.csv").exists()
    assert not (tmp_path / "resume" / "sample_efficiency.png").exists()
    assert _runs_rows(db) == rows

    summary.summarise("unit", trials[:1], store, "", tmp_path / "one")  # other trials
    assert drawn[-1] == tmp_path / "one"
    assert f"plot: {tmp_path / 'one' / 'sample_efficiency.png'}\n" in capsys.readouterr().out

    child = next(r for r in tracker.client.search_runs([experiment], "tags.trial_id != ''"))
    tracker.client.log_metric(child.info.run_id, "test/rel_mse", 123.0, step=10**9)  # a run changed
    summary.summarise("unit", trials, store, "", tmp_path / "changed")
    assert drawn[-1] == tmp_path / "changed" and len(drawn) == 3
    out = capsys.readouterr().out
    assert f"plot: {tmp_path / 'changed' / 'sample_efficiency.png'}\n" in out
    assert (tmp_path / "changed" / "sample_efficiency.png").exists() and _runs_rows(db) == rows

    # the runs are read with SQL on a SQLite store: exactly MLflow's search, also once a run is
    # deleted and a metric is NaN (the parent run, without trial_id, is left out by both)
    import mlflow

    from analysis.load import TRIAL_RUNS, search_sqlite

    tracker.client.log_metric(child.info.run_id, "val/loss", float("nan"), step=10**9)
    tracker.client.delete_run(next(r for r in tracker.client.search_runs([experiment], "tags.trial_id != ''")
                                   if r.info.run_id != child.info.run_id).info.run_id)
    mlflow.set_tracking_uri(store.uri)
    theirs = mlflow.search_runs([experiment], TRIAL_RUNS, output_format="pandas")
    ours = search_sqlite(db, experiment)
    assert len(ours) == 1 and np.isnan(ours["metrics.val/loss"].iloc[0])
    pd.testing.assert_frame_equal(ours, theirs[list(ours.columns)])
    assert sorted(ours.columns) == sorted(theirs.columns)
