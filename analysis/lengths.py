"""Per-length test errors and training lengths from a runs table (paper.md §12 T5).

Reads the ``test/n_<n>/<metric>`` and ``test/n_<n>/supported`` columns that ``run_trial`` logs
for every extra test length, and the logged ``task.*`` params that name the training lengths.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd


def per_length(df: pd.DataFrame, trained: Mapping[str, list[int]] | None = None,
               keep: Sequence[str] = ()) -> pd.DataFrame:
    """Tidy per-length test errors from the ``test/n_<n>/<metric>`` columns (paper.md §12 T5).

    One row per run and test length: ``run_id``, ``task``, ``variant``, ``seed``, ``status``,
    ``n`` (int), ``error`` (``rel_mse`` or ``1 − acc``), ``reference_error`` (uniform mixing or
    majority class, NaN if not logged) and ``supported`` (False where the model refused the
    length: ``test/n_<n>/supported = 0``; its error is NaN). Empty if no run has such columns.
    With ``trained`` (``{task: training lengths}``, :func:`training_lengths`) and a table from
    :func:`add_error`, a task with a single training length ``L`` also gets, for each run with
    no ``test/n_L`` metrics, its in-distribution ``error`` at ``n = L``. The columns named in
    ``keep`` (e.g. ``arm``, ``diverged``) are carried along where present.
    """
    pattern = r"^test/n_(\d+)/(rel_mse|acc|supported|uniform_rel_mse|majority_acc)$"
    cols = df.columns[df.columns.str.match(pattern)]
    ids = list(dict.fromkeys(c for c in ("run_id", "task", "variant", "seed", "status", *keep) if c in df))
    if not len(cols):
        return pd.DataFrame(columns=[*ids, "n", "error", "reference_error", "supported"])
    long = df[ids + list(cols)].melt(id_vars=ids, var_name="key", value_name="v").dropna(subset=["v"])
    parts = long["key"].str.extract(pattern)
    long["n"], long["metric"] = parts[0].astype(int), parts[1]
    wide = long.pivot_table(index=[*ids, "n"], columns="metric", values="v", aggfunc="first").reset_index()
    nan = pd.Series(np.nan, index=wide.index)
    rel, acc = wide.get("rel_mse", nan), wide.get("acc", nan)
    wide["error"] = rel.where(rel.notna(), 1.0 - acc)
    ref = wide.get("uniform_rel_mse", nan)
    wide["reference_error"] = ref.where(ref.notna(), 1.0 - wide.get("majority_acc", nan))
    wide["supported"] = wide.get("supported", pd.Series(1.0, index=wide.index)).fillna(1.0) > 0
    if trained is not None and "error" in df:
        single = {t: ls[0] for t, ls in trained.items() if len(ls) == 1}
        base = df[df["task"].isin(list(single)) & df["run_id"].isin(wide["run_id"])]
        extra = base[ids + ["error", "reference_error"]].assign(n=base["task"].map(single), supported=True)
        have = set(zip(wide["run_id"], wide["n"]))
        extra = extra[[(r, n) not in have for r, n in zip(extra["run_id"], extra["n"])]]
        wide = pd.concat([wide, extra], ignore_index=True) if len(extra) else wide
    order = [c for c in ("task", "variant", "seed") if c in wide] + ["n"]
    return wide[[*ids, "n", "error", "reference_error", "supported"]].sort_values(order, ignore_index=True)


def _int_list(text: object) -> list[int]:
    """``"[4, 8]"`` → ``[4, 8]``; anything else (NaN, ``"[]"``) → ``[]``."""
    digits = str(text).strip("[]() ").replace(",", " ").split()
    return [int(float(v)) for v in digits if v.replace(".", "", 1).isdigit()]


def training_lengths(df: pd.DataFrame) -> dict[str, list[int]]:
    """Per task, the training sequence lengths from the logged params: ``task.train_lengths``;
    when that is empty, T1's ``task.terms`` (``n = 2L − 1``, +1 with ``task.equals``) or the
    family's single length ``task.n``. Empty list where none can be read."""
    out: dict[str, list[int]] = {}
    for task, grp in df.groupby("task", dropna=False):
        row = grp.iloc[0]
        lengths = _int_list(row.get("task.train_lengths"))
        if not lengths and _int_list(row.get("task.terms")):
            extra = int(str(row.get("task.equals")).lower() == "true")
            lengths = [2 * L - 1 + extra for L in _int_list(row.get("task.terms"))]
        if not lengths and pd.notna(row.get("task.n", np.nan)):
            lengths = [int(row["task.n"])]
        out[task] = sorted(set(lengths))
    return out
