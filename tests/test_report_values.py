"""The report as values (issue 60 items 1–2): every part of today's bundle holds typed reasons
and preconditions, and the values the report is built from do not depend on its words: with
every wording of the render modules (:mod:`analysis.render`, :mod:`analysis.render_prose`,
:mod:`analysis.render_tables`) replaced by a random token, :func:`build_report` gives the same
verdicts, numbers, rules, flags, first-screen rows and claims; and the claims, the ablations'
shortfall and the scale column hold typed values, no sentence."""

from __future__ import annotations

import collections
import dataclasses
import inspect
import secrets
from pathlib import Path

import pandas as pd
import pytest

from analysis import render, render_prose, render_tables
from analysis.decision import Check, ClaimVerdict, Combined, Look, Reason, Step, Unstable

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "docs" / "report" / "runs.csv.gz"
ABLATIONS = ("practical", "knowledge_size")  # C12's parts: an equivalence with a control, 4c, choose-free pairs
# the stability table's words: each rendered from a typed column beside it (moves, scale_block, loo,
# unstable_of), which the comparison keeps
WORDS_OF_STABILITY = ["conditions", "scale_effect", "loo_flip", "unstable"]
RENDER_MODULES = (render, render_prose, render_tables)  # the render modules: every wording of the report


@pytest.fixture(scope="module")
def bundle():
    from analysis.bundle import read_bundle

    return read_bundle(BUNDLE)


@pytest.fixture(scope="module")
def report(bundle):
    """The report built once with the render modules' real words (:func:`_build`), for the tests
    that only read it; Hydra initialised on ``conf/`` for the build, as ``hydra_conf`` does."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        built = _build(bundle)
    GlobalHydra.instance().clear()
    return built


def _configs(names, bundle):
    """Each ablation's composed config reading the bundle's own block, as the offline report does
    (:func:`analysis.confirm.with_recorded_block`: its seeds are spent, the default has moved on)."""
    from hydra import compose

    from analysis.confirm import with_recorded_block

    return with_recorded_block({name: compose(config_name="config", overrides=[f"+ablation={name}"])
                                for name in names}, bundle)


def _build(bundle):
    from hydra import compose

    from analysis.reporting import build_report

    return build_report(compose(config_name="report"), _configs(ABLATIONS, bundle), bundle)


def _scramble(monkeypatch) -> None:
    """Every wording of the render modules a random token: their word tables, their sentences,
    and each function that returns words."""
    token = lambda: secrets.token_hex(4)  # noqa: E731
    for module in RENDER_MODULES:
        for name, value in list(vars(module).items()):
            if name.startswith("__"):
                continue
            if isinstance(value, str):
                monkeypatch.setattr(module, name, token())
            elif isinstance(value, dict):
                monkeypatch.setattr(module, name, {k: (lambda *a, t=token(), **kw: t) if callable(v) else token()
                                                   for k, v in value.items()})
            elif inspect.isfunction(value) and value.__module__ == module.__name__:
                returns = str(inspect.signature(value).return_annotation)
                if returns == "str":
                    monkeypatch.setattr(module, name, lambda *a, t=token(), **k: t)
                elif returns == "list[str]":
                    monkeypatch.setattr(module, name, lambda *a, t=token(), **k: [t])
                elif returns == "tuple[str, str]":
                    monkeypatch.setattr(module, name, lambda *a, t=token(), **k: (t, t))
                elif returns == "dict[str, list[str]]":  # sections of lines by name
                    monkeypatch.setattr(module, name,
                                        lambda *a, t=token(), **k: collections.defaultdict(lambda: [t]))


def _values(report) -> dict:
    """The report's values: every part (its typed conditions too), every first-screen line (its
    typed scale decision, leave-one-out flip and what would decide it), and the stability table
    but its words (:data:`WORDS_OF_STABILITY`; their typed columns stay)."""
    parts = [repr(dataclasses.asdict(r)) for r in report.parts]
    lines = [repr(x) for row in report.rows for x in row.lines]
    claims = [(c.claim.id, c.status, repr(c.checks), repr(c.verdict), [r.spec["name"] for r in c.parts],
               [r.spec["name"] for r in c.moved], [r.spec["name"] for r in c.reregistered]) for c in report.claims]
    return {"parts": parts, "lines": lines, "rows": [(row.component, repr(row.augmentation)) for row in report.rows],
            "stability": report.stability.drop(columns=WORDS_OF_STABILITY),
            "calibration": report.calibration, "trust": report.trust, "health": report.health,
            "claims": claims, "shortfall": report.shortfall, "report": (report.scale, report.path_check)}


def _words(report) -> dict:
    """The words rendered from the report's values: the first screen, the stability table's
    sentence columns, the calibration, task health and part tables (each a render module's)."""
    stab = report.stability
    lines = {"first screen": render.first_screen(report.rows, render.trust(report.trust)),
             "calibration": render_tables.calibration(report.calibration),
             "health": render_tables.health(report.health),
             "parts": render_tables.part_rows(report.parts, False, {}),
             "summary": render_tables.summary_table(report.parts),
             "stability table": render_tables.stability(stab),
             "claims": dict(render_tables.claims(report.claims, False, report.reregistered)),
             "shown": [render_tables.shown(c, False) for c in report.claims],
             "what matters": render_prose.what_matters(report.claims),
             "why": [render.claim_why(c.verdict) for c in report.claims if c.verdict is not None],
             "short labels": [render.short_label(r.spec) for r in report.parts],
             "scale cells": [render.scale_verdict(v) for v in stab["scale"]],
             "header": render_prose.header(_header()),
             "completeness": render_prose.completeness((("practical", 1, 2),)),  # today's bundle is complete
             "ablation": render_tables.ablation_section(_section())}
    columns = {c: list(stab[c]) for c in WORDS_OF_STABILITY if (stab[c].astype(str) != "").any()}
    return {**lines, **columns}


def _header():
    """A header's values as :func:`analysis.reporting.write_report` builds them (without git)."""
    from analysis.report_values import Frozen
    from analysis.reporting import Header, Source

    scale = {"name": "default", "seeds": "range(5)", "n_train": "1024", "n_train_max": 1024, "lrs": "0.003,0.01",
             "lrs_high": "0.03", "steps": 600, "long_steps": 2400, "eval_every": 20, "long_eval_every": 80}
    return Header(Source("sqlite", "mlflow.db", "report/runs.csv.gz"), None, "abc", "def", "012",
                  Frozen("frozen.csv", True, commit="345"), {"exploratory": (("cpu", 10),)}, scale, 2, False, 10, 2, 8,
                  4, 4)


def _section():
    from analysis.reporting import AblationSection

    return AblationSection("practical", "Q: ?", {"total": 3, "finished": 2, "blowup": 1}, 3, 1, 60.0, 1, (2, 1),
                           "report/practical", ("curves.png",), (("lr_table", "| a |"),))


@pytest.mark.integration
def test_every_part_of_todays_bundle_holds_typed_reasons_and_preconditions(hydra_conf, bundle):
    """Every part of every ablation of the paper suite, on both blocks, with its positive control."""
    from hydra import compose

    from analysis import stats, verdicts
    from analysis.bundle import split

    suite = compose(config_name="config", overrides=["+ablation=paper"])
    configs = _configs(suite.ablation.suite, bundle)
    runs, _ = split(bundle)
    both: dict = {}
    parts = verdicts.decide_parts(configs, {name: stats.add_error(runs[name]) for name in configs if name in runs}, both)
    decided = [r for pair in both.values() for r in pair.values() if not isinstance(r, Look)]  # a block's look beside its results
    assert len(parts) == sum(len(c.ablation.parts) for c in configs.values()) and len(decided) > len(parts)
    controls = [r.control for r in decided if r.control is not None]
    assert controls and all(isinstance(x, Reason) for c in controls for x in c.reasons)
    for r in decided:
        assert all(isinstance(x, Reason) for x in r.reasons), r.spec["name"]
        assert all(isinstance(k, Step) and isinstance(v, Check) for k, v in r.preconditions.items()), r.spec["name"]
        assert all(isinstance(x, Reason) for c in r.preconditions.values() for x in c.failures)


@pytest.mark.integration
def test_the_report_values_are_the_same_whatever_the_render_modules_words(hydra_conf, bundle, report, monkeypatch):
    """Rewording a sentence cannot change another module's conclusion: the values built with
    random words equal those built with the real ones; only the rendered text differs."""
    before = _values(report)
    words = _words(report)
    _scramble(monkeypatch)
    scrambled = _build(bundle)
    after = _values(scrambled)
    changed = _words(scrambled)
    for key, text in words.items():  # the words did change, each of them
        assert changed[key] != text, key
    for key in ("parts", "lines", "rows", "trust", "claims", "shortfall", "report"):
        assert before[key] == after[key], key
    for key in ("stability", "calibration", "health"):
        pd.testing.assert_frame_equal(before[key], after[key], obj=key)


def _strings(value, skip: tuple[type, ...]):
    """Every string inside ``value`` (dataclasses, tuples, lists, dicts), not entering ``skip``."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, skip) or value is None:
        return
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from _strings(getattr(value, f.name), skip)
    elif isinstance(value, (tuple, list)):
        for x in value:
            yield from _strings(x, skip)
    elif isinstance(value, dict):
        for k, x in value.items():
            yield from _strings(k, skip)
            yield from _strings(x, skip)


@pytest.mark.integration
def test_the_reports_claims_shortfall_and_scale_cells_hold_no_sentence(bundle, report):
    """What the report says of each claim, of the ablations short of their plan and of the scale
    column is typed: verdict labels, statuses, ids and counts; the words (why a claim has its
    verdict, "– (not run)", the completeness warning) exist only in the render modules."""
    from analysis import protocol, verdicts
    from analysis.claims import FAILED, INCOMPLETE, PASSED, Claim, Part
    from analysis.bundle import planned

    labels = {protocol.SUPPORTED, protocol.CONTRADICTED, protocol.INCONCLUSIVE, verdicts.UNSTABLE}
    allowed = labels | {PASSED, FAILED, INCOMPLETE, *planned(bundle), *(c.claim.id for c in report.claims)}
    # a claim's statement, its parts' specs and its checks' measurements are the registered data
    # (paper.md §13, the ablation files, analysis.claims), not the report's wording
    skip = (Claim, Part, protocol.PartResult, Unstable)
    free = [x for x in _strings([report.claims, report.shortfall], skip) if x not in allowed]
    assert free == []
    exact = [c for c in report.claims if c.exact]
    assert exact and all(c.status in (PASSED, FAILED, INCOMPLETE) and c.verdict is None for c in exact)
    stated = [c for c in report.claims if not c.exact]
    assert stated and all(isinstance(c.verdict, ClaimVerdict) and isinstance(c.verdict.combined, Combined)
                          and c.verdict.verdict in labels for c in stated)
    c12 = next(c for c in stated if c.claim.id == "C12")  # the ablations built here: C12's parts decide it
    assert c12.verdict.combined.deciding == c12.deciding > 0
    assert sum(n for _, n in c12.verdict.combined.counts) == c12.deciding
    assert all(isinstance(r, protocol.PartResult) and r.conditions for r in c12.moved)
    scale, length = report.stability["scale"], report.stability["length"]
    # read on the bundle's own block (its seeds spent, the default moved on), not on none
    assert (report.stability["decided_on"] == "confirmation").all()
    # every deciding part ran at scale (a label); a column not run holds a missing value (None,
    # which the frame holds as NaN), never a sentence: the length column where the task is not
    # defined at n = 32 (T3d's parts, T4c′)
    assert scale.notna().all() and all(v in labels for v in scale)
    assert length.notna().any() and all(v in labels for v in length.dropna())
    # the bundle's other ablations are not built here, so they fall short of their plan: counted, not worded
    assert {n for n, _, _ in report.shortfall} == set(planned(bundle)) - set(ABLATIONS)
    assert all(isinstance(done, int) and isinstance(of, int) and done < of for _, done, of in report.shortfall)


def test_the_short_answers_name_the_regime_and_what_would_decide_each_undecided_part(report):
    """The first screen's short answers, on today's bundle: the heading line names the regime from
    the trust paragraph's scale, and each undecided part carries what would decide it, as its row."""
    from analysis.decision import Label

    scale = report.trust.scale
    lines = render.first_screen(report.rows, "", scale)
    short = lines[lines.index(render.HEADING) + 2]
    assert short.startswith(f"**In short**, at n_train up to {scale.n_train_max} and {scale.steps} steps per trial")
    undecided = [x for row in report.rows for x in row.lines if x.label is Label.UNDECIDED]
    assert undecided  # C12(c) T3a″ is undecided in the ablations built here
    said = next(s for s in lines if s.startswith("- *undecided*"))
    for x in undecided:
        assert f" → {render.decide(x.decide)[1]}" in said
