"""Figures drawn from a runs DataFrame (see :func:`analysis.load.load_runs`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


def with_error(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``error`` (test relative MSE for regression tasks, ``1 − test/acc`` for token tasks),
    ``error_name``, and ``reference_error`` (the uniform-mixing predictor's relative MSE, where
    the task reports it); ``task`` falls back to ``task.name`` for runs without a task tag."""
    out = df.copy()
    rel = out["test/rel_mse"] if "test/rel_mse" in out else pd.Series(np.nan, index=out.index)
    acc = out["test/acc"] if "test/acc" in out else pd.Series(np.nan, index=out.index)
    out["error"] = rel.where(rel.notna(), 1.0 - acc)
    out["error_name"] = np.where(rel.notna(), "test relative MSE", "test error (1 − accuracy)")
    out["reference_error"] = out["test/uniform_rel_mse"] if "test/uniform_rel_mse" in out else np.nan
    if "task" not in out or out["task"].isna().all():
        out["task"] = out["task.name"] if "task.name" in out else "task"
    out["task"] = out["task"].fillna(out.get("task.name", "task"))
    return out


def sample_efficiency(df: pd.DataFrame, out: Path, x: str = "task.n_train") -> list[Path]:
    """Test error against training-set size, log-log, one panel per task: mean and 95% CI over
    seeds per variant (seaborn's bootstrap CI of the mean), the uniform-mixing predictor dashed.

    FAILED runs are left out of the lines and counted in the panel titles, with the diverged
    ones (which stay in the lines with their last finite metrics).

    Args:
        df: runs with columns ``variant``, ``status``, ``x`` and ``test/rel_mse`` or ``test/acc``.
        out: output path without suffix; ``.png`` and ``.pdf`` are written.

    Returns:
        The written files.

    Raises:
        ValueError: if no FINISHED run has an error metric.
    """
    data = with_error(df)
    ok = data[data["status"] == "FINISHED"].dropna(subset=["error"]).sort_values(x)
    if ok.empty:
        raise ValueError("no FINISHED run has test/rel_mse or test/acc; nothing to plot")
    tasks = sorted(ok["task"].unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 4.2), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        here, everything = ok[ok["task"] == task], data[data["task"] == task]
        sns.lineplot(data=here, x=x, y="error", hue="variant", marker="o", errorbar=("ci", 95), ax=ax)
        ref = here.groupby(x)["reference_error"].mean().dropna()
        if not ref.empty:
            ax.plot(ref.index, ref.values, "--", color="gray", label="uniform mixing")
        ax.set(xscale="log", yscale="log" if (here["error"] > 0).all() else "linear",
               xlabel=f"{x} (training examples)", ylabel=here["error_name"].iloc[0])
        diverged = int((here.get("diverged", pd.Series(dtype=object)).astype(str) == "True").sum())
        failed = int((everything["status"] != "FINISHED").sum())
        ax.set_title(f"{task}: {len(here)} runs, {failed} failed, {diverged} diverged", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("mean and 95% CI over seeds", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    paths = [out.with_suffix(".png"), out.with_suffix(".pdf")]
    for path in paths:
        fig.savefig(path, dpi=150)
    plt.close(fig)
    return paths
