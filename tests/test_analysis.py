"""The analysis library on small synthetic runs tables (issue 6): known intervals, slopes,
samples-to-target, validation-only lr selection, counts of failed/diverged trials, figures and
tables written, numeric sort. No training, no MLflow (except learning_curves on a tmp store)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import lengths, plots, render_tables, stats, tables

SIZES = [64, 256, 1024]


def _runs(variants=("softmax", "mlp"), sizes=SIZES, seeds=range(5), c=None, noise=0.01,
          task="teacher") -> pd.DataFrame:
    """Runs with ``test/rel_mse = c[v] · n^−0.5 · (1 + noise·N(0,1))``, a fixed seed per row."""
    c = c or {"softmax": 1.0, "mlp": 4.0}
    rng = np.random.default_rng(0)
    rows = []
    for v in variants:
        for n in sizes:
            for s in seeds:
                err = c[v] * n**-0.5 * (1 + noise * rng.standard_normal())
                rows.append({"run_id": f"{v}-{n}-{s}", "status": "FINISHED", "variant": v,
                             "task": task, "seed": s, "task.n_train": n, "train.lr": 0.003,
                             "val/best_loss": err, "test/rel_mse": err, "test/uniform_rel_mse": 0.6,
                             "n_params": 256 if v == "softmax" else 4096, "diverged": False,
                             "symmetry/rotation_err": 1e-7 if v == "softmax" else 1.0})
    return pd.DataFrame(rows)


def test_add_error_regression_and_tokens():
    df = pd.DataFrame({"task": ["a", "b"], "test/rel_mse": [0.2, np.nan], "test/acc": [np.nan, 0.9],
                       "test/uniform_rel_mse": [0.6, np.nan], "test/majority_acc": [np.nan, 0.25]})
    out = stats.add_error(df)
    assert out["error"].tolist() == pytest.approx([0.2, 0.1])
    assert out["reference_error"].tolist() == pytest.approx([0.6, 0.75])
    assert plots.with_error is stats.add_error  # the older name stays importable
    # token tasks: the better of the majority class and uniform mixing is the reference
    df["test/uniform_acc"] = [np.nan, 0.6]
    out = stats.add_error(df)
    assert out["reference_error"].tolist() == pytest.approx([0.6, 0.4])
    assert out["reference_name"].tolist() == ["uniform mixing", "uniform mixing"]
    df["test/uniform_acc"] = [np.nan, 0.1]
    assert stats.add_error(df)["reference_name"].tolist() == ["uniform mixing", "majority class"]


def test_identical_values_give_zero_width_interval():
    df = pd.DataFrame({"status": "FINISHED", "g": "x", "error": [0.3] * 5})
    ci = stats.mean_ci(df, by=("g",))
    assert ci.loc[0, ["mean", "lo", "hi"]].tolist() == pytest.approx([0.3, 0.3, 0.3])
    assert ci.loc[0, "n_runs"] == 5


def test_mean_ci_covers_mean_and_is_deterministic():
    df = _runs(noise=0.2)
    a, b = stats.mean_ci(df, by=("variant",), value="test/rel_mse", seed=3), \
        stats.mean_ci(df, by=("variant",), value="test/rel_mse", seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert ((a["lo"] <= a["mean"]) & (a["mean"] <= a["hi"]) & (a["lo"] < a["hi"])).all()


def test_paired_difference_known_constant_shift():
    df = _runs(noise=0.3)
    shifted = df[df["variant"] == "softmax"].assign(variant="other")
    shifted["test/rel_mse"] += 0.05
    res = stats.paired_difference(pd.concat([df, shifted]), "test/rel_mse", "other", "softmax")
    row = res.iloc[0]
    assert row["n_pairs"] == 15
    assert row[["mean", "lo", "hi"]].tolist() == pytest.approx([0.05] * 3)
    assert bool(row["excludes_zero"])
    same = stats.paired_difference(df, "test/rel_mse", "softmax", "softmax")
    assert not same["excludes_zero"].iloc[0]  # a zero difference does not exclude zero


def test_paired_difference_refuses_duplicate_pairs():
    df = _runs()
    with pytest.raises(ValueError, match="select_lr"):
        stats.paired_difference(pd.concat([df, df]), "test/rel_mse", "softmax", "mlp")


def test_loglog_slope_recovers_minus_half():
    res = stats.loglog_slope(_runs(), y="test/rel_mse", by=("variant",)).set_index("variant")
    for v in ("softmax", "mlp"):
        assert res.loc[v, "slope"] == pytest.approx(-0.5, abs=0.02)
        assert res.loc[v, "slope_lo"] <= -0.5 <= res.loc[v, "slope_hi"] or \
            abs(res.loc[v, "slope"] + 0.5) < 0.01
        assert res.loc[v, "slope_hi"] - res.loc[v, "slope_lo"] < 0.05


def test_samples_to_target_on_known_curve():
    df = _runs(noise=0.0)  # softmax: n^-0.5; mlp: 4 n^-0.5
    res = stats.samples_to_target(df, 1 / 32, y="test/rel_mse", by=("variant",)).set_index("variant")
    assert res.loc["softmax", "n_to_target"] == pytest.approx(1024)  # exactly at a measured size
    assert res.loc["mlp", "n_to_target"] == np.inf  # 4/32 at n=1024: never reached
    mid = stats.samples_to_target(df, 1 / 16, y="test/rel_mse", by=("variant",)).set_index("variant")
    assert mid.loc["softmax", "n_to_target"] == pytest.approx(256)
    between = stats.crossing(np.array([64.0, 1024.0]), np.array([[1 / 8, 1 / 32]]), 1 / 16)
    assert between[0] == pytest.approx(256)  # log-log interpolation of n^-0.5
    with pytest.raises(ValueError):
        stats.samples_to_target(df, 0.0, y="test/rel_mse")


def test_select_lr_uses_validation_not_test():
    rows = []
    for lr, val, test in ((0.01, 0.1, 0.9), (0.001, 0.5, 0.01)):  # test prefers 0.001
        for s in range(3):
            rows.append({"status": "FINISHED", "task": "t", "variant": "v", "task.n_train": 64,
                         "seed": s, "train.lr": lr, "val/best_loss": val, "test/rel_mse": test})
    rows.append({**rows[0], "status": "FAILED", "val/best_loss": np.nan})
    out = stats.select_lr(pd.DataFrame(rows))
    assert set(out["train.lr"]) == {0.01} and set(out["lr_chosen"]) == {0.01}
    assert (out["status"] == "FAILED").sum() == 1  # failed trials at the chosen lr are kept


def test_counts_show_failed_killed_and_diverged():
    df = _runs(seeds=range(2))
    df.loc[0, "status"] = "FAILED"
    df.loc[1, "diverged"] = True
    df.loc[2, "status"] = "KILLED"
    c = stats.counts(df).set_index("variant")
    assert c.loc["softmax", ["total", "finished", "failed", "killed", "diverged"]].tolist() == [6, 4, 1, 1, 1]
    assert c.loc["mlp", ["failed", "diverged"]].tolist() == [0, 0]
    table = tables.sample_efficiency_table(df.assign(diverged=df["diverged"].astype(str).str.lower()))
    assert table.set_index("variant").loc["softmax", ["failed", "killed", "diverged"]].tolist() == [1, 1, 1]


def test_tables_sort_numerically_and_write(tmp_path):
    df = _runs(sizes=[1024, 64, 256, 8], c={"softmax": 1.0, "mlp": 2.0})
    table = tables.sample_efficiency_table(df)
    errs = [c for c in table.columns if c.startswith("error_n") and not c.endswith(("_lo", "_hi", "_n"))]
    assert errs == ["error_n8", "error_n64", "error_n256", "error_n1024"]
    assert table.loc[table["variant"] == "softmax", "slope"].iloc[0] == pytest.approx(-0.5, abs=0.02)
    csv, md = render_tables.write_table(table, tmp_path / "se")
    assert pd.read_csv(csv).shape == table.shape
    text = md.read_text()
    assert "error_n8" in text and "[" in text and "error_n8_lo" not in text
    sym = tables.symmetry_table(df)
    assert sym.set_index("variant").loc["softmax", "symmetry/rotation_err"] == pytest.approx(1e-7)
    assert sym.set_index("variant").loc["mlp", "n_params"] == 4096


def test_per_length_and_training_lengths():
    df = _runs(seeds=range(2), sizes=[64]).assign(**{"task.train_lengths": "[4, 8]"})
    df["test/n_16/rel_mse"], df["test/n_16/supported"] = 0.5, 1.0
    df["test/n_32/supported"] = np.where(df["variant"] == "mlp", 0.0, 1.0)
    df["test/n_32/rel_mse"] = np.where(df["variant"] == "mlp", np.nan, 0.7)
    long = lengths.per_length(df)
    refused = long[~long["supported"]]
    assert set(refused["variant"]) == {"mlp"} and set(refused["n"]) == {32}
    assert lengths.training_lengths(df) == {"teacher": [4, 8]}


def test_figures_written_and_non_empty(tmp_path):
    df = _runs(seeds=range(3))
    df.loc[0, "status"] = "FAILED"
    df["task.train_lengths"] = "[]"
    df["task.n"] = 8
    for n in (8, 16):
        df[f"test/n_{n}/rel_mse"], df[f"test/n_{n}/supported"] = 0.1 * n / 8, 1.0
    df.loc[df["variant"] == "mlp", ["test/n_16/rel_mse", "test/n_16/supported"]] = [np.nan, 0.0]
    tok = _runs(seeds=range(3), task="nearest").drop(columns=["test/rel_mse", "test/uniform_rel_mse"])
    tok["test/acc"], tok["test/majority_acc"] = 0.8, 0.1
    paths = plots.sample_efficiency(pd.concat([df, tok]), tmp_path / "se")
    paths += plots.length_generalisation(df, tmp_path / "len")
    assert [p.suffix for p in paths] == [".png", ".pdf"] * 2
    assert all(p.stat().st_size > 1000 for p in paths)
    with pytest.raises(ValueError):
        plots.length_generalisation(tok, tmp_path / "none")


def test_learning_curves_from_mlflow(tmp_path):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("curves", artifact_location=str(tmp_path / "art"))
    run = client.create_run(exp, tags={"variant": "softmax"}).info.run_id
    for step in range(0, 50, 10):
        client.log_metric(run, "train/loss", 1.0 / (step + 1), step=step)
        client.log_metric(run, "val/loss", 2.0 / (step + 1), step=step)
    paths = plots.learning_curves(uri, [run], tmp_path / "curves")
    assert all(p.stat().st_size > 1000 for p in paths)
    with pytest.raises(ValueError):
        plots.learning_curves(uri, [], tmp_path / "none")


def test_sweep_times_from_a_bundle_read_a_time_on_a_whole_second(tmp_path):
    """A parent run that starts or ends on a whole second is written to the bundle without a
    fraction (23:38:13+00:00 beside 23:38:13.123000+00:00); reading both gave a pandas format
    error at the end of a 13-minute report."""
    from analysis.bundle import read_bundle, write_bundle
    from analysis.reporting import open_seconds

    ms = [1796081893000, 1796081893123, 1796081953500, 1796082013000]  # 0 and 123 ms past a second
    sweeps = pd.DataFrame([{"ablation": "a", "role": "sweep", "run_id": f"r{i}",
                            "start_time": pd.Timestamp(start, unit="ms", tz="UTC"),
                            "end_time": pd.Timestamp(end, unit="ms", tz="UTC")}
                           for i, (start, end) in enumerate([(ms[1], ms[2]), (ms[0], ms[3])])])
    trials = pd.DataFrame([{"ablation": "a", "role": "trial", "run_id": "t0",  # times as numbers
                            "start_time": ms[1] * 1000, "end_time": ms[2] * 1000}])
    bundle = read_bundle(write_bundle(pd.concat([trials, sweeps]), tmp_path / "runs.csv.gz"))
    again = bundle[bundle["role"] == "sweep"]
    assert again["start_time"].tolist()[1].endswith(":13.000+00:00")  # ISO 8601 to the ms: no form without a fraction
    expected = (ms[2] - ms[1] + ms[3] - ms[0]) / 1000
    assert open_seconds(again) == pytest.approx(expected)
    assert open_seconds(sweeps) == pytest.approx(expected)
    assert np.isnan(open_seconds(sweeps.iloc[:0]))
