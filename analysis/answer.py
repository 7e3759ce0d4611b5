"""The report's answer first (issue 45 item 1): *Which parts of attention matter*, one row per
component of attention the paper names, and the paragraph *How far to trust this*.

Every sentence is generated from the decided parts (:class:`analysis.protocol.PartResult`) and
the stability table (:func:`analysis.verdicts.stability_frame`); nothing here decides a part or
holds an outcome. A component's row lists its deciding parts (paper.md §13); a component with
none (the residual, LayerNorm, positions) shows the effect of its sanity or observation parts
and no verdict.

*What would decide it*, for an inconclusive part, is computed (:func:`what_would_decide`):

1. both arms at their floor (an error value with both arm means within δ of 0, a part's
   ``resolution`` below δ, or the *no power* precondition's floor clause) → *a harder task*:
   no number of seeds can show δ there;
2. the interval's centre within one half-width of δ (equivalences: the threshold the rule
   compares with; two-sided: the nearer of ±δ) → *not more seeds*: the estimate sits at the
   margin, so more seeds only narrow an interval around δ;
3. a precondition voided a decisive interval → what lifts it (a longer budget, an lr past the
   edge, a positive control);
4. otherwise the number of paired seeds a paired t-test needs, at the observed spread, for 80%
   power against the observed effect (:func:`seeds_needed`: the noncentral t distribution,
   ``scipy.stats.nct``; difference: two-sided α = 0.05 against 0; equivalence: one-sided α = 0.05
   against δ to support, α = 0.025 to contradict).

Fields the analysis adds to :class:`~analysis.protocol.PartResult` later (``conditions``,
``blowups``, ``resolution``, ``shared_with``) are read with ``getattr`` and a default, so the
table works on results with or without them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import pandas as pd
from scipy import stats as sps

from analysis import protocol

POWER = 0.8  # target power of the seed count (a standard design choice)
ALPHA = protocol.ALPHA
MAX_SEEDS = 1000  # above this the count is printed as "more than 1,000"
HEADING = "## Which parts of attention matter"


def _base(arm: str) -> str:
    """An arm's variant without its bracketed axes: ``softmax_free[k=8]`` → ``softmax_free``."""
    return re.sub(r"\[.*\]$", "", str(arm))


def _pair(*arms: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda s: {str(s["a"]), str(s["b"])} == set(arms)


def _bases(*arms: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda s: {_base(s["a"]), _base(s["b"])} == set(arms) and s["a"] != s["b"]


@dataclass(frozen=True)
class Component:
    """A component of attention the paper names and how its parts are recognised: ``match``
    takes a part's spec (:func:`analysis.protocol.spec_dict`) and says whether the part's arms
    differ by this component."""

    name: str
    match: Callable[[Mapping[str, Any]], bool]


COMPONENTS = (
    Component("the equivariant X g(·) structure against a flattened MLP",
              lambda s: _pair("xg", "mlp")(s) or _pair("coordwise", "softmax")(s)),
    Component("the Z g2 term", _pair("general", "general_nozg2")),
    Component("W_V", _pair("value", "softmax")),
    Component("softmax's row normalisation against an elementwise σ with 1/n",
              lambda s: str(s["a"]) == "quad_sigma[sigma=softmax]" and _base(s["b"]) != str(s["b"])
              and bool(s.get("choose_b") or s["role"] == "deciding")),
    Component("XᵀX with repeated tokens", _bases("higher_order_gram", "higher_order_identity")),
    Component("knowledge size k", lambda s: _base(s["a"]) == _base(s["b"]) == "softmax_free" and s["a"] != s["b"]),
    Component("1/√d1", _pair("softmax", "softmax_unscaled")),
    Component("the residual", _pair("residual", "value")),
    Component("LayerNorm", _pair("transformer", "transformer_ln")),
    Component("positions", _pair("transformer", "transformer_pe")),
)

TERMS = ("**Terms.** d = value(b) − value(a) per seed, at each arm's lr chosen on validation; its mean and "
         "95% Student-t interval are in the part's units (test error, mean log test error over n_train, or a "
         "fraction of the step budget); δ is the part's pre-registered margin in the same units. *supported* / "
         "*contradicted*: the interval decides the part's hypothesis (the row's sentence) one way; "
         "*inconclusive*: it does not, or a precondition voids it; *no power*: an equivalence cannot be "
         "supported because its positive control (a pair known to differ) is not contradicted by the same "
         "test, or both arms sit within δ of their floor; *floor*: the lowest error the arms can reach "
         "there (0, or a named arm's error); *half-width*: half the length of the 95% interval. "
         "*Holds under*: the verdict of the same part rerun at ×4 steps (four times the step budget) and under "
         "the other readouts of a token task (*scaled*: β Eᵀ f(X) with one learned temperature β; *tied*: Eᵀ f(X); "
         "*learned*: U f(X)).")


def _letter(spec: Mapping[str, Any]) -> str:
    m = re.match(r"\s*\(([a-z])\)", str(spec.get("name", "")))
    return f"({m.group(1)})" if m else ""


def _task_code(spec: Mapping[str, Any]) -> str:
    """The paper's task code from the part's name, the first one it names (``T4a``, ``T3f′``,
    ``T3a″`` in "(T3a″: T3a with noisy training targets)"), else the task preset."""
    codes = re.findall(r"\bT\d[a-z]?[′″]?", str(spec.get("name", "")))
    return codes[0] if codes else f"`{spec['task']}`"


def _n_pairs(result: protocol.PartResult) -> int:
    m = re.search(r"\((\d+) of \d+\)", result.seeds or "")
    return int(m.group(1)) if m else 0


def _num(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def hypothesis(spec: Mapping[str, Any]) -> str:
    """The part's hypothesis in one phrase from its test (paper.md §13 step 3)."""
    a, b = f"`{spec['a']}`", f"`{spec['b']}`"
    if spec["test"] == "difference":
        return f"{a} lower than {b}"
    if int(spec.get("sides", 2)) == 1:
        return f"{a} not lower than {b} by δ or more"
    return f"{a} within δ of {b}"


def seeds_needed(effect: float, sd: float, one_sided_alpha: float, power: float = POWER) -> int | None:
    """The smallest number of paired seeds n for which a paired t-test at one-sided level
    ``one_sided_alpha`` has ``power`` against a true mean ``effect`` (distance from the
    threshold, same units as ``sd``) at spread ``sd`` (noncentral t with n − 1 degrees of
    freedom, noncentrality effect/sd·√n). None above :data:`MAX_SEEDS`, or where ``effect`` ≤ 0
    or ``sd`` is not positive.
    """
    if not (effect > 0 and sd > 0) or any(map(math.isnan, (effect, sd))):
        return None
    for n in range(2, MAX_SEEDS + 1):
        crit = sps.t.ppf(1 - one_sided_alpha, n - 1)
        if sps.nct.sf(crit, n - 1, effect / sd * math.sqrt(n)) >= power:
            return n
    return None


def _at_floor(result: protocol.PartResult) -> str:
    """Why both arms sit at their floor, or ''."""
    spec, delta = result.spec, float(result.spec["delta"])
    shown = next((x for x in result.reasons if "cannot show δ" in x), "")  # the analysis's resolution rule, whole
    if shown:
        return shown
    floor = next((x for x in result.reasons if "within δ of the floor" in x), "")
    if floor:
        return floor.split(": ", 1)[-1]  # the no-power clause without its name
    resolution = getattr(result, "resolution", None)
    if resolution is not None and not math.isnan(resolution) and resolution < delta:
        return f"the largest effect this measurement can show is {resolution:.3g}, below δ = {delta:g}"
    if str(spec["value"]) in ("error", "absent_error") and max(result.mean_a, result.mean_b) < delta:
        return f"both arms within δ of 0 error ({_num(result.mean_a)}, {_num(result.mean_b)})"
    return ""


REMEDIES = {"budget-limited": "a longer budget (×4 steps)", "lr at grid edge": "an lr past the grid edge",
            "diverged": "an lr at which no seed diverges", "not learned": "a budget or size at which the arms learn",
            "no power": "a positive control that the same test contradicts"}


def _threshold(result: protocol.PartResult) -> float:
    delta = float(result.spec["delta"])
    if int(result.spec.get("sides", 2)) == 2:
        return delta if result.effect >= 0 else -delta
    return delta


def what_would_decide(result: protocol.PartResult) -> tuple[str, str]:
    """``(why undecided, what would decide it)`` of an inconclusive part (module docstring's
    rules, in order); ``("", "")`` for a decided one."""
    if result.verdict != protocol.INCONCLUSIVE:
        return "", ""
    if math.isnan(result.effect):
        return "; ".join(result.reasons) or "no interval", "the missing runs"
    floor = _at_floor(result)
    if floor:
        return floor, "a harder task (not more seeds)"
    blown = next((r for r in result.reasons if "blown-up" in r), "")
    if blown:
        return blown, "an lr at which no seed blows up (the part decided without them agrees)"
    names = [r.split(":")[0] for r in result.reasons]
    if result.test_alone in (protocol.SUPPORTED, protocol.CONTRADICTED):
        failed = [n for n in names if n in REMEDIES]
        return (f"{', '.join(failed) or 'a precondition'} voids a {result.test_alone} interval",
                "; ".join(REMEDIES[n] for n in failed) or "the failed precondition lifted")
    half = (result.hi95 - result.lo95) / 2
    n_now, sd = _n_pairs(result), result.se * math.sqrt(max(_n_pairs(result), 1))
    if result.spec["test"] == "difference":
        why = "the 95% interval includes 0"
        n = seeds_needed(abs(result.effect), sd, ALPHA / 2)
    else:
        threshold = _threshold(result)
        distance = abs(result.effect - threshold)
        why = f"the interval straddles {'δ' if threshold > 0 else '−δ'}"
        if distance <= half:
            return (f"the estimate {_num(result.effect)} sits within one half-width ({_num(half)}) of "
                    f"{'δ' if threshold > 0 else '−δ'} = {_num(threshold)}", "not more seeds: the effect is about δ")
        inside = abs(result.effect) < float(result.spec["delta"])
        n = seeds_needed(distance, sd, ALPHA if inside else ALPHA / 2)
    if n is None:
        return why, f"more than {MAX_SEEDS:,} seeds at the observed spread (sd {_num(sd)})"
    return why, f"about {max(n, n_now + 1)} paired seeds (now {n_now}; 80% power at the observed sd {_num(sd)})"


BLOCK_WORDS = {"x4": "at ×4 steps", "exploratory": "on the exploratory seeds",
               "confirmation": "on the confirmation seeds"}


def _block_name(block: str) -> str:
    """A stability block as a phrase with its preposition: ``readout=tied`` → "under the tied readout"."""
    if block.startswith("readout="):
        return f"under the {block.split('=', 1)[1]} readout"
    return BLOCK_WORDS.get(block, block)


def holds_under(result: protocol.PartResult, row: Mapping[str, Any] | None) -> str:
    """Where the part's verdict holds: ``result.conditions`` where the analysis set it, else the
    stability table's row (the same part at ×4 steps and under the other readouts) grouped by
    verdict; blown-up runs (``result.blowups``) named."""
    said = str(getattr(result, "conditions", "") or "")
    readout = result.spec.get("readout")
    main = f"{readout} readout" if readout and not said else ""  # the analysis's conditions name the readouts
    if not said and row is not None:
        others = [b for b in ("x4", *sorted(k for k in row if re.fullmatch(r"readout=[^_]+", str(k))))
                  if row.get(f"{b}_runs") and isinstance(row.get(b), str)]
        if row.get("decided_on") == "confirmation" and row.get("exploratory") != result.verdict:
            others.insert(0, "exploratory")
        by: dict[str, list[str]] = {}
        for b in others:
            by.setdefault(str(row[b]), []).append(_block_name(b))
        pieces = [f"{'also ' if v == result.verdict else ''}{v} {' and '.join(names)}"
                  for v, names in sorted(by.items(), key=lambda kv: kv[0] != result.verdict)]
        said = "; ".join(pieces) if pieces else "not rerun at ×4 steps or under another readout"
    blowups = int(getattr(result, "blowups", 0) or 0)
    extra = [f"{blowups} blown-up run{'s' if blowups != 1 else ''} among its pairs"] if blowups else []
    return "; ".join(x for x in [main, said, *extra] if x)


def _key(result: protocol.PartResult) -> tuple:
    """Results that are the same comparison (the same trials) share this key: the analysis's
    ``shared_with`` where set, else equal arms, task, value, sizes, seeds and numbers."""
    s = result.spec
    return (s["task"], s["a"], s["b"], s["value"], result.n_train, result.seeds,
            round(float(result.effect), 12) if not math.isnan(result.effect) else None,
            round(float(result.lo95), 12) if not math.isnan(result.lo95) else None)


def _label(result: protocol.PartResult) -> str:
    return f"{result.spec['claim']}{_letter(result.spec)}"


def _names(result: protocol.PartResult) -> set[str]:
    """The ways ``shared_with`` may name this part: ``C12 (a) W_V (M5) …`` (claim and part name,
    as :func:`analysis.verdicts.decide_parts` writes it) or ``C12(a)``."""
    return {f"{result.spec['claim']} {result.spec['name']}", _label(result)}


def merge_shared(results: Sequence[protocol.PartResult]) -> list[tuple[protocol.PartResult, list[str]]]:
    """``[(result, labels of every claim part it stands for)]``: a comparison built from the same
    trials is listed once, naming each claim it bears on (issue 45 item 2, *one comparison,
    one part*)."""
    out: list[tuple[protocol.PartResult, list[str]]] = []
    index: dict[tuple, int] = {}
    for r in results:
        key, shared = _key(r), set(getattr(r, "shared_with", ()) or ())
        hit = index.get(key)
        if hit is None:
            hit = next((i for i, (o, _) in enumerate(out) if _names(r) & set(getattr(o, "shared_with", ()) or ())
                        or shared & _names(o)), None)
        if hit is not None:
            out[hit][1].append(_label(r))
            continue
        index[key] = len(out)
        out.append((r, [_label(r)]))
    return out


def _units(result: protocol.PartResult, units: Mapping[str, str]) -> str:
    value = str(result.spec["value"])
    if value == "auc":
        return "mean log test error"
    if value.startswith("steps_to_"):
        return "fraction of the step budget"
    return units.get(str(result.spec["task"]), "test error")


def _verdict_text(result: protocol.PartResult) -> str:
    if result.verdict == protocol.OBSERVED or result.spec["role"] != "deciding":
        return f"no verdict ({result.spec['role']})"
    return f"**{result.verdict}**"


def part_cells(result: protocol.PartResult, labels: Sequence[str], row: Mapping[str, Any] | None,
               units: Mapping[str, str]) -> dict[str, str]:
    """One part's cells of the component table (every cell whole: nothing is cut)."""
    label = f"{', '.join(labels)} {_task_code(result.spec)}"
    effect = (f"{_num(result.effect)} [{_num(result.lo95)}, {_num(result.hi95)}]; δ {result.spec['delta']:g}; "
              f"{_units(result, units)}" if not math.isnan(result.effect) else "no interval")
    why, decide = what_would_decide(result) if result.spec["role"] == "deciding" else ("", "")
    return {"part": f"{label}: {hypothesis(result.spec)}", "effect": effect, "verdict": _verdict_text(result),
            "holds": holds_under(result, row) if result.spec["role"] == "deciding" else "–",
            "decide": f"{why} → {decide}" if why else "–"}


COLUMNS = {"part": "part: hypothesis", "effect": "effect d [95% interval]; δ; units", "verdict": "verdict",
           "holds": "holds under", "decide": "if undecided: why → what would decide it"}


def component_rows(parts: Sequence[protocol.PartResult], stab: Mapping[tuple[str, str], Mapping[str, Any]],
                   units: Mapping[str, str]) -> list[str]:
    """The component table's Markdown lines: one row per :data:`COMPONENTS` entry; its deciding
    parts (each comparison once, :func:`merge_shared`), else its other parts with no verdict,
    else "not measured". A component's parts are lines of its cells (``<br>``)."""
    lines = ["| component | " + " | ".join(COLUMNS.values()) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for comp in COMPONENTS:
        mine = [r for r in parts if r.spec.get("claim") != "scorecard" and comp.match(r.spec)]
        deciding = [r for r in mine if r.spec["role"] == "deciding"]
        shown = merge_shared(deciding or mine)
        if not shown:
            lines.append(f"| {comp.name} | not measured: no registered part compares arms that differ by it |"
                         + " – |" * (len(COLUMNS) - 1))
            continue
        cells = [part_cells(r, labels, stab.get((r.spec["claim"], r.spec["name"])), units) for r, labels in shown]
        lines.append(f"| {comp.name} | " + " | ".join("<br>".join(c[k] for c in cells) for k in COLUMNS) + " |")
    return lines


def trust_paragraph(parts: Sequence[protocol.PartResult], stab: pd.DataFrame, rereg: Mapping[tuple[str, str], str],
                    processors: Mapping[str, str], scale: str = "") -> str:
    """*How far to trust this*: the confirmation block, what re-registration means here, the
    processors (and the scale, where given), from the parts and the stability table."""
    deciding = [r for r in parts if r.spec["role"] == "deciding"]
    n = len(merge_shared(deciding))
    out = ["**How far to trust this.**"]
    if not stab.empty and "decided_on" in stab:
        block = stab[stab["decided_on"] == "confirmation"]
        same = int((block["exploratory"] == block["confirmation"]).sum())
        seeds = sorted({r.seeds.split(" (")[0] for r in deciding if r.seeds and " (" in r.seeds and
                        (r.spec["claim"], r.spec["name"]) in set(zip(block["claim"], block["part"]))})
        out.append(f"{len(block)} of {len(stab)} deciding parts are decided on a confirmation block (seeds "
                   f"{', '.join(seeds) or '–'}, fresh evaluation sets, each arm at the lr frozen from the "
                   f"exploratory block, so neither the lr nor the verdict was chosen on those seeds); {same} of "
                   f"them get the same label on the exploratory seeds.")
    marked = sum((r.spec["claim"], r.spec["name"]) in rereg for r in deciding)
    if marked:
        out.append(f"{marked} of {len(deciding)} deciding parts are *re-registered after a verdict run*: their "
                   "design (arms, task, margin or test) was changed after an earlier verdict on them had been seen; "
                   "their first design and its outcome are printed beside them, the confirmation block ran after "
                   "the last change, so a re-registered verdict confirms the revised design on unused seeds but "
                   "was not planned before any outcome was known.")
    models = sorted({m.rsplit(" (", 1)[0] for names in processors.values() for m in names.split(", ")
                     if m and m != "not recorded"})
    if models:
        out.append(f"Every run ran on {'one processor model' if len(models) == 1 else f'{len(models)} processor models'} "
                   f"({', '.join(models)}); results reproduce bit for bit only per model, so a part near a "
                   "threshold may change its label on another.")
    if scale:
        out.append(f"Measured at {scale}; no verdict here speaks for another scale.")
    if n != len(deciding):
        out.append(f"{len(deciding)} deciding parts are {n} distinct comparisons: a comparison that bears on two "
                   "claims is listed once.")
    return " ".join(out)


def section(parts: Sequence[protocol.PartResult], stab: pd.DataFrame, rereg: Mapping[tuple[str, str], str],
            processors: Mapping[str, str], units: Mapping[str, str], scale: str = "") -> list[str]:
    """The report's opening section: the heading, the terms, the component table and the trust
    paragraph (module docstring)."""
    rows = {(r["claim"], r["part"]): r for r in stab.to_dict("records")} if not stab.empty else {}
    return [HEADING, "", TERMS, "", *component_rows(parts, rows, units), "",
            trust_paragraph(parts, stab, rereg, processors, scale), ""]
