"""The extra rounds of trials after a grid (paper.md §13), one implementation each, used by the
report (:mod:`analysis.reporting`), the scorecard and the zoo (:func:`analysis.scorecard.extend_lr`):

* :func:`edge_rounds`: up to ``report.extend_lr`` rounds one lr step (×√10) past each edge a
  part chose, each round reading the grid and the rounds before it only;
* :func:`extension_trials`: one trial per seed past each edge, none past an lr cap
  (:func:`steps_to`, :func:`at_cap`: the scorecard's and the zoo's 3.0);
* :func:`tag`: every trial a round starts carries its phase (:data:`analysis.phases.PHASES`:
  ``lr_extension``, ``budget``, ``confirmation``, ``readout``, ``scale``, ``length``) in ``Trial.phase``,
  which the writer records as the run's ``phase`` tag, so that the analysis reads a run's phase
  instead of guessing it from its params (:func:`analysis.phases.phase_column` does so only for
  runs recorded without the tag).

The confirmation block's, the readout reruns' and the ×4 budget reruns' trials are built by
:func:`analysis.confirm.confirmation_trials`, :func:`analysis.confirm.readout_trials` and
:func:`analysis.budget.budget_trials`; the report runs each as one tagged round.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from analysis import phases
from analysis.confirm import distinct_extensions


def tag(trials: Iterable[Any], phase: str, design: str = "") -> list:
    """``trials`` with ``phase`` set, and ``design`` where given (a staged block's
    :func:`analysis.sequential.design_tag`; :class:`harness.records.Trial` is frozen: a copy
    each; neither is part of the trial's id, so a finished run is still reused).

    Raises:
        ValueError: ``phase`` is not one of :data:`analysis.phases.PHASES`.
    """
    if phase not in phases.PHASES:
        raise ValueError(f"phase {phase!r} is not one of {', '.join(phases.PHASES)}")
    extra = {"design": design} if design else {}
    return [dataclasses.replace(t, phase=phase, **extra) if dataclasses.is_dataclass(t) else t for t in trials]


STEP = math.sqrt(10)  # one lr grid step
# an lr printed to 3 significant digits (0.949 · √10 = 3.0009 → "3") still counts as the cap
_ROUNDING = 1e-2


def steps_to(lr: float, lr_max: float) -> int:
    """How many ×√10 steps take ``lr`` up to ``lr_max`` (0 when it is there already): the rounds
    an lr-edge extension may take before its cap.

    Raises:
        ValueError: ``lr`` or ``lr_max`` not positive.
    """
    if not (lr > 0 and lr_max > 0):
        raise ValueError(f"lr and lr_max must be positive, got lr={lr!r}, lr_max={lr_max!r}")
    return max(0, math.ceil(math.log(lr_max / lr, STEP) - _ROUNDING))


def at_cap(lr: float, lr_max: float | None) -> bool:
    """Whether one more ×√10 step past ``lr`` goes beyond ``lr_max`` (None: no cap)."""
    return lr_max is not None and lr * STEP > lr_max * (1 + _ROUNDING)


def extension_trials(edges: list[dict[str, Any]], trials: Mapping[str, Any], cli: list[str],
                     changes: dict[str, str] | Callable[[Mapping[str, Any]], dict[str, str]] | None = None, phase: str = phases.LR_EXTENSION,
                     lr_max: float | None = None) -> list:
    """One trial per seed past each edge (:attr:`analysis.protocol.PartResult.edges`): the grid
    trial's point with ``train.lr`` one step (×√10) beyond the chosen lr (and ``changes``: a
    column's overrides, or a function of the edge that gives them: a scale rerun's sizes,
    :func:`analysis.scale.rerun_sizes`; a length rerun's n), tagged ``extends`` with the grid trial's id and
    ``phase``; ids in ``trials`` left out. A high edge whose next step passes ``lr_max``
    (:func:`at_cap`) is not extended: its row stays at the cap and says so."""
    def points():
        for edge in edges:
            if edge["side"] == "high" and at_cap(edge["lr"], lr_max):
                continue
            lr = edge["lr"] * (STEP if edge["side"] == "high" else 1 / STEP)
            for run_id, ext in zip(edge["trial_ids"], edge["extends"] or [""] * len(edge["trial_ids"])):
                base = trials.get(ext) or trials.get(run_id)
                if base is not None:
                    extra = changes(edge) if callable(changes) else (changes or {})
                    yield base, {**extra, "train.lr": str(float(f"{lr:.3g}"))}
    return tag(distinct_extensions(cli, points(), skip=trials), phase)


def edge_rounds(cap: int, added: dict[str, set], read: Callable[[], Mapping[str, pd.DataFrame]],
                edges_of: Callable[[Mapping[str, pd.DataFrame]], Mapping[str, list]],
                build: Callable[[str, list], list], run: Callable[[dict[str, list]], int]) -> int:
    """Up to ``cap`` rounds one lr step past the edges a block's parts chose (paper.md §13).

    Each round reads the block's runs (``read()``: ``{group: runs}``) of the trials in ``added``
    only (round r reads the block and rounds < r: on a resume the store already holds later
    rounds, and reading them would pass the cap), takes their edges (``edges_of(runs)``:
    ``{group: [edge]}``), builds the trials past them (``build(group, edges)``, e.g.
    :func:`extension_trials`) and runs the new ones as one queue (``run({group: trials})``, which
    returns how many it ran, or a negative number to stop: a sweep that refused its input).
    ``added``: ``{group: trial ids}`` of the block, grown by each round (in place).

    Returns:
        The trials run.
    """
    total = 0
    for _ in range(cap):
        runs = {name: df[df["trial_id"].astype(str).isin(added.get(name, set()))] if not df.empty else df
                for name, df in read().items()}
        todo = {}
        for name, edges in edges_of(runs).items():
            new = [t for t in build(name, edges) if t.trial_id not in added.setdefault(name, set())]
            added[name].update(t.trial_id for t in new)  # run or skipped by id
            if new:
                todo[name] = new
        if not todo:
            break
        done = run(todo)  # one queue: small groups fill packs
        if done < 0:
            break
        total += done
    return total
