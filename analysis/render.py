"""The words of a decision (issue 60 item 2): every sentence that names a rule of paper.md §13,
a precondition's status, a part's reasons, its positive control and its blown-up runs' checks,
rendered from the typed values of :mod:`analysis.decision`. Nothing here decides: each function
maps a value to text, and no module reads a decision back from these words.

Also why a claim's parts combine to its verdict (:class:`analysis.decision.Combined`,
:class:`~analysis.decision.ClaimVerdict`), a part's short label, the stability table's
sentences (a leave-one-seed-out flip, the conditions that travel with a verdict, the scale cell
and "– (not run)", why a claim is unstable), the first screen with what would decide an
undecided part and *How far to trust this*. Its siblings :mod:`analysis.render_prose` (the
header, the completeness warning, the opening summary, the legend, the reader's pass over the
Markdown) and :mod:`analysis.render_tables` (the claims, parts, calibration, task health, budget
and ablation sections, and the page with its headings) word the rest of the report.

This module imports only :mod:`analysis.decision` (no store, no Ray, no module that starts
trials; ``tests/test_layering.py`` checks the render family). A new rule adds one entry to
:data:`RULE_WORDS`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis.decision import (Augmentation, Beyond, Block, Check, Choice, ClaimVerdict, Combined, Conditions, Look,
                               Control, Decide, Flip, Holds, Label, Line, LrChoice, Method, Move, NotRun, Reason,
                               Remedy, Robust, Row, Rule, Scale, Seeds, Step, Trust, UnitKind, Units, Unstable)

def lr(x: float) -> str:
    """A learning rate (or a mean) as the report prints it: three significant digits."""
    return f"{x:.3g}"


def num(x: float | None) -> str:
    """A number to three significant digits, ``–`` for none (NaN)."""
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def _at(r: Reason) -> str:
    return f"`{r.arm}` at n_train={r.n_train}: "


def _grid(values: Sequence[float]) -> str:
    return str([lr(g) for g in values])


def control(c: Control) -> str:
    """The positive control's line: its arms, d with its 95% interval and what the interval said."""
    if math.isnan(c.interval.estimate):
        return f"`{c.a}` vs `{c.b}`: {'; '.join(reason(x) for x in c.reasons)}"
    return (f"`{c.a}` {lr(c.mean_a)} vs `{c.b}` {lr(c.mean_b)}: d = {c.interval.estimate:.3g} "
            f"[{c.interval.lo:.3g}, {c.interval.hi:.3g}] (95%), {c.verdict}")


def robust(r: Robust) -> str:
    """Step 4b's checks in one line: the blown-up runs' seeds, the test without them, Hodges–Lehmann."""
    w, h = r.without, r.hodges_lehmann
    return (f"{len(r.runs)} blown-up run(s) on seed(s) {', '.join(str(s) for s in r.seeds)}; "
            f"without them d = {w.estimate:.3g} [{w.lo:.3g}, {w.hi:.3g}] (95%, {w.n} pairs): {r.without_verdict}; "
            f"Hodges–Lehmann {h.estimate:.3g} [{h.lo:.3g}, {h.hi:.3g}] (exact signed-rank 95%): {r.hl_verdict}")


def blown_up_runs(r: Robust) -> str:
    """The blown-up runs by arm, seed and trial id."""
    return ", ".join(f"`{b.arm}` seed {b.seed} (trial {b.trial_id[:12]})" for b in r.runs)


def _budget_unjudged(r: Reason) -> str:
    evals, least = r.values
    return f"{_at(r)}cannot judge, {int(evals)} evaluations in the last 20% (< {int(least)})"


# one wording per rule: the reason as the report's "why" prints it (a precondition's label apart)
RULE_WORDS: dict[Rule, Callable[[Reason], str]] = {
    Rule.NO_RUNS: lambda r: f"no runs of `{r.arm}` on {r.names[0]}" + (f" under readout {r.names[1]}"
                                                                       if r.names[1] else ""),
    Rule.NO_COLUMN: lambda r: f"no runs with {r.names[0]!r}",
    Rule.POOLED: lambda r: f"`{r.arm}` has several runs per size and seed: an axis is pooled (name it in the arm)",
    Rule.NO_SIZE: lambda r: "no training-set size where both arms have an eligible lr",
    Rule.AUC_SIZES: lambda r: "area under the curve needs ≥ 2 sizes; " + (
        f"`{r.arm}` has {r.names[0] or 'none'}" if r.arm else f"both arms have {r.names[0]}"),
    Rule.FEW_PAIRS: lambda r: f"{int(r.values[0])} paired seed(s): no interval",
    Rule.NO_RERUNS: lambda r: "no reruns",
    Rule.EMPTY_BLOCK: lambda r: "no runs",
    Rule.INCLUDES_ZERO: lambda r: "the 95% interval includes 0",
    Rule.STRADDLES_DELTA: lambda r: "the 90% interval is not inside ±δ, nor the 95% interval outside it",
    Rule.ONE_SIDED_OPEN: lambda r: (f"the one-sided 95% upper bound {r.values[0]:.3g} is not below δ, "
                                    f"nor the 95% lower bound {r.values[1]:.3g} above it"),
    Rule.ABOUT_DELTA: lambda r: (f"the effect is about δ (stopped for futility after {int(r.values[0])} paired "
                                 "seeds of the staged block)"),
    Rule.NOT_LEARNED: lambda r: (f"`{r.arm}` {r.values[0]:.3g} vs {r.names[0]} {r.values[1]:.3g} "
                                 f"(needs ≤ {r.values[2]:.3g})"),
    Rule.NOT_REACHED: lambda r: (f"`{r.arm}` reached validation error ≤ {r.values[0]:g} on {int(r.values[1])} "
                                 f"of {int(r.values[2])} seeds"),
    Rule.BUDGET_UNLOGGED: lambda r: f"{_at(r)}no best-so-far validation summary logged",
    Rule.BUDGET_UNJUDGED: _budget_unjudged,
    Rule.BUDGET_FALLING: lambda r: (f"{_at(r)}still falling (best-so-far {r.values[0]:.3g} at 80% → "
                                    f"{r.values[1]:.3g} at the end, > δ/2)"),
    Rule.DIVERGED: lambda r: f"`{r.arm}`: every lr has a diverged seed" + (
        f" ({int(r.values[0])} of {int(r.values[0])})" if r.values else ""),
    Rule.GRID_SMALL: lambda r: f"{_at(r)}lr grid has {len(r.values)} value(s) {_grid(r.values)}",
    Rule.LR_LARGEST: lambda r: f"{_at(r)}chosen lr {lr(r.values[0])} is the largest of {_grid(r.values[1:])}",
    Rule.LR_SMALLEST: lambda r: f"{_at(r)}chosen lr {lr(r.values[0])} is the smallest of {_grid(r.values[1:])}",
    Rule.AT_ZERO: lambda r: (f"both arms within δ of 0 {'steps (of the budget)' if r.names[0] == 'steps' else 'error'} "
                             f"({r.values[0]:.3g}, {r.values[1]:.3g})"),
    Rule.AT_BUDGET: lambda r: (f"both arms within δ of the budget: neither reaches the target ({r.values[0]:.3g}, "
                               f"{r.values[1]:.3g})"),
    Rule.FLOOR_MISSING: lambda r: f"the floor arm `{r.arm}` has no runs at n_train={r.names[0]}",
    Rule.AT_FLOOR: lambda r: f"both arms within δ of the floor arm `{r.arm}` ({r.values[0]:.3g})",
    Rule.NO_CONTROL: lambda r: "no positive control registered",
    Rule.CONTROL_OPEN: lambda r: f"positive control not contradicted ({control(r.control)})",
    Rule.BLOWUP: lambda r: f"decided by {int(r.values[0])} blown-up runs: {robust(r.robust)}",
    Rule.BLOWUP_LR: lambda r: f"decided by {int(r.values[0])} blown-up runs: the lr choice without their lr says "
                              f"{r.verdict}",
    Rule.RESOLUTION: lambda r: (f"the measurement cannot show δ: the largest effect it could show is "
                                f"{r.values[0]:.3g} (the compared arm's distance from its floor, exploratory block) "
                                f"< δ + the 95% half-width = {r.values[1]:.3g}"),
}

# each precondition's printed name (paper.md §13 step 4, 4c)
STEP_NAMES = {Step.NOT_LEARNED: "not learned", Step.BUDGET: "budget-limited", Step.DIVERGED: "diverged",
              Step.LR_EDGE: "lr at grid edge", Step.NO_POWER: "no power", Step.RESOLUTION: "resolution"}

# the test's rules in a few words (a block's "not shown (…)")
OPEN = "the interval decides neither way"
SHORT = {Rule.INCLUDES_ZERO: OPEN, Rule.STRADDLES_DELTA: OPEN, Rule.ONE_SIDED_OPEN: OPEN}
MISSING = (Rule.NO_RUNS, Rule.NO_COLUMN, Rule.EMPTY_BLOCK)


def look(x: Look | None) -> str:
    """Where a block run in stages was decided (:class:`analysis.decision.Look`): ``stopped at
    look 1 of 3 (4 paired seeds)``, ``about δ at look 2 of 3 (7 paired seeds)``, ``open after
    look 3 of 3 (10 paired seeds)``; ``""`` for the fixed design (None)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    how = "about δ at" if x.futile else "stopped at" if x.stopped else "open after"
    return f"{how} look {x.look + 1} of {len(x.looks)} ({x.n} paired seeds)"


def reason(r: Reason) -> str:
    """One reason in full, without its precondition's label."""
    return RULE_WORDS[r.rule](r)


def _groups(reasons: Iterable[Reason]) -> list[tuple[Step | None, list[Reason]]]:
    """Consecutive reasons of one precondition together (None: a reason of no precondition)."""
    out: list[tuple[Step | None, list[Reason]]] = []
    for r in reasons:
        step = r.rule.step if r.rule.precondition else None
        if step is not None and out and out[-1][0] is step:
            out[-1][1].append(r)
        else:
            out.append((step, [r]))
    return out


def lead(r: Reason) -> str:
    """A reason's first clause (up to "; "): a table's footnote names the rule, not each arm."""
    return reason(r).split("; ")[0]


def reason_lines(rs: Iterable[Reason]) -> list[str]:
    """A part's reasons, one line per precondition (its failures after its name, ``budget-limited:
    `a` at n_train=1024: still falling (…); …``) or per other rule."""
    return [f"{STEP_NAMES[step]}: {'; '.join(reason(x) for x in group)}" if step is not None
            else reason(group[0]) for step, group in _groups(rs)]


def reasons(rs: Iterable[Reason], sep: str = "; ") -> str:
    """A part's reasons as its "why" prints them (:func:`reason_lines` joined by ``sep``)."""
    return sep.join(reason_lines(rs))


def heads(rs: Iterable[Reason]) -> list[str]:
    """Each line of :func:`reason_lines` up to its first colon: the budget table's words."""
    return [x.split(":")[0] for x in reason_lines(rs)]


def reason_name(r: Reason) -> str:
    """A reason in a few words for the summary: its precondition's name (``lr at grid edge``),
    ``runs missing`` for the many ``no runs of `arm` on task …``, else its words up to a colon
    (``decided by 3 blown-up runs``)."""
    if r.rule.precondition:
        return STEP_NAMES[r.rule.step]
    return "runs missing" if r.rule in MISSING else reason(r).split(":")[0]


def short(r: Reason) -> str:
    """A rerun block's reason in a few words: as :func:`reason_name`, but the test's own rules as
    "the interval decides neither way" and missing runs named."""
    if r.rule.precondition:
        return STEP_NAMES[r.rule.step]
    return SHORT.get(r.rule) or reason(r).split(":")[0]


def short_names(rs: Iterable[Reason]) -> list[str]:
    """Each reason's :func:`short` name once, in order."""
    return list(dict.fromkeys(short(r) for r in rs))


def check(step: Step, c: Check) -> str:
    """A precondition's status: ``ok``, ``n/a`` (not judged) or ``fails: …``."""
    if not c.failures:
        return "ok" if c.judged else "n/a"
    if step is Step.RESOLUTION:
        res, need = c.failures[0].values
        return f"fails: largest effect {res:.3g} < {need:.3g}"
    return "fails: " + "; ".join(reason(x) for x in c.failures)


def flip(f: Flip | None) -> str:
    """A leave-one-seed-out flip (:func:`analysis.stability.loo_flip`): ``without seed 3: verdict
    supported → inconclusive`` or ``without seed 3: precondition diverged``; '' for none."""
    if f is None:
        return ""
    what = (f"verdict {f.before} → {f.after}" if f.verdict_changed
            else f"precondition {', '.join(STEP_NAMES[k] for k in f.steps)}")
    return f"without seed {f.seed}: {what}"


def unstable(u: Unstable | None) -> str:
    """Why a claim is unstable (:func:`analysis.stability.claim_unstable`), '' where it is not."""
    if u is None or not isinstance(u, Unstable):
        return ""
    if u.opposite:
        return f"opposite decisive labels on the exploratory and confirmation seeds: {list(u.opposite)}"
    return f"leaving one seed out of {u.part!r} changes the claim ({flip(u.flip)})"


# ----------------------------------------------------------------------------- a claim's verdict
NO_DECIDING = "no deciding part in this suite"


def combined(c: Combined) -> str:
    """Why a claim's parts combine to its verdict (:func:`analysis.protocol.combine`): ``1
    contradicted, 2 supported of 3 deciding parts`` with the parts Holm's correction made
    inconclusive, and that a contradiction survived it."""
    if not c.deciding:
        return NO_DECIDING
    holm = f"; {c.holm_removed} contradicted before Holm's correction, not after" if c.holm_removed else ""
    why = f"{', '.join(f'{n} {v}' for v, n in c.counts)} of {c.deciding} deciding parts{holm}"
    return why + (" (contradicted after Holm's correction)" if c.verdict == "contradicted" else "")


def claim_why(v: ClaimVerdict) -> str:
    """Why a claim has its verdict (:func:`analysis.verdicts.combine_claim`): :func:`combined`, or
    why it is unstable with what its parts alone say."""
    if v.unstable is not None:
        return f"{unstable(v.unstable)} (on the parts alone: {v.combined.verdict}; {combined(v.combined)})"
    return combined(v.combined)


def short_label(spec: Mapping[str, Any]) -> str:
    """A part named in a sentence: its name's lead before ':' where short and whole ("(a)
    selection"), with its arms, e.g. "(a) selection, `value` vs `softmax`"; else the arms and
    the task (a name cut at its first ':' could end mid-phrase)."""
    lead = str(spec["name"]).split(":")[0]
    arms = f"`{spec['a']}` vs `{spec['b']}`"
    whole = ":" in str(spec["name"]) and len(lead) <= 30 and lead.count("(") == lead.count(")")
    return f"{lead}, {arms}" if whole else f"{arms} on {spec['task']}"


# ----------------------------------------------------------------------------- a part's measurement
def seed_span(seeds: Iterable[Any]) -> str:
    """Seeds as a reader writes them: a run ``2000–2009``, else a list ``0,2,3``."""
    s = sorted(int(x) for x in seeds)
    return f"{s[0]}–{s[-1]}" if s == list(range(s[0], s[-1] + 1)) and len(s) > 1 else ",".join(map(str, s))


def seeds(paired: Sequence[int], expected: int | None) -> str:
    """The paired seeds of a part with how many each arm was meant to have: ``0–4 (5 of 5)``;
    empty where nothing was paired yet (``expected`` None: no size decided), ``none of 5``
    where none paired."""
    if expected is None:
        return ""
    return f"{seed_span(paired)} ({len(paired)} of {expected})" if paired else f"none of {expected}"


def block_seeds(s: Any) -> str:
    """A stability-table cell of :class:`~analysis.decision.Seeds` (anything else as it is)."""
    return seeds(s.paired, s.expected) if isinstance(s, Seeds) else s


def block_lrs(lrs: Any) -> str:
    """A stability-table cell of a block's chosen lrs (arm @ n_train → lr):
    ``a @ 256: 0.003; b @ 256: 0.003``; empty where none (anything not a mapping as it is)."""
    return "; ".join(f"{k}: {v:.3g}" for k, v in lrs.items()) if isinstance(lrs, Mapping) else lrs


def sizes(values: Sequence[int]) -> str:
    """The decided training-set sizes: ``256``, or ``64, 256, 1024`` for an area."""
    return ", ".join(str(int(n)) for n in values)


METHOD_WORDS = {Method.T95: "paired Student-t 95%", Method.TOST90: "TOST (paired t 90%), p = {p:.2g}",
                Method.ONE_SIDED90: "one-sided paired t (90% interval, upper bound vs δ)"}


def method(m: Method | None, p: float = math.nan) -> str:
    """The interval a part's test read, with TOST's p-value; empty where no test ran."""
    return METHOD_WORDS[m].format(p=p) if m is not None else ""


def lr_choice(c: LrChoice) -> str:
    """``0.01 of ['0.001', '0.003', '0.01', '0.03']``, with the lrs it tied with on validation."""
    tied = f" (tied on validation error with {', '.join(lr(t) for t in c.ties)}; validation loss chose)" if c.ties else ""
    return f"{lr(c.chosen)} of {[lr(x) for x in c.grid]}" + tied


def choice(c: Choice | None) -> str:
    """How ``b`` was chosen among the part's candidates on validation (empty: no choice)."""
    if c is None:
        return ""
    if c.n_train is None:
        return f"b: no size where every candidate {list(c.among)} has an eligible lr; took `{c.best}`"
    listed = ", ".join(f"`{arm}` {m:.3g}" for arm, m in zip(c.among, c.means))
    return f"b chosen on validation at n_train={c.n_train}: `{c.best}` ({listed})"


# ----------------------------------------------------------------------------- the stability table
def block_interval(b: Block) -> str:
    """A block's d with its 95% interval (``d = 0.0225 [0.016, 0.029]``, or that it has none)."""
    i = b.interval
    if math.isnan(i.lo):
        return f"d = {i.estimate:.3g}, no interval" if math.isfinite(i.estimate) else "no interval"
    return f"d = {i.estimate:.3g} [{i.lo:.3g}, {i.hi:.3g}]"


def block_why(b: Block) -> str:
    """An inconclusive block's reasons in a few words: the rules' names, or that the interval
    decides neither way."""
    return ", ".join(short_names(b.reasons)) or OPEN


def scale_effect(b: Block | None) -> str:
    """The scale column's estimate, led by why where it is inconclusive; '' where not run."""
    if b is None:
        return ""
    return ("" if b.decisive else f"{block_why(b)}; ") + block_interval(b)


NOT_RUN = "– (not run)"  # the scale or length cell of a part with no runs in that column


def scale_verdict(verdict: str | None) -> str:
    """The stability table's scale cell: the block's verdict, or that it was not run (missing: None, NaN in a frame)."""
    return verdict if isinstance(verdict, str) else NOT_RUN


def _where(block: str) -> str:
    """A condition block as a reader names it: ``readout=tied`` → ``the tied readout``, ``x4`` →
    ``×4 budget``."""
    return f"the {block.split('=', 1)[1]} readout" if block.startswith("readout=") else "×4 budget"


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"


def _conditions_head(c: Conditions) -> str:
    """'contradicted under the scaled and tied readouts' (and at ×4 budget): where the verdict holds."""
    readouts = ([c.registered] if c.registered else []) + [b.split("=", 1)[1] for b in c.same
                                                           if b.startswith("readout=")]
    where = f"under the {_listed(readouts)} readout{'s' if len(readouts) > 1 else ''}" if readouts else "as registered"
    return f"{c.verdict} {where}" + (" and at ×4 budget" if "x4" in c.same else "")


MOVE_WORDS = {Move.REVERSED: "reversed under {where}", Move.NOT_SHOWN: "not shown under {where}",
              Move.DECISIVE: "{verdict} under {where}", Move.ESTIMATE: "the estimate moves under {where}"}


def conditions(c: Conditions | None, details: bool = True) -> str:
    """The condition sentence of a deciding part (:func:`analysis.stability.conditions`), '' for
    none: "contradicted under the scaled and tied readouts; not shown under the learned readout
    (the interval decides neither way; d = …)"; ``details=False`` leaves out the parenthesised
    details (the summary and the verdict table)."""
    if c is None:
        return ""
    out = [_conditions_head(c)]
    for m in c.moved:
        text = MOVE_WORDS[m.move].format(where=_where(m.block), verdict=m.result.verdict)
        if details:
            estimate = block_interval(m.result) + (f", excluding the main estimate {m.excludes:.3g}"
                                                   if not math.isnan(m.excludes) else "")
            text += {Move.REVERSED: f" ({m.result.verdict}, {estimate})",
                     Move.NOT_SHOWN: f" ({block_why(m.result)}; {estimate})"}.get(m.move, f" ({estimate})")
        out.append(text)
    return "; ".join(out)


def checks(pre: dict[Step, Check], sep: str = "; ") -> str:
    """Every precondition's status, ``name: status`` joined by ``sep``."""
    return sep.join(f"{STEP_NAMES[k]}: {check(k, v)}" for k, v in pre.items())


# ----------------------------------------------------------------------------- the first screen
HEADING = "## Which parts of attention matter"
LABEL_WORDS = {Label.MATTERS: "matters", Label.NO_MATTER: "does not matter", Label.HURTS: "hurts",
               Label.UNDECIDED: "undecided", Label.NO_VERDICT: "no verdict"}
READ_ROW = "\n".join((
    "**How to read a row.** Each part compares two arms on one task, one *with* the component and one *without* "
    "it, each at its lr chosen on validation.",
    "",
    "- **amount** = value(without) − value(with): its mean over paired seeds and 95% interval, where the value is "
    "test error, mean log test error over n_train, or the fraction of the step budget to reach a target (lower is "
    "better), so a positive amount means the component lowers error.",
    "- **answer**: *matters*: the component lowers error and the interval excludes 0 (an equivalence: lies beyond "
    "δ, the part's pre-registered margin); *hurts*: it raises error, likewise; *does not matter*: the interval "
    "lies within ±δ (one-sided: it lowers error by less than δ); *undecided*: neither, or a rule of the protocol "
    "voids the interval: the row says why and what would decide it.",
    "- *Paper*: what the registered hypothesis expects and its verdict (*supported* / *contradicted*, the verdict "
    "tables below).",
    "- *How firm*: *fragile* where the interval is under 0.5 δ from a label change, or a precondition (a rule that "
    "voids the interval) under 0.5 δ from voiding it, else *firm*; the blocks whose label differs (the "
    "exploratory seeds, ×4 steps, another readout: *scaled* β Eᵀ f(X), *tied* Eᵀ f(X), *learned* U f(X)); then "
    "the answer beyond this regime, at 8× the part's n_train and more steps (the scale column) and at a 4× longer "
    "sequence (the length column), each decided on its own reruns with its lrs chosen again: *holds*, *moves to* "
    "another label (a part that moves is not settled), *not shown (fewer seeds)* (inconclusive there, which its "
    "wider interval on fewer seeds explains) or *not run* (no reruns of its arms in these runs; another reason is "
    "named).",
))
BLOCK_NAMES = {"exploratory": "exploratory seeds", "x4": "×4 steps"}
PRE_WORDS = {Step.RESOLUTION: "the resolution rule (cannot show δ)", Step.NO_POWER: "its positive control (power)"}


def _value_noun(value: str) -> str:
    if value == "auc":
        return "mean log error"
    if value.startswith("steps_to_"):
        return f"the steps to validation error {value.removeprefix('steps_to_')}"
    return "error"


def _amount(x: Line) -> str:
    """"`value` lowers error by 0.0288 [0.0255, 0.0321] against `softmax`" (the estimate's sign
    picks the verb; the interval follows it)."""
    g, noun = x.gain, _value_noun(x.value)
    if math.isnan(g.estimate):
        return f"`{x.has}` against `{x.lacks}`: no interval"
    verb, lo, hi = ("lowers", g.lo, g.hi) if g.estimate >= 0 else ("raises", -g.hi, -g.lo)
    among = f" (the best on validation of {', '.join(f'`{c}`' for c in x.choice)})" if x.choice else ""
    return f"`{x.has}` {verb} {noun} by {num(abs(g.estimate))} [{num(lo)}, {num(hi)}] against `{x.lacks}`{among}"


# what lifts each precondition that voided a decisive interval (Remedy.VOIDED)
REMEDY_WORDS = {Step.BUDGET: "a longer budget (×4 steps)", Step.LR_EDGE: "an lr past the grid edge",
                Step.DIVERGED: "an lr at which no seed diverges",
                Step.NOT_LEARNED: "a budget or size at which the arms learn",
                Step.NO_POWER: "a positive control that the same test contradicts"}
HARDER = "a harder task (not more seeds)"


def _sign(threshold: float) -> str:
    return "δ" if threshold > 0 else "−δ"


def decide(d: Decide | None) -> tuple[str, str]:
    """``(why undecided, what would decide it)`` (:func:`analysis.answer.what_would_decide`);
    ``("", "")`` for a decided part."""
    if d is None:
        return "", ""
    m, v = d.remedy, d.values
    if m is Remedy.NO_INTERVAL:
        return reasons(d.reasons) or "no interval", "the missing runs"
    if m is Remedy.FLOOR_RULE:
        return reason(d.reasons[0]), HARDER
    if m is Remedy.FLOOR_RESOLUTION:
        return f"the largest effect this measurement can show is {v[0]:.3g}, below δ = {v[1]:g}", HARDER
    if m is Remedy.FLOOR_ZERO:
        return f"both arms within δ of 0 error ({num(v[0])}, {num(v[1])})", HARDER
    if m is Remedy.BLOWUP:
        return reason(d.reasons[0]), "an lr at which no seed blows up (the part decided without them agrees)"
    if m is Remedy.VOIDED:
        return (f"{', '.join(STEP_NAMES[s] for s in d.steps) or 'a precondition'} voids a {d.verdict} interval",
                "; ".join(REMEDY_WORDS[s] for s in d.steps) or "the failed precondition lifted")
    if m is Remedy.AT_MARGIN:
        # magnitudes: the row's verb (lowers / raises) already gives the direction
        return (f"the amount {num(abs(v[0]))} sits within one half-width ({num(v[1])}) of δ = {num(abs(v[2]))}",
                "not more seeds: the effect is about δ")
    why = "the 95% interval includes 0" if d.threshold == 0 else f"the interval straddles {_sign(d.threshold)}"
    if d.seeds is None:
        return why, f"more than {d.most:,} seeds at the observed spread (sd {num(d.sd)})"
    return why, f"about {d.seeds} paired seeds (now {d.now}; 80% power at the observed sd {num(d.sd)})"


UNIT_WORDS = {UnitKind.LOG_ERROR: "mean log test error", UnitKind.BUDGET_FRACTION: "fraction of the step budget",
              UnitKind.TASK_ERROR: "test error"}


def units(u: Units) -> str:
    """A part's value's unit in words: the task's error metric's name where it has one."""
    return u.task_error if u.kind is UnitKind.TASK_ERROR and u.task_error else UNIT_WORDS[u.kind]


def _answer(x: Line) -> str:
    within = (f"less than δ = {x.delta:g}" if x.label is Label.NO_MATTER else "")
    head = f"**{LABEL_WORDS[x.label]}**" + (f" ({x.role})" if x.label is Label.NO_VERDICT else "")
    text = f"{head}: {_amount(x)}" + (f", {within}" if within else "") + f" ({units(x.units)}, δ {x.delta:g})"
    if x.label is Label.UNDECIDED:
        why, what = decide(x.decide)
        text += f"; why: {why} → {what}"
    return text


def _paper(x: Line) -> str:
    if x.expected is None:
        return "–"
    said = f"expects it {LABEL_WORDS[x.expected]}: **{x.verdict}**"
    if x.verdict == "contradicted":
        said += f" (it {LABEL_WORDS[x.label]})"
    return said


COLUMN_WORDS = {"scale": "at the larger scale", "length": "at a longer sequence"}
COLUMN_NAMES = {"scale": "larger scale", "length": "longer sequence"}  # both columns in one cell
SIZE_WORDS = {"scale": "at n_train {size}", "length": "at n = {size}"}
# NO_RUNS is the common case, said once in the reading paragraph (READ_ROW); other reasons on the row
NOT_RUN_WORDS = {NotRun.NO_RUNS: "", NotRun.FIXED_LENGTH: "the task's sequence length is fixed",
                 NotRun.UNDEFINED_AT_N: "the task is not defined at that length",
                 NotRun.OFF: "off at this scale"}


def not_run(why: NotRun | None) -> str:
    """A column's cell where it did not run: ``not run``, with its reason where not the common one."""
    words = NOT_RUN_WORDS[why] if why else "not registered"
    return f"not run ({words})" if words else "not run"


def beyond(b: Beyond, expected: Label | None = None) -> str:
    """A part's answer in one column: "at n_train 8192: holds", "at n = 32: moves to
    inconclusive (…)", "… not shown (fewer seeds; d = …)", "at the larger scale: not run (…)"."""
    where = SIZE_WORDS[b.column].format(size=b.size) if b.size else COLUMN_WORDS[b.column]
    if b.status is Holds.NOT_RUN:
        return f"{where}: {not_run(b.why)}"
    if b.status is Holds.HOLDS or b.block is None:
        return f"{where}: holds"
    if b.status is Holds.FEWER_SEEDS:
        return f"{where}: not shown (fewer seeds; {block_interval(b.block)})"
    return f"{where}: moves to {block_answer(b.block.verdict, expected)} ({scale_effect(b.block)})"


def block_answer(verdict: str, expected: Label | None) -> str:
    """Another block's label in the answer column's words: a supported block says what the
    hypothesis expects ("does not matter"), an inconclusive one "undecided", a contradicted one
    that it contradicts the expectation."""
    if expected is None or verdict not in ("supported", "contradicted", "inconclusive"):
        return verdict
    if verdict == "inconclusive":
        return LABEL_WORDS[Label.UNDECIDED]
    return LABEL_WORDS[expected] if verdict == "supported" else f"not '{LABEL_WORDS[expected]}' (contradicted)"


def _firm(x: Line) -> str:
    out = []
    if not math.isnan(x.margin) and x.margin < 0.5:
        out.append(f"fragile: the interval is {x.margin:.2f} δ from a label change")
    out += [f"fragile: {PRE_WORDS[step]} is {m:.2f} δ from voiding the verdict" for step, m in x.preconditions]
    out += [f"{BLOCK_NAMES.get(b, b.replace('readout=', '') + ' readout')}: {block_answer(v, x.expected)}"
            for b, v in x.blocks]
    if x.loo:
        out.append(flip(x.loo))
    if x.blown_up:
        out.append(f"{len(x.blown_up)} blown-up run(s): " + ", ".join(
            f"`{b.arm}` seed {b.seed}" for b in x.blown_up))
    moves = any(b.status is Holds.MOVES for b in x.beyond)  # a verdict that moves is never called firm
    if not out and x.expected is not None and not moves:
        out.append("firm")
    unrun = {b.why for b in x.beyond if b.status is Holds.NOT_RUN}
    if len(x.beyond) > 1 and len(unrun) == 1 and all(b.status is Holds.NOT_RUN for b in x.beyond):  # once for both
        why = unrun.pop()
        out.append(f"{', '.join(COLUMN_NAMES[b.column] for b in x.beyond)}: {not_run(why)}")
        return "; ".join(out)
    return "; ".join(out + [beyond(b, x.expected) for b in x.beyond]) or "–"


def _augmentation(a: Augmentation) -> str:
    c = a.closes
    return (f"augmentation control (observation): `{a.augmented}` (trained on position-permuted inputs) lowers "
            f"{units(a.units)} by {num(c.estimate)} [{num(c.lo)}, {num(c.hi)}] against `{a.plain}`: it closes "
            f"{c.estimate / a.gap:.2f} of the {num(a.gap)} gap from `{a.plain}` to `{a.target}`")


def _name(x: Line, named: Sequence[str]) -> str:
    """A part's label (claim, letter, task), with the arm that has the component where another
    part on the screen has the same label (C8(a) T4a is both the Z g2 and the W_V pair)."""
    name = f"{', '.join(x.labels)} {x.task_code}"
    return f"{name} · `{x.has}`" if named.count(name) > 1 else name


SHORT_ORDER = (Label.MATTERS, Label.HURTS, Label.NO_MATTER, Label.UNDECIDED, Label.NO_VERDICT)
# Each label glossed where the screen first uses it (the reading guide below defines it in full).
SHORT_GLOSS = {Label.MATTERS: "the component lowers error, beyond δ where the part tests an equivalence",
               Label.HURTS: "it raises error", Label.NO_MATTER: "the difference lies within δ, the part's margin",
               Label.UNDECIDED: "neither, or a rule of the protocol voids the interval",
               Label.NO_VERDICT: "sanity checks and observations, no hypothesis"}
SHORT_HEAD = ("**In short**, at {where} (the trust paragraph below the table says which answers hold beyond "
              "it); the rows give the amounts, intervals and reasons:")


def _fragile(x: Line) -> bool:
    """Whether the row's *how firm* calls the part fragile (:func:`_firm`'s first two rules)."""
    return (not math.isnan(x.margin) and x.margin < 0.5) or bool(x.preconditions)


def in_short(rows: Sequence[Row], named: Sequence[str], scale: Scale | None = None) -> list[str]:
    """The answers by label, a line each ("- *matters*: W_V (C8(a) T4a · `value`, fragile; C8(b),
    C12(a) T3d); …"), each part flagged where its row calls it fragile or its verdict moves in a
    column beyond the regime; an undecided part says what would decide it (as its row, after
    "→"), a part with no verdict which way its amount points. ``scale``: the regime measured,
    named in the heading line where given."""
    where = (f"n_train up to {scale.n_train_max} and {scale.steps} steps per trial" if scale is not None
             else "the regime measured")
    out = [SHORT_HEAD.format(where=where), ""]
    for label in SHORT_ORDER:
        items: list[str] = []
        for row in rows:
            parts = []
            for x in (x for x in row.lines if x.label is label):
                notes = (["fragile"] if _fragile(x) else []) + [
                    "moves " + SIZE_WORDS[b.column].format(size=b.size) for b in x.beyond
                    if b.status is Holds.MOVES]
                if label is Label.NO_VERDICT and not math.isnan(x.gain.estimate):
                    notes.append("lowers error" if x.gain.estimate >= 0 else "raises error")
                what = decide(x.decide)[1] if label is Label.UNDECIDED else ""
                parts.append(_name(x, named) + (", " + ", ".join(notes) if notes else "") + (f" → {what}" if what else ""))
            if parts:
                items.append(f"{row.component} ({'; '.join(parts)})")
        if items:
            out.append(f"- *{LABEL_WORDS[label]}* ({SHORT_GLOSS[label]}): " + "; ".join(items))
    return out


def first_screen(rows: Sequence[Row], trust: str, scale: Scale | None = None) -> list[str]:
    """The report's opening: heading, the answers in short (:func:`in_short`, at ``scale`` where
    given), how to read a row, one row per component (each part a line: its answer, the paper's
    verdict, how firm), and the trust paragraph."""
    lines = ["| component | part (task) | answer: amount [95% interval] | paper | how firm |", "|---|---|---|---|---|"]
    named = [f"{', '.join(x.labels)} {x.task_code}" for row in rows for x in row.lines]
    for row in rows:
        if not row.lines:
            lines.append(f"| {row.component} | not measured: no registered part compares arms that differ by it "
                         "| – | – | – |")
            continue
        cells = [(_name(x, named), _answer(x), _paper(x), _firm(x)) for x in row.lines]
        if row.augmentation is not None:
            cells.append(("C9 augmentation", _augmentation(row.augmentation), "–", "–"))
        lines.append(f"| {row.component} | " + " | ".join("<br>".join(c[i] for c in cells) for i in range(4)) + " |")
    return [HEADING, "", *in_short(rows, named, scale), "", READ_ROW, "", *lines, "", trust, ""]


def headline(name: str) -> str:
    """A part's name up to its first colon outside brackets ("(a) selection: adding …" →
    "(a) selection"); a colon inside a bracket ("… (T3a′: T3a with noisy targets)") is part of
    the headline, which would otherwise end in an open bracket."""
    depth = 0
    for i, ch in enumerate(name):
        depth += (ch in "([") - (ch in ")]")
        if ch == ":" and depth == 0:
            return name[:i]
    return name


def trust(t: Trust) -> str:
    """*How far to trust this* (:func:`analysis.answer.trust`)."""
    out = ["**How far to trust this.**"]
    if t.confirmed is not None:
        n, of, seeds, same = t.confirmed
        out.append(f"{n} of {of} deciding parts are decided on a confirmation block (seeds "
                   f"{', '.join(sorted({seed_span(p) for p in seeds})) or '–'}, fresh evaluation sets, each arm at the lr frozen from the "
                   f"exploratory block, so neither the lr nor the verdict was chosen on those seeds); {same} of "
                   f"them get the same label on the exploratory seeds.")
    if t.marked:
        out.append(f"{t.marked} of {t.deciding} deciding parts are *re-registered after a verdict run*: their "
                   "design (arms, task, margin or test) was changed after an earlier verdict on them had been seen; "
                   "their first design and its outcome are printed beside them, the confirmation block ran after "
                   "the last change, so a re-registered verdict confirms the revised design on unused seeds but "
                   "was not planned before any outcome was known.")
    if t.models:
        out.append(f"Every run ran on {'one processor model' if len(t.models) == 1 else f'{len(t.models)} processor models'} "
                   f"({', '.join(t.models)}); results reproduce bit for bit only per model, so a part near a "
                   "threshold may change its label on another.")
    if t.scale is not None:
        c = t.scale
        again = [f"{c.at_scale} parts again at 8× their n_train ({c.scale_n_train} for {c.n_train_max}) and "
                 f"{c.scale_steps} steps, the stability table's scale column" if c.at_scale else "",
                 f"{c.at_length} at n = {c.length_n}, its length column" if c.at_length else ""]
        again = [a for a in again if a]
        where = (f"n_train up to {c.n_train_max} and {c.steps} steps per trial (×{c.factor} in the budget reruns"
                 + (f"; {'; '.join(again)}, flags)" if again else ")"))
        out.append(f"Measured at {where}; no verdict here speaks for another scale.")
    if t.held is not None and not t.held.ran:
        out.append("No deciding part was run at the larger scale or a longer sequence: no answer here is shown to "
                   "hold beyond this regime.")
    elif t.held is not None:
        h = t.held
        # one entry per part, named with its arms: C8(a)'s Z g2 and W_V pairs share "(a) selection"
        moved = "; ".join(f"{m.claim} {short_label(m.spec)} ("
                          + "; ".join(f"{COLUMN_WORDS[col]}: {was} → {now}" for col, was, now in m.changes) + ")"
                          for m in h.moved)
        out.append(f"Beyond it, {h.holds} of the {h.ran} deciding parts run at the larger scale or a longer sequence "
                   "hold their answer in every column run" + (f"; {len(h.moved)} move, so their answer is not settled: "
                                                              f"{moved}" if h.moved else "")
                   + (f"; {h.fewer_seeds} not shown there (fewer seeds)" if h.fewer_seeds else "")
                   + f"; {h.not_run} deciding parts were run in neither column.")
    if t.distinct != t.deciding:
        out.append(f"{t.deciding} deciding parts are {t.distinct} distinct comparisons: a comparison that bears on "
                   "two claims is listed once.")
    return " ".join(out)


def cell(v: object) -> str:
    """A table cell: numbers to 3 significant digits, integers as integers, NaN as ``–``, inf as ``∞``."""
    if isinstance(v, (float, np.floating)):
        if np.isnan(v):
            return "–"
        if np.isinf(v):
            return "∞" if v > 0 else "−∞"
        return f"{v:.0f}" if float(v).is_integer() and abs(v) < 1e7 else f"{v:.3g}"
    return str(v)


def _triple(m: object, lo: object, hi: object, n: object = None) -> str:
    if pd.isna(m):
        return "–"
    if n is None or pd.isna(n):  # a bootstrap column: its n is the seed count of the error columns
        return f"{cell(m)} (no interval)" if pd.isna(lo) and pd.isna(hi) else f"{cell(m)} [{cell(lo)}, {cell(hi)}]"
    if pd.isna(lo) and pd.isna(hi):
        return f"{cell(m)} (n={int(n)}, no interval)"
    return f"{cell(m)} [{cell(lo)}, {cell(hi)}] n={int(n)}"


def for_markdown(df: pd.DataFrame) -> pd.DataFrame:
    """Strings for display: every ``X``, ``X_lo``, ``X_hi`` (and ``X_n``) as one column
    ``X [lo, hi] n=N`` (``X (n=2, no interval)`` when both bounds are NaN: fewer than
    :data:`analysis.stats.MIN_SEEDS` seeds), numbers to 3 significant digits, integers as
    integers, NaN as ``–`` and inf as ``∞``."""
    out = pd.DataFrame(index=df.index)
    for col in df.columns:
        if re.search(r"_(lo|hi)$", col) and col[:-3] in df or (
                col.endswith("_n") and f"{col[:-2]}_lo" in df):
            continue
        if f"{col}_lo" in df and f"{col}_hi" in df:
            n = df[f"{col}_n"] if f"{col}_n" in df else [None] * len(df)
            out[col] = [_triple(*t) for t in zip(df[col], df[f"{col}_lo"], df[f"{col}_hi"], n)]
        else:
            out[col] = df[col].map(cell)
    return out
