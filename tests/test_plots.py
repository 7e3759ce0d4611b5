"""Figures on synthetic runs tables (tests/synthetic_runs.py): natural order of legends and axes,
reference lines, a single x drawn as points, the special figures and write_all's files."""

from __future__ import annotations

import contextlib

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import seaborn as sns

import synthetic_runs as S
from analysis import curves, outputs, plots

K_ORDER = [f"softmax_free[k={k}]" for k in (2, 4, 8, 16, 32)]


@pytest.fixture(autouse=True)
def fewer_resamples(monkeypatch):
    monkeypatch.setattr(plots, "N_BOOT", 100)  # bands are not under test here; keeps the tests fast


@pytest.fixture
def grids(monkeypatch):
    """Every FacetGrid a figure function draws, kept open for inspection."""
    drawn = []
    monkeypatch.setattr(plots.plt, "close", lambda fig=None: None)
    real = plots._grid
    monkeypatch.setattr(plots, "_grid", lambda *a, **k: drawn.append(real(*a, **k)) or drawn[-1])
    yield drawn
    plt.close("all")


def _legend(g: sns.FacetGrid) -> list[str]:
    return [t.get_text() for t in g._legend.get_texts()]


def test_natural_order_of_arms_sizes_and_legend(tmp_path, grids):
    df = S.knowledge_size(seeds=range(2))
    assert curves.ordered(df["arm"]) == K_ORDER  # text order would be k=16, k=2, k=32, ...
    plots.sample_efficiency(df, tmp_path / "se", ablation="knowledge_size", scale="smoke")
    g = grids[0]
    assert [t.split(" (")[0] for t in _legend(g)] == [*K_ORDER, "uniform mixing predictor", "zero predictor"]
    ax = g.axes.flat[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16", "64", "128"]
    assert list(ax.get_xticks()) == [8, 16, 64, 128]
    assert "knowledge_size" in g.figure._suptitle.get_text() and "smoke" in g.figure._suptitle.get_text()


def test_reference_lines_and_counts(tmp_path, grids):
    df = S.knowledge_size(seeds=range(3))
    df.loc[0, "status"], df.loc[1, "diverged"] = "FAILED", True
    plots.sample_efficiency(df, tmp_path / "se")
    ax = grids[0].axes.flat[0]
    levels = {round(line.get_ydata()[0], 6) for line in ax.lines if len(set(line.get_ydata())) == 1}
    assert {0.7, 1.0} <= levels  # uniform mixing and zero predictor
    # named in the legend, not by texts in the panel (two close lines' labels overlapped)
    assert not ax.texts
    names = _legend(grids[0])
    assert "uniform mixing predictor" in names and "zero predictor (rel. MSE = 1)" in names
    assert ax.get_ylabel() == "test relative MSE"
    assert "1 failed" in ax.get_title() and "1 diverged" in ax.get_title()
    assert ax.get_yscale() == "log"


def test_single_size_is_points_on_a_categorical_axis(tmp_path, grids):
    df = S.knowledge_size(sizes=(256,), ks=(2, 8), seeds=range(3))
    other = df["arm"] == "softmax_free[k=8]"  # two presets: no one model factor to put on x
    df.loc[other, ["arm", "variant"]] = "mlp"
    plots.sample_efficiency(df, tmp_path / "se")
    ax = grids[0].axes.flat[0]
    assert ax.get_xscale() == "linear"
    # one size: the arms are the x axis (a point and bar each), the size is in the x label
    assert [t.get_text() for t in ax.get_xticklabels()] == ["mlp", "softmax_free[k=2]"]
    assert ax.get_xlabel() == "arm (task.n_train = 256)"
    drawn = [line for line in ax.lines if len(line.get_xdata()) and line.get_linestyle() != "--"
             and len(set(line.get_ydata())) > 1 and line.get_marker() not in (None, "None", "")]
    assert all(line.get_linestyle() in ("None", "none", "") for line in drawn)  # no connecting line


def test_diverged_and_failed_runs_stay_out_of_the_means(tmp_path, grids):
    df = S.knowledge_size(seeds=range(3), sizes=(8, 16), ks=(2,))
    bad = df.index[(df["task.n_train"] == 8) & (df["seed"] == 0)]
    df.loc[bad, "test/rel_mse"] = df.loc[bad, "error"] = 1e6
    df.loc[bad, "diverged"] = True
    plots.sample_efficiency(df, tmp_path / "se")
    ax = grids[0].axes.flat[0]
    means = [line for line in ax.lines if line.get_marker() == "o"][0].get_ydata()
    assert max(means) < 1.0


def test_permutation_rotation_and_absent_answer_figures(tmp_path, grids):
    paths = plots.permutation_error(S.knowledge_size(sizes=(16, 64), seeds=range(2)), tmp_path / "perm")
    ax = grids[-1].axes.flat[0]
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == K_ORDER
    # the float32 tolerance line, named in the legend (an in-panel label ran into the points)
    assert not ax.texts and "exact within float32 tolerance (1e-05)" in _legend(grids[-1])

    paths += plots.rotation_transfer(S.rotation(seeds=range(3)), tmp_path / "rot",
                                     axes=["task.rotation", "train.optimizer"])
    g = grids[-1]
    assert list(g.axes_dict) == ["arithmetic_rotation · rotation=eval · optimizer=adam",
                                 "arithmetic_rotation · rotation=eval · optimizer=sgd"]
    assert _legend(g) == [plots.ROTATED, plots.FIXED, "exact within float64 tolerance (1e-10)"]
    assert not any(ax.texts for ax in g.axes.flat)
    assert [t.get_text() for t in g.axes.flat[0].get_xticklabels()] == ["coordwise", "softmax"]

    paths += plots.absent_answers(S.tokens(seeds=range(3)), tmp_path / "absent")
    g = grids[-1]
    absent = g.axes_dict["arithmetic · answer absent from the input"]
    assert absent.get_yscale() == "linear" and absent.get_ylim() == pytest.approx((-0.03, 1.03))
    xg = [line for line in absent.lines if line.get_marker() == "o"]
    assert any(np.allclose(line.get_ydata(), 0.0) for line in xg)  # the Xg1 form at exactly 0
    assert all(p.stat().st_size > 1000 for p in paths)


def test_write_all_names_and_files(tmp_path):
    df = pd.concat([S.tokens(seeds=range(2)), S.rotation(seeds=range(2))], ignore_index=True)
    paths = outputs.write_all(df, tmp_path, None, False, ablation="mixed", scale="smoke")  # old positionals
    names = {p.name for p in paths}
    for stem in ("sample_efficiency", "absent_answers", "rotation_transfer"):
        assert {f"{stem}.png", f"{stem}.pdf"} <= names
    assert {"counts.csv", "sample_efficiency_table.md"} <= names


def test_learning_curves_leave_a_diverged_run_out_and_say_so(hydra_conf, tmp_path, monkeypatch):
    """Issue 12: a diverged run blanked the val/loss panel without a word (its inf, stored as
    1.797e308, overflowed the log axis, whose view fell back to 1..10, away from every other
    curve; a huge finite loss stretches it over decades). Real trials recorded by the harness:
    two that train, one that diverges (SGD at lr 1e6, its last validation loss inf); the
    learning-curve figure draws the two, keeps their val/loss range readable and names the
    diverged run as left out."""
    from harness.config import TrackingConfig
    from harness.scheduler import SerialScheduler
    from harness.store import resolve_store
    from harness.expansion import compose_trial
    from harness.tracking import Tracker
    from tests.recording import log_trial

    fast = ["train.max_steps=12", "train.eval_every=1", "task.n_train=32", "task.n_val=32",
            "task.n_test=64", "cluster=serial", "seed=0"]
    points = [["model=softmax"], ["model=mlp"],
              ["model=mlp", "train.optimizer=sgd", "train.lr=1e6"]]  # inf val/loss at step 2
    trials = [compose_trial(fast, point) for point in points]
    with SerialScheduler(trials[0].config.cluster) as scheduler:
        outcomes = list(scheduler.run(trials))
    assert [o.result.diverged for o in outcomes] == [False, False, True]
    tracker = Tracker(resolve_store(TrackingConfig(), tmp_path))
    experiment = tracker.experiment("curves")
    parent = tracker.start_parent(experiment, "curves", 3, 0, [])
    run_ids = [log_trial(tracker, experiment, parent, "curves", o) for o in outcomes]

    monkeypatch.setattr(plots.plt, "close", lambda fig=None: None)  # keep the figure to inspect
    try:
        paths = plots.learning_curves(tracker.store.uri, run_ids, tmp_path / "curves")
        fig = plt.figure(plt.get_fignums()[-1])
        val = next(ax for ax in fig.axes if ax.get_title() == "val/loss")
        labels = [line.get_label() for line in val.lines]
        trained = [line.get_ydata() for line in val.lines if np.nanmax(line.get_ydata()) < 1]
        view = val.get_ylim()
        title = fig._suptitle.get_text() if fig._suptitle else ""
    finally:
        plt.close("all")
    assert all(p.stat().st_size > 1000 for p in paths)
    assert len(trained) == 2, labels  # the two runs that trained, their val/loss below 1
    low, high = min(map(min, trained)), max(map(max, trained))
    # the view shows them, and is not stretched over decades by the diverged run's values
    assert view[0] <= low and high <= view[1] < 100, \
        f"val/loss view {view} does not show the trained runs' curves ({low:.3g} to {high:.3g})"
    assert len(labels) == 2, labels  # the diverged run is not drawn
    assert "diverged" in title and "mlp" in title.split("diverged")[-1], title


def test_curve_runs_prefer_a_run_that_did_not_diverge():
    """The learning-curve pick of an arm skips its diverged runs: with one lr nothing is
    selected away, and seed 0 of arm a diverged, so seed 1 is drawn; arm b, whose every run
    diverged, keeps its usual pick."""
    rows = [{"run_id": f"{arm}-{n}-{seed}", "status": "FINISHED", "task": "t", "variant": arm,
             "arm": arm, "seed": seed, "task.n_train": n, "train.lr": 0.01, "test/rel_mse": 0.1,
             "val/best_loss": 0.1, "val/best_error": 0.1, "diverged": arm == "b" or seed == 0}
            for arm in ("a", "b") for n in (32, 64) for seed in (0, 1)]
    assert outputs.curve_runs(pd.DataFrame(rows)) == ["a-64-1", "b-64-0"]

def test_bands_are_seaborns_own_bootstrap_to_the_bit():
    from seaborn._statistics import EstimateAggregator  # what errorbar=("ci", 95) runs

    rng = np.random.default_rng(1)
    for n in (2, 3, 5, 10):
        values = pd.Series(rng.lognormal(size=n) * 1e-3)
        if n == 5:
            values[2] = np.nan  # seaborn then takes the nan-aware mean
        ref = EstimateAggregator("mean", ("ci", 95), n_boot=plots.N_BOOT, seed=0)(pd.DataFrame({"y": values}), "y")
        assert plots._interval(values) == (ref["ymin"], ref["ymax"])


def test_legend_measured_without_rendering_saves_the_same_bytes(tmp_path, monkeypatch):
    df = S.knowledge_size(seeds=range(2))
    plots.sample_efficiency(df, tmp_path / "fast", formats=("png",))
    monkeypatch.setattr(plots, "_layout_only_draws", contextlib.nullcontext)  # seaborn's full draws
    plots.sample_efficiency(df, tmp_path / "full", formats=("png",))
    assert (tmp_path / "fast.png").read_bytes() == (tmp_path / "full.png").read_bytes()


def test_write_all_writes_the_formats_asked_for(tmp_path):
    paths = outputs.write_all(S.tokens(seeds=range(2)), tmp_path, ablation="tokens", scale="tiny",
                              formats=("png",))
    figures = [p for p in paths if p.suffix in (".png", ".pdf")]
    assert figures and {p.suffix for p in figures} == {".png"}
    assert list(tmp_path.glob("*.pdf")) == [] and all(p.exists() for p in figures)


def test_two_seeds_show_their_range_labelled_as_such(tmp_path, grids):
    """With 2 seeds the "95% bootstrap" band was the min–max; now it is drawn and named as the
    range, with n; 3 seeds get the bootstrap band, with n."""
    df = S.knowledge_size(seeds=range(2), ks=(2, 8), noise=0.5)
    plots.sample_efficiency(df, tmp_path / "se")
    caption = " ".join(t.get_text() for t in grids[0].figure.texts)
    assert "range (min–max) of the seeds, n=2" in caption and "bootstrap" not in caption
    ok = curves.usable(df[(df["arm"] == "softmax_free[k=2]") & (df["task.n_train"] == 8)])
    band = grids[0].axes.flat[0].collections[0].get_paths()[0].vertices[:, 1]
    assert band.max() == pytest.approx(ok["error"].max()) or band.min() == pytest.approx(ok["error"].min())
    plots.sample_efficiency(S.knowledge_size(seeds=range(3), ks=(2,)), tmp_path / "se3")
    caption = " ".join(t.get_text() for t in grids[1].figure.texts)
    assert "bootstrap" in caption and "n=3" in caption


def test_a_swept_model_value_at_one_size_goes_on_the_x_axis(tmp_path, grids):
    """knowledge_size plotted error against its one n_train (one tick) with k as colours; the
    question is error against k."""
    df = S.knowledge_size(sizes=(256,), seeds=range(3))
    plots.sample_efficiency(df, tmp_path / "se", ablation="knowledge_size")
    g = grids[0]
    ax = g.axes.flat[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "8", "16", "32"]
    assert ax.get_xlabel().startswith("k ") and "against k" in g.figure._suptitle.get_text()
    assert _legend(g)[0] == "softmax_free (n_train = 256)"


def test_a_panel_of_the_same_runs_as_another_is_drawn_once(tmp_path, grids):
    """sigma_vs_softmax's nearest and nearest_length panels showed the same runs; and a swept
    σ (categorical) goes on the x axis."""
    df = S.knowledge_size(sizes=(256,), ks=(2, 8), seeds=range(3))
    df["arm"] = df["arm"].str.replace("k=2", "sigma=relu").str.replace("k=8", "sigma=softmax")
    twin = df.assign(task="teacher_twin", run_id=df["run_id"] + "-twin")
    plots.sample_efficiency(pd.concat([df, twin], ignore_index=True), tmp_path / "se")
    g = grids[0]
    assert list(g.axes_dict) == ["teacher"]
    assert "teacher_twin: the same runs as teacher" in " ".join(t.get_text() for t in g.figure.texts).replace("\n", " ")
    ax = g.axes.flat[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["relu", "softmax"]


def test_four_panels_wrap_to_a_canvas_a_page_shows(tmp_path, grids):
    """sigma_vs_softmax's four panels were one row on a 2,946-px canvas (3,097 before): at most
    MAX_COLS panels a row, and the saved PNG at most MAX_WIDTH_PX wide."""
    from PIL import Image

    df = S.knowledge_size(seeds=range(3), ks=(2, 8))
    four = pd.concat([df.assign(task=t, run_id=df["run_id"] + t, error=df["error"] * (i + 1),
                                **{"test/rel_mse": df["test/rel_mse"] * (i + 1)})
                      for i, t in enumerate(("teacher", "teacher_a", "teacher_b", "teacher_c"))],
                     ignore_index=True)
    (png,) = plots.sample_efficiency(four, tmp_path / "se", formats=("png",))
    g = grids[0]
    assert len(g.axes_dict) == 4 and g._ncol == plots.MAX_COLS == 2
    assert Image.open(png).size[0] <= plots.MAX_WIDTH_PX
    g.figure.set_size_inches(40, 5)  # however wide a figure grows, its file fits a page
    plots._save(g.figure, tmp_path / "wide.png")
    assert Image.open(tmp_path / "wide.png").size[0] <= plots.MAX_WIDTH_PX


def test_two_reference_predictors_get_two_line_styles(tmp_path, grids):
    """A regression and a token task in one figure: the uniform-mixing and majority-class lines
    were both dashed gray, one legend entry read as the other."""
    reg = S.knowledge_size(seeds=range(3), ks=(2,))
    tok = S.tokens(seeds=range(3), variants=("value",))
    plots.sample_efficiency(pd.concat([reg, tok], ignore_index=True), tmp_path / "se")
    g = grids[0]
    legend = dict(zip(_legend(g), g._legend.get_lines()))
    styles = {name: legend[name].get_linestyle() for name in legend if name.endswith("class predictor")
              or name.startswith("uniform mixing")}
    assert len(styles) == 2 and len(set(styles.values())) == 2, styles
    ylabels = {facet: ax.get_ylabel() for facet, ax in g.axes_dict.items()}
    assert ylabels == {"arithmetic": "test error (1 − accuracy)", "teacher": "test relative MSE"}


def test_faceted_panels_of_the_same_models_are_drawn_once(tmp_path, grids):
    """rotation's rotation=none panels showed the same models and errors as its rotation=eval
    ones (the mode changes only the evaluation): every panel left shows runs no other shows,
    and the caption says which panel stands for which."""
    df = S.rotation(seeds=range(3))
    for opt in ("sgd", "adam"):  # the same trained models: eval's errors in none's rows
        eval_, none = ((df["task.rotation"] == m) & (df["train.optimizer"] == opt) for m in ("eval", "none"))
        df.loc[none, ["error", "test/acc"]] = df.loc[eval_, ["error", "test/acc"]].to_numpy()
    plots.sample_efficiency(df, tmp_path / "se", axes=["task.rotation", "train.optimizer"])
    g = grids[0]
    assert not any("rotation=none" in facet for facet in g.axes_dict)
    panels = [tuple(np.round(np.sort(np.concatenate([line.get_ydata() for line in ax.lines])), 12))
              for ax in g.axes.flat if ax.lines]
    assert len(panels) == 4 and len(set(panels)) == 4  # no two panels show the same data
    caption = " ".join(t.get_text() for t in g.figure.texts).replace("\n", " ")
    assert "rotation=none · optimizer=adam: the same runs as arithmetic_rotation · rotation=eval" in caption
    ax = g.axes_dict["arithmetic_rotation · rotation=eval · optimizer=adam"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["coordwise", "softmax"]  # one size: arms on x
    assert ax.get_xlabel() == "arm (task.n_train = 512)" or not ax.get_xlabel()


def test_refused_lengths_sit_one_row_per_arm_above_the_data(tmp_path, grids):
    """Coincident "length not supported" markers of several arms hid each other, and sat on the
    curves near the top: one row per arm, every row above the highest point of the panel."""
    df = S.knowledge_size(seeds=range(3), ks=(2, 4, 8), sizes=(64,))
    df["task.train_lengths"], df["task.n"] = "[]", 8
    for n in (8, 16, 32):
        df[f"test/n_{n}/rel_mse"], df[f"test/n_{n}/supported"] = 0.1 * n / 8, 1.0
    for arm in ("softmax_free[k=2]", "softmax_free[k=4]"):  # both refuse n = 32
        df.loc[df["arm"] == arm, ["test/n_32/rel_mse", "test/n_32/supported"]] = [np.nan, 0.0]
    plots.length_generalisation(df, tmp_path / "len")
    ax = grids[0].axes.flat[0]
    marks = [line for line in ax.lines if line.get_marker() == "x"]
    heights = [line.get_ydata()[0] for line in marks]  # axes fraction
    assert len(marks) == 2 and len(set(heights)) == 2
    lo, hi = ax.get_ylim()
    top_data = max(np.nanmax(line.get_ydata()) for line in ax.lines if line.get_marker() == "o")
    data_at = (np.log10(top_data) - np.log10(lo)) / (np.log10(hi) - np.log10(lo))
    assert min(heights) > data_at
    assert any(t.startswith("length not supported") for t in _legend(grids[0]))


def test_highlighted_arm_is_black_and_thick(tmp_path, grids):
    df = S.knowledge_size(seeds=range(2))
    plots.sample_efficiency(df, tmp_path / "se", highlight="softmax_free[k=8]", formats=("png",))
    g = grids[0]
    solid = [line for line in g.axes.flat[0].get_lines() if line.get_linestyle() == "-" and len(line.get_xdata()) > 1]
    thick = [line for line in solid if line.get_linewidth() == plots.HIGHLIGHT_LW]
    assert len(thick) == 1 and tuple(plots.mcolors.to_rgb(thick[0].get_color())) == plots.HIGHLIGHT
    assert all(tuple(plots.mcolors.to_rgb(line.get_color())) != plots.HIGHLIGHT for line in solid if line not in thick)
    labels = dict(zip(_legend(g), g._legend.legend_handles))
    (mine,) = [h for t, h in labels.items() if t.startswith("softmax_free[k=8]")]
    assert mine.get_linewidth() == plots.HIGHLIGHT_LW
