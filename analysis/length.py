"""The length column of the stability table (issue 64): does a verdict hold at a longer sequence?

Every deciding part whose task is defined for any sequence length (its runs log ``task.n`` and
set no ``task.train_lengths`` or ``task.terms``: :func:`analysis.stability.fixed_length`) is
rerun on the exploratory seeds at ``task.n = report.length_n`` (32: 4× today's n = 8) at the
grid's data scale (its decided n_train, or every size for an area over sizes; the ablation's
own steps): its arms, its positive control's and its floor arm, at every lr of the grid, then
up to ``report.extend_lr`` rounds one grid step past an edge chosen there, as the scale column
does (:mod:`analysis.scale`, one implementation: :func:`analysis.scale.column_trials`,
:func:`analysis.scale.column_edges`, :func:`analysis.rounds.edge_rounds`). The rounds tag their
trials with phase ``length`` (:func:`analysis.rounds.tag`; never part of a trial's id). The part
is decided on them alone, with every precondition: a flag column, never the verdict; a part
whose task cannot change n gets :attr:`analysis.decision.NotRun.FIXED_LENGTH` instead, and one
whose task has no definition at the column's n (a teacher calibrated at n = 8 whose target no
temperature reaches at n = 32: :func:`tasks.registry.undefined_at`) gets
:attr:`analysis.decision.NotRun.UNDEFINED_AT_N`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from analysis import scale
from tasks.registry import undefined_at

N_SEQ = "task.n"


def changes(n: int) -> dict[str, str]:
    """The override that turns a grid trial into its length rerun.

    Raises:
        ValueError: ``n`` is not a positive length.
    """
    if int(n) < 1:
        raise ValueError(f"report.length_n={n!r}; allowed: a sequence length ≥ 1 (0 turns the column off)")
    return {N_SEQ: str(int(n))}


def enabled(n: int, grid_n: Sequence[int]) -> bool:
    """Whether the length column runs: a positive ``report.length_n`` above every grid length."""
    return int(n) > 0 and all(int(n) > int(g) for g in grid_n)


def fixed_length(df: pd.DataFrame) -> bool:
    """Whether the task's sequence length cannot be changed: its runs log no ``task.n``, or set
    their lengths by ``task.train_lengths`` or ``task.terms`` (T1, T5)."""
    if df.empty:
        return False
    set_by = [c for c in ("task.train_lengths", "task.terms") if c in df]
    listed = any(str(v).strip("[]() ") not in ("", "nan", "None") for c in set_by for v in df[c].unique())
    return N_SEQ not in df or df[N_SEQ].isna().all() or listed


def undefined(df: pd.DataFrame, n: int) -> str | None:
    """Why the task of ``df``'s runs (one part's grid rows) has no definition at length ``n``
    (:func:`tasks.registry.undefined_at` on its first run's params), or None."""
    return undefined_at(df.iloc[0].to_dict(), int(n)) if not df.empty and int(n) > 0 else None


def length_trials(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame],
                  ablations: Mapping[str, Sequence[Any]], cli: Sequence[str], n: int,
                  parts: str = "deciding") -> dict[str, list]:
    """``{ablation: [Trial]}``: the length column's first round: every registered part's grid
    trials (:func:`analysis.scale.column_trials`) at ``task.n = n``, the parts of a fixed-length
    task or one undefined at ``n`` (:func:`undefined`) left out."""
    over = changes(n)
    return scale.column_trials(scale.registered(configs, parts), runs, ablations, cli, lambda row: dict(over),
                               keep=lambda spec, rows: not fixed_length(rows) and undefined(rows, n) is None)


def length_edges(configs: Mapping[str, Any], length_runs: Mapping[str, pd.DataFrame],
                 parts: str = "deciding") -> dict[str, list[dict]]:
    """The lr edges the registered parts choose on their length runs (:func:`analysis.scale.column_edges`)."""
    return scale.column_edges(scale.registered(configs, parts), length_runs)
