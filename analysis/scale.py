"""The scale column of the stability table (issue 51; paper.md §13 "Stability"): does a verdict
hold with more data and more steps?

A part registered with ``scale_check: true`` (the parts whose resolution or headroom sits
nearest δ) is rerun on the exploratory seeds at ``report.scale_n_train`` examples and
``report.scale_steps`` steps, validating every ``report.scale_eval_every`` steps: its two arms
(every ``choose_b`` candidate), its positive control's and its floor arm, each at every lr of
the ablation's grid, then one grid step (×√10) past a chosen edge, at most ``report.extend_lr``
rounds, as the exploratory block's lrs are extended (:func:`analysis.reporting.run_extensions`).
The lrs are chosen again at scale, because the chosen lr moves with the budget and the data;
the frozen ones of the confirmation block would decide the part at a grid edge.

Each rerun is the grid trial it repeats with ``task.n_train``, ``train.max_steps``,
``train.eval_every`` (and ``train.lr``) changed, tagged ``extends`` with that grid trial, so the
analysis reads it with the grid trial's arm; :mod:`analysis.phases` tells these runs apart by
their ``task.n_train`` above the grid's (phase ``scale``). The part is decided on them alone, with
every precondition (:func:`analysis.stability.stability_row`): a flag column, never the verdict.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from analysis import protocol
from analysis.confirm import distinct_extensions

N_TRAIN, STEPS, EVERY, READOUT = "task.n_train", "train.max_steps", "train.eval_every", "task.readout"


def changes(n_train: int, steps: int, eval_every: int) -> dict[str, str]:
    """The overrides that turn a grid trial into its scale rerun."""
    return {N_TRAIN: str(int(n_train)), STEPS: str(int(steps)), EVERY: str(int(eval_every))}


def enabled(n_train: int, n_train_max: int) -> bool:
    """Whether the scale column runs: a positive ``report.scale_n_train`` above the scale's own
    largest training set (at ``scale=full`` the grid reaches 8192 itself)."""
    return int(n_train) > 0 and int(n_train) > int(n_train_max)


def registered(configs: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """``{ablation: [part spec]}``: the deciding parts registered with ``scale_check``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, conf in configs.items():
        specs = [protocol.spec_dict(p) for p in conf.ablation.parts]
        chosen = [s for s in specs if s["scale_check"] and s["role"] == "deciding"]
        if chosen:
            out[name] = chosen
    return out


def arms_of(spec: Mapping[str, Any]) -> list[str]:
    """Every arm a part's decision reads: ``a``, ``b`` (or its ``choose_b`` candidates), the
    positive control's pair and the floor arm."""
    b = list(spec["choose_b"]) or [spec["b"]]
    return list(dict.fromkeys([spec["a"], *b, *spec["control"], *([spec["floor"]] if spec["floor"] else [])]))


def _grid_rows(df: pd.DataFrame, spec: Mapping[str, Any]) -> pd.DataFrame:
    """The part's grid runs (no ``extends``) of its arms at each arm's largest ``n_train`` (the
    size the part is decided at), under its registered readout."""
    if df.empty:
        return df
    extends = df["extends"].fillna("").astype(str) if "extends" in df else pd.Series("", index=df.index)
    rows = df[(extends == "") & (df["task"] == spec["task"]) & df["arm"].isin(arms_of(spec))]
    if spec["readout"] and READOUT in rows:
        rows = rows[rows[READOUT].astype(str) == spec["readout"]]
    size = pd.to_numeric(rows[N_TRAIN], errors="coerce")
    return rows[size == size.groupby(rows["arm"], dropna=False).transform("max")]


def scale_trials(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame],
                 ablations: Mapping[str, Sequence[Any]], cli: Sequence[str],
                 overrides: Mapping[str, str]) -> dict[str, list]:
    """``{ablation: [Trial]}``: one scale rerun (``overrides``, :func:`changes`) of every grid
    trial of each registered part's arms at the decided size, every lr and exploratory seed
    (``runs``: each ablation's exploratory runs, with ``arm``); one per distinct trial."""
    out: dict[str, list] = {}
    for name, specs in registered(configs).items():
        df = runs.get(name, pd.DataFrame())
        if df.empty:
            continue
        known = {t.trial_id: t for t in ablations[name]}
        bases = [known[i] for spec in specs for i in _grid_rows(df, spec)["trial_id"].astype(str) if i in known]
        todo = distinct_extensions([f"+ablation={name}", *cli], ((base, overrides) for base in bases))
        if todo:
            out[name] = todo
    return out


def scale_edges(configs: Mapping[str, Any], scale_runs: Mapping[str, pd.DataFrame]) -> dict[str, list[dict]]:
    """``{ablation: [edge]}``: the lr edges the registered parts choose on their scale runs
    (:attr:`analysis.protocol.PartResult.edges`), to extend one grid step further."""
    out: dict[str, list[dict]] = {}
    for name, specs in registered(configs).items():
        df = scale_runs.get(name, pd.DataFrame())
        if df.empty:
            continue
        edges = [e for s in specs for e in protocol.decide_part(df, s).edges]
        if edges:
            out[name] = edges
    return out
