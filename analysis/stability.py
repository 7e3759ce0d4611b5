"""The stability table (paper.md §13 "Confirmation block"): per deciding part, the verdict on
the exploratory seeds, on the confirmation seeds, at ×4 steps and under the other readout; the
slack to each threshold in δ and in standard errors; and whether leaving one seed out flips
the verdict or a precondition. A claim is *unstable* when one of its deciding parts gets
opposite decisive labels on the exploratory and the confirmation block, or when a leave-one-out
flip of a confirmation verdict changes the claim's verdict; ×4 and readout changes are flags.

Blocks are frames of one ablation's runs (with ``arm``), split by :func:`split_blocks` on the
runs' phases (:mod:`analysis.phases`) and the part's registered readout:

* ``exploratory``: the grid on ``scale.seeds`` and its lr extensions, at the ablation's own
  step budget, under the part's registered readout (``task.readout``, where logged);
* ``confirmation``: the seeds of ``scale.confirm_seeds`` (1000–1009 in the default scale) at the
  lr frozen from the exploratory block, with fresh evaluation sets (decided without the
  lr-edge precondition: one lr);
* ``x4``: runs past the ablation's own budget (the budget reruns, :mod:`analysis.budget`);
* ``scale``: the scale column's reruns (:mod:`analysis.scale`: a larger ``n_train`` and budget,
  lrs chosen again on the exploratory seeds, so decided with every precondition); a flag, never
  the verdict; missing (None, NaN in the frame) for a part whose arms have no runs there
  (:func:`covers`), which :func:`analysis.render.scale_verdict` words;
* ``length``: the length column's reruns (:mod:`analysis.length`: a longer sequence ``task.n``
  at the grid's data scale, lrs chosen again), decided as ``scale`` is;
* ``readout=<name>``: exploratory seeds under each other ``task.readout`` than the part's
  registered one (``tied``; ``learned`` too for the W_V part), rerun at the frozen lr
  (:func:`analysis.confirm.readout_trials`).

:func:`analysis.verdicts.stability_frame` builds the table (one row per deciding part);
:func:`analysis.render_tables.stability` formats it for the report and :func:`write_csv` writes
``docs/report/stability.csv``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from analysis import length, phases, protocol, render, staged
from analysis.decision import (Beyond, Block, Conditions, Flip, Holds, Interval, Look, Move, Moved, NotRun, Reason, Rule,
                               Seeds, Step, Unstable)
from analysis.protocol import CONTRADICTED, INCONCLUSIVE, SUPPORTED

CONFIRM_FIRST = phases.CONFIRM_FIRST  # the block's first seed (never 0–4, the audit's 10–14 or the pilot 100–104)
STEPS, READOUT = "train.max_steps", "task.readout"
DECISIVE = (SUPPORTED, CONTRADICTED)
TYPED = ("loo", "scale_block", "length_block", "beyond", "moves", "unstable_of")  # the typed columns: the CSV holds their words (``loo_flip``, …)


def split_blocks(df: pd.DataFrame, steps: int, readout: str | None = None,
                 confirm_seeds: Iterable[int] | None = None) -> dict[str, pd.DataFrame]:
    """``{exploratory, confirmation, x4, scale, scale_confirmation, length, length_confirmation,
    readout=<name>…}`` frames (a column's reruns split by seed: the exploratory seeds, where its
    lrs are chosen, and the confirmation seeds, its block) of one ablation's runs for one
    part (module docstring), by phase (:func:`analysis.phases.phase_column`) and the part's
    registered ``readout`` (None: every readout counts as registered). ``steps`` is the
    ablation's own ``train.max_steps``; ``confirm_seeds`` the seeds of ``scale.confirm_seeds``
    (None: seeds ≥ :data:`CONFIRM_FIRST`)."""
    phase = phases.phase_column(df, steps, confirm_seeds)
    registered = (df[READOUT].astype(str) == readout) if readout and READOUT in df else pd.Series(True, index=df.index)
    explore = phase.isin(phases.EXPLORATORY_DECISION)
    seed = pd.to_numeric(df["seed"], errors="coerce") if "seed" in df else pd.Series(np.nan, index=df.index)
    fresh = seed.isin(list(confirm_seeds)) if confirm_seeds is not None else seed >= CONFIRM_FIRST
    # the configured block only: a store that has run the next block holds the spent one's runs too
    out = {"exploratory": df[explore & registered], "confirmation": df[(phase == phases.CONFIRMATION) & registered & fresh],
           "x4": df[(phase == phases.BUDGET) & registered]}
    for column in COLUMNS:  # a column's reruns on the exploratory seeds choose its lrs; its block confirms
        mine = (phase == column) & registered
        out[column], out[f"{column}_confirmation"] = df[mine & ~fresh], df[mine & fresh]
    others = df[(explore | (phase == phases.READOUT)) & ~registered]
    for name in sorted(others[READOUT].dropna().astype(str).unique()) if READOUT in others else []:
        out[f"readout={name}"] = others[others[READOUT].astype(str) == name]  # one block per other readout
    return out


def slack(result: protocol.PartResult) -> dict[str, float]:
    """How far the part's interval bounds are from each threshold, positive on the side the
    rule needs: ``support`` (the bound that supports must pass it) and ``contradict``, each in
    units of δ and of the standard error of the mean difference.

    Difference: support = lo95 − 0, contradict = 0 − hi95. One-sided equivalence: support =
    δ − hi90, contradict = lo95 − δ. Two-sided: support = δ − max(|lo90|, |hi90|), contradict =
    max(lo95 − δ, −δ − hi95). NaN where the part has no interval.
    """
    spec, delta = result.spec, float(result.spec["delta"])
    if spec["test"] == "difference":
        support, contradict = result.lo, -result.hi
    elif int(spec["sides"]) == 1:
        support, contradict = delta - result.hi, result.lo95 - delta
    else:
        support = delta - max(abs(result.lo), abs(result.hi))
        contradict = max(result.lo95 - delta, -delta - result.hi95)
    se = result.se if result.se and not np.isnan(result.se) and result.se > 0 else np.nan
    return {"support_delta": support / delta, "support_se": support / se,
            "contradict_delta": contradict / delta, "contradict_se": contradict / se}


def loo_flip(df: pd.DataFrame, part: Any, check_edge: bool = True) -> Flip | None:
    """None, or which seed, left out, changes the part's verdict or a precondition's status
    (each seed in turn, the whole part decided again); :func:`analysis.render.flip` words it."""
    df = protocol.part_rows(df, part)
    full = protocol.decide_part(df, part, check_edge=check_edge)
    status = {k: v.fails for k, v in full.preconditions.items()}
    for seed in sorted(pd.to_numeric(df["seed"], errors="coerce").dropna().unique()):
        less = protocol.decide_part(df[pd.to_numeric(df["seed"], errors="coerce") != seed], part,
                                    check_edge=check_edge)
        flipped = tuple(k for k, v in less.preconditions.items() if v.fails != status.get(k, False))
        if less.verdict != full.verdict or flipped:
            return Flip(int(seed), full.verdict, less.verdict, flipped)
    return None


def _block(df: pd.DataFrame, part: Any, check_edge: bool,
           explored: protocol.PartResult | None = None) -> protocol.PartResult:
    if df.empty:
        return protocol.PartResult(protocol.spec_dict(part), INCONCLUSIVE, [Reason(Rule.EMPTY_BLOCK)])
    return protocol.decide_part(df, part, check_edge=check_edge, explored=explored)


def _empty(result: protocol.PartResult) -> bool:
    """Whether the result is an empty block's (:func:`_block` on no runs)."""
    return [x.rule for x in result.reasons] == [Rule.EMPTY_BLOCK]


def block_value(result: protocol.PartResult) -> Block:
    """A block's decision as a typed value (its verdict, d [95%], reasons) for its words
    (:func:`analysis.render.block_estimate`)."""
    return Block(result.verdict, result.verdict in DECISIVE,
                 Interval(float(result.effect), float(result.lo95), float(result.hi95), int(result.n_pairs or 0)),
                 tuple(result.reasons))


def conditions(main: protocol.PartResult, blocks: Mapping[str, protocol.PartResult],
               registered: str | None = None) -> Conditions | None:
    """The conditions of a deciding part (paper.md §13 "Conditions travel with the verdict"),
    None where no condition moves it: per condition block (``x4``, ``readout=<name>``,
    :func:`split_blocks`) decided at the frozen lr, :attr:`Move.REVERSED` (opposite decisive
    labels), :attr:`Move.NOT_SHOWN` (a decisive verdict inconclusive there: a precondition, or a
    rerun with fewer seeds), :attr:`Move.DECISIVE` (an inconclusive one decisive there), or, for
    an inconclusive verdict inconclusive there too, :attr:`Move.ESTIMATE` where its 95% interval
    excludes ``main.effect`` and moves by at least δ/2; with the blocks under which the main
    verdict holds (the same label: a decisive verdict holds there whatever its estimate).
    Blocks without runs say nothing. :func:`analysis.render.conditions` words it ("contradicted
    under the scaled and tied readouts; not shown under the learned readout (…)")."""
    same, moved = [], []
    for name, r in blocks.items():
        if _empty(r) or (r.verdict == INCONCLUSIVE and not r.n_runs):
            continue
        excludes = bool(np.isfinite(r.lo95) and np.isfinite(main.effect) and not r.lo95 <= main.effect <= r.hi95)
        material = abs(r.effect - main.effect) >= float(main.spec["delta"]) / 2  # a shift a reader acts on
        if r.verdict == main.verdict and (main.verdict in DECISIVE or not (excludes and material)):
            same.append(name)  # the verdict holds there (an estimate moving within one label is its table's)
            continue
        if {r.verdict, main.verdict} == set(DECISIVE):
            move = Move.REVERSED
        elif main.verdict in DECISIVE:
            move = Move.NOT_SHOWN
        elif r.verdict in DECISIVE:
            move = Move.DECISIVE
        else:
            move = Move.ESTIMATE
        moved.append(Moved(move, name, block_value(r), float(main.effect) if excludes else math.nan))
    return Conditions(main.verdict, registered, tuple(same), tuple(moved)) if moved else None


COLUMNS = ("scale", "length")  # the columns beyond the measured regime (issue 64)
N_SEQ, N_TRAIN = length.N_SEQ, "task.n_train"


def covers(df: pd.DataFrame, spec: Mapping[str, Any]) -> bool:
    """Whether a column's runs hold the part's arm ``a`` and its ``b`` (one of its ``choose_b``
    candidates) on its task, at two sizes or more for an area over sizes (``value: auc``): a part
    whose arms only share another part's reruns (a positive control's) is not decided there."""
    if df.empty or "arm" not in df:
        return False
    mine = df[df["task"] == spec["task"]] if "task" in df else df.iloc[:0]
    sizes = pd.to_numeric(mine.get(N_TRAIN, pd.Series(0, index=mine.index)), errors="coerce").groupby(
        mine["arm"].astype(str), dropna=False).nunique()
    need = 2 if spec["value"] == "auc" else 1  # an area over sizes needs its sizes rerun, not one
    ran = set(sizes[sizes >= need].index)
    return spec["a"] in ran and bool(ran & set(spec["choose_b"] or [spec["b"]]))


def _fewer_seeds(main: protocol.PartResult, r: protocol.PartResult) -> bool:
    """Whether a column's move from a decisive verdict to inconclusive is the wider interval of
    its fewer seeds: only the test is open there (no data rule, precondition, 4b or 4c fired),
    it has fewer pairs (a staged block's futile stop, *the effect is about δ*, is not), and its
    estimate with the main block's interval around it (the main
    block's precision) gets the main verdict."""
    if main.verdict not in DECISIVE or r.verdict != INCONCLUSIVE or not r.n_pairs < main.n_pairs:
        return False
    if any(x.rule.step is not Step.TEST or x.rule is Rule.ABOUT_DELTA for x in r.reasons):
        return False  # a futile stop (staged block) is the effect about δ, not too few seeds
    shift = float(r.effect) - float(main.effect)
    if not math.isfinite(shift):
        return False
    moved = dataclasses.replace(main, effect=r.effect, lo=main.lo + shift, hi=main.hi + shift,
                                lo95=main.lo95 + shift, hi95=main.hi95 + shift)
    key = "support_delta" if main.verdict == SUPPORTED else "contradict_delta"
    return bool(slack(moved)[key] > 0)


def beyond(column: str, main: protocol.PartResult, r: protocol.PartResult, frame: pd.DataFrame,
           why: NotRun | None = None) -> Beyond:
    """The part's answer in one column (:data:`COLUMNS`) against ``main`` (the verdict it is
    decided on): holds, moves, not shown (fewer seeds, :func:`_fewer_seeds`), or not run (``why``,
    :attr:`NotRun.NO_RUNS` by default)."""
    if not r.n_runs:
        return Beyond(column, Holds.NOT_RUN, why=why or NotRun.NO_RUNS)
    key = N_TRAIN if column == "scale" else N_SEQ
    size = int(pd.to_numeric(frame.get(key, pd.Series(dtype=float)), errors="coerce").max()) if key in frame else 0
    if r.verdict == main.verdict:
        status = Holds.HOLDS
    else:
        status = Holds.FEWER_SEEDS if _fewer_seeds(main, r) else Holds.MOVES
    return Beyond(column, status, block_value(r), size=size)


def _columns(blocks: Mapping[str, pd.DataFrame], results: Mapping[str, protocol.PartResult],
             main: protocol.PartResult, task: str, length_n: int = 0) -> dict[str, Any]:
    """A stability row's length cells (``length``: its verdict, None where not run;
    ``length_block``) and ``beyond``: each column's :class:`Beyond` against ``main``; where the
    length column did not run, why, read from the runs of the part's own ``task`` (an ablation's
    other tasks may be defined at other lengths; ``length_n``: ``report.length_n``)."""
    explored = blocks.get("exploratory", pd.DataFrame())
    if "task" in explored:
        explored = explored[explored["task"].astype(str) == str(task)]
    ran = results["length"].n_runs
    why = None
    if not ran and length.fixed_length(explored):
        why = NotRun.FIXED_LENGTH
    elif not ran and length.undefined(explored, length_n):
        why = NotRun.UNDEFINED_AT_N
    return {"length": results["length"].verdict if ran else None,
            "length_block": block_value(results["length"]) if ran else None,
            "beyond": tuple(beyond(c, main, results[c], blocks.get(c, pd.DataFrame()), why if c == "length" else None)
                            for c in COLUMNS)}


def column_block(blocks: Mapping[str, pd.DataFrame], spec: Mapping[str, Any], first: protocol.PartResult,
                 column: str) -> tuple[protocol.PartResult, Look | None]:
    """A column's decision (``column``: ``scale`` or ``length``) from ``first``, the part decided
    on the column's runs on the exploratory seeds (its lrs chosen again, every precondition):
    on the column's block (``<column>_confirmation``: its arms rerun on the confirmation seeds at
    the lrs ``first`` chose, :func:`analysis.staged.decide_confirmation`, staged where they ran
    so) where that block holds the part's arms, else ``first`` itself (Look None)."""
    block = blocks.get(f"{column}_confirmation", pd.DataFrame())
    if first.n_runs and covers(block, spec):
        return staged.decide_confirmation(block, first)
    return first, None


def column_decision(blocks: Mapping[str, pd.DataFrame], part: Any, column: str) -> tuple[protocol.PartResult,
                                                                                         Look | None]:
    """A part in one column (:data:`COLUMNS`) decided as the stability table decides it: on the
    column's exploratory-seed runs (every precondition), then on its block (:func:`column_block`)."""
    spec = protocol.spec_dict(part)
    runs = blocks.get(column, pd.DataFrame())
    return column_block(blocks, spec, _block(runs if covers(runs, spec) else pd.DataFrame(), part, True), column)


def stability_row(blocks: Mapping[str, pd.DataFrame], part: Any,
                  decided: Mapping[str, protocol.PartResult] | None = None, length_n: int = 0) -> dict[str, Any]:
    """One row of the stability table for one deciding part (module docstring). ``decided``: the
    part's exploratory and confirmation decisions where already made on these blocks
    (:func:`analysis.verdicts.decide_both`), each decided once; ``length_n``: the length column's
    n (``report.length_n``; 0: no column), to say why a part has no length runs."""
    spec = protocol.spec_dict(part)
    decided = decided or {}
    results = {"exploratory": decided.get("exploratory") or _block(blocks.get("exploratory", pd.DataFrame()), part,
                                                                    True),
               # lrs chosen again in a column, b among choose_b too: the part as registered, every
               # precondition; only where its own arms ran there (another part's arms may share the
               # column's runs, e.g. a positive control's)
               **{c: _block(blocks.get(c, pd.DataFrame()) if covers(blocks.get(c, pd.DataFrame()), spec)
                            else pd.DataFrame(), part, True) for c in COLUMNS}}
    looks: dict[str, Any] = {}
    for c in COLUMNS:  # a column decided on its block's seeds where it ran them, as the main verdict is
        results[c], looks[c] = column_block(blocks, spec, results[c], c)
    if "confirmation" not in decided and not blocks.get("confirmation", pd.DataFrame()).empty:
        results["confirmation"], looks["confirmation"] = staged.decide_confirmation(blocks["confirmation"],
                                                                                    results["exploratory"])
    looks.setdefault("confirmation", decided.get("confirmation_look"))
    for name in ["confirmation", "x4", *sorted(k for k in blocks if k.startswith("readout="))]:
        # one frozen lr per arm: no lr-edge precondition; a readout block decided under its own readout
        # (under the registered one, decide_part would find none of its runs)
        readout = {"readout": name.split("=", 1)[1]} if name.startswith("readout=") else {}
        if name in decided:
            results[name] = decided[name]
            continue
        results[name] = _block(blocks.get(name, pd.DataFrame()),
                               {**results["exploratory"].spec, "choose_b": [], **readout}, False,
                               results["exploratory"] if name == "confirmation" else None)
    row: dict[str, Any] = {"claim": spec["claim"], "part": spec["name"], "task": spec["task"],
                           "a": spec["a"], "b": results["exploratory"].spec["b"]}
    for name, r in results.items():
        frame = blocks.get(name, pd.DataFrame())
        ran = bool(r.n_runs) or not _empty(r)  # an empty block says "–", never a verdict
        row.update({f"{name}": r.verdict if ran else "–", f"{name}_seeds": Seeds(r.paired, r.expected), f"{name}_runs": r.n_runs,
                    f"{name}_steps": ",".join(sorted({str(int(s)) for s in frame.get(STEPS, pd.Series(dtype=float)).dropna()})),
                    f"{name}_readout": ",".join(sorted({str(x) for x in frame.get(READOUT, pd.Series(dtype=str)).dropna()})),
                    f"{name}_lr": dict(r.lr_chosen)})  # arm @ n_train → lr: render.block_lrs words it
    deciding = "confirmation" if not blocks.get("confirmation", pd.DataFrame()).empty else "exploratory"
    row["decided_on"] = deciding
    row.update(slack(results[deciding]))
    for name in ("confirmation", *COLUMNS):
        row[f"{name}_look"] = looks.get(name)  # the staged design's look it stopped at (None: fixed design)
    frame = staged.look_seeds(blocks.get(deciding, pd.DataFrame()), looks.get(deciding))
    again = part if deciding == "exploratory" else {**results["exploratory"].spec, "choose_b": []}
    row["loo"] = loo_flip(frame, again, check_edge=deciding == "exploratory") if not frame.empty else None
    row["loo_flip"] = render.flip(row["loo"])  # its words, for the CSV and the flags column
    scale = results["scale"]
    row["scale"] = scale.verdict if scale.n_runs else None  # None: not run (render.scale_verdict words it)
    row["scale_block"] = block_value(scale) if scale.n_runs else None
    row["scale_effect"] = render.scale_effect(row["scale_block"])
    row["scale_moved"] = bool(scale.n_runs) and scale.verdict != results[deciding].verdict
    row["opposite"] = {results["exploratory"].verdict, results["confirmation"].verdict} == set(DECISIVE)
    row["x4_moved"] = bool(results["x4"].n_runs) and results["x4"].verdict != results["exploratory"].verdict
    row["readout_moved"] = [k.split("=", 1)[1] for k in results if k.startswith("readout=")
                            and results[k].n_runs and results[k].verdict != results["exploratory"].verdict]
    main = results[deciding]
    row.update(_columns(blocks, results, main, spec["task"], length_n))
    row["moves"] = conditions(main, {k: v for k, v in results.items() if k == "x4" or k.startswith("readout=")},
                              spec["readout"])
    row["conditions"] = render.conditions(row["moves"])
    row["trial_ids"] = ",".join(main.trial_ids)
    row["blowups"] = main.blowups
    return row


def claim_unstable(rows: list[dict[str, Any]]) -> Unstable | None:
    """None, or why a claim is unstable, from its deciding parts' stability rows: opposite
    decisive labels on the exploratory and the confirmation block, or a leave-one-out flip
    (the rows' typed ``loo``, never its words) of a verdict that changes the claim's verdict
    (claims combine as in :func:`analysis.protocol.combine`, unadjusted here);
    :func:`analysis.render.unstable` words it."""
    opposite = tuple(r["part"] for r in rows if r["opposite"])
    if opposite:
        return Unstable(opposite=opposite)

    def verdict(labels: list[str]) -> str:
        return protocol.combine([protocol.PartResult({"role": "deciding"}, v) for v in labels]).verdict
    labels = [r["confirmation"] if r["confirmation_runs"] else r["exploratory"] for r in rows]
    for i, r in enumerate(rows):
        flip = r.get("loo")
        if isinstance(flip, Flip) and flip.verdict_changed:
            changed = labels.copy()
            changed[i] = flip.after
            if verdict(changed) != verdict(labels):
                return Unstable(part=r["part"], flip=flip)
    return None


def mark_once(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with ``claims`` (every claim a row's comparison bears on: rows of several
    claims with the same ``trial_ids``, joined) and ``repeat`` (True on every such row but the
    first): *one comparison, one part*, so the report shows it once (:func:`analysis.render_tables.stability`)."""
    if frame.empty or "trial_ids" not in frame:
        return frame
    key = frame["trial_ids"].fillna("").astype(str)
    key = key.where(key != "", pd.Series([f"_row{i}" for i in range(len(frame))], index=frame.index))
    claims = frame.groupby(key, sort=False, dropna=False)["claim"].agg(lambda c: ", ".join(dict.fromkeys(c)))
    return frame.assign(claims=key.map(claims), repeat=key.duplicated())


def write_stability(rows: list[dict[str, Any]], path: Path) -> bool:
    """Write the table as CSV when some row has a confirmation block; returns whether it did."""
    if not rows or not any(r["confirmation_runs"] for r in rows):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)
    return True


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    """Write the stability table (:func:`analysis.verdicts.stability_frame`) as CSV at ``path``
    (its folder created); list-valued cells as ``;``-joined text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = frame.drop(columns=[c for c in TYPED if c in frame])  # the CSV holds their words
    staged_cols = [c for c in frame if c.endswith("_look")]  # a column only where a block ran in stages
    frame = frame.drop(columns=[c for c in staged_cols if frame[c].isna().all()])
    frame = frame.assign(**{c: frame[c].map(render.look) for c in staged_cols if c in frame})
    frame = frame.assign(**{c: frame[c].map(render.scale_verdict) for c in COLUMNS if c in frame})
    frame = frame.assign(**{c: frame[c].map(render.block_seeds) for c in frame if c.endswith("_seeds")},
                         **{c: frame[c].map(render.block_lrs) for c in frame if c.endswith("_lr")})
    flat = frame.map(lambda v: ";".join(map(str, v)) if isinstance(v, (list, tuple)) else v) if not frame.empty else frame
    flat.to_csv(path, index=False)
    return path
