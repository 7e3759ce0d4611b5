"""A figure never turns a finished sweep into a failure (issue 47, item 4): legends fit whatever
their labels' length, and a figure that fails to draw after every trial finished is one
warning line, the exit status the trials' own."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

import synthetic_runs as S
from analysis import plots, summary


@pytest.fixture(autouse=True)
def fewer_resamples(monkeypatch):
    monkeypatch.setattr(plots, "N_BOOT", 100)  # bands are not under test here


def test_a_one_panel_figure_with_long_arm_labels_fits_its_legend(tmp_path, monkeypatch):
    """Before: seaborn's add_legend asked subplots_adjust for a right edge left of the left one
    ("left cannot be >= right"): a sweep of 20 finished trials (higher_order_gram and
    higher_order_identity, model.k=2, explicit points through extra_grids) exited 2, and so did
    every resume of it."""
    grids = []
    monkeypatch.setattr(plots.plt, "close", lambda fig=None: None)
    real = plots._grid
    monkeypatch.setattr(plots, "_grid", lambda *a, **k: grids.append(real(*a, **k)) or grids[-1])
    df = S.knowledge_size(seeds=range(2), ks=(2, 4))
    long = "model.k=2,task=repeated,extra_grids.points=" * 6
    df["arm"] = df["arm"] + "[" + long + "]"
    paths = plots.sample_efficiency(df, tmp_path / "se", ablation="higher_order")
    assert all(p.exists() for p in paths)
    (g,) = grids
    assert len(g.axes.flat) == 1
    fig_width = g.figure.get_window_extent().width
    legend = g._legend.get_window_extent()
    assert legend.width < fig_width  # on the figure, not wider than it
    texts = [t.get_text() for t in g._legend.get_texts()]
    assert all(max(len(line) for line in t.splitlines()) <= plots.LEGEND_WIDTH for t in texts)
    assert len(set(texts)) == len(texts)  # every arm still its own entry
    plt.close("all")


def test_a_figure_that_fails_after_the_trials_is_one_warning(tmp_path, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise ValueError("left cannot be >= right")

    monkeypatch.setattr(summary.reuse, "write_once", broken)
    assert summary._draw("higher_order", S.knowledge_size(seeds=range(2)), tmp_path, {}) == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: the figures of 'higher_order' were not drawn")
    assert "python -m analysis +ablation=higher_order" in err[0]
