"""The scale column of the stability table (issue 51; paper.md §13 "Stability"): does a verdict
hold with more data and more steps?

Every deciding part (``report.scale_parts: deciding``, issue 64; ``scale_check``: the three
parts registered with ``scale_check: true`` for the first column, issue 51) is rerun on the
exploratory seeds at :func:`factor` (``report.scale_n_train`` / ``scale.n_train_max``, 8) times
the n_train it is decided at (8192 for a part decided at 1024; 512 for T3a′ at 64, 256 for T3a″
at 32, 2048 for T4b′ at 256; each size for an area over sizes) and ``report.scale_steps``
steps, validating every ``report.scale_eval_every`` steps: its two arms (every ``choose_b`` candidate), its positive control's and its floor arm, each at every lr of
the ablation's grid, then one grid step (×√10) past a chosen edge, at most ``report.extend_lr``
rounds, as the exploratory block's lrs are extended (:func:`analysis.reporting.run_extensions`).
The lrs are chosen again at scale, because the chosen lr moves with the budget and the data;
the frozen ones of the confirmation block would decide the part at a grid edge.

Each rerun is the grid trial it repeats with ``task.n_train``, ``train.max_steps``,
``train.eval_every`` (and ``train.lr``) changed, tagged ``extends`` with that grid trial, so the
analysis reads it with the grid trial's arm; the round tags it with phase ``scale``
(:func:`analysis.rounds.tag`; :mod:`analysis.phases` tells untagged runs apart by their
``task.n_train`` above the grid's). The part is decided on them alone, with
every precondition (:func:`analysis.stability.stability_row`): a flag column, never the verdict.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from analysis import protocol
from analysis.confirm import distinct_extensions

N_TRAIN, STEPS, EVERY, READOUT = "task.n_train", "train.max_steps", "train.eval_every", "task.readout"
PARTS = ("deciding", "scale_check")  # the values of report.scale_parts (:func:`registered`)


def changes(n_train: int, steps: int, eval_every: int) -> dict[str, str]:
    """The overrides that turn a grid trial into its scale rerun."""
    return {N_TRAIN: str(int(n_train)), STEPS: str(int(steps)), EVERY: str(int(eval_every))}


def enabled(n_train: int, n_train_max: int) -> bool:
    """Whether the scale column runs: a positive ``report.scale_n_train`` above the scale's own
    largest training set (at ``scale=full`` the grid reaches 8192 itself)."""
    return int(n_train) > 0 and int(n_train) > int(n_train_max)


def factor(n_train: int, n_train_max: int) -> int:
    """How many times its grid size a part is rerun at: ``report.scale_n_train`` over the
    scale's largest size (8192 / 1024 = 8), so a part decided at a smaller size (T3a′ at 64) is
    rerun at 8× its own, not at 8192 (which would be another task's regime)."""
    return max(1, int(n_train) // max(1, int(n_train_max)))


def rerun_sizes(scale_factor: int, steps: int, eval_every: int) -> Callable[[Mapping[str, Any]], dict[str, str]]:
    """The overrides of one rerun from its grid run (or an lr edge, each with its ``n_train``):
    ``scale_factor`` × its ``n_train``, ``steps`` and ``eval_every``. An edge of the scale
    column is already at the scale's size (its n_train is the rerun's)."""
    def of(row: Mapping[str, Any]) -> dict[str, str]:
        n = int(float(row[N_TRAIN] if N_TRAIN in row else row["n_train"]))
        return changes(n * scale_factor if N_TRAIN in row else n, steps, eval_every)
    return of


def registered(configs: Mapping[str, Any], parts: str = "deciding") -> dict[str, list[dict[str, Any]]]:
    """``{ablation: [part spec]}``: the deciding parts a column reruns (``report.scale_parts``):
    ``deciding``: every one (issue 64); ``scale_check``: those registered with ``scale_check``
    (the first scale column's three, issue 51).

    Raises:
        ValueError: ``parts`` is neither.
    """
    if parts not in PARTS:
        raise ValueError(f"report.scale_parts={parts!r}; allowed: deciding, scale_check")
    out: dict[str, list[dict[str, Any]]] = {}
    for name, conf in configs.items():
        specs = [protocol.spec_dict(p) for p in conf.ablation.parts]
        chosen = [s for s in specs if s["role"] == "deciding" and (parts == "deciding" or s["scale_check"])]
        if chosen:
            out[name] = chosen
    return out


def _grid_rows(df: pd.DataFrame, spec: Mapping[str, Any]) -> pd.DataFrame:
    """The part's grid runs (no ``extends``) of its arms at each arm's largest ``n_train`` (the
    size the part is decided at; every size for an area over sizes, ``value: auc``), under its
    registered readout."""
    if df.empty:
        return df
    extends = df["extends"].fillna("").astype(str) if "extends" in df else pd.Series("", index=df.index)
    rows = df[(extends == "") & (df["task"] == spec["task"]) & df["arm"].isin(protocol.arms_of(spec))]
    if spec["readout"] and READOUT in rows:
        rows = rows[rows[READOUT].astype(str) == spec["readout"]]
    if spec["value"] == "auc":
        return rows
    size = pd.to_numeric(rows[N_TRAIN], errors="coerce")
    return rows[size == size.groupby(rows["arm"], dropna=False).transform("max")]


Keep = Callable[[Mapping[str, Any], pd.DataFrame], bool]


def column_trials(specs: Mapping[str, Sequence[Mapping[str, Any]]], runs: Mapping[str, pd.DataFrame],
                  ablations: Mapping[str, Sequence[Any]], cli: Sequence[str],
                  overrides: Callable[[Mapping[str, Any]], dict[str, str]],
                  keep: Keep = lambda spec, rows: True) -> dict[str, list]:
    """``{ablation: [Trial]}``: one rerun (``overrides(grid run)``) of every grid trial of each
    part's arms at its decided size(s) (:func:`_grid_rows`), every lr and exploratory seed, for
    the parts of ``specs`` (``{ablation: [spec]}``) that ``keep(spec, grid rows)`` accepts;
    ``runs``: each ablation's exploratory runs, with ``arm``. One trial per distinct id: a
    column of this module (scale) or of :mod:`analysis.length`."""
    out: dict[str, list] = {}
    for name, chosen in specs.items():
        df = runs.get(name, pd.DataFrame())
        if df.empty:
            continue
        known = {t.trial_id: t for t in ablations[name]}
        points = []
        for spec in chosen:
            rows = _grid_rows(df, spec)
            if not rows.empty and keep(spec, rows):
                points += [(known[str(r["trial_id"])], overrides(r)) for _, r in rows.iterrows()
                           if str(r["trial_id"]) in known]
        todo = distinct_extensions([f"+ablation={name}", *cli], points)
        if todo:
            out[name] = todo
    return out


def scale_trials(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame],
                 ablations: Mapping[str, Sequence[Any]], cli: Sequence[str],
                 overrides: Callable[[Mapping[str, Any]], dict[str, str]], parts: str = "deciding") -> dict[str, list]:
    """``{ablation: [Trial]}``: the scale column's first round (:func:`column_trials` with
    ``overrides``, e.g. :func:`rerun_sizes`) for the parts of :func:`registered`."""
    return column_trials(registered(configs, parts), runs, ablations, cli, overrides)


def column_edges(specs: Mapping[str, Sequence[Mapping[str, Any]]],
                 column_runs: Mapping[str, pd.DataFrame]) -> dict[str, list[dict]]:
    """``{ablation: [edge]}``: the lr edges the parts of ``specs`` choose on a column's runs
    (:attr:`analysis.protocol.PartResult.edges`), to extend one grid step further."""
    out: dict[str, list[dict]] = {}
    for name, chosen in specs.items():
        df = column_runs.get(name, pd.DataFrame())
        if df.empty:
            continue
        edges = [e for s in chosen for e in protocol.decide_part(df, s).edges]
        if edges:
            out[name] = edges
    return out


def scale_edges(configs: Mapping[str, Any], scale_runs: Mapping[str, pd.DataFrame],
                parts: str = "deciding") -> dict[str, list[dict]]:
    """The lr edges the registered parts choose on their scale runs (:func:`column_edges`)."""
    return column_edges(registered(configs, parts), scale_runs)
