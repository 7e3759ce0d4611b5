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
* ``readout=<name>``: exploratory seeds under each other ``task.readout`` than the part's
  registered one (``tied``; ``learned`` too for the W_V part), rerun at the frozen lr
  (:func:`analysis.confirm.readout_trials`).

:func:`analysis.verdicts.stability_frame` builds the table (one row per deciding part);
:func:`report_lines` formats it for the report and :func:`write_csv` writes
``docs/report/stability.csv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from analysis import phases, protocol
from analysis.protocol import CONTRADICTED, INCONCLUSIVE, SUPPORTED

CONFIRM_FIRST = phases.CONFIRM_FIRST  # the block's first seed (never 0–4, the audit's 10–14 or the pilot 100–104)
STEPS, READOUT = "train.max_steps", "task.readout"
DECISIVE = (SUPPORTED, CONTRADICTED)


def split_blocks(df: pd.DataFrame, steps: int, readout: str | None = None,
                 confirm_seeds: Iterable[int] | None = None) -> dict[str, pd.DataFrame]:
    """``{exploratory, confirmation, x4, readout=<name>…}`` frames of one ablation's runs for one
    part (module docstring), by phase (:func:`analysis.phases.phase_column`) and the part's
    registered ``readout`` (None: every readout counts as registered). ``steps`` is the
    ablation's own ``train.max_steps``; ``confirm_seeds`` the seeds of ``scale.confirm_seeds``
    (None: seeds ≥ :data:`CONFIRM_FIRST`)."""
    phase = phases.phase_column(df, steps, confirm_seeds)
    registered = (df[READOUT].astype(str) == readout) if readout and READOUT in df else pd.Series(True, index=df.index)
    explore = phase.isin(phases.EXPLORATORY_DECISION)
    out = {"exploratory": df[explore & registered], "confirmation": df[(phase == phases.CONFIRMATION) & registered],
           "x4": df[(phase == phases.BUDGET) & registered]}
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


def loo_flip(df: pd.DataFrame, part: Any, check_edge: bool = True) -> str:
    """'' or which seed, left out, changes the part's verdict or a precondition's status (each
    seed in turn, the whole part decided again)."""
    full = protocol.decide_part(df, part, check_edge=check_edge)
    status = {k: v.startswith("fails") for k, v in full.preconditions.items()}
    for seed in sorted(pd.to_numeric(df["seed"], errors="coerce").dropna().unique()):
        less = protocol.decide_part(df[pd.to_numeric(df["seed"], errors="coerce") != seed], part,
                                    check_edge=check_edge)
        flipped = [k for k, v in less.preconditions.items() if v.startswith("fails") != status.get(k, False)]
        if less.verdict != full.verdict or flipped:
            what = f"verdict {full.verdict} → {less.verdict}" if less.verdict != full.verdict else \
                f"precondition {', '.join(flipped)}"
            return f"without seed {int(seed)}: {what}"
    return ""


def _block(df: pd.DataFrame, part: Any, check_edge: bool) -> protocol.PartResult:
    if df.empty:
        return protocol.PartResult(protocol.spec_dict(part), INCONCLUSIVE, ["no runs"])
    return protocol.decide_part(df, part, check_edge=check_edge)


def _lr_text(result: protocol.PartResult) -> str:
    return "; ".join(f"{k}: {v.split(' of ')[0]}" for k, v in result.lr.items())


def stability_row(blocks: Mapping[str, pd.DataFrame], part: Any) -> dict[str, Any]:
    """One row of the stability table for one deciding part (module docstring)."""
    spec = protocol.spec_dict(part)
    results = {"exploratory": _block(blocks.get("exploratory", pd.DataFrame()), part, True)}
    for name in ["confirmation", "x4", *sorted(k for k in blocks if k.startswith("readout="))]:
        # one frozen lr per arm: no lr-edge precondition; a readout block decided under its own readout
        # (under the registered one, decide_part would find none of its runs)
        readout = {"readout": name.split("=", 1)[1]} if name.startswith("readout=") else {}
        results[name] = _block(blocks.get(name, pd.DataFrame()),
                               {**results["exploratory"].spec, "choose_b": [], **readout}, False)
    row: dict[str, Any] = {"claim": spec["claim"], "part": spec["name"], "task": spec["task"],
                           "a": spec["a"], "b": results["exploratory"].spec["b"]}
    for name, r in results.items():
        frame = blocks.get(name, pd.DataFrame())
        row.update({f"{name}": r.verdict, f"{name}_seeds": r.seeds, f"{name}_runs": r.n_runs,
                    f"{name}_steps": ",".join(sorted({str(int(s)) for s in frame.get(STEPS, pd.Series(dtype=float)).dropna()})),
                    f"{name}_readout": ",".join(sorted({str(x) for x in frame.get(READOUT, pd.Series(dtype=str)).dropna()})),
                    f"{name}_lr": _lr_text(r)})
    deciding = "confirmation" if not blocks.get("confirmation", pd.DataFrame()).empty else "exploratory"
    row["decided_on"] = deciding
    row.update(slack(results[deciding]))
    frame = blocks.get(deciding, pd.DataFrame())
    again = part if deciding == "exploratory" else {**results["exploratory"].spec, "choose_b": []}
    row["loo_flip"] = loo_flip(frame, again, check_edge=deciding == "exploratory") if not frame.empty else ""
    row["opposite"] = {results["exploratory"].verdict, results["confirmation"].verdict} == set(DECISIVE)
    row["x4_moved"] = results["x4"].verdict != results["exploratory"].verdict
    row["readout_moved"] = [k.split("=", 1)[1] for k in results if k.startswith("readout=")
                            and results[k].verdict != results["exploratory"].verdict]
    return row


def claim_unstable(rows: list[dict[str, Any]]) -> str:
    """'' or why a claim is unstable, from its deciding parts' stability rows: opposite decisive
    labels on the exploratory and the confirmation block, or a leave-one-out flip of a verdict
    that changes the claim's verdict (claims combine as in :func:`analysis.protocol.combine`,
    unadjusted here)."""
    opposite = [r["part"] for r in rows if r["opposite"]]
    if opposite:
        return f"opposite decisive labels on the exploratory and confirmation seeds: {opposite}"

    def verdict(labels: list[str]) -> str:
        return protocol.combine([protocol.PartResult({"role": "deciding"}, v) for v in labels])[0]
    labels = [r["confirmation"] if r["confirmation_runs"] else r["exploratory"] for r in rows]
    for i, r in enumerate(rows):
        flip = r["loo_flip"]
        if flip and "verdict" in flip:
            changed = labels.copy()
            changed[i] = flip.rsplit("→ ", 1)[1]
            if verdict(changed) != verdict(labels):
                return f"leaving one seed out of {r['part']!r} changes the claim ({flip})"
    return ""


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
    flat = frame.map(lambda v: ";".join(map(str, v)) if isinstance(v, (list, tuple)) else v) if not frame.empty else frame
    flat.to_csv(path, index=False)
    return path


def _blocks_of(frame: pd.DataFrame) -> list[str]:
    readouts = sorted({c.split("_")[0] for c in frame.columns if c.startswith("readout=")})
    return ["exploratory", "confirmation", "x4", *readouts]


def _verdict_table(frame: pd.DataFrame, blocks: list[str]) -> str:
    rows = []
    for _, r in frame.iterrows():
        row = {"claim": r["claim"], "part": r["part"], "decided on": r["decided_on"]}
        row.update({b: (r.get(b) if isinstance(r.get(b), str) else "–") for b in blocks})
        flags = [f"**unstable**: {r['unstable']}" if r.get("unstable") else "",
                 "opposite labels" if r.get("opposite") else "", r.get("loo_flip") or "",
                 "×4 moved" if r.get("x4_moved") else "",
                 f"readout moved: {', '.join(r['readout_moved'])}" if len(r.get("readout_moved") or []) else ""]
        row["flags"] = "; ".join(f for f in flags if f) or "–"
        rows.append(row)
    return pd.DataFrame(rows).to_markdown(index=False)


def _blocks_table(frame: pd.DataFrame, blocks: list[str]) -> str:
    rows = []
    for _, r in frame.iterrows():
        for b in blocks:
            if f"{b}_runs" not in r or not r[f"{b}_runs"] or pd.isna(r[f"{b}_runs"]):
                continue
            rows.append({"claim": r["claim"], "part": r["part"], "block": b, "seeds": r[f"{b}_seeds"] or "–",
                         "steps": r[f"{b}_steps"] or "–", "readout": r[f"{b}_readout"] or "–",
                         "lr": r[f"{b}_lr"] or "–", "runs": int(r[f"{b}_runs"])})
    return pd.DataFrame(rows).to_markdown(index=False) if rows else "No block has runs."


def _slack_table(frame: pd.DataFrame) -> str:
    cols = {"support_delta": "support (δ)", "support_se": "support (SE)",
            "contradict_delta": "contradict (δ)", "contradict_se": "contradict (SE)"}
    table = frame[["claim", "part", "decided_on", *cols]].rename(columns={**cols, "decided_on": "block"})
    return table.to_markdown(index=False, floatfmt=".2f")


def report_lines(frame: pd.DataFrame) -> list[str]:
    """The stability table as the body of a Markdown section (module docstring): verdicts and
    flags per block, what each block ran (seeds, steps, readout, lr, runs) and the slack to
    each threshold, as three narrow tables rather than one too wide to read."""
    if frame.empty:
        return ["No deciding part was decided, so there is no stability table.", ""]
    blocks = _blocks_of(frame)
    return ["A part's verdict on each block of runs; the claim is *unstable* when a part gets opposite decisive "
            "labels on the exploratory and the confirmation seeds, or a leave-one-seed-out flip decides it; "
            "×4 steps and readout changes are flags only.", "", _verdict_table(frame, blocks), "",
            "<details><summary>what each block ran</summary>", "", _blocks_table(frame, blocks), "", "</details>", "",
            "Slack of the deciding block's interval to each threshold (positive: on the side the rule needs), "
            "in units of δ and of the standard error of the mean paired difference:", "",
            _slack_table(frame), ""]
