"""The report's tables in words (issue 60 item 2; one of the render modules with
:mod:`analysis.render` and :mod:`analysis.render_prose`): each claim's parts and their details,
the claims' rows and evidence sections, the parts by role, verdict and reason, the calibration
section, the task health section, the budget ablation's table, the ablations' sections, and the
whole page with every section heading (:func:`document`). Each function words values computed
elsewhere (:class:`analysis.protocol.PartResult`, :class:`analysis.report_values.Report` and its
:class:`~analysis.report_values.ClaimResult`, :class:`~analysis.report_values.AblationSection`,
:func:`analysis.calibration.rates`, :func:`analysis.health.task_health`,
:func:`analysis.budget.compare`); nothing here decides.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from analysis import calibration as calibration_of
from analysis import health as health_of
from analysis import curves, protocol, render, render_prose, stats
from analysis import tables as tables_of
from analysis import verdicts as verdicts_of
from analysis.claims import Measure, Measured
from analysis.decision import CalibrationRule, Open, Step

if TYPE_CHECKING:  # the report's typed values (analysis.report_values; only their fields are read)
    from analysis.report_values import AblationSection, ClaimResult, Header, Report

PATH_CHECK = "path check, not evidence"


def _num(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def _pre(result: protocol.PartResult) -> str:
    if not result.preconditions:
        return "–"
    return render.checks(result.preconditions, "<br>")


def _also95(result: protocol.PartResult) -> str:
    """An equivalence's 95% interval (its contradiction test) beside the printed 90% one."""
    if result.spec["test"] == "difference" or math.isnan(result.lo95):
        return ""
    return f"; 95% [{_num(result.lo95)}, {_num(result.hi95)}]"


def _params(result: protocol.PartResult, arm: str) -> str:
    """An arm's parameter count (paper.md §13: every part prints both arms')."""
    n = result.params.get(arm)
    return f" ({int(n):,} params)" if n is not None and not math.isnan(n) else ""


def _p_text(result: protocol.PartResult) -> str:
    """'p (Holm p)'; the Holm-adjusted p only for deciding parts (protocol.adjust)."""
    if math.isnan(result.p):
        return "–"
    return f"{result.p:.2g}" + (f" ({result.p_holm:.2g})" if not math.isnan(result.p_holm) else "")


def _value_name(spec: dict[str, Any]) -> str:
    value = str(spec["value"])
    if value.startswith("steps_to_"):  # protocol's steps-to-target value kind
        return f"steps to validation error ≤ {value.removeprefix('steps_to_')} (fraction of the step budget)"
    return {"error": "test error", "auc": "mean log test error over n_train",
            "absent_error": "test error on absent answers"}.get(
        value, value.replace("error_n", "test error at length n = "))


def _rereg(spec: dict[str, Any], rereg: dict[tuple[str, str], str]) -> str:
    """The mark of a part re-registered after a verdict run, with its original design and outcome
    (``PartConfig.reregistered``, issue 28 item 7); empty for a part registered once."""
    note = rereg.get((spec["claim"], spec["name"]), "")
    return f"<br>*re-registered after a verdict run; originally: {note}*" if note else ""


def part_rows(results: list[protocol.PartResult], tiny: bool,
               rereg: dict[tuple[str, str], str] | None = None) -> list[str]:
    """A claim's parts as a short table a Markdown viewer shows without scrolling (part, arms,
    effect, δ, verdict) and every part's detail below it, folded (issue 29 item 6)."""
    rereg = rereg or {}
    rows = ["| part | arms a vs b (mean value) | effect d = b − a [interval] | δ | verdict |",
            "|---|---|---|---|---|"]
    detail = []
    for i, r in enumerate(results, 1):
        s = r.spec
        kind = s["test"] if s["test"] == "difference" else f"equivalence ({s['sides']}-sided)"
        short = list(dict.fromkeys(render_prose.reason_name(x) for x in r.reasons))  # the deciding rule first
        verdict = PATH_CHECK if tiny else f"**{r.verdict}**" + (f" ({', '.join(short)})" if short else "") + \
            (f"; {render.conditions(r.conditions)}" if r.conditions else "")
        shared = f"<br>*the same runs as {'; '.join(r.shared_with)}*" if r.shared_with else ""
        rows.append(f"| {i}. {s['name']} ({s['role']}){_rereg(s, rereg)}{shared} | `{s['a']}` {_num(r.mean_a)} vs "
                    f"`{s['b']}` {_num(r.mean_b)} | {_num(r.effect)} [{_num(r.lo)}, {_num(r.hi)}] | "
                    f"{s['delta']} | {verdict} |")
        lrs = "<br>".join(([render.choice(r.choice)] if r.choice else [])
                          + [f"{k}: {render.lr_choice(v)}" for k, v in r.lr.items()]) or "–"
        pre = render.checks(r.preconditions) or "–"
        detail += [f"{i}. **{s['name']}** ({s['role']}): {kind} on {_value_name(s)}; task `{s['task']}`, n_train "
                   f"{render.sizes(r.sizes) or '–'}, seeds {render.seeds(r.paired, r.expected) or '–'}",
                   f"   * arms: `{s['a']}`{_params(r, s['a'])} vs `{s['b']}`{_params(r, s['b'])}",
                   f"   * interval: {render.method(r.method, r.method_p) or '–'}{_also95(r)}; p for contradiction (Holm within the "
                   f"claim): {_p_text(r)}",
                   f"   * preconditions: {pre}", f"   * lr chosen (of grid): {lrs}"]
        if r.control:  # an equivalence's power: its known-different pair, the same test (paper.md §13)
            detail.append(f"   * positive control (the same test must contradict it): {render.control(r.control)}")
        if r.resolution is not None and not math.isnan(r.resolution):
            detail.append(f"   * resolution (the largest effect the measurement could show, exploratory block): "
                          f"{_num(r.resolution)}; " + (render.check(Step.RESOLUTION, r.preconditions[Step.RESOLUTION])
                                                       if Step.RESOLUTION in r.preconditions else "not judged"))
        if r.blowups:
            detail.append(f"   * blown-up runs among the pairs: {render.robust(r.robust) if r.robust else ''}")
        if r.conditions:
            detail.append(f"   * conditions: {render.conditions(r.conditions)}")
        if r.shared_with:
            detail.append(f"   * one comparison, one part: built from the same trial ids as {'; '.join(r.shared_with)}")
        if not tiny and (r.reasons or r.test_alone):
            detail.append(f"   * why: {render.reasons(r.reasons) or '–'}"
                          + (f" (the interval alone: {r.test_alone})" if r.test_alone else ""))
    return rows + ["", "<details><summary>each part in detail: test, arms' parameters, interval "
                   "method, p, preconditions, lr</summary>", "", *detail, "", "</details>"]


def summary_table(decided: list[protocol.PartResult]) -> list[str]:
    """Parts by role and verdict, and the inconclusive ones by reason; a comparison that several
    claims' parts rest on (the same trial ids) counts once."""
    rows = []
    for r in verdicts_of.distinct(decided):  # a comparison several claims rest on counts once
        reasons = [render_prose.reason_name(x) for x in r.reasons] if r.verdict == protocol.INCONCLUSIVE else []
        rows.append({"role": r.spec["role"], "verdict": r.verdict,
                     "reason": ", ".join(sorted(set(reasons))) or "–"})
    if not rows:
        return ["No statistical part was decided.", ""]
    table = pd.DataFrame(rows).value_counts().rename("parts").reset_index()
    return [table.sort_values(["role", "verdict", "reason"]).to_markdown(index=False), ""]


def calibration(table: pd.DataFrame) -> list[str]:
    """The calibration section's body (:mod:`analysis.calibration`): what was done, the rates
    table and, folded, the count per task and block."""
    if table.empty:
        return ["No deciding part has an arm with 4 or more seeds on one block: nothing to calibrate.", ""]
    return ["Each deciding part's arms against themselves: on one block, the arm's seeds split into two disjoint "
            "halves paired in order, decided by the part's own rules on its own value (the interval's label; "
            "preconditions can only weaken it). Difference rule: the rate of decisive labels where nothing "
            "differs. Equivalence rules: the same pairs with one half shifted by exactly δ, so the truth sits on "
            "the margin: the rate of *equivalent*. Both against the nominal 5%; the interval is the exact binomial "
            "95% interval of the rate. Descriptive, not a decision: a comparison counts once however many parts "
            "share its runs, and the comparisons of one task share arms, so they are not independent.", "",
            _calibration_rates(calibration_of.rates(table)).to_markdown(index=False, floatfmt=".3f"), "",
            "<details><summary>per task and block</summary>", "",
            calibration_of.per_task(table).assign(rule=lambda t: t["rule"].map(CALIBRATION_RULE_WORDS))
            .sort_values(["task", "block", "rule"], kind="stable").to_markdown(index=False), "", "</details>", ""]


# the calibration's rules (analysis.decision.CalibrationRule) and what each counts
CALIBRATION_RULE_WORDS = {CalibrationRule.DIFFERENCE: "difference",
                          CalibrationRule.EQUIVALENCE_TWO_SIDED: "equivalence, two-sided (shift ±δ)",
                          CalibrationRule.EQUIVALENCE_ONE_SIDED: "equivalence, one-sided (shift +δ)"}
CALIBRATION_COUNTED_AS = {CalibrationRule.DIFFERENCE: "decisive", CalibrationRule.EQUIVALENCE_TWO_SIDED: "equivalent",
                          CalibrationRule.EQUIVALENCE_ONE_SIDED: "equivalent"}


def _calibration_rates(rates: pd.DataFrame) -> pd.DataFrame:
    """The rates table (:func:`analysis.calibration.rates`) in words: the rule, what it counts and
    the interval as ``[low, high]`` (``–`` where no comparison)."""
    interval = [f"[{lo:.3f}, {hi:.3f}]" if pd.notna(lo) else "–" for lo, hi in zip(rates["low"], rates["high"])]
    return pd.DataFrame({"rule": rates["rule"].map(CALIBRATION_RULE_WORDS),
                         "counted as": rates["rule"].map(CALIBRATION_COUNTED_AS),
                         "n": rates["n"], "k": rates["k"], "rate": rates["rate"], "95% interval": interval,
                         "nominal": rates["nominal"]})


HEALTH_WORDS = {health_of.OK: "ok", health_of.NOTHING: "nothing beats the reference",
                health_of.UNDECIDABLE: "a deciding part cannot be decided", health_of.NO_RUNS: "no runs"}
HEALTH_CAPTION = (
    "Per task: its trivial reference predictors (mean test error over the task's runs; the best "
    "one is the bar), the best and worst arm (seed-mean test error at the largest n_train of its "
    "ablation and the lr chosen on validation), the margin = best reference − best arm (> 0: "
    "something learns), and each deciding part on the task with its δ: ✓ if the best arm of "
    "the part's ablation beats the best reference by ≥ δ (else the part is *not learned* "
    "whatever its arms do). Judged on the test error, also for parts on another value (absent "
    "answers, area under the curve).")


def _fmt(x: float) -> str:
    """A number to three significant digits, ``–`` for none or an infinite one."""
    return "–" if x is None or not np.isfinite(x) else f"{x:.3g}"


def _arm(arm: tuple[str, str] | None) -> str:
    """A task health arm: `arm`, with its ablation where the task has several; ``–`` for none."""
    return "–" if arm is None else f"`{arm[0]}`" + (f" ({arm[1]})" if arm[1] else "")


def _judged(j: health_of.Judged) -> str:
    """A deciding part on its task: ``C8 `forms` δ=0.02 ✓`` (✗, or ✗ (no runs) where its ablation has none)."""
    return f"{j.claim} `{j.ablation}` δ={j.delta:g} {'✓' if j.ok else '✗' if j.ran else '✗ (no runs)'}"


def health(table: pd.DataFrame) -> list[str]:
    """The report's "Task health" section body: the caption, a short Markdown table of
    :func:`task_health` a viewer shows without scrolling (task, best reference, best arm,
    margin, status; flagged tasks in bold) and the rest of each row below it, folded
    (every reference predictor, n_train, worst arm, deciding parts); numbers to 3 significant
    digits."""
    if table.empty:
        return ["No task has runs.", ""]
    task = table["task"].map(lambda t: f"`{t}`")
    shown = pd.DataFrame({
        "task": task,
        "best reference": [f"{n} {_fmt(e)}" for n, e in zip(table["reference"], table["reference_error"])],
        "best arm": [f"{_arm(b)} {_fmt(e)}" for b, e in zip(table["best"], table["best_error"])],
        "margin": table["margin"].map(_fmt),
        "status": [HEALTH_WORDS[s] if s == health_of.OK else f"**{HEALTH_WORDS[s]}**" for s in table["status"]],
    })
    detail = pd.DataFrame({
        "task": task, "reference predictors (test error)": [" · ".join(f"{k} {_fmt(v)}" for k, v in refs) or "–"
                                                            for refs in table["references"]],
        "n_train": [", ".join(str(n) for n in sizes) or "–" for sizes in table["n_train"]],
        "worst arm": [f"{_arm(w)} {_fmt(e)}" for w, e in zip(table["worst"], table["worst_error"])],
        "deciding parts (δ: decidable?)": ["<br>".join(_judged(j) for j in parts) or "–" for parts in table["parts"]],
    })
    return [HEALTH_CAPTION, "", shown.to_markdown(index=False), "",
            "<details><summary>per task: every reference predictor, n_train, worst arm, deciding parts</summary>",
            "", detail.to_markdown(index=False), "", "</details>", ""]


def calibration_section(table: pd.DataFrame) -> list[str]:
    """The calibration section: its heading and :func:`calibration`."""
    return ["## Calibration: how often the rules decide when nothing differs", "", *calibration(table)]


def budget_section(lines: list[str], factor: int, reruns: int) -> list[str]:
    """The budget ablation's section: its heading, what was rerun (×``factor`` steps, ``reruns``
    runs) and the table :func:`budget` made; none where the table is empty."""
    if not lines:
        return []
    return ["## Budget ablation: do the verdicts move with more steps?", "",
            f"Each deciding part's arms rerun at ×{factor} the steps (validation ×{factor} as far apart), "
            "at the size the part was decided at and each arm's lr chosen on validation, every seed; "
            "the part decided again on those runs alone (lr fixed: no lr-edge precondition). "
            f"{reruns} reruns.", "", *lines, ""]


def budget(compared: list[tuple[dict[str, Any], protocol.PartResult, protocol.PartResult]], factor: int) -> list[str]:
    """Markdown: per deciding part (:func:`analysis.budget.compare`), the verdict and effect at ×1
    and at ×``factor`` steps, and whether the verdict moved; no lines where no part was compared."""
    head = [f"| claim | part | task · n_train | ×1: effect [interval] | ×1 verdict (no lr-edge check) | ×{factor}: effect "
            f"[interval] | ×{factor} verdict | moved |", "|---|---|---|---|---|---|---|---|"]

    def cell(r: protocol.PartResult) -> tuple[str, str]:
        eff = "–" if pd.isna(r.effect) else f"{r.effect:.3g} [{r.lo:.3g}, {r.hi:.3g}]"
        why = f" ({'; '.join(render.heads(r.reasons))})" if r.reasons else ""
        return eff, f"{r.verdict}{why}"
    rows = []
    for spec, one, many in compared:
        e1, v1 = cell(one)
        e4, v4 = cell(many)
        moved = "no" if one.verdict == many.verdict else "**yes**"
        rows.append(f"| {spec['claim']} | {spec['name']} | {spec['task']} · {render.sizes(one.sizes) or '–'} | "
                    f"{e1} | {v1} | {e4} | {v4} | {moved} |")
    return head + rows if rows else []


# ----------------------------------------------------------------------------- the stability table
def _blocks_of(frame: pd.DataFrame) -> list[str]:
    readouts = sorted({c.split("_")[0] for c in frame.columns if c.startswith("readout=")})
    ran = [c for c in ("length",) if c in frame and frame[c].map(lambda v: isinstance(v, str)).any()]  # issue 64
    return ["exploratory", "confirmation", "x4", *readouts, *(["scale"] if "scale" in frame else []), *ran]


def _once(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per comparison (:func:`mark_once`), its ``claim`` naming every claim."""
    if "repeat" not in frame:
        return frame
    return frame[~frame["repeat"].astype(bool)].assign(claim=frame["claims"])


def _verdict_table(frame: pd.DataFrame, blocks: list[str]) -> str:
    rows = []
    for _, r in _once(frame).iterrows():
        look = render.look(r.get(f"{r['decided_on']}_look"))  # a staged block: the look it stopped at
        row = {"claim": r["claim"], "part": r["part"], "decided on": r["decided_on"] + (f" ({look})" if look else "")}
        row.update({b: (r.get(b) if isinstance(r.get(b), str) else "–") for b in blocks})
        if "scale" in row:
            row["scale"] = render.scale_verdict(r.get("scale"))
        if "scale" in row and isinstance(r.get("scale_effect"), str) and r["scale_effect"]:
            row["scale"] = f"{row['scale']} ({r['scale_effect']})"
        if "length" in row:  # its estimate where it moves: a holding label needs no more width
            effect = render.scale_effect(r.get("length_block")) if r.get("length") != r.get(r["decided_on"]) else ""
            row["length"] = render.scale_verdict(r.get("length")) + (f" ({effect})" if effect else "")
        flags = [f"**unstable**: {r['unstable']}" if r.get("unstable") else "",
                 "opposite labels" if r.get("opposite") else "", r.get("loo_flip") or "",
                 "×4 moved" if r.get("x4_moved") else "", "scale moved" if r.get("scale_moved") is True else "",
                 f"readout moved: {', '.join(r['readout_moved'])}" if len(r.get("readout_moved") or []) else ""]
        row["flags"] = "; ".join(f for f in flags if f) or "–"
        row["conditions"] = r.get("conditions") or "–"
        row["blown-up runs"] = int(r["blowups"]) if pd.notna(r.get("blowups")) else 0
        rows.append(row)
    return pd.DataFrame(rows).to_markdown(index=False)


def _blocks_table(frame: pd.DataFrame, blocks: list[str]) -> str:
    rows = []
    for _, r in _once(frame).iterrows():
        for b in blocks:
            if f"{b}_runs" not in r or not r[f"{b}_runs"] or pd.isna(r[f"{b}_runs"]):
                continue
            look = render.look(r.get(f"{b}_look"))
            seeds = (render.block_seeds(r[f"{b}_seeds"]) or "–") + (f"; {look}" if look else "")
            rows.append({"claim": r["claim"], "part": r["part"], "block": b, "seeds": seeds,
                         "steps": r[f"{b}_steps"] or "–", "readout": r[f"{b}_readout"] or "–",
                         "lr": render.block_lrs(r[f"{b}_lr"]) or "–", "runs": int(r[f"{b}_runs"])})
    return pd.DataFrame(rows).to_markdown(index=False) if rows else "No block has runs."


def _slack_table(frame: pd.DataFrame) -> str:
    cols = {"support_delta": "support (δ)", "support_se": "support (SE)",
            "contradict_delta": "contradict (δ)", "contradict_se": "contradict (SE)"}
    table = _once(frame)[["claim", "part", "decided_on", *cols]].rename(columns={**cols, "decided_on": "block"})
    return table.to_markdown(index=False, floatfmt=".2f")


def stability(frame: pd.DataFrame) -> list[str]:
    """The stability table (:func:`analysis.verdicts.stability_frame`) as the body of a Markdown
    section (:mod:`analysis.stability`'s docstring): verdicts and
    flags per block, what each block ran (seeds, steps, readout, lr, runs) and the slack to
    each threshold, as three narrow tables rather than one too wide to read."""
    if frame.empty:
        return ["No deciding part was decided, so there is no stability table.", ""]
    blocks = _blocks_of(frame)
    return ["A part's verdict on each block of runs; the claim is *unstable* when a part gets opposite decisive "
            "labels on the exploratory and the confirmation seeds, or a leave-one-seed-out flip decides it; "
            "×4 steps and readout changes are flags only, and *conditions* states the verdict with the readouts "
            "and budgets it holds under where one moves it. A comparison several claims rest on (the same "
            "trial ids) is one row naming every claim; *blown-up runs* counts the deciding block's runs whose "
            "validation error blew up.", "", _verdict_table(frame, blocks), "",
            "<details><summary>what each block ran</summary>", "", _blocks_table(frame, blocks), "", "</details>", "",
            "Slack of the deciding block's interval to each threshold (positive: on the side the rule needs), "
            "in units of δ and of the standard error of the mean paired difference:", "",
            _slack_table(frame), ""]


# ----------------------------------------------------------------------------- the claims
def shown(c: ClaimResult, path_check: bool) -> str:
    """A claim's verdict as the report shows it: ``check passed`` (its exact checks' status), the
    statistical verdict, or :data:`PATH_CHECK` at a path-check scale."""
    if path_check:
        return PATH_CHECK
    return f"check {c.status}" if c.exact else c.verdict.verdict


def claims(cs: Sequence[ClaimResult], path_check: bool, rereg: dict[tuple[str, str], str]) -> dict[str, list[str]]:
    """The claims' rows of the verdict table (``verdicts``: statistical claims) and of the checks'
    table (``checks``: exact ones), and each claim's evidence section (``evidence``: its parts'
    table and details, its exact checks with what they measured)."""
    out: dict[str, list[str]] = {"verdicts": [], "checks": [], "evidence": []}
    for c in cs:
        claim, said = c.claim, shown(c, path_check)
        row = f'| {claim.id} | <a id="{render_prose.anchor(claim.id)}"></a>{claim.statement} |'
        if c.exact:
            out["checks"].append(f"{row} {len(c.checks)} | **{said}** |")
        else:
            out["verdicts"].append(f"{row} {c.deciding} | **{said}** ([evidence](#evidence-{claim.id.lower()})) "
                                   f"| {render_prose.claim_why(c)} |")
        out["evidence"] += [f'### <a id="evidence-{claim.id.lower()}"></a>{claim.id}: {claim.statement} — '
                            f"**{said}**", ""]
        if claim.paper:
            out["evidence"] += [f"*The paper*: {claim.paper}.", ""]
        if c.parts:
            out["evidence"] += part_rows(list(c.parts), path_check, rereg) + [""]
        if c.checks:
            out["evidence"] += ["Exact checks (implementation, not evidence):", "",
                                "| check | status | measured |", "|---|---|---|",
                                *[f"| {p.what} | {p.verdict} | {measured(p.evidence)} |" for p in c.checks], ""]
    return out



# ----------------------------------------------------------------------------- an ablation's tables
SAMPLE_EFFICIENCY_CAPTION = (
    "Per task and arm, at the learning rate chosen on validation (`lr`: the one at the largest "
    f"n_train). `error_n<N>`: test error at n_train = N, {stats.LOG_T_INTERVAL}. `auc_log_error`: per seed, "
    "the trapezoid area under log(error) against log(n_train), divided by the log-width of the "
    "n_train range (the mean log error over the range; errors floored at 1e-6; lower is better); "
    "`slope`: per seed, the OLS slope of log(error) on log(n_train); for these two [lo, hi] is a "
    f"{curves.T_INTERVAL} interval. `n_to_target_boot`: the smallest n_train at which the "
    "seed-mean error reaches `target` (log–log interpolation; ∞ = never reached; the smallest n_train = "
    "already reached there, an upper bound), with a 95% "
    "percentile bootstrap interval over seeds. Only FINISHED, non-diverged runs are used (`used`); "
    "the others are counted. n=N: the seeds an estimate has; with fewer than "
    f"{stats.MIN_SEEDS} there is no interval (\"n=2, no interval\").")


def write_markdown(df: pd.DataFrame, out: Path, caption: str | None = None) -> Path:
    """Write ``df`` to ``<out>.md`` as a GitHub pipe table (:func:`analysis.render.for_markdown`:
    each estimate with its interval), ``caption`` a paragraph above it; returns the path."""
    md = Path(out).with_suffix(".md")
    md.parent.mkdir(parents=True, exist_ok=True)
    text = render.for_markdown(df).to_markdown(index=False) + "\n"
    md.write_text(f"{caption}\n\n{text}" if caption else text)
    return md


def write_table(df: pd.DataFrame, out: Path, caption: str | None = None) -> list[Path]:
    """``df`` as ``<out>.csv`` (:func:`analysis.tables.write_csv`) and ``<out>.md``
    (:func:`write_markdown`); returns ``[csv, md]``."""
    return [tables_of.write_csv(df, out), write_markdown(df, out, caption)]

MEASURED_WORDS = {
    Measure.ERRORS: lambda m: f"{m.name}: " + ", ".join(f"`{p}` {e:.1e}" for p, e in m.values),
    Measure.VALUE: lambda m: f"{m.name}: {m.values[0]:.1e}",
    Measure.RUNS: lambda m: f"{m.name}: {m.n} runs, min {m.values[0]:.3g}, max {m.values[1]:.3g}",
    Measure.PAIRS: lambda m: (f"{m.n} pairs ({m.name}): relative |Δ test loss| max {m.values[0]:.2g}, "
                              f"median {m.values[1]:.2g}"),
    Measure.WORDS: lambda m: f"{m.n} words; by number of Y factors: {dict(m.counts)}",
    Measure.NO_RUNS: lambda m: f"no runs with {m.name}" if m.name else "no runs",
    Measure.NOT_MEASURED: lambda m: f"{m.name} not measured",
    Measure.NO_PAIRS: lambda m: "no paired runs",
}


def measured(m: Measured) -> str:
    """What an exact check measured (:class:`analysis.claims.Measured`), as its table cell."""
    return MEASURED_WORDS[m.kind](m)


# ----------------------------------------------------------------------------- the ablations
def ablation_section(a: AblationSection) -> list[str]:
    """An ablation's section: its question, its trials by status (with the reruns outside its
    exploratory block and their blown-up runs, never hidden under "0 blown up"), its figures and,
    folded, its tables."""
    n = a.counts
    composed = f" runs of the {a.composed} trials this ablation composes to" if a.composed is not None else ""
    reruns = (f" Its reruns (confirmation block, readouts, scale): {a.reruns[0]} runs, {a.reruns[1]} blown up."
              if a.reruns is not None else "")
    lines = [f"### `{a.name}`", "", a.question, "",
             f"Trials: {n.get('total', 0)}{composed} ({n.get('finished', 0)} finished, {n.get('failed', 0)} failed, "
             f"{n.get('killed', 0)} killed, {n.get('diverged', 0)} diverged, {n.get('blowup', 0)} blown up; "
             f"{a.extended} past an lr grid edge); its sweeps were open {a.open_s / 60:.1f} min over "
             f"{a.invocations} invocation(s) (a suite's ablations run as one queue, so their times overlap)."
             + reruns, ""]
    for fig in a.figures:
        lines += [f"![{a.name} {fig.rsplit('.', 1)[0]}]({a.folder}/{fig})", ""]
    for stem, text in a.tables:
        lines += [f"<details><summary>{stem.replace('_', ' ')}</summary>", "", text, "</details>", ""]
    return lines


SYMMETRY = ["id", "preset", "params", "symmetry/rotation_knowledge_err", "symmetry/rotation_err",
            "symmetry/permutation_err"]  # the exact symmetry table's columns


# ----------------------------------------------------------------------------- the whole report
def document(report: Report, header: Header, compared: list, sections: Sequence[AblationSection],
             protocol_text: str) -> list[str]:
    """The report's Markdown lines (before :func:`analysis.render_prose.for_reader`): the title,
    the answer first (issue 45 item 1), the provenance, then every section with its heading.
    ``compared``: the budget ablation's parts (:func:`analysis.budget.compare`); ``protocol_text``:
    :mod:`analysis.protocol`'s docstring, whose body after its first paragraph is the section on
    how verdicts are decided."""
    tiny = report.path_check
    top = render_prose.header(header)
    opening = [] if tiny else render.first_screen(report.rows, render.trust(report.trust), report.trust.scale)
    said = claims(report.claims, tiny, report.reregistered)
    return [
        *top[:2], *opening, *top[2:],
        *render_prose.completeness(report.shortfall),
        *(render_prose.path_check(report.scale) if tiny else []),
        *([] if tiny else render_prose.what_matters(report.claims)),
        *render_prose.legend(report.presets.to_dict("records")),
        "## Verdicts (statistical claims)", "",
        "| claim | statement | deciding parts | verdict | why |", "|---|---|---|---|---|", *said["verdicts"], "",
        "## Stability of the verdicts", "", *stability(report.stability),
        *([] if tiny else calibration_section(report.calibration)),
        '## <a id="checks"></a>Checks (exact identities: implementation checks, not evidence)', "",
        "| claim | statement | checks | status |", "|---|---|---|---|", *said["checks"], "",
        "## Parts by role, verdict and reason", "", *summary_table(report.parts),
        "## Task health", "", *health(report.health),
        *budget_section(budget(compared, header.factor), header.factor, header.longer),
        "## How verdicts are decided", "", protocol_text.split("\n\n", 1)[1].strip(), "",
        *render_prose.sequential_design(header.replay),
        "## Evidence per claim", "", *said["evidence"],
        "## Exact symmetry of every variant (random O(1) weights, float64)", "",
        report.presets[SYMMETRY].to_markdown(index=False, floatfmt=".1e"), "",
        "## Ablations", "", *[line for a in sections for line in ablation_section(a)],
    ]


# The scorecard's and the zoo's inconclusive rows (analysis.decision.Open): what keeps each open,
# and for those more runs of this design can remove, which runs.
OPEN_WORDS = {
    Open.SEEDS: ("the interval decides neither way (or only Holm's correction holds it back): more paired seeds, "
                 "on a confirmation block"),
    Open.POWER: "the positive control is not contradicted yet: more paired seeds",
    Open.RUNS: "runs or paired seeds are missing: the missing runs",
    Open.LR_EDGE: "an arm chose an lr at the grid's edge below the cap: another lr-edge round",
    Open.BUDGET: "an arm is budget-limited at ×1 (no ×4 reruns in these runs): the ×4 budget reruns",
    Open.LR_CAP: "an arm still chooses the largest lr at the cap: it needs lr > 3.0, past this design's grid",
    Open.BUDGET_X4: ("an arm is still budget-limited at ×4 steps (still improving, or too few evaluations "
                     "to judge): a longer budget than this design's"),
    Open.SIZES: "an area over n_train needs two sizes and the grid has one: a grid of several sizes",
    Open.NOT_LEARNED: "an arm does not learn the task: no amount of this design's runs decides it",
    Open.DIVERGED: "every lr of an arm has a diverged seed: another lr grid or parametrisation",
    Open.BLOWUP: "the verdict rests on blown-up runs: an lr at which no seed blows up",
    Open.FLOOR: ("no power: both arms sit at the floor, at 0 or at the budget, the resolution hides δ or no "
                 "positive control is registered: a harder task or another design"),
    Open.CONFIRMED: ("open on the exploratory seeds, then on its confirmation block of fresh seeds too: the "
                     "difference is smaller than this design resolves (a larger block or a finer measure)"),
}


def decided_longer(factor: int) -> str:
    """A row decided on its budget reruns at ``factor`` × the steps (it was budget-limited at ×1)."""
    return f"decided at ×{factor} steps (budget-limited at ×1)"


def confirmed_words(seeds: str, factor: int, decided: bool, why: str, explored: str) -> str:
    """A row decided again on its confirmation block (:func:`analysis.scorecard._confirm`): the
    first ``; ``-segment is the cell's (the block, its seeds and budget, and why it is still open
    where it is), then how the exploratory seeds left it."""
    at = f" at ×{factor} steps" if factor > 1 else ""
    if decided:
        return f"decided on its confirmation block{at}, seeds {seeds}; {explored}"
    return f"open on its confirmation block{at} too, seeds {seeds}: {why}; {explored}"


def budget_limited(factor: int) -> str:
    """A row still budget-limited after its reruns at ``factor`` × the steps."""
    return f"budget-limited at ×{factor}"


def inconclusive_lines(rows: Sequence[tuple[str, str, str, Open]]) -> list[str]:
    """The page's account of its inconclusive rows (Markdown lines): ``rows`` as ``(arm, task,
    reference, why open)``, grouped first by whether more runs of this design can remove the
    reason (:attr:`analysis.decision.Open.removable`), then by the reason; no lines for none."""
    if not rows:
        return []
    lines = [f"## Inconclusive rows ({len(rows)})", ""]
    for removable, title in ((False, "More runs of this design cannot decide these"),
                             (True, "More runs of this design can decide these")):
        mine = [r for r in rows if r[3].removable is removable]
        if not mine:
            continue
        lines += [f"{title} ({len(mine)}):", ""]
        for why in Open:
            cells = [f"`{arm}` on {task} vs `{ref}`" for arm, task, ref, w in mine if w is why]
            if cells:
                lines.append(f"* {OPEN_WORDS[why]} ({len(cells)}): {', '.join(cells)}.")
        lines.append("")
    return lines
