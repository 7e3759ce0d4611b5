"""Figures drawn from a runs DataFrame (see :func:`analysis.load.load_runs`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


def sample_efficiency(df: pd.DataFrame, out: Path, metric: str = "test/rel_mse",
                      reference: str = "test/uniform_rel_mse", x: str = "task.n_train") -> list[Path]:
    """Test error against training-set size, log-log: mean and 95% CI over seeds per variant.

    The CI is seaborn's bootstrap interval of the mean over the runs at each point (one run per
    seed). The uniform-mixing predictor's error (``reference``) is drawn dashed. FAILED runs are
    left out of the lines and counted in the title.

    Args:
        df: runs with columns ``variant``, ``status``, ``x`` and ``metric``.
        out: output path without suffix; ``.png`` and ``.pdf`` are written.

    Returns:
        The written files.

    Raises:
        ValueError: if no FINISHED run has the metric.
    """
    ok = df[(df["status"] == "FINISHED")].dropna(subset=[metric])
    if ok.empty:
        raise ValueError(f"no FINISHED run has metric {metric!r}; nothing to plot")
    n_failed = int((df["status"] != "FINISHED").sum())
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    sns.lineplot(data=ok.sort_values(x), x=x, y=metric, hue="variant", marker="o",
                 errorbar=("ci", 95), ax=ax)
    if reference in ok:
        ref = ok.groupby(x)[reference].mean()
        ax.plot(ref.index, ref.values, "--", color="gray", label="uniform mixing")
    ax.set(xscale="log", yscale="log", xlabel=f"{x} (training examples)", ylabel=metric)
    ax.set_title(f"{len(ok)} finished runs, {n_failed} failed; mean and 95% CI over seeds", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_suffix(".png"), out.with_suffix(".pdf")]
    for path in paths:
        fig.savefig(path, dpi=150)
    plt.close(fig)
    return paths
