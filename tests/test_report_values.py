"""The report as values (issue 60 items 1–2): every part of today's bundle holds typed reasons
and preconditions, and the values the report is built from do not depend on its words: with
every wording of :mod:`analysis.render` replaced by a random token, :func:`build_report` gives
the same verdicts, numbers, rules, flags and first-screen rows."""

from __future__ import annotations

import dataclasses
import inspect
import secrets
from pathlib import Path

import pandas as pd
import pytest

from analysis import render, render_prose, render_tables
from analysis.decision import Check, Reason, Step

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


def _build(bundle):
    from hydra import compose

    from analysis.reporting import build_report

    cfg = compose(config_name="report")
    configs = {name: compose(config_name="config", overrides=[f"+ablation={name}"]) for name in ABLATIONS}
    return build_report(cfg, configs, bundle)


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


def _values(report) -> dict:
    """The report's values: every part (its typed conditions too), every first-screen line (its
    typed scale decision, leave-one-out flip and what would decide it), and the stability table
    but its words (:data:`WORDS_OF_STABILITY`; their typed columns stay)."""
    parts = [repr(dataclasses.asdict(r)) for r in report.parts]
    lines = [repr(x) for row in report.rows for x in row.lines]
    return {"parts": parts, "lines": lines, "rows": [(row.component, repr(row.augmentation)) for row in report.rows],
            "stability": report.stability.drop(columns=WORDS_OF_STABILITY),
            "calibration": report.calibration, "trust": report.trust, "health": report.health}


def _words(report) -> dict:
    """The words rendered from the report's values: the first screen, the stability table's
    sentence columns, the calibration, task health and part tables (each a render module's)."""
    stab = report.stability
    lines = {"first screen": render.first_screen(report.rows, render.trust(report.trust)),
             "calibration": render_tables.calibration(report.calibration),
             "health": render_tables.health(report.health),
             "parts": render_tables.part_rows(report.parts, False, {}),
             "summary": render_tables.summary_table(report.parts),
             "stability table": render_tables.stability(stab)}
    columns = {c: list(stab[c]) for c in WORDS_OF_STABILITY if (stab[c].astype(str) != "").any()}
    return {**lines, **columns}


@pytest.mark.integration
def test_every_part_of_todays_bundle_holds_typed_reasons_and_preconditions(hydra_conf, bundle):
    """Every part of every ablation of the paper suite, on both blocks, with its positive control."""
    from hydra import compose

    from analysis import stats, verdicts
    from analysis.bundle import split

    suite = compose(config_name="config", overrides=["+ablation=paper"])
    configs = {name: compose(config_name="config", overrides=[f"+ablation={name}"]) for name in suite.ablation.suite}
    runs, _ = split(bundle)
    both: dict = {}
    parts = verdicts.decide_parts(configs, {name: stats.add_error(runs[name]) for name in configs if name in runs}, both)
    decided = [r for pair in both.values() for r in pair.values()]
    assert len(parts) == sum(len(c.ablation.parts) for c in configs.values()) and len(decided) > len(parts)
    controls = [r.control for r in decided if r.control is not None]
    assert controls and all(isinstance(x, Reason) for c in controls for x in c.reasons)
    for r in decided:
        assert all(isinstance(x, Reason) for x in r.reasons), r.spec["name"]
        assert all(isinstance(k, Step) and isinstance(v, Check) for k, v in r.preconditions.items()), r.spec["name"]
        assert all(isinstance(x, Reason) for c in r.preconditions.values() for x in c.failures)


@pytest.mark.integration
def test_the_report_values_are_the_same_whatever_the_render_modules_words(hydra_conf, bundle, monkeypatch):
    """Rewording a sentence cannot change another module's conclusion: the values built with
    random words equal those built with the real ones; only the rendered text differs."""
    report = _build(bundle)
    before = _values(report)
    words = _words(report)
    _scramble(monkeypatch)
    scrambled = _build(bundle)
    after = _values(scrambled)
    changed = _words(scrambled)
    for key, text in words.items():  # the words did change, each of them
        assert changed[key] != text, key
    for key in ("parts", "lines", "rows", "trust"):
        assert before[key] == after[key], key
    for key in ("stability", "calibration", "health"):
        pd.testing.assert_frame_equal(before[key], after[key], obj=key)
