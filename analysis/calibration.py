"""How often the verdict rules decide when nothing differs (issue 45 item 2, *calibration*):
descriptive, never a decision.

A *same-vs-same comparison* is one arm against itself: on one block of runs (the exploratory
seeds at the arm's lr chosen on validation over the whole block, or the confirmation seeds at
its frozen lr) the arm's seeds, sorted, are split into two disjoint halves (the first ⌊n/2⌋ and
the next ⌊n/2⌋; an odd seed out is left out), paired in order, relabelled as two arms and
decided by :func:`analysis.protocol.decide_part` with the deciding part's own value, task and
readout. Every deciding part's arms on each block give one comparison each; a comparison built
from the same trials as another (a shared arm, or one trial in two ablations) counts once.

* **Difference rule** (paired 95% t-interval against 0): the rate of *decisive* labels
  (supported or contradicted) on same-vs-same comparisons, against the nominal 5%.
* **Equivalence rules**: the same pairs with the second half shifted by exactly δ (the part's
  margin), so the true difference sits on the margin: two-sided (TOST) with shifts +δ and −δ,
  one-sided (``d < δ``) with +δ; the rate of *equivalent* (supported), against the nominal 5%.

The label is the interval's alone (``PartResult.test_alone`` where a precondition voided it):
what is calibrated is the test, not the preconditions, which can only weaken it. Each rate is
printed with its count n and an exact (Clopper–Pearson) binomial 95% interval
(``scipy.stats.binomtest``). Source: paper.md §13 steps 3–4.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from omegaconf import DictConfig
from scipy import stats as sps

from analysis import protocol, stability, stats
from analysis.decision import CalibrationRule
from analysis.verdicts import confirm_seeds

NOMINAL = protocol.ALPHA
FIRST, SECOND = "first half", "second half"
BLOCKS = ("exploratory", "confirmation")
RULES = tuple(CalibrationRule)  # in the order of the tables


def shift(df: pd.DataFrame, value: str, by: float) -> pd.DataFrame:
    """``df`` with the part's ``value`` moved by ``by`` in the value's units: ``error`` (and
    ``auc``, the mean log error: the error times e^by); ``steps_to_<t>``: the first step below
    ``t`` moved by ``by`` budgets (a run that never reached it counts as the whole budget first,
    as :func:`analysis.protocol.steps_to` reads it; a step below 0 is clipped to 0).

    Raises:
        ValueError: a value kind the calibration does not shift (e.g. ``absent_error``).
    """
    out = df.copy()
    target = protocol.STEPS_TO.fullmatch(value)
    if value == "error":
        out["error"] = pd.to_numeric(out["error"], errors="coerce") + by
    elif value == "auc":
        out["error"] = pd.to_numeric(out["error"], errors="coerce") * np.exp(by)
    elif target:
        column, budget = f"val/first_step_below/{float(target[1]):g}", pd.to_numeric(out[protocol.STEPS])
        step = pd.to_numeric(out[column], errors="coerce")
        out[column] = (step.where(step >= 0, budget) + by * budget).clip(lower=0)
    else:
        raise ValueError(f"value={value!r} cannot be shifted; allowed: error, auc, steps_to_<t>")
    return out


def halves(rows: pd.DataFrame) -> pd.DataFrame | None:
    """One arm's runs (one lr) as two arms: the first and second half of its sorted seeds, the
    second half's seeds renamed to their partners' (module docstring); None under 4 seeds."""
    seeds = sorted(pd.to_numeric(rows["seed"], errors="coerce").dropna().unique())
    h = len(seeds) // 2
    if h < 2:
        return None
    first, second = seeds[:h], seeds[h:2 * h]
    seed = pd.to_numeric(rows["seed"], errors="coerce")
    a = rows[seed.isin(first)].assign(arm=FIRST)
    b = rows[seed.isin(second)].assign(arm=SECOND)
    return pd.concat([a, b.assign(seed=b["seed"].map(dict(zip(second, first))))], ignore_index=True)


def _label(frame: pd.DataFrame, spec: Mapping[str, Any]) -> str:
    r = protocol.decide_part(frame, {**spec, "a": FIRST, "b": SECOND, "choose_b": [], "control": [],
                                     "floor": None, "role": "deciding"}, check_edge=False)
    return r.test_alone or r.verdict


def _one_lr(block: pd.DataFrame, task: str, arm: str) -> pd.DataFrame:
    """The arm's runs on the task at the lr chosen on validation per size over the whole block."""
    rows = block[(block["task"] == task) & (block["arm"] == arm)]
    if rows.empty:
        return rows
    chosen = stats.select_lr(rows, group=("task", "arm", "task.n_train"))
    return chosen[chosen["lr_chosen"].notna()].drop(columns=["lr_chosen", "lr_grid", "lr_ties", "lr_eligible"])


def _identity(frame: pd.DataFrame | None) -> tuple | None:
    """What makes two same-vs-same frames one comparison: their runs' ``trial_id`` (one trial can
    stand in two ablations' runs, e.g. W_V on T3d for C8(b) and C12(a)), else ``run_id``."""
    if frame is None:
        return None
    column = next((c for c in ("trial_id", "run_id") if c in frame and frame[c].notna().all()), None)
    return tuple(sorted(frame[column].astype(str))) if column else None


def comparisons(configs: Mapping[str, DictConfig], runs: Mapping[str, pd.DataFrame],
                parts: Sequence[protocol.PartResult]) -> pd.DataFrame:
    """One row per same-vs-same comparison and rule: ``task``, ``arm``, ``block``, ``rule``,
    ``label`` and ``decisive`` (difference: supported or contradicted; equivalence: supported).
    ``parts``: the decided parts (their ``b`` as chosen); ``runs``: each ablation's runs with
    ``arm`` and :func:`analysis.stats.add_error`'s columns, any phases."""
    chosen_b = {(r.spec["claim"], r.spec["name"]): r.spec["b"] for r in parts}
    rows, seen = [], set()
    for name, conf in configs.items():
        df = runs.get(name, pd.DataFrame())
        for part in conf.ablation.parts if not df.empty else []:
            spec = protocol.spec_dict(part)
            if spec["role"] != "deciding" or spec["value"] not in ("error", "auc") and not \
                    protocol.STEPS_TO.fullmatch(spec["value"]):
                continue
            blocks = stability.split_blocks(df, int(conf.train.max_steps), spec["readout"], confirm_seeds(conf))
            for block_name in BLOCKS:
                for arm in dict.fromkeys([spec["a"], chosen_b.get((spec["claim"], spec["name"]), spec["b"])]):
                    frame = halves(_one_lr(blocks.get(block_name, pd.DataFrame()), spec["task"], arm)) \
                        if not blocks.get(block_name, pd.DataFrame()).empty else None
                    ids = _identity(frame)
                    if frame is None or (ids, spec["value"]) in seen:
                        continue
                    seen.add((ids, spec["value"]))
                    rows += _rules(frame, spec, {"ablation": name, "task": spec["task"], "arm": arm, "block": block_name})
    return pd.DataFrame(rows, columns=["ablation", "task", "arm", "block", "rule", "label", "decisive"])


def _rules(frame: pd.DataFrame, spec: Mapping[str, Any], where: dict[str, str]) -> list[dict[str, Any]]:
    """The three rules on one same-vs-same frame (module docstring)."""
    delta, value, second = float(spec["delta"]), spec["value"], frame["arm"] == SECOND

    def moved(by: float) -> pd.DataFrame:
        return pd.concat([frame[~second], shift(frame[second], value, by)], ignore_index=True)

    out = []
    label = _label(frame, {**spec, "test": "difference", "sides": 2})
    out.append({**where, "rule": CalibrationRule.DIFFERENCE, "label": label,
                "decisive": label in (protocol.SUPPORTED, protocol.CONTRADICTED)})
    for rule, sides, by in ((CalibrationRule.EQUIVALENCE_TWO_SIDED, 2, delta), (CalibrationRule.EQUIVALENCE_TWO_SIDED, 2, -delta),
                            (CalibrationRule.EQUIVALENCE_ONE_SIDED, 1, delta)):
        label = _label(moved(by), {**spec, "test": "equivalence", "sides": sides})
        out.append({**where, "rule": rule, "label": label, "decisive": label == protocol.SUPPORTED})
    return out


def rates(table: pd.DataFrame) -> pd.DataFrame:
    """Per rule (:class:`~analysis.decision.CalibrationRule`): n comparisons, k decisive
    (difference) or equivalent (equivalence), the rate and its exact binomial 95% interval
    (``low``, ``high``; NaN where no comparison), beside the nominal rate."""
    out = []
    for rule in RULES:
        mine = table[table["rule"] == rule]
        n, k = len(mine), int(mine["decisive"].sum())
        ci = sps.binomtest(k, n, NOMINAL).proportion_ci(0.95, method="exact") if n else None
        out.append({"rule": rule, "n": n, "k": k, "rate": k / n if n else np.nan,
                    "low": ci.low if ci else np.nan, "high": ci.high if ci else np.nan, "nominal": NOMINAL})
    return pd.DataFrame(out)


def per_task(table: pd.DataFrame) -> pd.DataFrame:
    """The comparisons per task, block and rule (in :data:`RULES`' order): how many (``n``) and
    how many decisive (``k``)."""
    order = table.assign(order=table["rule"].map(RULES.index))
    return (order.groupby(["task", "block", "order"], dropna=False)
            .agg(rule=("rule", "first"), n=("decisive", "size"), k=("decisive", "sum"))
            .reset_index().drop(columns="order"))
