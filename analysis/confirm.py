"""The confirmation block (paper.md §13): after the exploratory seeds have chosen each arm's lr
(and C10's σ), every deciding part's two arms and its positive control's two arms run again on
fresh seeds (``scale.confirm_seeds``: 1000–1009 in the default scale; never 0–4, the audit's
10–14 or the pilot 100–104) at that frozen lr and the decided size, each tagged ``extends`` with
the exploratory trial it repeats (so the analysis reads it with that trial's arm). The verdict
comes from this block (:mod:`analysis.stability`, every precondition but the lr edge
re-evaluated on it).

Evaluation sets: today every seed shares the task's validation and test sets (the task's own
streams, ``tasks/base.py``), so the block's intervals cover training noise only; drawing fresh
ones needs a task key that re-seeds those streams (see the issue-28 report).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from analysis import protocol
from analysis.budget import _chosen

SEED = "seed"


def seeds_of(text: str) -> list[int]:
    """The seeds of ``scale.confirm_seeds`` in Hydra's sweep grammar (``range(1000,1010)``,
    ``1000,1001``), through Hydra's own parser."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    override = OverridesParser.create().parse_overrides([f"seed={text}"])[0]
    values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
    return [int(v) for v in values]


def _arms(df: pd.DataFrame, part: Any) -> list[protocol.PartResult]:
    """The part decided on the exploratory runs, and its positive control's pair (if any)."""
    result = protocol.decide_part(df, part)
    out = [result]
    if len(result.spec["control"]) == 2:
        ca, cb = result.spec["control"]
        out.append(protocol.decide_part(df, {**result.spec, "a": ca, "b": cb, "control": [], "choose_b": [],
                                             "role": "control"}))
    return [r for r in out if r.n_train]


def _reruns(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame], ablations: Mapping[str, Sequence[Any]],
            cli: Sequence[str], changes: Any) -> dict[str, list]:
    """``{ablation: [Trial]}``: for each arm of each deciding part (and of its positive control),
    at its chosen lr and decided size, one trial per ``changes(spec)`` entry (overrides), tagged
    ``extends``; one per distinct point."""
    from harness.sweep import Composer

    out: dict[str, list] = {}
    for name, conf in configs.items():
        df = runs.get(name)
        if df is None or df.empty:
            continue
        known = {t.trial_id: t for t in ablations[name]}
        composer, todo, seen = Composer([f"+ablation={name}", *cli]), [], set()
        for part in conf.ablation.parts:
            if protocol.spec_dict(part)["role"] != "deciding":
                continue
            for result in _arms(df, part):
                for _, row in _chosen(df, result).drop_duplicates(["arm", "task.n_train"]).iterrows():
                    base = known.get(str(row.get("extends") or "")) or known.get(str(row["trial_id"]))
                    for change in changes(protocol.spec_dict(part)) if base is not None else ():
                        trial = composer.extension(base, {"train.lr": f"{float(row['lr_chosen']):.3g}", **change})
                        if trial.trial_id not in seen:
                            seen.add(trial.trial_id)
                            todo.append(trial)
        if todo:
            out[name] = todo
    return out


def confirmation_trials(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame],
                        ablations: Mapping[str, Sequence[Any]], cli: Sequence[str],
                        seeds: Sequence[int]) -> dict[str, list]:
    """``{ablation: [Trial]}``: one trial per seed of ``seeds`` for each arm of each deciding
    part and of its positive control, at the arm's lr chosen on ``runs`` (the exploratory
    block) and the part's decided size.

    Raises:
        ValueError: a seed of ``seeds`` is one the exploratory block already ran.
    """
    for name, df in runs.items():
        used = set(pd.to_numeric(df[SEED], errors="coerce").dropna().astype(int)) if SEED in df else set()
        if used & set(seeds):
            raise ValueError(f"confirmation seeds {sorted(used & set(seeds))} were already run in {name}; "
                             "allowed: seeds no block has used (1000–1009 in the default scale)")
    return _reruns(configs, runs, ablations, cli, lambda spec: [{SEED: str(s)} for s in seeds])


def readout_trials(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame],
                   ablations: Mapping[str, Sequence[Any]], cli: Sequence[str]) -> dict[str, list]:
    """``{ablation: [Trial]}``: the readout stability rows (paper.md §13 "Readout"): each arm of
    each deciding part with ``stability_readouts`` rerun under each of them, on the exploratory
    seeds at the chosen lr and decided size."""
    return _reruns(configs, runs, ablations, cli,
                   lambda spec: [{"task.readout": r} for r in spec["stability_readouts"]])
