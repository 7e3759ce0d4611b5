"""The report's answer first (issue 45 item 1, :mod:`analysis.answer`) and the calibration of
its rules (item 2, :mod:`analysis.calibration`), on synthetic part rows and runs: one test per
misreading the audit found in the old headline (item 4), each against hand-written sentences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from analysis import answer, calibration, protocol, stats
from analysis.protocol import CONTRADICTED, INCONCLUSIVE, SUPPORTED, PartResult, spec_dict


def _part(claim, name, a, b, verdict, effect, lo95, hi95, *, test="difference", sides=2, task="nearest",
          delta=0.02, readout=None, mean=(0.1, 0.1), se=0.01, seeds="1000–1009 (10 of 10)", reasons=(),
          test_alone="", role="deciding", value="error"):
    spec = spec_dict({"claim": claim, "name": name, "task": task, "a": a, "b": b, "test": test, "sides": sides,
                      "delta": delta, "role": role, "value": value, "readout": readout})
    return PartResult(spec, verdict, list(reasons), n_train="1024", seeds=seeds, mean_a=mean[0], mean_b=mean[1],
                      effect=effect, lo=lo95, hi=hi95, lo95=lo95, hi95=hi95, se=se, test_alone=test_alone)


ZG2 = _part("C8", "(a) selection: adding the Zg2 term to M0 does not lower error by δ or more (T4a)", "general",
            "general_nozg2", SUPPORTED, -0.0016, -0.0038, 0.0006, test="equivalence", sides=1, readout="scaled")
WV = _part("C8", "(a) selection: adding W_V does not lower error by δ or more (T4a)", "value", "softmax",
           CONTRADICTED, 0.0305, 0.0279, 0.0331, test="equivalence", sides=1, readout="scaled")


def _row(table: list[str], component: str) -> str:
    return next(line for line in table if line.startswith(f"| {component} |"))


def test_a_claim_contradicted_by_w_v_while_its_z_g2_pair_supports_it_reads_so_per_component():
    """Misreading 1: the old headline said the Z g2 claim is contradicted 'by (a) selection' when
    only W_V contradicted it and the direct Z g2 pair supported it."""
    table = answer.component_rows([ZG2, WV], {}, {"nearest": "test error (1 − accuracy)"})
    assert _row(table, "the Z g2 term") == (
        "| the Z g2 term | C8(a) T4a: `general` not lower than `general_nozg2` by δ or more | -0.0016 [-0.0038, "
        "0.0006]; δ 0.02; test error (1 − accuracy) | **supported** | scaled readout | – |")
    assert _row(table, "W_V") == (
        "| W_V | C8(a) T4a: `value` not lower than `softmax` by δ or more | 0.0305 [0.0279, 0.0331]; δ 0.02; "
        "test error (1 − accuracy) | **contradicted** | scaled readout | – |")


def test_a_sign_that_reverses_under_one_readout_travels_with_the_verdict():
    """Misreading 2: C10's supported-looking part reverses under the tied readout."""
    part = _part("C10", "neutral selection task (T4a): softmax does not beat the best σ by δ or more",
                 "quad_sigma[sigma=softmax]", "quad_sigma[sigma=exp]", CONTRADICTED, 0.0204, 0.0138, 0.027,
                 test="equivalence", sides=1, readout="scaled")
    row = {"decided_on": "confirmation", "exploratory": CONTRADICTED, "x4": CONTRADICTED, "x4_runs": 10,
           "readout=tied": SUPPORTED, "readout=tied_runs": 10, "readout=tied_seeds": "0–4 (5 of 5)"}
    assert answer.holds_under(part, row) == ("scaled readout; also contradicted at ×4 steps; supported under the "
                                             "tied readout")
    part.conditions = "contradicted under the scaled readout; reversed under the tied one (−0.022 [−0.042, −0.002])"
    assert answer.holds_under(part, row) == part.conditions  # the analysis's rule, whole, instead of the table's
    part.blowups = 4
    assert answer.holds_under(part, None).endswith("; 4 blown-up runs among its pairs")


def test_no_cell_is_cut_mid_phrase():
    """Misreading 3: the verdict table cut C9's cell at the first colon of its part's name."""
    c9 = _part("C9", "on a non-equivariant control teacher not of B7's form (T3f′ squashed: ψ after the mixing) "
               "the ranking reverses: B7 beats M4", "coordwise", "softmax", INCONCLUSIVE, -0.129, -0.519, 0.262,
               task="teacher_squashed", value="auc", delta=0.1, se=0.1726, reasons=["the 95% interval includes 0"])
    cells = answer.part_cells(c9, ["C9"], None, {})
    assert cells["part"] == "C9 T3f′: `coordwise` lower than `softmax`"
    assert cells["effect"] == "-0.129 [-0.519, 0.262]; δ 0.1; mean log test error"
    assert cells["decide"] == ("the 95% interval includes 0 → about 143 paired seeds (now 10; 80% power at the "
                               "observed sd 0.546)")
    floor = _part("C12", "(a) W_V (M5) matches M4a where the target stays in span(X) (T3a)", "value", "softmax",
                  INCONCLUSIVE, 0.0, -1e-8, 1e-8, test="equivalence", task="teacher", mean=(0.22, 0.2201),
                  reasons=["no power: both arms within δ of the floor arm `xg` (0.22): the floor, not the arms"],
                  test_alone=SUPPORTED)
    assert answer.part_cells(floor, ["C12(a)"], None, {})["decide"] == (
        "both arms within δ of the floor arm `xg` (0.22): the floor, not the arms → a harder task (not more seeds)")


def test_terms_are_defined_before_they_are_used():
    """Misreading 4: "no power" was defined 250 lines after its first use."""
    part = _part("C10", "neutral selection task (T4b): softmax does not beat the best σ by δ or more",
                 "quad_sigma[sigma=softmax]", "quad_sigma[sigma=exp]", INCONCLUSIVE, -0.005, -0.01, 0.0,
                 test="equivalence", sides=1, task="argmax", mean=(0.3, 0.295),
                 reasons=["no power: positive control not contradicted"], test_alone=SUPPORTED)
    text = "\n".join(answer.section([part], pd.DataFrame(), {}, {}, {}))
    assert text.index("## Which parts of attention matter") < text.index("*no power*: an equivalence cannot be "
                                                                          "supported because")
    start = text.index("**Terms.**")
    for term in ("no power", "floor", "half-width"):  # first used in the paragraph that defines it
        assert start < text.index(term) <= text.index(f"*{term}*:") + 1 < text.index("\n\n", start), term
    assert text.index("no power") == text.index("*no power*:") + 1  # its first use is its definition
    assert text.index("δ") > text.index("**Terms.**") and "δ is the part's pre-registered margin" in text
    assert answer.part_cells(part, ["C10"], None, {})["decide"] == (
        "no power voids a supported interval → a positive control that the same test contradicts")


def test_what_would_decide_follows_its_rules_in_order():
    at_floor = _part("C12", "(c) knowledge k = 8 matches k = 4 within δ (T3a)", "softmax_free[k=8]",
                     "softmax_free[k=4]", INCONCLUSIVE, 6e-4, -8e-4, 2e-3, test="equivalence", task="teacher",
                     mean=(3e-7, 6e-4), reasons=["the 90% interval is not inside ±δ"])
    assert answer.what_would_decide(at_floor) == ("both arms within δ of 0 error (3e-07, 0.0006)",
                                                  "a harder task (not more seeds)")
    resolution = _part("C12", "(b) the 1/√d1 scale (T3a)", "softmax", "softmax_unscaled", INCONCLUSIVE, 0.0, 0.0,
                       0.0, test="equivalence", value="steps_to_0.003", delta=0.1, mean=(0.1, 0.1),
                       reasons=["inconclusive: the measurement cannot show δ"])
    resolution.resolution = 0.0333
    assert answer.what_would_decide(resolution) == ("inconclusive: the measurement cannot show δ",
                                                    "a harder task (not more seeds)")
    resolution.reasons = []  # no rule fired, but the measurement's resolution is below δ
    assert answer.what_would_decide(resolution) == ("the largest effect this measurement can show is 0.0333, below "
                                                    "δ = 0.1", "a harder task (not more seeds)")
    blown = _part("C9", "(T3f′)", "coordwise", "softmax", INCONCLUSIVE, -0.129, -0.519, 0.262, value="auc",
                  reasons=["decided by 4 blown-up runs: without seeds 1002, 1005 d = 0.175 [0.17, 0.18]"])
    assert answer.what_would_decide(blown) == ("decided by 4 blown-up runs: without seeds 1002, 1005 d = 0.175 "
                                               "[0.17, 0.18]", "an lr at which no seed blows up (the part decided "
                                               "without them agrees)")
    at_margin = _part("C10", "(T4a)", "quad_sigma[sigma=softmax]", "quad_sigma[sigma=exp]", INCONCLUSIVE, 0.0204,
                      0.0138, 0.027, test="equivalence", sides=1)
    assert answer.what_would_decide(at_margin) == (
        "the estimate 0.0204 sits within one half-width (0.0066) of δ = 0.02", "not more seeds: the effect is about δ")
    assert answer.what_would_decide(ZG2) == ("", "")
    assert answer.seeds_needed(0.5, 1.0, 0.025) == 34 and answer.seeds_needed(1.0, 1.0, 0.025) == 10  # G*Power's


def test_a_comparison_shared_by_two_claims_is_listed_once_naming_both():
    """Issue 45 item 3: C8(b) and C12(a) "W_V on T3d" are the same trials."""
    c8 = _part("C8", "(b) generation: W_V lowers error where the output leaves span(X) (T3d)", "value", "softmax",
               SUPPORTED, 0.0396, 0.0389, 0.0404, task="teacher_general")
    c12 = _part("C12", "(a) W_V (M5) lowers error where the target leaves span(X) (T3d)", "value", "softmax",
                SUPPORTED, 0.0396, 0.0389, 0.0404, task="teacher_general")
    table = answer.component_rows([c8, c12], {}, {})
    assert _row(table, "W_V").startswith("| W_V | C8(b), C12(a) T3d: `value` lower than `softmax` | 0.0396 ")
    assert _row(table, "W_V").count("<br>") == 0
    c12.effect = 0.04  # numbers differ (e.g. a rounding elsewhere), but the analysis says the trials are shared
    c12.shared_with = (f"C8 {c8.spec['name']}",)  # as analysis.verdicts names it
    assert answer.merge_shared([c8, c12])[0][1] == ["C8(b)", "C12(a)"]
    assert _row(table, "positions") == ("| positions | not measured: no registered part compares arms that differ "
                                        "by it | – | – | – | – |")


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
    row = calibration.rates(table).iloc[0]
    assert (row["n"], row["k"], row["95% interval"], row["nominal"]) == (54, 0, "[0.000, 0.066]", 0.05)
    assert calibration.rates(table).iloc[1]["95% interval"] == "–"  # no comparison under that rule
