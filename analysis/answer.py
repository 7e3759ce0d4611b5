"""The report's answer first (issues 45 and 60): *Which parts of attention matter*, one row per
component of attention the paper names, and the paragraph *How far to trust this*.

The rows are typed values (:class:`Row`, :class:`Line`) built from the decided parts
(:class:`analysis.protocol.PartResult`) and the stability table
(:func:`analysis.verdicts.stability_frame`); :func:`analysis.render.first_screen` words them.
Nothing here decides a part. A component's row lists its deciding parts (paper.md §13), each
read for the arm *with* the component against the arm *without* it (``Component.has``):
*matters* (the component lowers error, decisively), *does not matter* (an equivalence
supported: within δ), *hurts* (it raises error, decisively), *undecided* (inconclusive, with
why and what would decide it); a component with none (the residual, LayerNorm, positions) shows
its sanity or observation parts with no verdict. The registered hypothesis's verdict
(*supported* / *contradicted*) is beside it, with the direction of a contradiction.

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

from analysis import protocol, render, stability
from analysis.decision import (Augmentation, Beyond, Decide, Flip, Held, Holds, Interval, Label, Line, MovedBeyond, Remedy,
                               Row, Rule, Scale, Step, Trust, UnitKind, Units)

POWER = 0.8  # target power of the seed count (a standard design choice)
ALPHA = protocol.ALPHA
MAX_SEEDS = 1000  # above this the count is printed as "more than 1,000"
HEADING = render.HEADING


def _base(arm: str) -> str:
    """An arm's variant without its bracketed axes: ``softmax_free[k=8]`` → ``softmax_free``."""
    return re.sub(r"\[.*\]$", "", str(arm))


def _pair(*arms: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda s: {str(s["a"]), str(s["b"])} == set(arms)


def _bases(*arms: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda s: {_base(s["a"]), _base(s["b"])} == set(arms) and s["a"] != s["b"]


def _one_of(*arms: str) -> Callable[[Mapping[str, Any]], str]:
    """The part's arm that is one of ``arms`` (its a if both are)."""
    return lambda s: str(s["a"]) if str(s["a"]) in arms or _base(s["a"]) in arms else str(s["b"])


def _k(arm: str) -> int:
    m = re.search(r"k=(\d+)", str(arm))
    return int(m.group(1)) if m else 0


@dataclass(frozen=True)
class Component:
    """A component of attention the paper names and how its parts are recognised: ``match``
    takes a part's spec (:func:`analysis.protocol.spec_dict`) and says whether the part's arms
    differ by this component; ``has`` names the arm that has it (the other arm lacks it)."""

    name: str
    match: Callable[[Mapping[str, Any]], bool]
    has: Callable[[Mapping[str, Any]], str] = lambda s: str(s["a"])


COMPONENTS = (
    Component("the equivariant X g(·) structure against a flattened MLP",
              lambda s: _pair("xg", "mlp")(s) or _pair("coordwise", "softmax")(s), _one_of("xg", "softmax")),
    Component("the Z g2 term", _pair("general", "general_nozg2"), _one_of("general")),
    Component("W_V", _pair("value", "softmax"), _one_of("value")),
    Component("softmax's row normalisation against an elementwise σ with 1/n",
              lambda s: str(s["a"]) == "quad_sigma[sigma=softmax]" and _base(s["b"]) != str(s["b"])
              and bool(s.get("choose_b") or s["role"] == "deciding"), _one_of("quad_sigma[sigma=softmax]")),
    Component("XᵀX with repeated tokens", _bases("higher_order_gram", "higher_order_identity"),
              _one_of("higher_order_gram")),
    Component("knowledge size k", lambda s: _base(s["a"]) == _base(s["b"]) == "softmax_free" and s["a"] != s["b"],
              lambda s: max(str(s["a"]), str(s["b"]), key=_k)),
    Component("1/√d1", _pair("softmax", "softmax_unscaled"), _one_of("softmax")),
    Component("the residual", _pair("residual", "value"), _one_of("residual")),
    Component("LayerNorm", _pair("transformer", "transformer_ln"), _one_of("transformer_ln")),
    Component("positions", _pair("transformer", "transformer_pe"), _one_of("transformer_pe")),
)
AUGMENTED = "augment=permutation"  # C9's augmentation control: B1 trained on position-permuted inputs

def _letter(spec: Mapping[str, Any]) -> str:
    m = re.match(r"\s*\(([a-z])\)", str(spec.get("name", "")))
    return f"({m.group(1)})" if m else ""


def _task_code(spec: Mapping[str, Any]) -> str:
    """The paper's task code from the part's name, the first one it names (``T4a``, ``T3f′``,
    ``T3a″`` in "(T3a″: T3a with noisy training targets)"), else the task preset."""
    codes = re.findall(r"\bT\d[a-z]?[′″]?", str(spec.get("name", "")))
    return codes[0] if codes else f"`{spec['task']}`"


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


def _at_floor(result: protocol.PartResult) -> Decide | None:
    """Why both arms sit at their floor, or None."""
    spec, delta = result.spec, float(result.spec["delta"])
    for rule in (Rule.RESOLUTION, Rule.AT_FLOOR):  # the analysis's resolution rule; the no-power floor clause
        fired = next((x for x in result.reasons if x.rule is rule), None)
        if fired:
            return Decide(Remedy.FLOOR_RULE, (fired,))
    resolution = getattr(result, "resolution", None)
    if resolution is not None and not math.isnan(resolution) and resolution < delta:
        return Decide(Remedy.FLOOR_RESOLUTION, values=(float(resolution), delta))
    if str(spec["value"]) in ("error", "absent_error") and max(result.mean_a, result.mean_b) < delta:
        return Decide(Remedy.FLOOR_ZERO, values=(float(result.mean_a), float(result.mean_b)))
    return None


REMEDIES = (Step.BUDGET, Step.LR_EDGE, Step.DIVERGED, Step.NOT_LEARNED, Step.NO_POWER)  # what lifts each:
# analysis.render.REMEDY_WORDS


def _threshold(result: protocol.PartResult) -> float:
    delta = float(result.spec["delta"])
    if int(result.spec.get("sides", 2)) == 2:
        return delta if result.effect >= 0 else -delta
    return delta


def what_would_decide(result: protocol.PartResult) -> Decide | None:
    """Why an inconclusive part is undecided and what would decide it (module docstring's rules,
    in order), as a :class:`analysis.decision.Decide` (:func:`analysis.render.decide` words it);
    None for a decided one."""
    if result.verdict != protocol.INCONCLUSIVE:
        return None
    if math.isnan(result.effect):
        return Decide(Remedy.NO_INTERVAL, tuple(result.reasons))
    floor = _at_floor(result)
    if floor:
        return floor
    blown = next((r for r in result.reasons if r.rule.step is Step.BLOWUP), None)
    if blown:
        return Decide(Remedy.BLOWUP, (blown,))
    steps = list(dict.fromkeys(r.rule.step for r in result.reasons))
    if result.test_alone in (protocol.SUPPORTED, protocol.CONTRADICTED):
        return Decide(Remedy.VOIDED, steps=tuple(s for s in steps if s in REMEDIES), verdict=result.test_alone)
    half = (result.hi95 - result.lo95) / 2
    n_now, sd = result.n_pairs, result.se * math.sqrt(max(result.n_pairs, 1))
    threshold = 0.0
    if result.spec["test"] == "difference":
        n = seeds_needed(abs(result.effect), sd, ALPHA / 2)
    else:
        threshold = _threshold(result)
        distance = abs(result.effect - threshold)
        if distance <= half:
            return Decide(Remedy.AT_MARGIN, values=(float(result.effect), float(half), threshold), threshold=threshold)
        inside = abs(result.effect) < float(result.spec["delta"])
        n = seeds_needed(distance, sd, ALPHA if inside else ALPHA / 2)
    return Decide(Remedy.SEEDS, threshold=threshold, seeds=None if n is None else max(n, n_now + 1), now=n_now,
                  sd=float(sd), most=MAX_SEEDS)


def _key(result: protocol.PartResult) -> tuple:
    """Results that are the same comparison (the same trials) share this key: the analysis's
    ``shared_with`` where set, else equal arms, task, value, sizes, seeds and numbers."""
    s = result.spec
    return (s["task"], s["a"], s["b"], s["value"], result.sizes, result.paired, result.expected,
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


def _units(result: protocol.PartResult, units: Mapping[str, str]) -> Units:
    value = str(result.spec["value"])
    if value == "auc":
        return Units(UnitKind.LOG_ERROR)
    if value.startswith("steps_to_"):
        return Units(UnitKind.BUDGET_FRACTION)
    return Units(UnitKind.TASK_ERROR, units.get(str(result.spec["task"]), ""))


FRAGILE = 0.5  # a margin (in δ) under this is printed on the row: a label that small a shift changes
BLOCKS = ("exploratory", "x4")  # the stability table's blocks a row names where their label differs


def label_of(result: protocol.PartResult, has: str) -> Label:
    """The component's answer from a part's verdict (module docstring of :mod:`analysis.render`)."""
    spec = result.spec
    if spec["role"] != "deciding" or result.verdict == protocol.OBSERVED:
        return Label.NO_VERDICT
    if result.verdict == protocol.INCONCLUSIVE:
        return Label.UNDECIDED
    if spec["test"] == "equivalence" and result.verdict == protocol.SUPPORTED:
        return Label.NO_MATTER
    lower = (result.effect > 0) == (str(spec["a"]) == has)  # d = b − a > 0: a is lower
    return Label.MATTERS if lower else Label.HURTS


def expected_of(spec: Mapping[str, Any], has: str) -> Label | None:
    """What the registered hypothesis says of the component: an equivalence that it does not
    matter; a difference (``a`` lower) that it matters where ``a`` has it, else that it hurts."""
    if spec["role"] != "deciding":
        return None
    if spec["test"] == "equivalence":
        return Label.NO_MATTER
    return Label.MATTERS if str(spec["a"]) == has else Label.HURTS


def _gain(result: protocol.PartResult, has: str) -> Interval:
    if str(result.spec["a"]) == has:
        return Interval(result.effect, result.lo95, result.hi95, result.n_pairs)
    return Interval(-result.effect, -result.hi95, -result.lo95, result.n_pairs)


def _margin(result: protocol.PartResult) -> float:
    """The interval's distance to a label change in δ (:func:`analysis.stability.slack`)."""
    slack = stability.slack(result) if not math.isnan(result.effect) else {}
    if result.verdict == protocol.SUPPORTED:
        return float(slack.get("support_delta", math.nan))
    if result.verdict == protocol.CONTRADICTED:
        return float(slack.get("contradict_delta", math.nan))
    return math.nan


def _precondition_margins(result: protocol.PartResult) -> tuple[tuple[Step, float], ...]:
    """The preconditions that did not fire but sit under :data:`FRAGILE` δ from firing: the
    resolution rule (4c) and the positive control of *no power*."""
    out = []
    res = result.preconditions.get(Step.RESOLUTION)
    if res is not None and res.ok and 0 <= res.margin < FRAGILE:
        out.append((Step.RESOLUTION, float(res.margin)))
    control = result.control
    if control is not None and control.verdict == protocol.CONTRADICTED and 0 <= control.margin < FRAGILE:
        out.append((Step.NO_POWER, float(control.margin)))
    return tuple(out)


def _blocks(result: protocol.PartResult, row: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """The blocks of the part's stability row whose label differs from its verdict."""
    if row is None:
        return ()
    names = [b for b in BLOCKS if b != "exploratory" or row.get("decided_on") == "confirmation"]
    names += sorted(k for k in row if re.fullmatch(r"readout=[^_]+", str(k)))
    return tuple((b, str(row[b])) for b in names
                 if row.get(f"{b}_runs") and isinstance(row.get(b), str) and row[b] != result.verdict)


def _typed(row: Mapping[str, Any] | None, key: str, kind: type) -> Any:
    """A stability row's typed cell (``loo``, ``scale_block``), None where it has none."""
    value = row.get(key) if row is not None else None
    return value if isinstance(value, kind) else None


def line(result: protocol.PartResult, labels: Sequence[str], comp: Component, row: Mapping[str, Any] | None,
         units: Mapping[str, str]) -> Line:
    """One part's :class:`Line` on its component's row."""
    spec = result.spec
    has = comp.has(spec)
    lacks = str(spec["b"]) if has == str(spec["a"]) else str(spec["a"])
    return Line(tuple(labels), _task_code(spec), str(spec["role"]), result.verdict, has, lacks, str(spec["value"]),
                _units(result, units), float(spec["delta"]), _gain(result, has), label_of(result, has),
                expected_of(spec, has), _margin(result), _precondition_margins(result), _blocks(result, row),
                _typed(row, "loo", Flip), tuple(result.blown_up),
                tuple(str(x) for x in spec.get("chosen_among") or spec["choose_b"]) if lacks == str(spec["b"]) else (),
                what_would_decide(result) if label_of(result, has) is Label.UNDECIDED else None,
                tuple(b for b in (row.get("beyond") if row is not None else None) or () if isinstance(b, Beyond)))


def augmentation(parts: Sequence[protocol.PartResult], units: Mapping[str, str]) -> Augmentation | None:
    """C9's augmentation control from its observation parts: the augmented MLP against the plain
    one (what augmentation closes) and the equivariant arm against the augmented MLP (the rest)."""
    closing = next((r for r in parts if AUGMENTED in str(r.spec["a"]) and AUGMENTED not in str(r.spec["b"])
                    and _base(str(r.spec["b"]).split(" ")[0]) == _base(str(r.spec["a"]).split(" ")[0])), None)
    rest = next((r for r in parts if AUGMENTED in str(r.spec["b"]) and AUGMENTED not in str(r.spec["a"])), None)
    if closing is None or rest is None or math.isnan(closing.effect):
        return None
    return Augmentation(str(closing.spec["b"]), str(closing.spec["a"]), str(rest.spec["a"]),
                        Interval(closing.effect, closing.lo95, closing.hi95, closing.n_pairs),
                        float(closing.mean_b - rest.mean_a), _units(closing, units))


def rows(parts: Sequence[protocol.PartResult], stab: Mapping[tuple[str, str], Mapping[str, Any]],
         units: Mapping[str, str]) -> list[Row]:
    """One :class:`Row` per :data:`COMPONENTS` entry: its deciding parts (each comparison once,
    :func:`merge_shared`), else its other parts with no verdict, else none (not measured); the
    first (the equivariant structure) with C9's augmentation control."""
    out = []
    for i, comp in enumerate(COMPONENTS):
        mine = [r for r in parts if r.spec.get("claim") != "scorecard" and comp.match(r.spec)]
        deciding = [r for r in mine if r.spec["role"] == "deciding"]
        lines = tuple(line(r, labels, comp, stab.get((r.spec["claim"], r.spec["name"])), units)
                      for r, labels in merge_shared(deciding or mine))
        out.append(Row(comp.name, lines, augmentation(parts, units) if i == 0 else None))
    return out


def held(stab: pd.DataFrame) -> Held | None:
    """:class:`Held` from the stability table's typed ``beyond`` column, one count per deciding part."""
    if stab.empty or "beyond" not in stab:
        return None
    rows = stab
    ran = holds = fewer = none = 0
    moved = []
    for _, r in rows.iterrows():
        cols = [b for b in (r["beyond"] or ()) if isinstance(b, Beyond) and b.status is not Holds.NOT_RUN]
        if not cols:
            none += 1
            continue
        ran += 1
        holds += all(b.status is Holds.HOLDS for b in cols)
        fewer += any(b.status is Holds.FEWER_SEEDS for b in cols)
        changes = tuple((b.column, str(r[r["decided_on"]]), b.block.verdict)
                        for b in cols if b.status is Holds.MOVES and b.block is not None)
        if changes:
            spec = {"name": str(r["part"]), **{k: str(r.get(k, "")) for k in ("a", "b", "task")}}
            moved.append(MovedBeyond(str(r["claim"]), spec, changes))
    return Held(ran, holds, tuple(moved), fewer, none)


def trust(parts: Sequence[protocol.PartResult], stab: pd.DataFrame, rereg: Mapping[tuple[str, str], str],
          processors: Mapping[str, Sequence[tuple[str, int]]], scale: Scale | None = None) -> Trust:
    """*How far to trust this*: the confirmation block, what re-registration means here, the
    processors (and the scale, where given), from the parts and the stability table."""
    deciding = [r for r in parts if r.spec["role"] == "deciding"]
    confirmed = None
    if not stab.empty and "decided_on" in stab:
        block = stab[stab["decided_on"] == "confirmation"]
        same = int((block["exploratory"] == block["confirmation"]).sum())
        seeds = sorted({r.paired for r in deciding if r.paired and
                        (r.spec["claim"], r.spec["name"]) in set(zip(block["claim"], block["part"]))})
        confirmed = (len(block), len(stab), tuple(seeds), same)
    marked = sum((r.spec["claim"], r.spec["name"]) in rereg for r in deciding)
    models = tuple(sorted({model for per_phase in processors.values() for model, _ in per_phase}))  # (model, runs)
    return Trust(confirmed, marked, len(deciding), models, scale, held(stab), len(merge_shared(deciding)))


def section(parts: Sequence[protocol.PartResult], stab: pd.DataFrame, units: Mapping[str, str], said: Trust,
            table: Sequence[Row] | None = None) -> list[str]:
    """The report's opening section: the heading, how to read a row, the component table (``table``
    where built, else :func:`rows`) and the trust paragraph ``said`` (:func:`trust`), worded by
    :func:`analysis.render.first_screen`."""
    if table is None:
        by_part = {(r["claim"], r["part"]): r for r in stab.to_dict("records")} if not stab.empty else {}
        table = rows(parts, by_part, units)
    return render.first_screen(table, render.trust(said))
