"""The report's answer first (issue 45 item 1, :mod:`analysis.answer`) and the calibration of
its rules (item 2, :mod:`analysis.calibration`), on synthetic part rows and runs: one test per
misreading the audit found in the old headline (item 4), each against hand-written sentences."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from analysis import answer, calibration, protocol, render, render_tables, stats
from analysis.decision import Beyond, Block, BlownUp, Holds, Interval, Label, NotRun, Reason, Robust, Rule
from analysis.protocol import CONTRADICTED, INCONCLUSIVE, OBSERVED, SUPPORTED, PartResult, spec_dict


def _part(claim, name, a, b, verdict, effect, lo95, hi95, *, test="difference", sides=2, task="nearest",
          delta=0.02, readout=None, mean=(0.1, 0.1), se=0.01, seeds="1000–1009 (10 of 10)", reasons=(),
          test_alone="", role="deciding", value="error"):
    spec = spec_dict({"claim": claim, "name": name, "task": task, "a": a, "b": b, "test": test, "sides": sides,
                      "delta": delta, "role": role, "value": value, "readout": readout})
    paired = tuple(range(int(seeds.split("–")[0]), int(seeds.split("–")[1].split(" ")[0]) + 1)) if "–" in seeds else ()
    return PartResult(spec, verdict, list(reasons), sizes=(1024,), expected=10, paired=paired, n_pairs=len(paired),
                      mean_a=mean[0], mean_b=mean[1],
                      effect=effect, lo=lo95, hi=hi95, lo95=lo95, hi95=hi95, se=se, test_alone=test_alone)


ZG2 = _part("C8", "(a) selection: adding the Zg2 term to M0 does not lower error by δ or more (T4a)", "general",
            "general_nozg2", SUPPORTED, -0.0016, -0.0038, 0.0006, test="equivalence", sides=1, readout="scaled")
WV = _part("C8", "(a) selection: adding W_V does not lower error by δ or more (T4a)", "value", "softmax",
           CONTRADICTED, 0.0305, 0.0279, 0.0331, test="equivalence", sides=1, readout="scaled")


def _row(table: list[str], component: str) -> str:
    return next(line for line in table if line.startswith(f"| {component} |"))


def _table(parts, stab=None, units=None) -> list[str]:
    rows = answer.rows(parts, stab or {}, units or {"nearest": "test error (1 − accuracy)"})
    return render.first_screen(rows, "")


def test_a_claim_contradicted_by_w_v_while_its_z_g2_pair_supports_it_reads_so_per_component():
    """Misreading 1: the old headline said the Z g2 claim is contradicted 'by (a) selection' when
    only W_V contradicted it and the direct Z g2 pair supported it. Now each component says what
    it does in plain words, which arm has it, and which way a contradiction goes."""
    table = _table([ZG2, WV])
    assert _row(table, "the Z g2 term") == (
        "| the Z g2 term | C8(a) T4a · `general` | **does not matter**: `general` raises error by 0.0016 [-0.0006, 0.0038] "
        "against `general_nozg2`, less than δ = 0.02 (test error (1 − accuracy), δ 0.02) | expects it does not "
        "matter: **supported** | firm |")
    assert _row(table, "W_V") == (
        "| W_V | C8(a) T4a · `value` | **matters**: `value` lowers error by 0.0305 [0.0279, 0.0331] against `softmax` (test "
        "error (1 − accuracy), δ 0.02) | expects it does not matter: **contradicted** (it matters) | fragile: the "
        "interval is 0.40 δ from a label change |")


def test_two_parts_with_one_label_are_told_apart_on_the_screen():
    """C8(a) T4a is both the Z g2 pair and the W_V pair: each gets the arm with its component."""
    table = _table([ZG2, WV])
    assert _row(table, "the Z g2 term").startswith("| the Z g2 term | C8(a) T4a · `general` | ")
    assert _row(table, "W_V").startswith("| W_V | C8(a) T4a · `value` | ")
    assert _row(_table([WV]), "W_V").startswith("| W_V | C8(a) T4a | ")
    from analysis import render_prose as prose  # the claim's sentence names the contradicting part by its arms and its direction

    assert prose._against(WV) == "(a) selection, `value` vs `softmax`: `value` lower by 0.0305"


def test_a_contradiction_says_its_direction_and_a_difference_names_the_arm_with_the_component():
    """Misreading (C12): *contradicted* because W_V is worse on T3a′; the row says it hurts. A
    part whose arm a lacks the component (C9 T3f′: `coordwise` lower than `softmax`) reads from
    the arm with it."""
    worse = _part("C12", "(a) W_V (M5) matches M4a (T3a′)", "value", "softmax", CONTRADICTED, -0.0435, -0.048,
                  -0.039, test="equivalence", task="teacher_noisy")
    row = _row(_table([worse], units={"teacher_noisy": "test relative MSE"}), "W_V")
    assert "**hurts**: `value` raises error by 0.0435 [0.039, 0.048] against `softmax`" in row
    assert "expects it does not matter: **contradicted** (it hurts)" in row
    c9 = _part("C9", "the ranking reverses (T3f′)", "coordwise", "softmax", SUPPORTED, 0.2, 0.1, 0.3,
               task="teacher_squashed", value="auc", delta=0.1)
    row = _row(_table([c9]), "the equivariant X g(·) structure against a flattened MLP")
    assert "**hurts**: `softmax` raises mean log error by 0.2 [0.1, 0.3] against `coordwise`" in row
    assert "expects it hurts: **supported**" in row


def test_fragile_verdicts_say_so_on_the_row():
    """Issue 60 item 3: the margin to a label change (in δ), the blocks that disagree, the scale
    column where it moves, and C9's augmentation control, all on the row."""
    stab = {("C8", ZG2.spec["name"]): {"decided_on": "confirmation", "exploratory": SUPPORTED, "x4": INCONCLUSIVE,
                                       "x4_runs": 10, "readout=tied": INCONCLUSIVE, "readout=tied_runs": 10,
                                       "beyond": (Beyond("scale", Holds.MOVES, Block(
                                           INCONCLUSIVE, False, Interval(0.1, 0.05, 0.15),
                                           (Reason(Rule.RESOLUTION, values=(0.05, 0.07)),)), size=8192),
                                                  Beyond("length", Holds.NOT_RUN, why=NotRun.NO_RUNS))}}
    row = _row(_table([ZG2], stab), "the Z g2 term")
    assert row.endswith("| ×4 steps: undecided; tied readout: undecided; at n_train 8192: moves to undecided "
                        "(the measurement cannot show δ; d = 0.1 [0.05, 0.15]); at a longer sequence: not run |")
    neither = {k: {**v, "beyond": (Beyond("scale", Holds.NOT_RUN, why=NotRun.NO_RUNS),
                                   Beyond("length", Holds.NOT_RUN, why=NotRun.NO_RUNS))} for k, v in stab.items()}
    assert _row(_table([ZG2], neither), "the Z g2 term").endswith(
        "; larger scale, longer sequence: not run |")
    fixed = {k: {**v, "beyond": (Beyond("scale", Holds.NOT_RUN, why=NotRun.NO_RUNS),
                                 Beyond("length", Holds.NOT_RUN, why=NotRun.FIXED_LENGTH))} for k, v in stab.items()}
    assert _row(_table([ZG2], fixed), "the Z g2 term").endswith(  # a reason other than the common one is named
        "; at the larger scale: not run; at a longer sequence: not run (the task's sequence length is fixed) |")
    # a verdict that moves at scale is not called firm; one that holds is, with the column beside it
    assert "firm" not in _row(_table([ZG2], {k: {**v, "x4_runs": 0, "readout=tied_runs": 0} for k, v in stab.items()}),
                              "the Z g2 term")
    holds = {k: {"decided_on": "confirmation", "beyond": (Beyond("length", Holds.HOLDS, Block(
        SUPPORTED, True, Interval(0.001, -0.001, 0.003)), size=32),)} for k in stab}
    assert _row(_table([ZG2], holds), "the Z g2 term").endswith("| firm; at n = 32: holds |")
    near = _part("C12", "(b) 1/√d1 (T3a)", "softmax", "softmax_unscaled", SUPPORTED, -0.05, -0.09, -0.01,
                 test="equivalence", value="steps_to_1e-06", delta=0.1, task="teacher")
    near.lo, near.hi = -0.08, -0.02
    assert "fragile: the interval is 0.20 δ from a label change" in _row(_table([near]), "1/√d1")
    mlp = dict(task="nearest", value="auc", delta=0.1, role="observation")
    gap = _part("C9", "augmentation control: xg lower than augmented B1", "xg · augment=none",
                "mlp · augment=permutation", OBSERVED, 0.87, 0.81, 0.93, mean=(-2.45, -1.58), **mlp)
    closes = _part("C9", "augmentation control: augmented B1 lower than B1", "mlp · augment=permutation",
                   "mlp · augment=none", OBSERVED, 0.961, 0.904, 1.02, mean=(-1.58, -0.614), **mlp)
    c9 = _part("C9", "xg beats mlp", "xg", "mlp", SUPPORTED, 1.8, 1.78, 1.82, value="auc", delta=0.1)
    row = _row(_table([c9, gap, closes]), "the equivariant X g(·) structure against a flattened MLP")
    assert row.startswith("| the equivariant X g(·) structure against a flattened MLP | C9 `nearest`<br>C9 augmentation |")
    assert ("<br>augmentation control (observation): `mlp · augment=permutation` (trained on position-permuted "
            "inputs) lowers mean log test error by 0.961 [0.904, 1.02] against `mlp · augment=none`: it closes 0.52 "
            "of the 1.84 gap from `mlp · augment=none` to `xg · augment=none` |") in row
    chosen = _part("C10", "(T4a)", "quad_sigma[sigma=softmax]", "quad_sigma[sigma=exp]", INCONCLUSIVE, 0.0196,
                   0.0129, 0.0262, test="equivalence", sides=1)
    chosen.spec["choose_b"] = ["quad_sigma[sigma=exp]", "quad_sigma[sigma=tanh]"]
    row = _row(_table([chosen]), "softmax's row normalisation against an elementwise σ with 1/n")
    assert ("`quad_sigma[sigma=softmax]` lowers error by 0.0196 [0.0129, 0.0262] against `quad_sigma[sigma=exp]` (the "
            "best on validation of `quad_sigma[sigma=exp]`, `quad_sigma[sigma=tanh]`)") in row


def test_no_cell_is_cut_mid_phrase():
    """Misreading 3: the verdict table cut C9's cell at the first colon of its part's name."""
    c9 = _part("C9", "on a non-equivariant control teacher not of B7's form (T3f′ squashed: ψ after the mixing) "
               "the ranking reverses: B7 beats M4", "coordwise", "softmax", INCONCLUSIVE, -0.129, -0.519, 0.262,
               task="teacher_squashed", value="auc", delta=0.1, se=0.1726, reasons=[Reason(Rule.INCLUDES_ZERO)])
    row = _row(_table([c9]), "the equivariant X g(·) structure against a flattened MLP")
    assert row.startswith("| the equivariant X g(·) structure against a flattened MLP | C9 T3f′ | **undecided**: "
                          "`softmax` lowers mean log error by 0.129 [-0.262, 0.519] against `coordwise`")
    assert row.endswith("; why: the 95% interval includes 0 → about 143 paired seeds (now 10; 80% power at the "
                        "observed sd 0.546) | expects it hurts: **inconclusive** | firm |")
    floor = _part("C12", "(a) W_V (M5) matches M4a where the target stays in span(X) (T3a)", "value", "softmax",
                  INCONCLUSIVE, 0.0, -1e-8, 1e-8, test="equivalence", task="teacher", mean=(0.22, 0.2201),
                  reasons=[Reason(Rule.AT_FLOOR, arm="xg", values=(0.22,))], test_alone=SUPPORTED)
    assert render.decide(answer.what_would_decide(floor)) == ("both arms within δ of the floor arm `xg` (0.22)",
                                               "a harder task (not more seeds)")


def test_the_labels_are_defined_before_the_table():
    """Misreading 4: terms used before their definition. The reading guide defines each label and
    the sign before the first row; the short answers above it gloss each label where they use it."""
    text = "\n".join(_table([ZG2, WV]))
    start, table = text.index("**How to read a row.**"), text.index("| component |")
    for term in ("*matters*", "*hurts*", "*does not matter*", "*undecided*", "*Paper*", "*How firm*"):
        assert start < text.index(term, start) < table, term
    assert "a positive amount means the component lowers error" in text[start:table]
    # the short answers above the guide use a label only with its gloss
    short = text[text.index("**In short**"):start]
    for label in (Label.MATTERS, Label.NO_MATTER):
        first = short.index(f"*{render.LABEL_WORDS[label]}*")
        assert short[first:].startswith(f"*{render.LABEL_WORDS[label]}* ({render.SHORT_GLOSS[label]}): "), label


def test_what_would_decide_follows_its_rules_in_order():
    at_floor = _part("C12", "(c) knowledge k = 8 matches k = 4 within δ (T3a)", "softmax_free[k=8]",
                     "softmax_free[k=4]", INCONCLUSIVE, 6e-4, -8e-4, 2e-3, test="equivalence", task="teacher",
                     mean=(3e-7, 6e-4), reasons=[Reason(Rule.STRADDLES_DELTA)])
    assert render.decide(answer.what_would_decide(at_floor)) == ("both arms within δ of 0 error (3e-07, 0.0006)",
                                                  "a harder task (not more seeds)")
    resolution = _part("C12", "(b) the 1/√d1 scale (T3a)", "softmax", "softmax_unscaled", INCONCLUSIVE, 0.0, 0.0,
                       0.0, test="equivalence", value="steps_to_0.003", delta=0.1, mean=(0.1, 0.1),
                       reasons=[Reason(Rule.RESOLUTION, values=(0.0333, 0.12))])
    resolution.resolution = 0.0333
    assert render.decide(answer.what_would_decide(resolution)) == (
        "the measurement cannot show δ: the largest effect it could show is 0.0333 (the compared arm's distance from "
        "its floor, exploratory block) < δ + the 95% half-width = 0.12", "a harder task (not more seeds)")
    resolution.reasons = []  # no rule fired, but the measurement's resolution is below δ
    assert render.decide(answer.what_would_decide(resolution)) == ("the largest effect this measurement can show is 0.0333, below "
                                                    "δ = 0.1", "a harder task (not more seeds)")
    blown = _part("C9", "(T3f′)", "coordwise", "softmax", INCONCLUSIVE, -0.129, -0.519, 0.262, value="auc",
                  reasons=[Reason(Rule.BLOWUP, values=(2,), robust=Robust(
                      (BlownUp("softmax", 1002, "t1"), BlownUp("softmax", 1005, "t2")), Interval(0.175, 0.17, 0.18, 8),
                      SUPPORTED, Interval(0.1, -0.3, 0.2, 10), INCONCLUSIVE))])
    assert render.decide(answer.what_would_decide(blown)) == (
        "decided by 2 blown-up runs: 2 blown-up run(s) on seed(s) 1002, 1005; without them d = 0.175 [0.17, 0.18] "
        "(95%, 8 pairs): supported; Hodges–Lehmann 0.1 [-0.3, 0.2] (exact signed-rank 95%): inconclusive",
        "an lr at which no seed blows up (the part decided without them agrees)")
    at_margin = _part("C10", "(T4a)", "quad_sigma[sigma=softmax]", "quad_sigma[sigma=exp]", INCONCLUSIVE, 0.0204,
                      0.0138, 0.027, test="equivalence", sides=1)
    assert render.decide(answer.what_would_decide(at_margin)) == (
        "the amount 0.0204 sits within one half-width (0.0066) of δ = 0.02", "not more seeds: the effect is about δ")
    assert render.decide(answer.what_would_decide(ZG2)) == ("", "")
    assert answer.seeds_needed(0.5, 1.0, 0.025) == 34 and answer.seeds_needed(1.0, 1.0, 0.025) == 10  # G*Power's


def test_a_comparison_shared_by_two_claims_is_listed_once_naming_both():
    """Issue 45 item 3: C8(b) and C12(a) "W_V on T3d" are the same trials."""
    c8 = _part("C8", "(b) generation: W_V lowers error where the output leaves span(X) (T3d)", "value", "softmax",
               SUPPORTED, 0.0396, 0.0389, 0.0404, task="teacher_general")
    c12 = _part("C12", "(a) W_V (M5) lowers error where the target leaves span(X) (T3d)", "value", "softmax",
                SUPPORTED, 0.0396, 0.0389, 0.0404, task="teacher_general")
    table = _table([c8, c12])
    assert _row(table, "W_V").startswith("| W_V | C8(b), C12(a) T3d | **matters**: `value` lowers error by 0.0396 ")
    assert _row(table, "W_V").count("<br>") == 0
    c12.effect = 0.04  # numbers differ (e.g. a rounding elsewhere), but the analysis says the trials are shared
    c12.shared_with = (f"C8 {c8.spec['name']}",)  # as analysis.verdicts names it
    assert answer.merge_shared([c8, c12])[0][1] == ["C8(b)", "C12(a)"]
    assert _row(table, "positions") == ("| positions | not measured: no registered part compares arms that differ "
                                        "by it | – | – | – |")


# ----------------------------------------------------------------------------- calibration
def _runs(second_offset: float, pairing_noise: float = 0.0) -> pd.DataFrame:
    """One arm on one task: exploratory seeds 0–4 at two lrs, confirmation seeds 1000–1009 at
    one; the second half of the confirmation seeds = the first half + ``second_offset``."""
    rng = np.random.default_rng(0)
    rows = []
    first = [0.1, 0.2, 0.3, 0.4, 0.5]
    for i, seed in enumerate(range(1000, 1010)):
        err = first[i] if i < 5 else first[i - 5] + second_offset + pairing_noise * rng.standard_normal()
        rows.append({"seed": seed, "train.lr": 0.01, "error": err})
    rows += [{"seed": s, "train.lr": lr, "error": 0.3 + 0.01 * s + (lr == 0.03) + 1e-3 * rng.standard_normal()}
             for s in range(5) for lr in (0.01, 0.03)]
    df = pd.DataFrame(rows).assign(task="teacher", arm="softmax", variant="softmax", status="FINISHED",
                                   diverged=False, **{"task.n_train": 1024, "train.max_steps": 600,
                                                      "test/uniform_rel_mse": 0.7})
    df["val/best_error"] = df["test/rel_mse"] = df.pop("error")
    df = stats.add_error(df)
    df["run_id"] = df["trial_id"] = [f"r{i}" for i in range(len(df))]
    return df


CONF = OmegaConf.create({"train": {"max_steps": 600}, "scale": {"confirm_seeds": "range(1000,1010)"},
                         "ablation": {"parts": [{"claim": "C12", "name": "p", "task": "teacher", "a": "softmax",
                                                 "b": "softmax", "test": "difference", "delta": 0.02}]}})


def test_same_vs_same_pairs_disjoint_halves_in_order_and_shifts_by_delta():
    table = calibration.comparisons({"x": CONF}, {"x": _runs(0.05, 1e-4)}, [])
    confirm = table[table["block"] == "confirmation"].set_index("rule")["label"]
    # in order: d = 0.05 on every pair, a decisive difference; shifted by ±δ it is 0.07 or 0.03: never within δ
    assert list(confirm.index) == list(calibration.RULES[:2]) + list(calibration.RULES[1:])
    assert list(confirm) == [SUPPORTED, CONTRADICTED, CONTRADICTED, CONTRADICTED]
    assert len(table[table["block"] == "exploratory"]) == 4  # 5 seeds at the chosen lr: 2 pairs
    twice = {"x": _runs(0.05, 1e-4), "y": _runs(0.05, 1e-4).assign(run_id=lambda d: "y" + d["run_id"])}
    assert len(calibration.comparisons({"x": CONF, "y": CONF}, twice, [])) == len(table)  # one trial, two ablations
    same = calibration.comparisons({"x": CONF}, {"x": _runs(0.0, 0.001)}, [])
    labels = same[same["block"] == "confirmation"].set_index("rule")["label"]
    assert labels[calibration.RULES[0]] == INCONCLUSIVE  # nothing differs: not decisive


def test_shift_moves_each_value_kind_by_delta_in_its_units():
    df = pd.DataFrame({"error": [0.1, 0.2], "val/first_step_below/0.003": [60, -1], "train.max_steps": [600, 600]})
    assert calibration.shift(df, "error", 0.02)["error"].tolist() == pytest.approx([0.12, 0.22])
    assert np.log(calibration.shift(df, "auc", 0.1)["error"]).tolist() == pytest.approx(np.log([0.1, 0.2]) + 0.1)
    moved = calibration.shift(df, "steps_to_0.003", 0.1)
    assert protocol.steps_to(moved, 0.003).tolist() == pytest.approx([0.2, 1.1])  # never reached: the budget, +δ
    with pytest.raises(ValueError, match="value='absent_error' cannot be shifted; allowed: error, auc"):
        calibration.shift(df, "absent_error", 0.1)


def test_rates_print_the_exact_binomial_interval_beside_the_nominal_rate():
    table = pd.DataFrame({"rule": [calibration.RULES[0]] * 54, "decisive": [False] * 54})
    rates = calibration.rates(table)
    row = rates.iloc[0]
    assert (row["n"], row["k"], round(row["low"], 3), round(row["high"], 3), row["nominal"]) == (54, 0, 0.0, 0.066, 0.05)
    assert np.isnan(rates.iloc[1]["low"])  # no comparison under that rule
    words = render_tables._calibration_rates(rates)
    assert list(words.iloc[0][["rule", "counted as", "95% interval"]]) == ["difference", "decisive", "[0.000, 0.066]"]
    assert list(words.iloc[1][["counted as", "95% interval"]]) == ["equivalent", "–"]


def test_another_blocks_label_is_worded_as_the_answer_column_words_it():
    """The *how firm* cell speaks the answer column's words (a newcomer read 'inconclusive' and
    'supported' there beside 'matters' and 'undecided'), relative to what the part expects."""
    from analysis.decision import Label

    assert render.block_answer(SUPPORTED, Label.NO_MATTER) == "does not matter"
    assert render.block_answer(SUPPORTED, Label.HURTS) == "hurts"
    assert render.block_answer(INCONCLUSIVE, Label.MATTERS) == "undecided"
    assert render.block_answer(CONTRADICTED, Label.MATTERS) == "not 'matters' (contradicted)"
    assert render.block_answer(SUPPORTED, None) == SUPPORTED  # no registered expectation: the verdict as it is


def test_the_short_answers_list_each_part_under_its_label_and_flag_fragile_and_moving_ones():
    """The lines above the reading guide: each part under its row's label, with *fragile* where its
    row calls it so and *moves at …* where a column beyond the regime changes its verdict; a firm
    part carries neither."""
    rows = answer.rows([ZG2, WV], {}, {"nearest": "test error (1 − accuracy)"})
    zg2_row = next(r for r in rows if any(x.has == "general" for x in r.lines))
    fragile = dataclasses.replace(zg2_row.lines[0], margin=0.2, beyond=(
        Beyond("scale", Holds.MOVES, size=8192), Beyond("length", Holds.NOT_RUN, why=NotRun.NO_RUNS)))
    rows = [dataclasses.replace(r, lines=(fragile,)) if r is zg2_row else
            dataclasses.replace(r, lines=tuple(dataclasses.replace(x, margin=1.0, preconditions=()) for x in r.lines))
            for r in rows]  # the W_V part firm: 1 δ from a label change, no precondition near voiding it
    named = [f"{', '.join(x.labels)} {x.task_code}" for r in rows for x in r.lines]
    short = render.in_short(rows, named)
    no_matter = next(s for s in short if s.startswith("- *does not matter*"))
    assert no_matter.endswith(f"{zg2_row.component} ({render._name(fragile, named)}, fragile, moves at n_train 8192)")
    matters = next(s for s in short if s.startswith("- *matters*"))
    assert "fragile" not in matters and "moves" not in matters and "`value`" in matters
    assert not any(s.startswith(("- *hurts*", "- *undecided*")) for s in short)  # no part has those labels


def test_the_trust_paragraph_names_each_moving_part_once_with_its_arms():
    """Two parts of one claim share a headline (C8(a)'s Z g2 and W_V pairs, "(a) selection"):
    the paragraph tells them apart by their arms and lists each part once, with every column
    it moves in; the count is of parts, not of moves."""
    from analysis.decision import Held, MovedBeyond, Trust

    zg2 = MovedBeyond("C8", {"name": "(a) selection: adding the Zg2 term", "a": "general", "b": "general_nozg2",
                             "task": "argmax"}, (("scale", "supported", "inconclusive"),
                                                 ("length", "supported", "inconclusive")))
    wv = MovedBeyond("C8", {"name": "(a) selection: adding W_V", "a": "value", "b": "softmax", "task": "argmax"},
                     (("length", "contradicted", "inconclusive"),))
    text = render.trust(Trust(None, 0, 3, (), None, Held(3, 1, (zg2, wv), 0, 0), 3))
    assert "1 of the 3 deciding parts" in text and "; 2 move, so their answer is not settled: " in text
    assert ("C8 (a) selection, `general` vs `general_nozg2` (at the larger scale: supported → inconclusive; "
            "at a longer sequence: supported → inconclusive); C8 (a) selection, `value` vs `softmax` "
            "(at a longer sequence: contradicted → inconclusive)") in text
