"""Every part of the suite decided, as the report's verdicts use it (paper.md §13).

The report's writer (:func:`analysis.reporting.write_report`) asks this module for the decided
parts, the claims' verdicts and the stability table and only formats them; which runs decide a
part is decided here, by the runs' phases (:mod:`analysis.phases`):

* a deciding part with a confirmation block is decided on the block (seeds of
  ``scale.confirm_seeds``, fresh evaluation sets, the lr frozen from the exploratory block: every
  precondition re-evaluated on it but the lr edge, and ``b`` as the exploratory block chose it);
* every other part on the exploratory block (the grid on ``scale.seeds`` and its lr
  extensions); budget, confirmation and readout reruns never enter it.

The exploratory decision of a block-decided part stays available (:func:`decide_both`) for the
stability table (:func:`stability_frame`), whose *unstable* outcome :func:`combine_claim` wires
into the claim's verdict.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd
from omegaconf import DictConfig

from analysis import phases, protocol, render, stability, staged, stats
from analysis.confirm import seeds_of
from analysis.decision import ClaimVerdict, Conditions, Look, Unstable

UNSTABLE = "unstable"


def confirm_seeds(conf: DictConfig) -> list[int] | None:
    """The seeds of the ablation's ``scale.confirm_seeds`` (None where it has no scale)."""
    scale = conf.get("scale") if hasattr(conf, "get") else None
    text = scale.get("confirm_seeds") if scale is not None else None
    return seeds_of(str(text)) if text else None


def exploratory_runs(configs: Mapping[str, DictConfig], runs: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Each ablation's exploratory runs (the grid and its lr extensions, :mod:`analysis.phases`):
    what the report's figures, tables and task health show, with no budget, confirmation or
    readout rerun among them."""
    return {name: phases.exploratory(runs[name], int(conf.train.max_steps), confirm_seeds(conf))
            if name in runs else pd.DataFrame() for name, conf in configs.items()}


def _blocks(conf: DictConfig, df: pd.DataFrame, part: Any) -> dict[str, pd.DataFrame]:
    if df.empty:
        return {"exploratory": df}
    return stability.split_blocks(df, int(conf.train.max_steps), protocol.spec_dict(part)["readout"],
                                  confirm_seeds(conf))


def _n_seeds(df: pd.DataFrame) -> int | None:
    return int(df["seed"].nunique()) if "seed" in df and not df.empty else None


def decide_both(conf: DictConfig, df: pd.DataFrame, part: Any) -> tuple[protocol.PartResult, protocol.PartResult | None]:
    """``(exploratory decision, block decision or None)`` of one part on one ablation's runs
    (every phase; ``arm`` and :func:`analysis.stats.add_error`'s columns). The block decision
    exists for a deciding part whose confirmation block has runs (:func:`decide_all`)."""
    first, block, _ = decide_all(conf, df, part)
    return first, block


def decide_all(conf: DictConfig, df: pd.DataFrame, part: Any) -> tuple[protocol.PartResult, protocol.PartResult | None,
                                                                        Look | None]:
    """:func:`decide_both` with the :class:`Look` a staged block stopped at (None: fixed design
    or no block)."""
    blocks = _blocks(conf, df, part)
    explore = blocks["exploratory"]
    first = protocol.decide_part(explore, part, _n_seeds(explore))
    block = blocks.get("confirmation", pd.DataFrame())
    if protocol.spec_dict(part)["role"] != "deciding" or block.empty:
        return first, None, None
    return (first, *staged.decide_confirmation(block, first))


def decide_parts(configs: Mapping[str, DictConfig], runs: Mapping[str, pd.DataFrame],
                 both: dict[tuple[str, str], dict[str, protocol.PartResult]] | None = None) -> list[protocol.PartResult]:
    """Every part of every ablation of ``configs`` decided on ``runs`` (ablation → its runs, with
    ``error``; any phases), in the order of the ablation files: a deciding part with a
    confirmation block decided on it, every other part on the exploratory block. ``both``, where
    given, gets ``{(ablation, part name): {"exploratory": …, "confirmation": …}}`` for
    :func:`stability_frame` (each decision made once)."""
    out = []
    for name, conf in configs.items():
        df = runs.get(name, pd.DataFrame())
        for part in conf.ablation.parts:
            first, block, look = decide_all(conf, df, part)
            out.append(block if block is not None else first)
            if both is not None:
                both[(name, str(part.name))] = {"exploratory": first, **({"confirmation": block} if block else {}),
                                                **({"confirmation_look": look} if look else {})}
    mark_shared(out)
    return out


def tag_blowups(client: Any, runs: Mapping[str, pd.DataFrame]) -> int:
    """Tag every blown-up run (:func:`analysis.stats.blowup`, the ``blowup`` column of
    :func:`analysis.stats.add_error`) ``blowup=true`` in the MLflow store of ``client``
    (``MlflowClient``), so the UI shows it beside ``diverged``; returns how many were tagged.
    The report computes the column from the runs whatever the tags say (a bundle regenerates
    offline)."""
    n = 0
    for df in runs.values():
        if df.empty or "run_id" not in df or stats.BLOWUP not in df:
            continue
        for run_id in df.loc[stats.is_blowup(df), "run_id"].dropna().astype(str):
            client.set_tag(run_id, stats.BLOWUP, "true")
            n += 1
    return n


def label(result: protocol.PartResult) -> str:
    """A part as another claim names it: ``C12 (a) W_V (M5) lowers error …``."""
    return f"{result.spec['claim']} {result.spec['name']}"


def mark_shared(results: list[protocol.PartResult]) -> None:
    """*One comparison, one part* (paper.md §13): fill ``shared_with`` of each deciding part
    built from exactly the same trial ids as another claim's deciding part (their labels,
    :func:`label`), in place. Each claim keeps its part (its verdict and Holm family); the
    tables that count across claims count the comparison once (:func:`distinct`)."""
    by_ids: dict[tuple[str, ...], list[protocol.PartResult]] = {}
    for r in results:
        if r.trial_ids and r.spec["role"] == "deciding":
            by_ids.setdefault(r.trial_ids, []).append(r)
    for same in by_ids.values():
        for r in same:
            r.shared_with = tuple(label(o) for o in same if o is not r and o.spec["claim"] != r.spec["claim"])


def distinct(results: list[protocol.PartResult]) -> list[protocol.PartResult]:
    """``results`` with every comparison once: a part that shares its trial ids with an earlier
    one of another claim (``shared_with``) left out, for the tallies across claims."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for r in results:
        if r.shared_with and r.trial_ids in seen:
            continue
        seen.add(r.trial_ids) if r.trial_ids else None
        out.append(r)
    return out


def annotate(results: list[protocol.PartResult], frame: pd.DataFrame) -> None:
    """Fill each deciding part's ``conditions`` (a :class:`analysis.decision.Conditions`, or None)
    from the stability table (:func:`stability_frame`, its ``moves`` column:
    :func:`analysis.stability.conditions`), in place, matched on claim and part name."""
    if frame.empty or "moves" not in frame:
        return
    said = {(r["claim"], r["part"]): r["moves"] for _, r in frame.iterrows()}
    for r in results:
        value = said.get((r.spec["claim"], r.spec["name"]))
        r.conditions = value if isinstance(value, Conditions) else None


def stability_frame(configs: Mapping[str, DictConfig], runs: Mapping[str, pd.DataFrame],
                    longer: Mapping[str, pd.DataFrame] | None = None,
                    decided: Mapping[tuple[str, str], Mapping[str, protocol.PartResult]] | None = None) -> pd.DataFrame:
    """The stability table (:mod:`analysis.stability`): one row per deciding part, with the
    claim's *unstable* reason (``unstable``, '' where stable). ``runs``: each ablation's runs
    (any phases); ``longer``: the budget reruns where the caller split them off
    (:func:`analysis.budget.split_budget`); ``decided``: the parts' exploratory and confirmation
    decisions from :func:`decide_parts` (its ``both``), not decided again."""
    rows = []
    for name, conf in configs.items():
        parts = [name_df for name_df in (runs.get(name), (longer or {}).get(name)) if name_df is not None]
        df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        for part in conf.ablation.parts:
            if protocol.spec_dict(part)["role"] != "deciding":
                continue
            blocks = _blocks(conf, df, part) if not df.empty else {}
            report = conf.get("report") if hasattr(conf, "get") else None
            rows.append({"ablation": name, **stability.stability_row(
                blocks, part, (decided or {}).get((name, str(part.name))),
                int(report.get("length_n", 0) or 0) if report is not None else 0)})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    why = {claim: stability.claim_unstable(g.to_dict("records")) for claim, g in frame.groupby("claim", sort=False, dropna=False)}
    typed = frame["claim"].map(why)
    return stability.mark_once(frame.assign(unstable_of=typed, unstable=typed.map(render.unstable)))


def combine_claim(results: list[protocol.PartResult], frame: pd.DataFrame) -> ClaimVerdict:
    """A claim's verdict from its parts (:func:`analysis.protocol.adjust` then
    :func:`analysis.protocol.combine`), or ``unstable`` with the reason where the stability
    table (:func:`stability_frame`) says the claim is (paper.md §13); :func:`analysis.render.claim_why`
    words why."""
    protocol.adjust(results)
    combined = protocol.combine(results)
    claims = {r.spec.get("claim") for r in results}
    mine = frame[frame["claim"].isin(claims)] if not frame.empty else frame
    reason = next((u for u in mine.get("unstable_of", pd.Series(dtype=object)) if isinstance(u, Unstable)), None)
    return ClaimVerdict(UNSTABLE if reason else combined.verdict, combined, reason)
