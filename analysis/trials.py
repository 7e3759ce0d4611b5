"""Which runs an analysis reads: exactly the trials an ablation composes to (paper.md §13, no
silent pooling), each labelled with its *arm*.

An ablation's trials come from composing it with the command's overrides
(:func:`harness.expansion.expand`); the analysis keeps the runs whose ``trial_id`` is one of them,
plus the runs added past a learning-rate grid edge for one of them (tag ``extends``). Runs made
with other overrides in the same experiment are never mixed in.

An *arm* is what a comparison compares: the variant (which already names its ``model.*``
overrides, e.g. ``softmax_free[k=4]``) plus every other axis that the ablation sweeps, except
the task (a facet), the training-set size (the x axis), the seed (the replicate) and the
learning rate (chosen on validation), e.g. ``softmax · rotation=eval · optimizer=sgd``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd

from harness.expansion import Trial

NOT_ARM = ("task", "task.n_train", "seed", "train.lr", "model")  # facet, x, replicate, selected


def _point(trial: Trial) -> dict[str, str]:
    return dict(o.lstrip("+~").split("=", 1) for o in trial.overrides if "=" in o)


def swept_axes(trials: Sequence[Trial]) -> list[str]:
    """Grid keys that take more than one value across ``trials``, in grid order, without the
    task, ``task.n_train``, ``seed``, ``train.lr`` and the model (group or ``model.*`` keys: the
    variant names them)."""
    values: dict[str, set[str]] = {}
    for trial in trials:
        for key, value in _point(trial).items():
            values.setdefault(key, set()).add(value)
    return [k for k, v in values.items()
            if len(v) > 1 and k not in NOT_ARM and not k.startswith("model.")]


def arm_label(trial: Trial, axes: Iterable[str]) -> str:
    """``variant`` plus `` · key=value`` for each swept axis (the key's last component)."""
    point = _point(trial)
    extra = [f"{key.rsplit('.', 1)[-1]}={point[key]}" for key in axes if key in point]
    return " · ".join([trial.variant, *extra])


def arms(trials: Sequence[Trial]) -> pd.DataFrame:
    """One row per trial: ``trial_id``, ``arm`` and each swept axis's value (string)."""
    axes = swept_axes(trials)
    rows = [{"trial_id": t.trial_id, "arm": arm_label(t, axes),
             **{key: _point(t).get(key) for key in axes}} for t in trials]
    return pd.DataFrame(rows, columns=["trial_id", "arm", *axes])


def restrict(runs: pd.DataFrame, trials: Sequence[Trial], ablation: str) -> pd.DataFrame:
    """The runs of exactly ``trials`` (and of lr-edge extensions of them), with ``arm``,
    ``ablation`` and ``extends`` columns. A run of a trial outside the set is dropped.

    Args:
        runs: one row per run (:func:`analysis.load.load_runs`), with ``trial_id`` and,
            optionally, the tag ``extends``.
    """
    table = arms(trials)[["trial_id", "arm"]].rename(columns={"trial_id": "_key"})
    extends = (runs["extends"].fillna("").astype(str) if "extends" in runs
               else pd.Series("", index=runs.index))
    key = runs["trial_id"].astype(str).where(extends == "", extends)
    out = runs.drop(columns=[c for c in ("arm",) if c in runs]).assign(_key=key, extends=extends)
    out = out.merge(table, on="_key", how="inner").drop(columns="_key")
    return out.assign(ablation=ablation).reset_index(drop=True)


def grid_axes(grid_keys: Iterable[str], runs: pd.DataFrame) -> list[str]:
    """The arm axes of an ablation from its grid keys and its runs (no composition needed, e.g.
    from a results bundle): keys other than task, n_train, seed, lr and the model that take more
    than one value in ``runs``."""
    return [k for k in grid_keys if k not in NOT_ARM and not k.startswith("model.")
            and k in runs and runs[k].nunique(dropna=True) > 1]
