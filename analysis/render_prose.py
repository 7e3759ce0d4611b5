"""The report's text for a reader (issue 29 item 6, issue 28 item 9; one of the render modules,
issue 60 item 2): the header (title, source, registration trail, frozen choices, processors,
scale, :class:`analysis.report_values.Header`), the completeness warning, the opening summary of
what the evidence says matters with each claim's why, the legend of variant codes, and the last pass over the
Markdown that turns the code's own vocabulary into a reader's (config keys as the field's
terms, Sphinx roles as file names, repr'd lists as lists, ``paper.md §N`` citations as links
to the sections of ``docs/theory.md`` that hold them).

Nothing here decides anything: the sentences are generated from the verdicts
(:class:`analysis.decision.ClaimVerdict`) and the decided parts, never from hard-coded outcomes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from analysis import phases, protocol, render
from analysis.render import headline  # noqa: F401  (a part named by its headline; render words it)
from analysis.claims import PASSED
from analysis.decision import Reason
from analysis.verdicts import UNSTABLE

if TYPE_CHECKING:  # the report's typed values (analysis.report_values; only their fields are read)
    from analysis.report_values import ClaimResult, Frozen, Header, Replay, Source

# paper.md (the shared science notes) section → the section of docs/theory.md that holds it;
# a section not listed (or missing from theory.md) links to the page itself.
PAPER_TO_THEORY = {"2": "1", "3": "4", "4": "2", "5": "2", "6": "3", "7": "4", "8": "5", "9": "6",
                   "10": "3", "10.2": "3", "10.3": "2", "10.4": "3", "10.5": "4", "10.6": "3",
                   "11": "7", "11.1": "7", "11.2": "7", "12": "8", "13": "9"}
MAX_SENTENCES = 10  # issue 28 item 9: "at most 10 sentences"


def anchor(claim: str) -> str:
    """The id of a claim's row in the verdict tables (``verdict-c8``)."""
    return f"verdict-{claim.lower()}"


def theory_anchors(theory: Path) -> dict[str, str]:
    """``{section number: anchor}`` of ``theory.md``'s numbered ``##`` headings: an explicit
    ``<a id=…>`` in the heading if it has one, else GitHub's slug of the heading's text."""
    out = {}
    for line in theory.read_text().splitlines() if theory.exists() else []:
        m = re.match(r"##\s+(\d+)\.\s+(.*)", line)
        if not m:
            continue
        explicit = re.search(r'<a id="([^"]+)"', m.group(2))
        text = re.sub(r"<[^>]+>", "", f"{m.group(1)}. {m.group(2)}").strip().lower()
        slug = re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))
        out[m.group(1)] = explicit.group(1) if explicit else slug
    return out


def _cite(text: str, theory: Path, link: str | None) -> str:
    """``paper.md §N`` → ``[theory §M](link#anchor)`` (``link``: theory.md relative to the
    report, or ``None`` to name ``docs/theory.md`` without a link)."""
    anchors = theory_anchors(theory)

    def one(m: re.Match) -> str:
        section = PAPER_TO_THEORY.get(m.group(1)) or PAPER_TO_THEORY.get(m.group(1).split(".")[0], "")
        if section not in anchors:
            return f"[the theory]({link})" if link else "`docs/theory.md`"
        return f"[theory §{section}]({link}#{anchors[section]})" if link else f"`docs/theory.md` §{section}"

    return re.sub(r"`?paper\.md`?\s*§\s*(\d+(?:\.\d+)?)", one, text)


def _roles(text: str) -> str:
    """Sphinx roles as what a reader can open: ``:mod:`analysis.x``` → ``analysis/x.py``,
    ``:func:`analysis.x.f``` → ``f`` (``analysis/x.py``)."""
    def one(m: re.Match) -> str:
        role, target = m.group(1), m.group(2).lstrip("~.")
        if role == "mod":
            return f"`{target.replace('.', '/')}.py`"
        module, _, name = target.rpartition(".")
        if role == "meth":  # module.Class.method: the file is the module's
            module = module.rpartition(".")[0]
        return f"`{name}` (`{module.replace('.', '/')}.py`)" if module else f"`{name}`"

    return re.sub(r":(mod|func|class|meth|data|attr):`([^`]+)`", one, text)


def _lists(text: str) -> str:
    """A repr'd list of strings or numbers (``['0.003', '0.01']``) as ``0.003, 0.01``."""
    item = r"'[^'\[\]]*'"  # quoted items only: [lo, hi] of an interval is a pair of numbers
    return re.sub(rf"\[({item}(?:,\s*{item})*)\]", lambda m: m.group(1).replace("'", ""), text)


def _names(text: str, scale: Mapping[str, object]) -> str:
    """Config keys as the field's terms: ``scale.steps`` → its value, ``task.n_train`` →
    ``n_train`` (RST's double backticks as Markdown's single ones)."""
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    text = re.sub(r"\bscale\.(\w+)", lambda m: str(scale[m.group(1)]) if m.group(1) in scale else m.group(0), text)
    return re.sub(r"\b(?:task|train|model)\.(?!(?:py|yaml|md)\b)(\w+)", r"\1", text)


def for_reader(text: str, scale: Mapping[str, object], theory: Path, link: str | None) -> str:
    """The report's Markdown with the code's vocabulary replaced (module docstring). Image and
    link targets (``](…)``) are left alone: they are paths, not prose."""
    pieces = re.split(r"(\]\([^)]*\))", text)
    return "".join(p if i % 2 else _cite(_lists(_roles(_names(p, scale))), theory, link)
                   for i, p in enumerate(pieces))


def legend(presets: Sequence[Mapping[str, object]]) -> list[str]:
    """One paragraph naming every variant code (``M0 = general``, ``B1 = mlp``), from the preset
    registry's own ids (:func:`harness.variant_table.measure_presets`, ``docs/variants.md``)."""
    by_code: dict[str, list[str]] = {}  # code → its presets, in the registry's (paper) order
    for p in presets:
        if str(p.get("id", "")).strip():
            by_code.setdefault(str(p["id"]), []).append(f"`{p['preset']}`")
    codes = [f"{code} = {', '.join(names)}" for code, names in by_code.items()]
    return ["**Variant codes** (the families and formulas: [variants.md](variants.md)): "
            + "; ".join(codes) + ".", ""] if codes else []


def reason_name(reason: Reason) -> str:
    """An inconclusive part's reason in a few words: its precondition's name (``lr at grid
    edge``), or ``runs missing`` for the many ``no runs of `arm` on task …`` lines
    (:func:`analysis.render.reason_name`)."""
    return render.reason_name(reason)


def _reason(results: Sequence[protocol.PartResult]) -> str:
    """Why a claim's deciding parts are inconclusive, in a few words: their preconditions' names."""
    names = sorted({reason_name(r) for x in results if x.verdict == protocol.INCONCLUSIVE for r in x.reasons} - {""})
    return ", ".join(names) or "the intervals are too wide for either verdict"


def _against(result: protocol.PartResult) -> str:
    """A contradicting part named apart from its claim's other parts (its arms) and the way it
    goes: "(a) selection, `value` vs `softmax`: `value` lower by 0.0288"."""
    spec = result.spec
    lower = spec["a"] if result.effect > 0 else spec["b"]  # d = value(b) − value(a)
    return f"{render.short_label(spec)}: `{lower}` lower by {abs(result.effect):.3g}"


def _sentence(claim, verdict: str, why: str, mine: Sequence[protocol.PartResult]) -> str:
    """One plain sentence on a claim: its statement, what the evidence says and why, its link."""
    deciding = [r for r in mine if r.spec["role"] == "deciding"]
    against = [_against(r) for r in deciding if r.verdict == protocol.CONTRADICTED]
    said = claim.statement[:1].upper() + claim.statement[1:]
    link = f"([{claim.id}](#{anchor(claim.id)}))"
    if verdict == UNSTABLE:
        return f"{said}: unstable, {why} {link}."
    if verdict == protocol.SUPPORTED:
        return f"{said}: supported by the evidence ({why}) {link}."
    moved = "".join(f"; {render.short_label(r.spec)}: {render.conditions(r.conditions, details=False)}"
                    for r in deciding if r.conditions)
    if verdict == protocol.CONTRADICTED:
        return (f"{said}: the evidence goes against it ({len(against)} of {len(deciding)} deciding parts "
                f"contradict it: {'; '.join(against)}{moved}) {link}.")
    return f"{said}: still open, inconclusive ({_reason(deciding)}{moved}) {link}."


def claim_why(c: ClaimResult, marks: bool = True) -> str:
    """Why a statistical claim has its verdict (:func:`analysis.render.claim_why`), with the
    conditions that travel with its deciding parts' verdicts and (``marks``) the parts
    re-registered after a verdict run, each named once by its short label."""
    why = render.claim_why(c.verdict)
    moved = [f"{render.short_label(r.spec)}: {render.conditions(r.conditions, details=False)}" for r in c.moved]
    why += "; conditions: " + " · ".join(moved) if moved else ""
    labels = list(dict.fromkeys(render.short_label(r.spec) for r in c.reregistered)) if marks else []
    return why + (f"; re-registered after a verdict run: {', '.join(labels)}" if labels else "")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def sequential_design(r: Replay | None) -> list[str]:
    """The method section's paragraph on the sequential design (issue 64): how the blocks run in
    stages, its citations, and the replay figures (:class:`analysis.report_values.Replay`, from
    ``docs/report/sequential.csv``); nothing where the report has no replay."""
    if r is None:
        return []
    looks = ", ".join(map(str, r.looks))
    return [
        f"**Seeds in stages.** The confirmation block and each column's block run their seeds in stages, "
        f"with looks at {looks} paired seeds (`analysis/staged.py`): at each look a part is "
        "decided by the rules above on the block's first seeds, and it stops at the first look that decides it "
        "with every precondition holding; only the parts still open run the next seeds. The error over the "
        "looks is held at the fixed design's α by *repeated confidence intervals* (Jennison & Turnbull, "
        "*Group Sequential Methods with Applications to Clinical Trials*, 2000, ch. 9) with a Lan–DeMets "
        "spending function of O'Brien–Fleming type (Lan & DeMets, *Biometrika* 70, 1983): each look's 95% and "
        "90% intervals are Student-t intervals at the look's nominal level, its boundary (`analysis/sequential.py`). "
        "At an interim look a part that could not be decided by the last look if its estimate held stops as "
        "*inconclusive: the effect is about δ* (a non-binding futility stop: it never makes a decisive label). "
        "A block is read in the design its runs record (their `design` tag), at the look where it stopped, "
        "which the stability table names; a block without the tag, as every block run before this design, "
        "with the fixed design on all its seeds.",
        "",
        f"Replayed on the fixed-design confirmation block of seeds {r.block} ({r.parts} deciding parts, their first {looks} "
        f"seeds): {100 * r.saved(False):.0f}% fewer confirmation runs than the fixed {r.looks[-1]}-seed design "
        f"without the futility stop ({r.plain_runs} of {r.fixed_runs}), {100 * r.saved():.0f}% with it "
        f"({r.runs}); the fixed design's verdict reached on {r.plain_same} of {r.parts} parts without it and "
        f"{r.same} with it. Simulated from each part's observed per-seed spread ({r.replays:,} replays per "
        f"null mean): the false-decision rate over the looks is at most {_pct(r.plain_rate)} (exact 95% upper "
        f"bound {_pct(r.plain_upper)}) without the futility stop and {_pct(r.rate)} ({_pct(r.upper)}) with it; "
        f"the fixed design's on the same replays at most {_pct(r.fixed_rate)} (`python -m benchmarks.sequential`, "
        "`benchmarks/RESULTS.md`).",
        "",
    ]


def what_matters(claims: Sequence[ClaimResult]) -> list[str]:
    """The report's opening (issue 28 item 9): one generated sentence per statistical claim
    (from its verdict and its deciding parts, linking to its row) and one for the exact checks;
    at most :data:`MAX_SENTENCES`.

    Args:
        claims: every claim of paper.md §13 as the report states it
            (:class:`analysis.report_values.ClaimResult`), in :data:`analysis.paper.CLAIMS` order.
    """
    sentences = [_sentence(c.claim, c.verdict.verdict, claim_why(c, marks=False), c.parts)
                 for c in claims if not c.exact]
    checks = [c for c in claims if c.exact]
    if checks:
        ok = [c.claim.id for c in checks if c.status == PASSED]
        bad = [c.claim.id for c in checks if c.status != PASSED]
        sentences.append(f"The exact identities ({', '.join(c.claim.id for c in checks)}) test the implementation, not "
                         f"the paper's argument: {len(ok)} of {len(checks)} hold"
                         + (f", {', '.join(bad)} {'does' if len(bad) == 1 else 'do'} not" if bad else "") + " ([checks](#checks)).")
    return ["## What the evidence says matters", "", " ".join(sentences[:MAX_SENTENCES]), ""]


# ----------------------------------------------------------------------------- the header
TITLE = "# The paper, tested: Ma & Ying (2022) against the harness"


def source(s: Source) -> str:
    """Where the runs came from: ``the results bundle `runs.csv.gz```, or ``the SQLite file
    `mlflow.db` (exported to `report/runs.csv.gz`)`` (an MLflow server by ``host:port``)."""
    if s.kind == "bundle":
        return f"the results bundle `{s.name}`"
    store = f"SQLite file `{s.name}`" if s.kind == "sqlite" else f"MLflow server `{s.name}`"
    return f"the {store} (exported to `{s.exported}`)"


def grid(text: object) -> str:
    """A scale's grid as a reader writes it: ``0.003,0.01`` → ``0.003, 0.01``; ``range(5)`` → ``0–4``."""
    m = re.fullmatch(r"range\((\d+)(?:,\s*(\d+))?\)", str(text).strip())
    if m:
        lo, hi = (0, int(m.group(1))) if m.group(2) is None else (int(m.group(1)), int(m.group(2)))
        return f"{lo}–{hi - 1}"
    return ", ".join(x.strip() for x in str(text).split(","))


def header(h: Header) -> list[str]:
    """The title, provenance (source, the time of its last finished run, the commits, the frozen
    choices, the processors) and the scale paragraph; its first two lines are the title (the
    answer follows them, then the rest)."""
    sc = h.scale
    return [
        TITLE, "",
        f"Generated by `python -m analysis.report` from {source(h.source)} (results as of "
        f"{h.results_time or 'no run ended'}), harness commit `{h.head}`.", "",
        f"**Registration trail**: parts first registered in the ablation files at commit `{h.first_registration}`, "
        f"last changed at `{h.margins}` (a part changed after a verdict run is marked *re-registered* in its "
        f"claim's table); confirmation block: {frozen(h.frozen)}.", "",
        processors(h.processors), "",
        f"**Scale: `{sc['name']}`**: seeds {grid(sc['seeds'])}, n_train {grid(sc['n_train'])} (parts "
        f"decided at one size: {sc['n_train_max']}), learning rates {grid(sc['lrs'])} ({grid(sc['lrs_high'])} "
        "too where an ablation says so; " + (f"extended past a chosen edge at most {h.extend_lr}× by ×√10"
                                             if not h.path_check else "no reruns past an edge at this scale") + "), "
        f"{sc['steps']} steps per trial ({sc['long_steps']} where an ablation says so), validation every "
        f"{sc['eval_every']} steps ({sc['long_eval_every']}). {h.runs} trial runs in {h.ablations} "
        "ablations" + (f" ({h.composed} trials composed; the rest are reruns past an lr grid edge, the "
                       "confirmation block and readout reruns, counted per phase under Processors)"
                       if h.composed is not None else "") +
        (f", and {h.longer} budget-ablation reruns at ×{h.factor} steps" if h.longer else "") + ". "
        "Do not edit by hand: rerun the command.", ""]


PHASE_WORDS = {phases.EXPLORATORY: "the suite's grid", phases.LR_EXTENSION: "reruns past an lr grid edge",
               phases.CONFIRMATION: "the confirmation block", phases.READOUT: "readout reruns",
               phases.BUDGET: "the budget ablation", phases.SCALE: "the scale column",
               phases.LENGTH: "the length column"}
NOT_RECORDED = "not recorded"  # a phase none of whose runs carries the processor tag
REPRODUCE = ("Results reproduce bit for bit only per processor model: the same trial on another "
             "model gives other last digits, and a part near a threshold can change its verdict.")


def processors(per_phase: Mapping[str, Sequence[tuple[str, int]]]) -> str:
    """One paragraph: the processor models per phase (:func:`analysis.trail.processors`) and what
    that means for reproducing them."""
    listed = "; ".join(f"{PHASE_WORDS[phase]}: {', '.join(f'{m} ({n} runs)' for m, n in models) or NOT_RECORDED}"
                       for phase, models in per_phase.items()) or NOT_RECORDED
    return f"**Processors** per phase: {listed}. {REPRODUCE}"


def frozen(f: Frozen) -> str:
    """Where the confirmation block's frozen choices stand (:func:`analysis.confirm.frozen_state`),
    without a closing full stop (the header's sentence ends it)."""
    used = f"The exploratory choices the confirmation block used (`{f.file}`)"
    if not f.exists:
        return "No exploratory choices were frozen (no confirmation block)"
    if not f.git:
        return f"{used} are not in a git repository"
    if not f.commit:
        return f"{used} are not committed"
    if f.changed:
        return f"{used} differ from their last commit `{f.commit}`: not committed"
    return (f"The exploratory choices (lr per arm, σ, readouts, positive controls) were frozen at commit `{f.commit}` "
            f"(`{f.file}`) before the confirmation block ran")


def completeness(short: Sequence[tuple[str, int, int]]) -> list[str]:
    """A warning line where some ablation has fewer grid trials finished than it composes to
    (``(ablation, finished, composed)``); none where none has."""
    if not short:
        return []
    return [f"**Incomplete store: these ablations have fewer finished trials than they compose to** "
            f"({', '.join(f'`{name}` {done} of {n}' for name, done, n in short)}). Their parts are decided on what "
            "exists or are inconclusive (\"no runs\"); rerun the command to complete them.", ""]


def path_check(scale: str) -> list[str]:
    """The line that says a path-check scale's report is not evidence."""
    return [f"**This is a check of the path at scale `{scale}`, not evidence**: budgets and seeds "
            "are far too small for any verdict.", ""]
