"""Tables on synthetic runs tables (tests/synthetic_runs.py): natural row and column order,
Student-t intervals, the area under the log-log sample-efficiency curve, single-run groups,
counts of runs left out, and the written CSV/Markdown."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import synthetic_runs as S
from analysis import curves, render, render_tables, stats, tables

K_ORDER = [f"softmax_free[k={k}]" for k in (2, 4, 8, 16, 32)]


def test_rows_and_size_columns_in_numeric_order():
    table = tables.sample_efficiency_table(S.knowledge_size(seeds=range(3)))
    assert table["arm"].tolist() == K_ORDER
    errs = [c for c in table.columns if c.startswith("error_n") and not c.endswith(("_lo", "_hi", "_n"))]
    assert errs == ["error_n8", "error_n16", "error_n64", "error_n128"]


def test_error_intervals_are_student_t_of_log_error_over_seeds():
    """An error is non-negative and spreads over decades: its interval is a t-interval of log
    error (geometric mean), so it never reaches below 0 (the plain t-interval of 2 seeds read
    ``0.00158 [-0.00314, 0.00631]``)."""
    df = S.knowledge_size(seeds=range(5), noise=0.2)
    table = tables.sample_efficiency_table(df).set_index("arm")
    values = df[(df["arm"] == "softmax_free[k=4]") & (df["task.n_train"] == 16)]["error"]
    mean, lo, hi = np.exp(stats.t_interval(np.log(values)))
    row = table.loc["softmax_free[k=4]"]
    assert row[["error_n16", "error_n16_lo", "error_n16_hi", "error_n16_n"]].tolist() == pytest.approx(
        [mean, lo, hi, 5])
    assert (table.filter(regex=r"^error_n\d+_lo$") > 0).all().all()


def test_two_seeds_give_no_interval_and_say_n_2(tmp_path):
    df = S.knowledge_size(seeds=range(2), ks=(2, 4), noise=0.5)
    table = tables.sample_efficiency_table(df)
    bounds = table.filter(regex=r"_(lo|hi)$")
    assert bounds.isna().all().all()  # error, auc, slope and samples-to-target: none from 2 seeds
    assert (table["error_n8_n"] == 2).all() and table["error_n8"].notna().all()
    md = render_tables.write_table(table, tmp_path / "se", caption=render_tables.SAMPLE_EFFICIENCY_CAPTION)[1]
    text = md.read_text()
    assert text.count("(n=2, no interval)") >= 2 * 4 and not re.search(r"\[[-\d.e]+, ", text)
    assert "geometric mean" in text and "fewer than 3" in text
    three = render.for_markdown(tables.sample_efficiency_table(S.knowledge_size(seeds=range(3))))
    assert three["error_n8"].str.endswith("n=3").all() and three["error_n8"].str.contains(r"\[").all()


def test_area_and_slope_of_a_known_curve():
    df = S.knowledge_size(seeds=range(3), noise=0.0)  # error = (0.2 + 2/k) n^-0.4 exactly
    table = tables.sample_efficiency_table(df).set_index("arm")
    for k in (2, 32):
        c = 0.2 + 2 / k
        auc = np.log(c) - 0.4 * (np.log(8) + np.log(128)) / 2  # linear in log n: exact trapezoid
        row = table.loc[f"softmax_free[k={k}]"]
        assert row[["auc_log_error", "auc_log_error_lo", "auc_log_error_hi"]].tolist() == pytest.approx([auc] * 3)
        assert row["slope"] == pytest.approx(-0.4)
    assert table["n_to_target_boot"].notna().all()


def test_area_is_paired_per_seed_and_nan_with_one_size():
    df = S.knowledge_size(seeds=range(3), ks=(2,))
    df = df[~((df["seed"] == 0) & (df["task.n_train"] == 64))]  # seed 0 misses a size: left out
    seeds = curves.per_seed(curves.usable(df))
    assert seeds.set_index("seed").loc[0, "auc"] != seeds.set_index("seed").loc[0, "auc"]  # NaN
    assert seeds["auc"].notna().sum() == 2
    one = curves.per_seed(S.knowledge_size(sizes=(64,), ks=(2,)))
    assert one["auc"].isna().all()


def test_single_run_has_no_interval_and_the_markdown_says_so(tmp_path):
    df = S.knowledge_size(seeds=range(1), ks=(2, 4))
    table = tables.sample_efficiency_table(df)
    assert table["error_n8_lo"].isna().all() and table["n_to_target_boot_lo"].isna().all()
    csv, md = render_tables.write_table(table, tmp_path / "se", caption=render_tables.SAMPLE_EFFICIENCY_CAPTION)
    text = md.read_text()
    assert "(n=1, no interval)" in text and "Student-t" in text and "bootstrap" in text
    back = pd.read_csv(csv)
    assert back.shape == table.shape and pd.api.types.is_float_dtype(back["error_n8"])


def test_failed_and_diverged_runs_counted_not_averaged():
    df = S.knowledge_size(seeds=range(3), ks=(2,), sizes=(8, 16))
    first = df.index[(df["task.n_train"] == 8) & (df["seed"] == 0)]
    df.loc[first, ["error", "test/rel_mse"]] = 1e6
    df.loc[first, "diverged"] = True
    df.loc[df.index[-1], "status"] = "FAILED"
    row = tables.sample_efficiency_table(df).iloc[0]
    assert row[["used", "failed", "diverged"]].tolist() == [4, 1, 1]
    assert row["error_n8"] < 1.0


def test_symmetry_table_per_arm_in_natural_order():
    table = tables.symmetry_table(S.knowledge_size(seeds=range(2)), by=("task", "arm"))
    assert table["arm"].tolist() == K_ORDER
    assert (table["symmetry/permutation_err"] < 1e-6).all() and (table["n_runs"] == 8).all()
