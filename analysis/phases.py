"""Which phase of the report's run path each run of the bundle belongs to (paper.md §13): the
``phase`` tag where the round that started the run recorded it (:mod:`analysis.rounds`), else
(runs recorded before the tag, e.g. today's bundle) from its params alone, so the exploratory
block (recorded without any phase tag) splits as the reruns do:

* ``budget``: ``train.max_steps`` above the ablation's own (``report.budget_factor`` ×,
  :mod:`analysis.budget`);
* ``confirmation``: a seed of ``scale.confirm_seeds`` (1000–1009 in the default scale,
  :mod:`analysis.confirm`);
* ``readout``: tagged ``extends`` with a run of the bundle under another ``task.readout`` (the
  readout stability reruns, :func:`analysis.confirm.readout_trials`);
* ``scale``: tagged ``extends`` and at a ``task.n_train`` above every grid run's of the
  ablation (the scale column's reruns, :mod:`analysis.scale`; their ``train.max_steps`` is
  longer too, so this is tested after ``budget``);
* ``length``: tagged ``extends`` and at a ``task.n`` (sequence length) above every grid run's
  of the ablation (the length column's reruns, :mod:`analysis.length`);
* ``lr_extension``: any other run tagged ``extends`` (one grid step past a chosen lr edge);
* ``exploratory``: the grid itself (no ``extends``), seeds of ``scale.seeds``.

Each run gets exactly one phase, tested in that order (``scale`` before ``budget``). The exploratory decision reads
``exploratory`` and ``lr_extension`` runs only (:data:`EXPLORATORY_DECISION`): confirmation
reruns share ``extends`` with the lr extensions, and without this split they would be pooled
into it.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

EXPLORATORY, LR_EXTENSION, BUDGET, CONFIRMATION, READOUT, SCALE, LENGTH = (
    "exploratory", "lr_extension", "budget", "confirmation", "readout", "scale", "length")
PHASES = (EXPLORATORY, LR_EXTENSION, BUDGET, CONFIRMATION, READOUT, SCALE, LENGTH)
EXPLORATORY_DECISION = (EXPLORATORY, LR_EXTENSION)  # the runs the exploratory block decides on
CONFIRM_FIRST = 1000  # without ``scale.confirm_seeds``: seeds from here on are the block's
STEPS, READOUT_KEY, EXTENDS, N_TRAIN, N_SEQ = "train.max_steps", "task.readout", "extends", "task.n_train", "task.n"
TAG = "phase"  # the run's tag written from harness.records.Trial.phase by the rounds of analysis.rounds


def _column(df: pd.DataFrame, key: str, fill: object) -> pd.Series:
    return df[key] if key in df else pd.Series(fill, index=df.index, dtype=object)


def phase_column(df: pd.DataFrame, steps: int, confirm_seeds: Iterable[int] | None = None) -> pd.Series:
    """The phase of each run of one ablation's runs (module docstring), indexed like ``df``.

    Args:
        df: one ablation's runs (``seed``; ``train.max_steps``, ``task.readout``, ``extends``
            and ``trial_id`` where logged: a missing column counts as the grid's value).
        steps: the ablation's own ``train.max_steps``.
        confirm_seeds: the seeds of ``scale.confirm_seeds``; None: every seed ≥
            :data:`CONFIRM_FIRST`.
    """
    if df.empty:
        return pd.Series([], index=df.index, dtype=object)
    seed = pd.to_numeric(df["seed"], errors="coerce")
    longer = pd.to_numeric(_column(df, STEPS, steps), errors="coerce").fillna(steps) > steps
    confirm = seed.isin(list(confirm_seeds)) if confirm_seeds is not None else seed >= CONFIRM_FIRST
    extends = _column(df, EXTENDS, "").fillna("").astype(str)
    readout = _column(df, READOUT_KEY, None).astype(str)
    ids = _column(df, "trial_id", "").astype(str)
    base_readout = extends.map(dict(zip(ids, readout)))  # NaN where the extended run is not in df
    other_readout = (extends != "") & base_readout.notna() & (base_readout != readout)
    phase = pd.Series(EXPLORATORY, index=df.index, dtype=object)
    phase[extends != ""] = LR_EXTENSION
    phase[other_readout] = READOUT
    n_train = pd.to_numeric(_column(df, N_TRAIN, np.nan), errors="coerce")
    grid_max = n_train[extends == ""].max()  # NaN where no grid run is in df: no scale run told apart
    larger = (extends != "") & (n_train > grid_max) if pd.notna(grid_max) else pd.Series(False, index=df.index)
    n_seq = pd.to_numeric(_column(df, N_SEQ, np.nan), errors="coerce")
    seq_max = n_seq[extends == ""].max()
    longer_seq = (extends != "") & (n_seq > seq_max) if pd.notna(seq_max) else pd.Series(False, index=df.index)
    phase[confirm] = CONFIRMATION
    phase[longer] = BUDGET  # the later assignment wins: the order of the module docstring
    phase[larger] = SCALE
    phase[longer_seq] = LENGTH
    if TAG in df:  # the round that started a run recorded its phase (analysis.rounds): read, not guessed
        recorded = df[TAG].astype(object)
        phase = phase.where(~recorded.isin(PHASES), recorded)
    return phase


def with_phase(df: pd.DataFrame, steps: int, confirm_seeds: Iterable[int] | None = None) -> pd.DataFrame:
    """``df`` with a ``phase`` column (:func:`phase_column`)."""
    return df.assign(phase=phase_column(df, steps, confirm_seeds)) if not df.empty else df.assign(phase=[])


def exploratory(df: pd.DataFrame, steps: int, confirm_seeds: Iterable[int] | None = None) -> pd.DataFrame:
    """The runs the exploratory decision reads (:data:`EXPLORATORY_DECISION`)."""
    if df.empty:
        return df
    return df[phase_column(df, steps, confirm_seeds).isin(EXPLORATORY_DECISION)].reset_index(drop=True)


def phase_counts(df: pd.DataFrame, steps: int, confirm_seeds: Iterable[int] | None = None) -> dict[str, int]:
    """Runs per phase (every phase named, 0 where none)."""
    counts = phase_column(df, steps, confirm_seeds).value_counts() if not df.empty else pd.Series(dtype=int)
    return {p: int(counts.get(p, 0)) for p in PHASES}
