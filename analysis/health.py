"""Task health: can a task separate the variants at all? (paper.md §13 *not learned*, issue 11).

Per task, from the runs of every ablation that uses it (the same tables the report decides its
parts on, :func:`analysis.stats.add_error`, with ``arm``):

* its **reference predictors** and their mean test error over the task's runs: uniform mixing
  (``test/uniform_rel_mse``), the identity ``ŷ = x`` (``test/identity_rel_mse``) and the zero
  predictor (relative MSE 1) for regression; the majority class (``1 − test/majority_acc``) and
  uniform mixing (``1 − test/uniform_acc``, the most frequent input token) for token tasks. The **best** of them is the bar a variant has to clear;
* the **best and worst variant**: per ablation, at the task's largest ``task.n_train`` in that
  ablation and the learning rate chosen on validation (:func:`analysis.stats.select_lr`, per
  task × arm × n_train), the seed-mean test error of each arm (FINISHED, non-diverged runs);
* the **margin** ``best reference − best variant`` (> 0: some variant beats every trivial
  predictor);
* each **deciding part** on the task (``ablation.parts``) and whether it can be decided here:
  the best arm of *its* ablation beats the best reference by at least the part's δ (the
  precondition *not learned* of :mod:`analysis.protocol`, judged on the test error whatever the
  part's value).

``status`` flags a task: ``no runs`` (no usable run of any arm), ``nothing beats the
reference`` (margin ≤ 0), ``a deciding part cannot be decided`` (some deciding part fails its
δ, or its ablation has no usable run on the task), else ``ok``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis import curves, stats
from analysis.protocol import spec_dict

SIZE = "task.n_train"


class Status(Enum):
    """A task's health (worded by :data:`analysis.render_tables.HEALTH_WORDS`): its best arm
    beats the best reference predictor and every deciding part on it can be decided (``OK``),
    no arm beats the reference (``NOTHING``), a deciding part cannot be decided
    (``UNDECIDABLE``), or the task has no runs (``NO_RUNS``)."""

    OK = "ok"
    NOTHING = "nothing"
    UNDECIDABLE = "undecidable"
    NO_RUNS = "no runs"


OK, NOTHING, UNDECIDABLE, NO_RUNS = Status.OK, Status.NOTHING, Status.UNDECIDABLE, Status.NO_RUNS
REFERENCES = {  # logged column → (name, error from the logged value)
    "test/uniform_rel_mse": ("uniform mixing", lambda v: v),
    "test/identity_rel_mse": ("identity", lambda v: v),
    "test/zero_rel_mse": ("zero predictor", lambda v: v),
    "test/majority_acc": ("majority class", lambda v: 1.0 - v),
    "test/uniform_acc": ("uniform mixing", lambda v: 1.0 - v),
}
@dataclass(frozen=True)
class Judged:
    """A deciding part judged on its task: whether the best arm of its ablation beats the best
    reference by its δ (``ok``), and whether that ablation has runs on the task (``ran``)."""

    claim: str
    ablation: str
    delta: float
    ok: bool
    ran: bool


def _references(df: pd.DataFrame) -> dict[str, float]:
    """``{name: mean error}`` of the reference predictors that ``df``'s runs logged; the zero
    predictor (error 1) is always one for a relative-MSE task."""
    ok = stats.finished(df)
    out = {}
    for column, (name, error) in REFERENCES.items():
        if column in ok:
            values = pd.to_numeric(ok[column], errors="coerce").dropna()
            if not values.empty:
                out[name] = float(error(values).mean())
    if "test/rel_mse" in ok and pd.to_numeric(ok["test/rel_mse"], errors="coerce").notna().any():
        out.setdefault("zero predictor", 1.0)
    return out


def arm_errors(runs: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per ablation × task × arm: ``n_train`` (the task's largest in that ablation),
    ``error`` (seed-mean test error there, at the chosen lr) and ``seeds`` (runs averaged).

    Args:
        runs: ``{ablation: runs}``, each with ``task``, ``arm`` (or ``variant``), ``error``
            (:func:`analysis.stats.add_error`; added here if missing) and ``task.n_train``; the
            lr is chosen here unless an ``lr_chosen`` column says it was already.
    """
    rows = []
    for ablation, df in runs.items():
        if df.empty or SIZE not in df:
            continue
        df = df if "error" in df else stats.add_error(df)
        df = df.assign(arm=(df["arm"] if "arm" in df else df["variant"]).astype(str))
        if "train.lr" in df and "lr_chosen" not in df:  # not already selected (curves.prepare)
            df = stats.select_lr(df, group=("task", "arm", SIZE))
        if "lr_chosen" in df:
            df = df[df["lr_chosen"].notna()]
        ok = stats.finished(df, "error")
        ok = ok[~stats.diverged(ok)]
        for task, grp in ok.groupby("task", dropna=False):
            top = grp[grp[SIZE] == grp[SIZE].max()]
            for arm, mine in top.groupby("arm", dropna=False):
                rows.append({"ablation": ablation, "task": task, "arm": arm, "n_train": top[SIZE].iloc[0],
                             "error": float(mine["error"].mean()), "seeds": len(mine)})
    return pd.DataFrame(rows, columns=["ablation", "task", "arm", "n_train", "error", "seeds"])


def _fmt(x: float) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{x:.3g}"


def task_health(runs: Mapping[str, pd.DataFrame], parts: Mapping[str, Sequence[Any]]) -> pd.DataFrame:
    """The task health table (module docstring), one row per task used by a run or a part,
    in natural order of ``task``.

    Args:
        runs: ``{ablation: runs}`` as for :func:`arm_errors`.
        parts: ``{ablation: its pre-registered parts}`` (``PartConfig``, DictConfig or mapping);
            only deciding parts are judged.

    Returns:
        Columns ``task``, ``references`` (``((name, mean error), …)``), ``reference`` (the best
        one's name), ``reference_error``, ``n_train`` (the sizes), ``best`` and ``worst`` (``(arm,
        its ablation where the task has several, else "")``, None without runs), ``best_error``,
        ``worst_error``, ``margin``, ``parts`` (a :class:`Judged` per deciding part),
        ``decidable`` (``(k, m)``: k of the m deciding parts can be decided; None without any)
        and ``status``. :func:`analysis.render_tables.health` words it.
    """
    arms = arm_errors(runs)
    specs = [(ablation, spec_dict(p)) for ablation, ps in parts.items() for p in ps]
    deciding = [(a, s) for a, s in specs if s["role"] == "deciding"]
    tasks = sorted({*arms["task"], *(s["task"] for _, s in deciding)})
    rows = []
    for task in tasks:
        frames = [df[df["task"] == task] for df in runs.values() if not df.empty and "task" in df]
        refs = _references(pd.concat(frames)) if frames else {}
        ref_name = min(refs, key=refs.get) if refs else "–"
        ref = refs.get(ref_name, np.nan)
        mine = arms[arms["task"] == task].sort_values(["error", "arm"], kind="stable")
        several = mine["ablation"].nunique() > 1
        label = lambda r: (str(r["arm"]), str(r["ablation"]) if several else "")  # noqa: E731  an arm, its ablation
        best, worst = (mine.iloc[0], mine.iloc[-1]) if len(mine) else (None, None)
        margin = ref - best["error"] if best is not None else np.nan
        judged = []
        for ablation, spec in (x for x in deciding if x[1]["task"] == task):
            own = mine[mine["ablation"] == ablation]["error"]
            ok = bool(len(own)) and own.min() <= ref - float(spec["delta"])
            judged.append((Judged(str(spec["claim"]), ablation, spec["delta"], ok, bool(len(own))), ok))
        status = (NO_RUNS if mine.empty else NOTHING if not (margin > 0)
                  else UNDECIDABLE if not all(ok for _, ok in judged) else OK)
        rows.append({
            "task": task, "references": tuple(refs.items()),
            "reference": ref_name, "reference_error": ref,
            "n_train": tuple(int(n) for n in sorted(mine["n_train"].unique())),
            "best": label(best) if best is not None else None,
            "best_error": best["error"] if best is not None else np.nan,
            "worst": label(worst) if worst is not None else None,
            "worst_error": worst["error"] if worst is not None else np.nan, "margin": margin,
            "parts": tuple(j for j, _ in judged),
            "decidable": (sum(ok for _, ok in judged), len(judged)) if judged else None,
            "status": status})
    return curves.sort_rows(pd.DataFrame(rows, columns=[
        "task", "references", "reference", "reference_error", "n_train", "best", "best_error", "worst",
        "worst_error", "margin", "parts", "decidable", "status"]), ["task"])
