"""Figures drawn from a runs DataFrame (:func:`analysis.load.load_runs`), paper.md §13.

Every figure is written as ``<out>.png`` and ``<out>.pdf``; each function returns those paths.
Bands are 95% percentile-bootstrap intervals of the mean over seeds (:func:`analysis.stats.mean_ci`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import mlflow  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis import lengths, stats  # noqa: E402
from analysis.stats import add_error as with_error  # noqa: E402,F401  (older name, kept importable)

PANEL = (5.2, 4.2)


def _save(fig: plt.Figure, out: Path) -> list[Path]:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    paths = [out.with_suffix(".png"), out.with_suffix(".pdf")]
    for path in paths:
        fig.savefig(path, dpi=150)
    plt.close(fig)
    return paths


def _panels(n: int, cols: int = 4) -> tuple[plt.Figure, list[plt.Axes]]:
    cols = min(n, cols)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(PANEL[0] * cols, PANEL[1] * rows), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _band(ax: plt.Axes, x: pd.Series, curve: pd.DataFrame, label: str) -> plt.Line2D:
    """Mean line with markers, the interval as a band and as error bars (visible at one point)."""
    line, = ax.plot(x, curve["mean"], "o-", ms=4, label=label)
    ax.fill_between(x, curve["lo"], curve["hi"], color=line.get_color(), alpha=0.2)
    ax.errorbar(x, curve["mean"], yerr=[curve["mean"] - curve["lo"], curve["hi"] - curve["mean"]],
                fmt="none", ecolor=line.get_color(), capsize=3, lw=1)
    return line


def _yscale(ax: plt.Axes, values: pd.Series) -> None:
    """Log scale when every value is positive, else symlog (errors of exactly 0 stay visible)."""
    v = values[np.isfinite(values)]
    if len(v) and (v > 0).all():
        ax.set_yscale("log")
    elif len(v):
        positive = v[v > 0]
        ax.set_yscale("symlog", linthresh=float(positive.min()) if len(positive) else 1e-3)


def _labels(df: pd.DataFrame) -> dict[str, str]:
    """``variant → "variant (N params)"`` (median parameter count over the task's runs)."""
    if "n_params" not in df:
        return {}
    n = df.groupby("variant")["n_params"].median()
    return {v: f"{v} ({p:,.0f} params)" for v, p in n.items() if np.isfinite(p)}


def _title(task: str, here: pd.DataFrame) -> str:
    c = stats.counts(here, by=()).iloc[0] if len(here) else None
    if c is None:
        return task
    return (f"{task}: {c['finished']} finished, {c['failed']} failed, {c['killed']} killed, "
            f"{c['diverged']} diverged")


def sample_efficiency(df: pd.DataFrame, out: Path, x: str = "task.n_train", seed: int = 0) -> list[Path]:
    """Test error against training-set size, log–log, one panel per task (claim C9, paper.md §13).

    Per variant: the mean over seeds of the FINISHED runs at the learning rate chosen on
    validation loss (:func:`analysis.stats.select_lr`; identity with a single lr), with a 95%
    bootstrap band. The trivial reference predictor (uniform mixing for regression, majority
    class for token tasks; :func:`analysis.stats.add_error`) is drawn dashed where logged.
    Panel titles count finished, failed, killed and diverged trials (diverged runs stay in the
    lines with their last finite metrics); legends give each variant's parameter count.

    Args:
        df: runs with ``status``, ``variant``, ``x``, ``seed`` and ``test/rel_mse`` or ``test/acc``.
        out: output path without suffix.

    Returns:
        ``[png, pdf]``.

    Raises:
        ValueError: if no FINISHED run has an error metric.
    """
    data = with_error(df)
    chosen = stats.select_lr(data, group=("task", "variant", x)) if "train.lr" in data else data
    ok = stats.finished(chosen, "error")
    if ok.empty:
        raise ValueError("no FINISHED run has test/rel_mse or test/acc; nothing to plot")
    tasks = sorted(ok["task"].unique())
    fig, axes = _panels(len(tasks))
    for ax, task in zip(axes, tasks):
        here = ok[ok["task"] == task]
        labels = _labels(here)
        for variant, curve in stats.mean_ci(here, by=("variant", x), seed=seed).groupby("variant"):
            _band(ax, curve[x], curve, labels.get(variant, variant))
        ref = here["reference_error"].dropna()  # one test set per task: constant in n_train
        if not ref.empty:
            ax.axhline(ref.mean(), ls="--", color="gray", label=here["reference_name"].iloc[0])
        ax.set_xscale("log")
        _yscale(ax, pd.concat([here["error"], ref]))
        ax.set(xlabel=f"{x} (training examples)", ylabel=here["error_name"].iloc[0])
        ax.set_title(_title(task, chosen[chosen["task"] == task]), fontsize=8)
        ax.legend(fontsize=7)
    fig.suptitle("mean and 95% bootstrap CI over seeds (lr chosen on validation loss)", fontsize=9)
    return _save(fig, out)


def length_generalisation(df: pd.DataFrame, out: Path, seed: int = 0) -> list[Path]:
    """Test error against test sequence length (paper.md §12 T5), one panel per task that has
    ``test/n_<n>/<metric>`` columns, one line per variant (mean and 95% bootstrap band over the
    FINISHED runs), the training lengths as dotted vertical lines, the reference predictor
    dashed. A length a variant refused (``test/n_<n>/supported = 0``) is marked with an ``x`` at
    the top of the panel in the variant's colour and named in the legend; never left out.

    Returns:
        ``[png, pdf]``.

    Raises:
        ValueError: if no run has per-length metrics.
    """
    data = with_error(df)
    chosen = stats.select_lr(data, group=("task", "variant", "task.n_train")) if "train.lr" in data else data
    runs = stats.finished(chosen)
    trained = lengths.training_lengths(runs)
    long = lengths.per_length(runs, trained)
    if long.empty:
        raise ValueError("no run has test/n_<n>/<metric> columns; nothing to plot")
    tasks = sorted(long["task"].unique())
    fig, axes = _panels(len(tasks))
    for ax, task in zip(axes, tasks):
        here = long[long["task"] == task]
        labels = _labels(runs[runs["task"] == task])
        ok = here[here["supported"] & np.isfinite(here["error"])]
        top = ax.get_xaxis_transform()  # x in data, y in axes fraction
        for variant in sorted(here["variant"].unique()):
            curve = stats.mean_ci(ok[ok["variant"] == variant], by=("n",), seed=seed).astype(float)
            line = _band(ax, curve["n"], curve, labels.get(variant, variant))
            refused = sorted(here.loc[(here["variant"] == variant) & ~here["supported"], "n"].unique())
            if refused:
                ax.plot(refused, [0.97] * len(refused), "x", ms=8, mew=2, color=line.get_color(),
                        transform=top, clip_on=False,
                        label=f"{variant}: not supported at n={', '.join(map(str, refused))}")
        ref = ok.groupby("n")["reference_error"].mean().dropna()
        if not ref.empty:
            ax.plot(ref.index, ref.values, "_--", ms=10, color="gray", label="reference predictor")
        for i, n in enumerate(trained.get(task, [])):
            ax.axvline(n, color="black", ls=":", lw=1, label="training length" if i == 0 else None)
        ax.set_xscale("log", base=2)
        ticks = sorted({*here["n"], *trained.get(task, [])})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        _yscale(ax, pd.concat([ok["error"], ref]))
        ax.set(xlabel="test sequence length n", ylabel="test error (rel. MSE or 1 − acc)")
        ax.set_title(_title(task, chosen[chosen["task"] == task]), fontsize=8)
        ax.legend(fontsize=6)
    fig.suptitle("length generalisation: mean and 95% bootstrap CI over seeds", fontsize=9)
    return _save(fig, out)


def learning_curves(tracking_uri: str, run_ids: Sequence[str], out: Path,
                    metrics: Sequence[str] = ("train/loss", "val/loss")) -> list[Path]:
    """Learning curves of the given runs from MLflow's metric histories (one panel per metric,
    one line per run labelled ``task variant seed=… n_train=…``, log-scaled loss against step).

    Returns:
        ``[png, pdf]``.

    Raises:
        ValueError: ``run_ids`` is empty.
    """
    if not run_ids:
        raise ValueError("learning_curves needs at least one run id")
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    fig, axes = _panels(len(metrics))
    for run_id in run_ids:
        run = client.get_run(run_id)
        p, tags = run.data.params, run.data.tags
        label = (f"{tags.get('task', '')} {tags.get('variant', run_id[:8])} seed={p.get('seed', '?')} "
                 f"n_train={p.get('task.n_train', '?')}")
        for ax, key in zip(axes, metrics):
            hist = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
            if hist:
                ax.plot([m.step for m in hist], [m.value for m in hist], label=label)
    for ax, key in zip(axes, metrics):
        ax.set(xlabel="step", ylabel=key, title=key)
        if ax.lines and all(min(line.get_ydata()) > 0 for line in ax.lines):
            ax.set_yscale("log")
        ax.legend(fontsize=6)
    return _save(fig, out)
