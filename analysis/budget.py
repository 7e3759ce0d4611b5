"""The budget ablation: does a verdict move when every trial may train longer? (paper.md §13
*budget-limited*.)

After the suite (and its lr-edge reruns), each deciding part's two arms are rerun with
``report.budget_factor`` times the steps (validation ``factor`` times as far apart, so the
budget precondition sees as many evaluations), at the ``task.n_train`` the part was decided at
(every size for ``value = auc``) and at each arm's learning rate frozen from the exploratory
block (:func:`analysis.confirm.freeze`), for every exploratory seed; the positive control's arms
too. The reruns are tagged ``extends`` with the grid trial they lengthen, so the analysis reads
them with that trial's arm; they are told apart from the grid by ``train.max_steps``
(:func:`split_budget`) and never enter the main verdicts, figures or task health. The part is
then decided again on the reruns alone (its lr is fixed, so the lr-edge precondition does not
apply there) and :func:`compare` decides both (:func:`analysis.render_tables.budget` tabulates them side by side).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from analysis import phases, protocol
from analysis.decision import Reason, Rule

STEPS = "train.max_steps"


def split_budget(df: pd.DataFrame, steps: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(every other run, the budget reruns)`` of one ablation's runs, by phase
    (:func:`analysis.phases.phase_column`: longer than ``steps``, the ablation's
    ``train.max_steps``, and not a scale-column rerun, which stays with the others: its own
    block). Runs without the column count as the ablation's own budget."""
    if df.empty or STEPS not in df:
        return df, df.iloc[0:0]
    longer = phases.phase_column(df, steps) == phases.BUDGET
    return df[~longer].reset_index(drop=True), df[longer].reset_index(drop=True)


def budget_trials(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame],
                  ablations: Mapping[str, Sequence[Any]], cli: Sequence[str], factor: int,
                  frozen: pd.DataFrame | None = None) -> dict[str, list]:
    """``{ablation: [Trial]}``: the reruns at ``factor`` × the steps (module docstring) of each
    deciding part's arms and of its positive control's, every exploratory seed, at the frozen
    lr (``frozen``, :func:`analysis.confirm.freeze`; default: frozen from ``runs``, the
    ablations' exploratory runs with ``arm``)."""
    from analysis.confirm import freeze, rerun_trials

    frozen = freeze(configs, runs) if frozen is None else frozen

    def longer(row: pd.Series, base: Any) -> list[dict[str, str]]:
        train = base.config.train  # the ablation's own budget (long_steps where it says so)
        return [{STEPS: str(int(train.max_steps) * factor), "train.eval_every": str(int(train.eval_every) * factor)}]
    return rerun_trials(frozen, runs, ablations, cli, longer)


def compare(configs: Mapping[str, Any], main: Mapping[str, pd.DataFrame],
            longer: Mapping[str, pd.DataFrame]) -> list[tuple[dict[str, Any], protocol.PartResult, protocol.PartResult]]:
    """Per deciding part, ``(spec, at ×1, at ×factor)``: the part decided on its own runs and on
    the budget reruns alone (module docstring). Both leave the lr-edge precondition out (the
    reruns have one lr), so a move is the budget's doing; the part's own verdict, with every
    precondition, is in the claim's table. :func:`analysis.render_tables.budget` words it."""
    out = []
    for name, conf in configs.items():
        for part in conf.ablation.parts:
            spec = protocol.spec_dict(part)
            if spec["role"] != "deciding":
                continue
            # like with like: at ×1 too the lr-edge precondition is left out (its own table has it)
            one = protocol.decide_part(main.get(name, pd.DataFrame()), part, check_edge=False)
            long_runs = longer.get(name, pd.DataFrame())
            # the reruns have one lr per arm: the edge precondition is the grid's, not theirs
            many = protocol.decide_part(long_runs, {**one.spec, "choose_b": []}, check_edge=False) \
                if not long_runs.empty else protocol.PartResult(spec, protocol.INCONCLUSIVE, [Reason(Rule.NO_RERUNS)])
            out.append((spec, one, many))
    return out
