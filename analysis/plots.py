"""Figures of an ablation from its runs table (paper.md §12–§13), drawn with seaborn ``FacetGrid``.

One look for every figure: a panel per task (and per rotation mode × optimiser where those are
swept, :data:`analysis.curves.FACET_AXES`); one colour per arm, the same in every panel, in
natural order (``k=2 < k=4 < k=16``) in one figure legend; markers at the seed mean, joined by a
line only where there is more than one x (at a single x the arms are the x axis, a point with
an error bar each); an ablation's swept model value (k, σ) on the x axis where it is the one
factor; bands and bars are a 95% percentile bootstrap of the mean over seeds with at least 3
seeds, else the seeds' range, said so (plot only; tables carry Student-t intervals, paper.md
§13); reference lines gray, one style each, named in the legend; at most :data:`MAX_COLS`
panels a row and at most :data:`MAX_WIDTH_PX` pixels wide; a panel whose runs another panel
shows is drawn once; x ticks at the values used; the title names the ablation and scale; each panel says
how many runs it uses and which it leaves out (failed, killed, diverged); a caption under the
figure says what is drawn. Every figure is written as ``<out>.png`` and ``<out>.pdf`` (``formats``
chooses; the tiny report writes PNG only); each function returns those paths.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import textwrap
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import mlflow  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from analysis import curves, lengths, stats  # noqa: E402
from analysis.curves import BAND, SIZE  # noqa: E402
from analysis.stats import add_error as with_error  # noqa: E402,F401  (older name, kept importable)

# matplotlib.category logs at INFO for every categorical axis of numbers-as-strings (a one-point
# panel's x); Hydra's job logging shows INFO, so every summary printed two such lines per figure
logging.getLogger("matplotlib.category").setLevel(logging.WARNING)

N_BOOT = 2000
DPI = 150  # the saved resolution, lowered for a figure wider than MAX_WIDTH_PX at it
MAX_WIDTH_PX = 1800  # a report page shows about this many pixels; the 4-panel row was 3,097
MAX_COLS = 2  # panels per row beside the right-hand legend (3 made a 2,300-px canvas)
# reference lines of one figure, one style each in order (two dashed grays read as one)
REF_STYLES = ("--", "-.", (0, (1, 1.5)), (0, (6, 2, 1, 2, 1, 2)))
FORMATS = ("png", "pdf")  # the files each figure is written to, by suffix
TOLERANCE = {"float64": 1e-10, "float32": 1e-5}  # exact-identity tolerances, paper.md §13 (E rows)


# ---------------------------------------------------------------- shared drawing ----------------

@functools.lru_cache(maxsize=None)
def _resamples(n: int, n_boot: int) -> np.ndarray:
    """The ``(n_boot, n)`` row indices that seaborn's ``bootstrap(seed=0)`` draws for ``n``
    values: a fresh ``default_rng(0)``, one ``integers(0, n, n)`` per resample, as it does."""
    rng = np.random.default_rng(0)
    return np.stack([rng.integers(0, n, n, dtype=np.intp) for _ in range(n_boot)])


def _interval(values: pd.Series) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean of ``values`` (seeds) that seaborn's
    ``errorbar=("ci", 95), n_boot=N_BOOT, seed=0`` gives, to the bit (same resamples, same
    nan-aware mean, same percentiles), with the resamples' means taken at once instead of one
    Python call per resample (about 70× faster; the figures of a report draw hundreds)."""
    a = np.asarray(values, dtype=float)
    mean = np.nanmean if np.isnan(np.sum(a)) else np.mean
    return tuple(np.nanpercentile(mean(a[_resamples(len(a), N_BOOT)], axis=1), (2.5, 97.5)))


def _fmt(v: float) -> str:
    return f"{int(v)}" if float(v).is_integer() else f"{v:g}"


def _labels(df: pd.DataFrame, axes: Sequence[str]) -> pd.Series:
    """Per row, the arm's legend label: the arm without its faceted parts, with its median
    parameter count (``"softmax (1,234 params)"``)."""
    short = df["arm"].map(lambda a: curves.strip_arm(a, axes))
    if "n_params" not in df:
        return short
    n = df.groupby(short, dropna=False)["n_params"].median()
    return short.map(lambda s: f"{s} ({n[s]:,.0f} params)" if np.isfinite(n.get(s, np.nan)) else s)


def _frame(df: pd.DataFrame, axes: Sequence[str] | None, x: str = SIZE) -> tuple[pd.DataFrame, list[str]]:
    """Prepared runs (:func:`analysis.curves.prepare`) with ``label`` (legend) and ``facet``
    (panel) columns, and the faceted axes."""
    data = curves.prepare(df, x)
    faxes = curves.facet_axes(data, axes)
    data["label"] = _labels(data, faxes)
    data["short"] = data["arm"].map(lambda a: curves.strip_arm(a, faxes))
    data["facet"] = data.apply(lambda r: curves.facet_label(r, faxes), axis=1) if len(data) else []
    return data, faxes


def _palette(labels: Sequence[str]) -> dict[str, tuple]:
    name = "colorblind" if len(labels) <= 10 else "husl"
    return dict(zip(labels, sns.color_palette(name, len(labels))))


def _grid(data: pd.DataFrame, faxes: Sequence[str], sharey: bool = False) -> sns.FacetGrid:
    """A panel per ``facet`` in natural order; rows follow the last faceted axis."""
    facets = curves.ordered(data["facet"])
    wrap = data[faxes[-1]].nunique() if faxes else len(facets)
    return sns.FacetGrid(data, col="facet", col_order=facets,
                         col_wrap=max(1, min(wrap, len(facets), MAX_COLS)),
                         sharex=False, sharey=sharey, height=3.0, aspect=1.35, despine=False)


def _yscale(ax: plt.Axes, values: pd.Series) -> None:
    """Log scale when every value is positive, else symlog (errors of exactly 0 stay visible)."""
    v = pd.to_numeric(pd.Series(values), errors="coerce")
    v = v[np.isfinite(v)]
    if len(v) and (v > 0).all():
        ax.set_yscale("log")
        if v.max() / v.min() < 10:  # within a decade: plain numbers on major and minor ticks
            plain = FuncFormatter(lambda y, _: f"{y:.3g}")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
    elif len(v):
        positive = v[v > 0]
        ax.set_yscale("symlog", linthresh=float(positive.min()) if len(positive) else 1e-3)


def _hline(ax: plt.Axes, y: float, text: str | None, style: str = "--", color: str = "0.45") -> Line2D:
    """A horizontal reference line, labelled in the panel with ``text``, or (``None``) unlabelled
    there: the figure legend names it (the returned handle), so a label never overlaps another
    line's or the data. Every figure of the report passes ``None``. Returns the legend handle."""
    ax.axhline(y, ls=style, color=color, lw=1.2, zorder=1)
    if text:
        ax.text(0.02, y, f" {text}", transform=ax.get_yaxis_transform(), va="bottom", ha="left",
                fontsize=7, color=color)
    return Line2D([], [], ls=style, color=color, lw=1.2)


def _curve(data: pd.DataFrame, *, x: str, y: str, palette: Mapping[str, tuple], errorbar=None,
           **_) -> None:
    """Seed means of ``y`` per label against ``x``: a line with a band over several x values
    (log x, ticks at the values used), points with bars at a single x. The band is
    ``errorbar`` (default: the bootstrap of :func:`_interval`; :func:`_band` chooses)."""
    ax, labels = plt.gca(), [lab for lab in palette if lab in set(data["label"])]
    categorical = not pd.api.types.is_numeric_dtype(data[x])  # e.g. σ names
    values = curves.ordered(data[x]) if categorical else sorted(data[x].unique())
    common = dict(hue="label", hue_order=labels, palette=palette, errorbar=errorbar or _interval,
                  ax=ax, legend=False)
    if len(values) == 1 and not categorical and "short" in data:
        # one x value (the xlabel says which): the arms are the x axis, one point and bar each
        sns.pointplot(data=data, x="short", y=y, order=curves.ordered(data["short"]),
                      linestyle="none", marker="o", capsize=0.15, err_kws={"linewidth": 1.2}, **common)
        _slanted(ax)
    elif len(values) == 1 or categorical:
        shown = data[x].astype(str) if categorical else data[x].map(_fmt)
        sns.pointplot(data=data.assign(**{x: shown}), x=x, y=y, order=[str(v) if categorical else _fmt(v) for v in values],
                      dodge=0.45 if len(labels) > 1 else False,
                      linestyle="none", marker="o", capsize=0.08, err_kws={"linewidth": 1.2}, **common)
        if len(values) == 1:
            ax.set_xlim(-0.6, 0.6)
    else:
        sns.lineplot(data=data, x=x, y=y, marker="o", markersize=5, err_style="band", **common)
        ax.set_xscale("log")
        ax.set_xticks(values, [_fmt(v) for v in values])
        ax.minorticks_off()


def _slanted(ax: plt.Axes) -> None:
    """x tick labels (arm names) slanted, right-aligned under their tick."""
    ax.tick_params(axis="x", labelrotation=30)
    for tick in ax.get_xticklabels():
        tick.set_horizontalalignment("right")


def _one_x(data: pd.DataFrame, x: str) -> str | None:
    """``"task.n_train = 512"`` where every run has one value of ``x`` (the arms go on the x
    axis, :func:`_curve`), else ``None``."""
    values = data[x].dropna().unique() if x in data else []
    return f"{x} = {_fmt(values[0])}" if len(values) == 1 and pd.api.types.is_numeric_dtype(data[x]) else None


def _ref_styles(names: Sequence[str]) -> dict[str, object]:
    """One line style per reference predictor of a figure (:data:`REF_STYLES`)."""
    return {name: REF_STYLES[i % len(REF_STYLES)] for i, name in enumerate(names)}


def _band(ok: pd.DataFrame, x: str) -> tuple[object, str]:
    """``(errorbar, description)`` for the runs ``ok``: the bootstrap band (:data:`BAND`) where
    every point has at least :data:`analysis.stats.MIN_SEEDS` seeds, else the range of the
    seeds (a bootstrap of 2 values is their range, and would read as an interval)."""
    sizes = ok.groupby(["facet", "label", x], dropna=False).size()
    low, high = (int(sizes.min()), int(sizes.max())) if len(sizes) else (0, 0)
    n = f"n={low}" if low == high else f"n={low}–{high}"
    if low >= stats.MIN_SEEDS:
        return _interval, f"{BAND}, {n}"
    return ("pi", 100), f"the range (min–max) of the seeds, {n}, fewer than {stats.MIN_SEEDS}: no interval"


def _metric_labels(g: sns.FacetGrid, data: pd.DataFrame) -> dict[str, str]:
    """Per panel, the y label naming its one metric (``error_name`` of its runs): a figure of a
    regression and a token task said "test error (1 − accuracy) or test relative MSE"."""
    return {facet: " / ".join(curves.ordered(data.loc[data["facet"] == facet, "error_name"]))
            for facet in g.axes_dict}


def _finish(g: sns.FacetGrid, data: pd.DataFrame, title: str, caption: str, out: Path,
            ablation: str | None, scale: str | None, legend: Mapping[str, Line2D] | None,
            value: str = "error", legend_title: str = "arm", labels: tuple[str, str] = ("", ""),
            formats: Sequence[str] = FORMATS, ylabels: Mapping[str, str] | None = None) -> list[Path]:
    """Axis labels (outer panels; ``ylabels``: per panel, where panels show other metrics),
    panel titles with run counts, the figure legend, title and caption; saves one file per
    suffix in ``formats`` (PNG and PDF)."""
    g.set_axis_labels(*labels)
    if ylabels:
        one = len(set(ylabels.values())) == 1
        for facet, ax in g.axes_dict.items():
            if not one or ax in g._left_axes:
                ax.set_ylabel(ylabels.get(facet, ""))
    # slanted arm names under a panel need more room before the next row's title
    slanted = any(t.get_rotation() for ax in g.axes.flat for t in ax.get_xticklabels())
    g.figure.subplots_adjust(hspace=0.8 if slanted else 0.45, wspace=0.25)
    for facet, ax in g.axes_dict.items():
        ax.set_title(f"{facet}\n{curves.describe_excluded(data[data['facet'] == facet], value)}",
                     fontsize=8)
    if legend:
        _add_legend(g, legend, legend_title)
    where = " · ".join(p for p in (ablation, f"scale={scale}" if scale else None) if p)
    g.figure.suptitle(f"{where}: {title}" if where else title, fontsize=11,
                      y=1 + 0.3 / g.figure.get_figheight(), va="bottom")
    width = max(60, int(g.figure.get_figwidth() * 14))
    g.figure.text(0.01, -0.01, textwrap.fill(caption, width), va="top", ha="left", fontsize=7)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_suffix(f".{suffix}") for suffix in formats]
    _save(g.figure, *paths)
    plt.close(g.figure)
    return paths


LEGEND_WIDTH = 40  # characters per line of a legend entry: longer arm names wrap


def _add_legend(g: sns.FacetGrid, legend: Mapping[str, Line2D], title: str) -> None:
    """The figure legend beside the panels, each entry wrapped at :data:`LEGEND_WIDTH`
    characters, so a legend fits whatever its labels' length (seaborn widens the figure by the
    legend's width, and a legend wider than the figure asked ``subplots_adjust`` for a right edge
    left of the left one: "left cannot be >= right", a finished sweep reported as failed).
    Should it still not fit beside the panels, it goes below them."""
    wrapped = {_wrap_label(label): line for label, line in legend.items()}
    if len(wrapped) < len(legend):  # two labels alike in their shortened form: every line kept
        wrapped = {_wrap_label(label, None): line for label, line in legend.items()}
    try:
        with _layout_only_draws():
            g.add_legend(legend_data=wrapped, title=title, label_order=list(wrapped))
    except ValueError:  # still wider than the figure can give it: below the panels instead
        if g._legend is not None:
            g._legend.remove()
        g._legend = g.figure.legend(list(wrapped.values()), list(wrapped), title=title, loc="upper center",
                                    bbox_to_anchor=(0.5, 0), frameon=False)


def _wrap_label(label: str, most: int | None = 4) -> str:
    """A legend label in lines of :data:`LEGEND_WIDTH` characters; over ``most`` lines, its
    first two, "…" and its last (where the run counts and parameter counts stand)."""
    lines = textwrap.wrap(label, LEGEND_WIDTH, break_on_hyphens=False) or [label]
    if most is not None and len(lines) > most:
        lines = [*lines[:2], "…", lines[-1]]
    return "\n".join(lines)


@contextlib.contextmanager
def _layout_only_draws() -> Iterator[None]:
    """While in this block, seaborn's figure draws (``FacetGrid.add_legend`` draws the whole
    figure twice to measure its legend) lay the figure out without rasterising it
    (``Figure.draw_without_rendering``): the same sizes, so the same saved bytes, at a fraction
    of the cost."""
    import seaborn.axisgrid

    original = getattr(seaborn.axisgrid, "_draw_figure", None)
    if original is None:  # another seaborn: its own draws, the same figure
        yield
        return
    seaborn.axisgrid._draw_figure = lambda fig: fig.draw_without_rendering()
    try:
        yield
    finally:
        seaborn.axisgrid._draw_figure = original


def _save(fig, *paths: Path) -> None:
    """Save ``fig`` once per path (PNG or PDF), reproducibly (a PDF carries no creation date, so
    the same runs give the same bytes), cropped to the figure's tight box with matplotlib's
    padding, at :data:`DPI` or less where that box would be wider than :data:`MAX_WIDTH_PX` (a
    report page shows about that many pixels).

    The box is measured once (one layout pass) and given to every file: ``bbox_inches="tight"``
    measured it again per file, a layout pass each (``python -m benchmarks.figures``).
    """
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(plt.rcParams["savefig.pad_inches"])
    dpi = min(DPI, MAX_WIDTH_PX / box.width) if box.width > 0 else DPI
    for path in paths:
        metadata = {"CreationDate": None} if Path(path).suffix == ".pdf" else None
        fig.savefig(path, dpi=dpi, bbox_inches=box, metadata=metadata)


def _legend(palette: Mapping[str, tuple], marker: str = "o") -> dict[str, Line2D]:
    return {lab: Line2D([], [], color=c, marker=marker, lw=HIGHLIGHT_LW if c == HIGHLIGHT else 1.5)
            for lab, c in palette.items()}


HIGHLIGHT = (0.0, 0.0, 0.0)  # the highlighted arm's colour (the scorecard's mixer): black, drawn thick
HIGHLIGHT_LW = 3.0


def _highlighted(data: pd.DataFrame, highlight: str | None) -> str | None:
    """The legend label of the arm ``highlight`` (an arm, e.g. the scorecard's mixer), or ``None``."""
    if highlight is None:
        return None
    labels = data.loc[data["short" if "short" in data else "arm"] == highlight, "label"]
    return str(labels.iloc[0]) if len(labels) else None


def _draw(data: pd.DataFrame, faxes: Sequence[str], panel: Callable, sharey: bool = False,
          highlight: str | None = None, **kw) -> tuple[sns.FacetGrid, dict]:
    """The facet grid with ``panel`` drawn in each; the arm ``highlight`` (if given) in black,
    its lines thick and on top. Returns ``(grid, label → colour)``."""
    mark = _highlighted(data, highlight)
    others = [lab for lab in curves.ordered(data["label"]) if lab != mark]
    palette = {**_palette(others), **({mark: HIGHLIGHT} if mark else {})}
    with sns.axes_style("whitegrid"), sns.plotting_context("paper"):
        g = _grid(data, faxes, sharey)
        g.map_dataframe(panel, palette=palette, **kw)
    if mark:
        for ax in g.axes.flat:
            for line in ax.get_lines():  # the arm's own solid lines; reference lines are dashed or dotted
                if line.get_linestyle() == "-" and tuple(mcolors.to_rgb(line.get_color())) == HIGHLIGHT:
                    line.set_linewidth(HIGHLIGHT_LW)
                    line.set_zorder(5)
    return g, palette


def _tolerance(df: pd.DataFrame) -> tuple[float, str]:
    dtype = str(df["train.dtype"].dropna().iloc[0]) if "train.dtype" in df and df["train.dtype"].notna().any() \
        else "float32"
    return TOLERANCE.get(dtype, TOLERANCE["float32"]), dtype


# ---------------------------------------------------------------- figures -----------------------

def _model_factor(data: pd.DataFrame) -> tuple[str, pd.Series, pd.Series] | None:
    """``(name, value, base)`` where every arm is one preset with one numeric ``model.*``
    override (``softmax_free[k=4]``): the factor an ablation such as ``knowledge_size`` sweeps,
    its value per row and the preset; ``None`` otherwise."""
    parts = data["arm"].str.extract(r"^([\w-]+)\[(\w+)=([^\],]+)\]$")
    if parts.isna().any().any() or parts[0].nunique() != 1 or parts[1].nunique() != 1:
        return None
    numeric = pd.to_numeric(parts[2], errors="coerce")  # k=4; a σ name stays a category
    return str(parts[1].iloc[0]), numeric if numeric.notna().all() else parts[2], parts[0]


def _same_runs(data: pd.DataFrame) -> dict[str, str]:
    """``{facet: earlier facet}`` for each panel whose runs are all another panel's (the same
    arm without its faceted parts, seed and error): e.g. ``rotation``'s ``rotation=none``
    panels are its ``rotation=eval`` ones (the mode changes only the evaluation), and ``sigma_vs_softmax``'s ``nearest_length`` at its training length
    is ``nearest``; one panel shows them."""
    # the arm without its faceted parts: rotation=none and rotation=eval train the same models
    cols = [c for c in ("short" if "short" in data else "arm", "seed", "error") if c in data]
    keys = {f: set(map(tuple, grp[cols].round({"error": 12}).astype(str).to_numpy()))
            for f, grp in data.groupby("facet", sort=False, dropna=False)}
    order = curves.ordered(data["facet"])
    return {b: a for i, b in enumerate(order) for a in order[:i]
            if keys.get(b) and keys[b] <= keys.get(a, set())}


def sample_efficiency(df: pd.DataFrame, out: Path, x: str = SIZE, ablation: str | None = None,
                      scale: str | None = None, axes: Sequence[str] | None = None,
                      formats: Sequence[str] = FORMATS, highlight: str | None = None) -> list[Path]:
    """Test error against training-set size, one panel per task (claims C9, C10, C12; paper.md
    §12 T3 "plot that trivial predictor as a reference line", §13).

    Per arm: the mean over seeds of the usable runs (:func:`analysis.curves.usable`) at the lr
    chosen on validation, with a 95% percentile-bootstrap band (plot only); one training-set
    size gives points with bars. Reference lines: the task's trivial predictor (uniform mixing
    or majority class, mean ``reference_error``), and for relative-MSE tasks the zero predictor
    at 1. Log x with ticks at the sizes used; log y (symlog where an error is 0).

    Args:
        df: runs (the input contract of :func:`analysis.curves.prepare`).
        out: output path without suffix.
        axes: the ablation's swept columns; those in :data:`analysis.curves.FACET_AXES` become panels.
        highlight: an arm drawn thick and black (the scorecard's mixer).

    Returns:
        ``[png, pdf]``.

    Raises:
        ValueError: if no usable run has an error metric.
    """
    data, faxes = _frame(df, axes, x)
    ok = curves.usable(data)
    if ok.empty:
        raise ValueError("no FINISHED, non-diverged run has test/rel_mse or test/acc; nothing to plot")
    factor = _model_factor(data) if data[x].nunique() == 1 else None
    size = x
    if factor:  # one training-set size and arms that differ in one model value: that value on x
        name, value, base = factor
        label = base + f" (n_train = {_fmt(data[x].iloc[0])})"
        data = data.assign(**{name: value, "label": label})
        ok, x = curves.usable(data), name
    same = _same_runs(ok)
    data, ok = data[~data["facet"].isin(same)], ok[~ok["facet"].isin(same)]
    errorbar, band = _band(ok, x)
    g, palette = _draw(ok, faxes, _curve, x=x, y="error", errorbar=errorbar, highlight=highlight)
    lines: dict[str, Line2D] = {}  # reference lines, named in the legend (labels in panels overlapped)
    styles = _ref_styles(curves.ordered(data.loc[data["reference_error"].notna(), "reference_name"]))
    for facet, ax in g.axes_dict.items():
        here = data[data["facet"] == facet]
        refs = [ok.loc[ok["facet"] == facet, "error"]]
        ref = here["reference_error"].dropna()
        if len(ref):
            name = here.loc[ref.index, "reference_name"].iloc[0]
            lines[f"{name} predictor"] = _hline(ax, ref.mean(), None, styles[name])
            refs.append(ref)
        if (here["error_name"] == "test relative MSE").any():
            lines["zero predictor (rel. MSE = 1)"] = _hline(ax, 1.0, None, ":", "black")
            refs.append(pd.Series([1.0]))
        _yscale(ax, pd.concat(refs))
    names = curves.ordered(data["error_name"])
    zero = "; black dotted: the zero predictor (relative MSE 1)" if "test relative MSE" in names else ""
    one = None if factor else _one_x(ok, x)
    caption = ("Mean test error over seeds per arm at the learning rate chosen on validation "
               + (f"(against {x} at one training-set size)" if factor else
                  f"(one training-set size, {one}: a point per arm)" if one else
                  "(several training-set sizes: a line; one: points)")
               + f"; bands and bars: {band}. Gray lines, "
               f"one style each: the task's trivial reference predictor{zero}. Panel titles count the runs used "
               "and those left out (failed, killed, diverged)."
               + "".join(f" {b}: the same runs as {a}, shown once." for b, a in same.items()))
    title, xlabel = "test error against training-set size", f"{x} (training examples)"
    if one:
        title, xlabel = f"test error per arm at {one}", f"arm ({one})"
    if factor:
        title, xlabel = f"test error against {x}", f"{x} (model.{x}; {size} = {_fmt(data[size].iloc[0])})"
    return _finish(g, data, title, caption, out, ablation, scale,
                   {**_legend(palette), **lines}, labels=(xlabel, ""),
                   formats=formats, ylabels=_metric_labels(g, data))


def length_generalisation(df: pd.DataFrame, out: Path, ablation: str | None = None,
                          scale: str | None = None, axes: Sequence[str] | None = None,
                          formats: Sequence[str] = FORMATS, highlight: str | None = None) -> list[Path]:
    """Test error against test sequence length (paper.md §12 T5), one panel per task with
    ``test/n_<n>/<metric>`` columns: per arm the seed mean and a 95% percentile-bootstrap band
    (plot only) over the usable runs; training lengths dotted vertical lines; the reference
    predictor dashed gray; a length an arm refused (``test/n_<n>/supported = 0``) an ``x`` at the
    top of the panel in the arm's colour, named in the caption.

    Returns:
        ``[png, pdf]``.

    Raises:
        ValueError: if no run has per-length metrics.
    """
    data, faxes = _frame(df, axes)
    keep = ["arm", "label", "facet", "diverged", *faxes]
    long = lengths.per_length(data, lengths.training_lengths(data), keep=keep)
    if long.empty:
        raise ValueError("no run has test/n_<n>/<metric> columns; nothing to plot")
    trained = lengths.training_lengths(data)
    ok = curves.usable(long[long["supported"]])
    errorbar, band = _band(ok.assign(**{SIZE: ok["n"]}), SIZE)
    g, palette = _draw(ok, faxes, _curve, x="n", y="error", errorbar=errorbar, highlight=highlight)
    refused, lines = [], {}
    for facet, ax in g.axes_dict.items():
        here = long[long["facet"] == facet]
        task = here["task"].iloc[0]
        ref = here.groupby("n", dropna=False)["reference_error"].mean().dropna()
        if len(ref):
            ax.plot(ref.index, ref.values, "--", color="0.45", lw=1.2)
            lines["trivial reference predictor"] = Line2D([], [], ls="--", color="0.45", lw=1.2)
        for n in trained.get(task, []):
            ax.axvline(n, color="black", ls=":", lw=1)
            lines["training length"] = Line2D([], [], ls=":", color="black", lw=1)
        ticks = sorted({*here["n"], *trained.get(task, [])})
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        _yscale(ax, pd.concat([ok.loc[ok["facet"] == facet, "error"], ref]))
        rows = _refused(ax, here[~here["supported"]], palette)
        refused += rows
        if rows:
            lines["length not supported (x, a row per arm above the data)"] = Line2D(
                [], [], ls="none", marker="x", ms=7, mew=2, color="0.3")
    caption = (f"Mean test error over seeds per arm against the test sequence length; bands: {band}. "
               "Dotted vertical lines: training lengths; dashed gray: the trivial reference predictor. "
               + (f"x in the band above the data, one row per arm: length not supported ({'; '.join(refused)})."
                  if refused else ""))
    return _finish(g, data, "length generalisation", caption, out, ablation, scale,
                   {**_legend(palette), **lines}, labels=("test sequence length n", ""), formats=formats,
                   ylabels=_metric_labels(g, data))


def _refused(ax: plt.Axes, refused: pd.DataFrame, palette: Mapping[str, tuple]) -> list[str]:
    """Mark the lengths each arm refused (rows of ``refused``) with an ``x`` in the arm's colour,
    one row per arm in a band that the y axis gains above the data (on the data they hid the
    lines, and at one height they hid each other). Returns ``"<arm> at n = …"`` per arm."""
    groups = list(refused.groupby("label", dropna=False))
    if not groups:
        return []
    lo, hi = ax.get_ylim()
    log = ax.get_yscale() in ("log", "symlog") and lo > 0
    span = np.log10(hi / lo) if log else hi - lo
    frac = 0.07 * (len(groups) + 1)  # the band's share of the new axis
    top = span / (1 - frac)
    ax.set_ylim(lo, lo * 10 ** top if log else lo + top)
    out = []
    for row, (label, grp) in enumerate(groups):
        ns = sorted(grp["n"].unique())
        y = 1 - 0.07 * (row + 1)  # axes fraction, inside the band
        ax.plot(ns, [y] * len(ns), "x", ms=7, mew=2, color=palette.get(label, "black"),
                transform=ax.get_xaxis_transform(), clip_on=False)
        out.append(f"{curves.strip_arm(label, ())} at n = {', '.join(map(str, ns))}")
    return out


def _categorical(data: pd.DataFrame, *, y: str, palette: Mapping[str, tuple], hue: str = "label",
                 **_) -> None:
    """Seeds as dots and the seed mean with 95% bootstrap bars, one column per label."""
    ax = plt.gca()
    order = curves.ordered(data["short"])
    hues = [h for h in palette if h in set(data[hue])]
    kw = dict(data=data, x="short", y=y, order=order, hue=hue, hue_order=hues, palette=palette,
              ax=ax, legend=False)
    dodge = 0.4 if hue != "label" and len(hues) > 1 else False
    # no jitter: seaborn draws jitter from numpy's global RNG, and figures must be reproducible
    sns.stripplot(alpha=0.45, size=4, jitter=False, dodge=bool(dodge), **kw)
    sns.pointplot(errorbar=_interval, dodge=dodge, linestyle="none",
                  marker="D", markersize=6, capsize=0.1, markeredgecolor="black", **kw)
    _slanted(ax)
    ax.set_xlabel("")


def permutation_error(df: pd.DataFrame, out: Path, ablation: str | None = None,
                      scale: str | None = None, axes: Sequence[str] | None = None,
                      formats: Sequence[str] = FORMATS) -> list[Path]:
    """Measured permutation-equivariance error ``‖f(XP) − f(X)P‖ / ‖f(X)‖`` of each trained
    model (``symmetry/permutation_err``; claim C7, paper.md §8, §13), one panel per task: per arm
    the seeds as dots and their mean with a 95% percentile-bootstrap bar (plot only), log y, at
    the largest training-set size; the exact-identity tolerance of the run's dtype (paper.md §13:
    1e-5 in fp32, 1e-10 in fp64) dashed.

    Raises:
        ValueError: no usable run has ``symmetry/permutation_err``.
    """
    value = "symmetry/permutation_err"
    data, faxes = _frame(df, axes)
    if value not in data:
        raise ValueError(f"no {value} column in the runs table")
    if SIZE in data:
        data = data[data[SIZE] == data.groupby("task", dropna=False)[SIZE].transform("max")]
    ok = curves.usable(data, value)
    if ok.empty:
        raise ValueError(f"no FINISHED, non-diverged run has a finite {value}")
    ok = ok.assign(**{value: ok[value].clip(lower=ZERO_AT)})
    g, palette = _draw(ok, faxes, _categorical, y=value)
    tol, dtype = _tolerance(data)
    line = {}  # named in the legend: in the panel its label ran into the points near it
    for facet, ax in g.axes_dict.items():
        line = {f"exact within {dtype} tolerance ({tol:g})": _hline(ax, tol, None)}
        _yscale(ax, pd.concat([ok.loc[ok["facet"] == facet, value], pd.Series([tol])]))
    sizes = ", ".join(_fmt(v) for v in curves.ordered(data[SIZE])) if SIZE in data else "all"
    caption = (f"Each trained model's relative permutation-equivariance error (dots: seeds; diamonds: "
               f"seed mean with {BAND}) at n_train = {sizes}. Dashed: the exact-identity tolerance "
               f"of {dtype} (paper.md §13). Below it the model is permutation equivariant; an error of exactly 0 "
               f"is drawn at {ZERO_AT:g}.")
    return _finish(g, data, "permutation error of the trained models", caption, out, ablation, scale,
                   {**_legend(palette, "D"), **line}, value=value,
                   labels=("", "permutation error ‖f(XP) − f(X)P‖ / ‖f(X)‖"), formats=formats)


ZERO_AT = 1e-17  # non-negative errors that are exactly 0 are drawn here on a log axis (said in the caption)
ROTATED = "knowledge rotated: f(QX; QZ)"
FIXED = "knowledge not rotated: f(QX; Z)"


def rotation_transfer(df: pd.DataFrame, out: Path, ablation: str | None = None,
                      scale: str | None = None, axes: Sequence[str] | None = None,
                      formats: Sequence[str] = FORMATS) -> list[Path]:
    """T2 embedding-rotation transfer (claims C5, C5b; paper.md §12 T2, §13), one panel per
    rotation mode × optimiser (only modes that measured it): per arm the relative transfer gap
    ``|test/rotated/loss − test/loss| / |test/loss|`` of the model with its knowledge rotated
    (must be ~0 for equivariant-with-knowledge forms), beside the same gap with the knowledge not
    rotated (``test/rotated_fixed/loss``; such forms and B7 collapse). Seeds as dots, the mean
    with a 95% percentile-bootstrap bar (plot only); log y; the dtype's tolerance dashed.

    Raises:
        ValueError: no usable run has ``test/rotated/loss`` and ``test/loss``.
    """
    data, faxes = _frame(df, axes if axes is not None else list(curves.FACET_AXES))
    if "test/rotated/loss" not in data or "test/loss" not in data:
        raise ValueError("no test/rotated/loss and test/loss columns in the runs table")
    base = data["test/loss"].abs()
    gaps = {ROTATED: (data["test/rotated/loss"] - data["test/loss"]).abs() / base}
    if "test/rotated_fixed/loss" in data:
        gaps[FIXED] = (data["test/rotated_fixed/loss"] - data["test/loss"]).abs() / base
    long = pd.concat([data.assign(gap=v, knowledge=k) for k, v in gaps.items()], ignore_index=True)
    measured = data.loc[data["test/rotated/loss"].notna(), "facet"].unique()
    mode = "task.rotation"
    others = curves.ordered(set(data[mode]) - set(data.loc[data["test/rotated/loss"].notna(), mode])) \
        if mode in data else []
    long = long[long["facet"].isin(measured)]
    ok = curves.usable(long, "gap")
    if ok.empty:
        raise ValueError("no FINISHED, non-diverged run has finite test/rotated/loss and test/loss")
    ok = ok.assign(gap=ok["gap"].clip(lower=ZERO_AT))
    colours = dict(zip(gaps, sns.color_palette("colorblind", 4)[2:]))
    g, _ = _draw(ok, faxes, lambda data, palette, **kw: _categorical(data, palette=colours, **kw),
                 y="gap", hue="knowledge", sharey=True)
    tol, dtype = _tolerance(data)
    line = {}  # named in the legend, as in every figure
    for facet, ax in g.axes_dict.items():
        line = {f"exact within {dtype} tolerance ({tol:g})": _hline(ax, tol, None)}
        _yscale(ax, pd.concat([ok["gap"], pd.Series([tol])]))
    caption = ("Trained on the embedding E, evaluated on QE. Per arm, the relative gap between the "
               "test loss on QE and on E: with every knowledge tensor rotated (QZ) it must vanish for "
               "the equivariant-with-knowledge forms (C5); without rotating it they lose. Dots: seeds; "
               f"diamonds: seed mean with {BAND}. Dashed: the exact-identity tolerance (paper.md §13); a gap of "
               f"exactly 0 is drawn at {ZERO_AT:g}."
               + (f" Modes without a transfer measurement (not drawn): {', '.join(map(str, others))}."
                  if others else ""))
    return _finish(g, data[data["facet"].isin(measured)], "rotation transfer gap", caption, out,
                   ablation, scale, {**_legend(colours, "D"), **line}, value="test/rotated/loss",
                   legend_title="knowledge on QE", labels=("", "relative transfer gap |L(QE) − L(E)| / L(E)"),
                   formats=formats)


ABSENT = {"test/acc_answer_in_input": "answer in the input",
          "test/acc_not_answer_in_input": "answer absent from the input"}


def absent_answers(df: pd.DataFrame, out: Path, ablation: str | None = None,
                   scale: str | None = None, axes: Sequence[str] | None = None,
                   formats: Sequence[str] = FORMATS) -> list[Path]:
    """Test accuracy on the answers absent from the input (``test/acc_not_answer_in_input``),
    beside the accuracy on answers present in it where logged (claims C2, C8(b); paper.md §5,
    §12 T1: Xg1-only forms with a tied readout score exactly 0 on absent answers), against the
    training-set size, one panel per task × subset: per arm the seed mean and a 95%
    percentile-bootstrap band (plot only); linear y from 0 to 1.

    Raises:
        ValueError: no usable run has ``test/acc_not_answer_in_input``.
    """
    data, faxes = _frame(df, axes)
    cols = [c for c in ABSENT if c in data]
    if "test/acc_not_answer_in_input" not in cols:
        raise ValueError("no test/acc_not_answer_in_input column in the runs table")
    long = pd.concat([data.assign(acc=data[c], subset=ABSENT[c]) for c in reversed(cols)],
                     ignore_index=True)
    long["facet"] = long["facet"] + " · " + long["subset"]
    ok = curves.usable(long, "acc")
    if ok.empty:
        raise ValueError("no FINISHED, non-diverged run has a finite test/acc_not_answer_in_input")
    errorbar, band = _band(ok, SIZE)
    g, palette = _draw(ok, faxes, _curve, x=SIZE, y="acc", errorbar=errorbar)
    line = {}  # named in the legend: in the panel its label lay on the points at 0
    for facet, ax in g.axes_dict.items():
        ax.set_ylim(-0.03, 1.03)
        if facet.endswith(ABSENT["test/acc_not_answer_in_input"]):
            line = {"0: exact for tied-readout Xg1 forms": _hline(ax, 0.0, None, ":", "black")}
    one = _one_x(ok, SIZE)
    caption = (f"Mean test accuracy over seeds per arm, split by whether the answer token occurs in "
               f"the input{f' ({one}: a point per arm)' if one else ''}; bands and bars: {band}. "
               "Xg1-only forms with a tied readout must score exactly 0 on absent answers (paper.md §12 T1).")
    return _finish(g, long, "accuracy on answers absent from the input", caption, out, ablation,
                   scale, {**_legend(palette), **line}, value="acc",
                   labels=(f"arm ({one})" if one else f"{SIZE} (training examples)", "test accuracy (strict argmax)"),
                   formats=formats)


def learning_curves(tracking_uri: str, run_ids: Sequence[str], out: Path,
                    metrics: Sequence[str] = ("train/loss", "val/loss"),
                    title: str | None = None, caption: str | None = None,
                    of: int | None = None) -> list[Path]:
    """Learning curves of the given runs from MLflow's metric histories (one panel per metric,
    one line per run labelled ``task arm seed=… n_train=…``, log-scaled loss against step).
    The suptitle is short: ``title`` (the ablation and scale), "learning curves of N runs" (``of
    M`` where ``of`` gives how many runs the ablation has) and the seeds shown; ``caption``, a
    line under the figure, says how the runs were picked (it was a 40-word suptitle). A diverged
    run (tag ``diverged``) is left out of the panels, whose loss axis it would stretch over
    dozens of decades, and the title names it as left out.

    Returns:
        ``[png, pdf]``.

    Raises:
        ValueError: ``run_ids`` is empty.
    """
    if not run_ids:
        raise ValueError("learning_curves needs at least one run id")
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4.4), squeeze=False)
    seeds, diverged = set(), []
    for run_id in run_ids:
        run = client.get_run(run_id)
        p, tags = run.data.params, run.data.tags
        label = (f"{tags.get('task', '')} {tags.get('arm', tags.get('variant', run_id[:8]))} "
                 f"seed={p.get('seed', '?')} n_train={p.get('task.n_train', '?')}")
        if tags.get("diverged", "").lower() == "true":
            diverged.append(label)
            continue
        seeds.add(p.get("seed", "?"))
        for ax, key in zip(axes[0], metrics):
            hist = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
            if hist:
                # markers: a short run has one evaluation, and a line of one point is not drawn
                ax.plot([m.step for m in hist], [m.value for m in hist], label=label, marker="o",
                        markersize=3)
    for ax, key in zip(axes[0], metrics):
        ax.set(xlabel="step", ylabel=key, title=key)
        if ax.lines:  # log where every value is positive; plain tick numbers within a decade
            _yscale(ax, pd.Series(np.concatenate([line.get_ydata() for line in ax.lines])))
        ax.legend(fontsize=6)
    shown = f"learning curves of {len(run_ids) - len(diverged)}" + (f" of {of}" if of else "") + " runs"
    shown += f", seed {', '.join(curves.ordered(seeds))}" if seeds else ""
    if diverged:
        shown += f"\nleft out, diverged: {'; '.join(diverged)}"
    fig.suptitle(f"{title}: {shown}" if title else shown, fontsize=10)
    if caption:
        fig.text(0.01, -0.01, textwrap.fill(caption, 110), va="top", ha="left", fontsize=7)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_suffix(".png"), out.with_suffix(".pdf")]
    fig.tight_layout()
    _save(fig, *paths)
    plt.close(fig)
    return paths
