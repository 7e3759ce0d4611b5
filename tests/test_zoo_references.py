"""The zoo's fair references (issue 63 item 1) and its typed inconclusive rows (item 2), without
training: the registered references and their rule (conf/zoo.yaml), the leaderboard's parts per
reference, which parts an arm of each measured causality is decided on, the refusal of a
reference whose measured causality is not the one it serves, and why a row stays open."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from analysis import scorecard, zoo, zoo_page
from analysis.decision import Open, Reason, Rule
from harness.symmetry import CAUSAL_KEY

REFS = [{"arm": "softmax_causal", "label": "softmax (M4a) with a causal mask", "serves": "causal"},
        {"arm": "softmax", "label": "softmax (M4a)", "serves": "bidirectional"},
        {"arm": "softmax_pos", "label": "softmax (M4a) with learned positions", "serves": "bidirectional"}]


def test_the_registered_references_and_their_rule():
    cfg = OmegaConf.load(zoo.ROOT / "conf" / "zoo.yaml")
    assert zoo.references_of(cfg) == REFS
    assert "transformer_causal" not in {r["arm"] for r in REFS}


@pytest.mark.parametrize("refs, said", [
    ([REFS[1], REFS[2]], "no reference serves the causal arms"),
    ([REFS[0]], "no reference serves the bidirectional arms"),
    ([{**REFS[0], "serves": "both"}, *REFS[1:]], "zoo.references[0]: needs exactly arm, label, serves"),
    ([*REFS, REFS[1]], "an arm registered twice"),
])
def test_bad_references_are_refused(refs, said):
    with pytest.raises(zoo.ZooInputError, match=said.replace("[", r"\[").replace("]", r"\]")):
        zoo.references_of(OmegaConf.create({"zoo": {"references": refs}}))


def _row(arm: str, leak: float, kind: str = "reference") -> dict:
    return {"arm": arm, "kind": kind, CAUSAL_KEY: leak, "tolerance": 1e-8}


def test_a_reference_measured_otherwise_than_it_serves_is_refused():
    rows = [_row("softmax_causal", 0.0), _row("softmax", 0.3), _row("softmax_pos", 0.2)]
    zoo.check_references(REFS, rows)  # as registered
    with pytest.raises(zoo.ZooInputError, match="'softmax_causal' serves the causal arms but is measured bidirectional"):
        zoo.check_references(REFS, [_row("softmax_causal", 0.4), *rows[1:]])
    with pytest.raises(zoo.ZooInputError, match="'softmax' serves the bidirectional arms but is measured causal"):
        zoo.check_references(REFS, [rows[0], _row("softmax", 0.0), rows[2]])


def _parts() -> list[dict]:
    sc = SimpleNamespace(ablation=SimpleNamespace(parts=OmegaConf.create([
        {"claim": "scorecard", "role": "observation", "name": "selection vs softmax (M4a)", "task": "nearest",
         "a": "MIXER", "b": "softmax", "delta": 0.02, "control": ["mlp", "softmax"]}])))
    cfg = OmegaConf.create({"zoo": {"tasks": {"nearest": {"value": "auc", "delta": 0.1}}}})
    return zoo._parts(sc, cfg, REFS)


def test_one_leaderboard_part_per_reference_and_each_arm_by_its_measured_causality():
    parts = _parts()
    board = [p for p in parts if p.get("leaderboard")]
    assert [(p["name"], p["b"], p["serves"]) for p in board] == [
        ("selection vs softmax (M4a) with a causal mask, auc over n_train", "softmax_causal", "causal"),
        ("selection vs softmax (M4a), auc over n_train", "softmax", "bidirectional"),  # the name it had
        ("selection vs softmax (M4a) with learned positions, auc over n_train", "softmax_pos", "bidirectional")]
    causal = [p["b"] for p in zoo_page.parts_for(parts, True) if p.get("leaderboard")]
    bidir = [p["b"] for p in zoo_page.parts_for(parts, False) if p.get("leaderboard")]
    assert causal == ["softmax_causal"] and bidir == ["softmax", "softmax_pos"]
    assert len(zoo_page.parts_for(parts, True)) == 2  # the scorecard's part stays
    # measured, not named: an arm called *_causal that leaks is decided as bidirectional
    rows = [_row("gla", 0.0, "mixer"), _row("looks_causal", 0.5, "mixer"), _row("softmax", 0.3)]
    got = {(p["a"], p["b"]) for p in zoo.concrete_parts(parts, rows) if p.get("leaderboard")}
    assert got == {("gla", "softmax_causal"), ("looks_causal", "softmax"), ("looks_causal", "softmax_pos"),
                   ("softmax", "softmax_pos")}  # a reference never against itself


def _decided(**kw) -> SimpleNamespace:
    row = {"verdict": "inconclusive", "diff": "inconclusive", "equiv": "inconclusive", "at_cap": "",
           "longer": False, "first_rule": None, "budget_open": False, **kw}
    return SimpleNamespace(**row)


@pytest.mark.parametrize("row, why", [
    (_decided(verdict="worse"), None),
    (_decided(diff="contradicted"), Open.SEEDS),  # Holm only
    (_decided(first_rule=Rule.INCLUDES_ZERO), Open.SEEDS),
    (_decided(first_rule=Rule.NO_RUNS), Open.RUNS),
    (_decided(first_rule=Rule.AUC_SIZES), Open.SIZES),
    (_decided(first_rule=Rule.LR_LARGEST), Open.LR_EDGE),
    (_decided(first_rule=Rule.LR_LARGEST, at_cap="needs lr > 3.0: …"), Open.LR_CAP),
    (_decided(first_rule=Rule.BUDGET_FALLING), Open.BUDGET),
    (_decided(first_rule=Rule.BUDGET_FALLING, longer=True), Open.BUDGET_X4),
    (_decided(first_rule=Rule.NOT_LEARNED), Open.NOT_LEARNED),
    (_decided(first_rule=Rule.NOT_LEARNED, budget_open=True), Open.BUDGET),  # and still falling
    (_decided(first_rule=Rule.NOT_LEARNED, budget_open=True, longer=True), Open.BUDGET_X4),
    (_decided(first_rule=Rule.DIVERGED), Open.DIVERGED),
    (_decided(first_rule=Rule.CONTROL_OPEN), Open.POWER),
    (_decided(first_rule=Rule.AT_FLOOR), Open.FLOOR),
    (_decided(first_rule=Rule.RESOLUTION), Open.FLOOR),
    (_decided(first_rule=Rule.BLOWUP), Open.BLOWUP),
])
def test_why_a_row_stays_open(row, why):
    assert scorecard.open_reason(row) is why


def test_which_reasons_more_runs_of_this_design_can_remove():
    assert {o for o in Open if o.removable} == {Open.SEEDS, Open.POWER, Open.RUNS, Open.LR_EDGE, Open.BUDGET}
    from analysis.render_tables import OPEN_WORDS, inconclusive_lines

    assert set(OPEN_WORDS) == set(Open)
    lines = inconclusive_lines([("gla", "nearest", "softmax_causal", Open.BUDGET_X4),
                                ("mamba", "nearest", "softmax_causal", Open.SEEDS)])
    cannot, can = lines.index("More runs of this design cannot decide these (1):"), \
        lines.index("More runs of this design can decide these (1):")
    assert cannot < lines.index(f"* {OPEN_WORDS[Open.BUDGET_X4]} (1): `gla` on nearest vs `softmax_causal`.") < can
    assert inconclusive_lines([]) == []


def test_a_budget_limited_row_is_decided_on_its_x4_reruns(monkeypatch):
    """decide() reads a row whose first open rule is the budget's on the ×4 runs (without the
    lr-edge precondition), and words a row still limited there with the render module's words."""
    from analysis import protocol
    from analysis.render_tables import budget_limited, decided_longer

    calls = []

    def fake(df, spec, check_edge=True, **_):
        calls.append((df, check_edge))
        if df != "x1" and spec.get("decides") and spec["test"] == "difference":  # worse at ×4 by far
            return protocol.PartResult(spec, protocol.CONTRADICTED, effect=-1.0, lo=-1.1, hi=-0.9, n_pairs=5)
        rule = Rule.BUDGET_FALLING if df == "x1" or spec.get("still") else Rule.INCLUDES_ZERO
        return protocol.PartResult(spec, protocol.INCONCLUSIVE, [Reason(rule, arm="m", n_train=64, values=(1.0, 0.5, 0.1))])

    monkeypatch.setattr(protocol, "decide_part", fake)
    part = {"task": "nearest", "name": "selection vs softmax_causal", "a": "m", "b": "softmax_causal",
            "delta": 0.1, "choose_b": []}
    table = scorecard.decide("x1", [part, {**part, "still": True}, {**part, "decides": True}], "",
                             longer=_Longer(), factor=4)
    assert list(table["open"]) == [Open.SEEDS, Open.BUDGET_X4, None]
    assert table["reason"].iloc[1].startswith(f"{budget_limited(4)}: ")
    assert table["verdict"].iloc[2] == "worse" and table["reason"].iloc[2] == decided_longer(4)  # says so
    assert [c for c in calls if c[0] != "x1"] and all(edge is False for df, edge in calls if df != "x1")
    assert list(scorecard.decide("x1", [part], "")["open"]) == [Open.BUDGET]  # no reruns: still ×1


def test_a_row_not_learned_while_an_arm_still_falls_is_decided_on_its_x4_reruns(monkeypatch):
    """The two-layer zoo's teacher_general at 300 steps: the softmax references, still falling,
    read *not learned* (first of the row's reasons) on 40 rows, so the budget round reran none of
    them and the page left them open for a budget short of ×4. A row whose only reasons before its
    budget line are *not learned* is reread on the ×4 runs: decided there, still falling there
    (its budget line then says ×4), or not learned there; a row not learned and not falling is
    not reread."""
    from analysis import protocol
    from analysis.render_tables import budget_limited, decided_longer

    flat = Reason(Rule.NOT_LEARNED, arm="softmax", values=(-0.25, -0.51, -0.61), names=("reference (mean log)",))
    falling = Reason(Rule.BUDGET_FALLING, arm="softmax", n_train=1024, values=(-0.28, -0.39))

    def fake(df, spec, check_edge=True, **_):
        x4 = df != "x1"
        if x4 and spec["at_x4"] == "decided" and spec["test"] == "difference":
            return protocol.PartResult(spec, protocol.SUPPORTED, effect=0.5, lo=0.3, hi=0.7, n_pairs=5)
        if not x4:
            rs = [flat] if spec["at_x4"] == "flat" else [flat, falling]
        else:
            rs = {"decided": [Reason(Rule.INCLUDES_ZERO)], "falling": [flat, falling], "not learned": [flat]}[spec["at_x4"]]
        return protocol.PartResult(spec, protocol.INCONCLUSIVE, rs)

    monkeypatch.setattr(protocol, "decide_part", fake)
    part = {"task": "teacher_general", "name": "vs softmax", "a": "m", "b": "softmax", "delta": 0.1, "choose_b": []}
    rows = [{**part, "at_x4": x} for x in ("decided", "falling", "not learned", "flat")]
    assert list(scorecard.decide("x1", rows, "m")["open"]) == [Open.BUDGET] * 3 + [Open.NOT_LEARNED]  # ×1: rerun 3
    table = scorecard.decide("x1", rows, "m", longer=_Longer(), factor=4)
    assert list(table["open"]) == [None, Open.BUDGET_X4, Open.NOT_LEARNED, Open.NOT_LEARNED]
    assert list(table["longer"]) == [True, True, True, False]
    assert table["verdict"].iloc[0] == "better" and table["reason"].iloc[0] == decided_longer(4)
    still = table["reason"].iloc[1]
    assert still.startswith("not learned: ") and f"; {budget_limited(4)}: `softmax` at n_train=1024" in still, still
    assert "budget-limited: " not in still


def test_a_difference_decided_on_the_grid_is_not_reread_on_the_x4_runs(monkeypatch):
    """The two-layer zoo's recall piece: mlp_mixer beat softmax on the grid (the difference
    decided; the winner's still-falling curve cannot reverse it), but its equivalence test was
    budget-limited, so decide() reread the row on the ×4 runs, which hold none of mlp_mixer's (the
    budget round reran only rows left open), and the page said "no runs of `mlp_mixer` on recall"
    beside its area of -5.41. The row stays decided on the grid, as budget_round judged it."""
    from analysis import protocol

    def fake(df, spec, check_edge=True, **_):
        if df != "x1":
            return protocol.PartResult(spec, protocol.INCONCLUSIVE, [Reason(Rule.NO_RUNS, arm="m", names=("recall", ""))])
        if spec["test"] == "difference":
            return protocol.PartResult(spec, protocol.SUPPORTED, effect=4.9, lo=3.5, hi=6.2, n_pairs=5)
        return protocol.PartResult(spec, protocol.INCONCLUSIVE, [Reason(Rule.BUDGET_FALLING, arm="m", n_train=256,
                                                                        values=(-2.09, -2.14))])

    monkeypatch.setattr(protocol, "decide_part", fake)
    part = {"task": "recall", "name": "recall vs softmax", "a": "m", "b": "softmax", "delta": 0.1, "choose_b": []}
    table = scorecard.decide("x1", [part], "", longer=_Longer(), factor=4)
    assert table["verdict"].iloc[0] == "better" and not table["longer"].iloc[0], table.iloc[0].to_dict()
    assert "no runs" not in table["reason"].iloc[0]


def test_each_arm_is_held_to_the_trivial_predictor_it_can_express():
    """The two-layer zoo's pieces. On repeated the causal reference's error 0.30 read *not learned*
    against uniform mixing over the whole sequence (0.25), which no causal model can compute, and
    left every causal row open: a causal arm's rows read its task's prefix reference. On recall
    every arm beat the logged references (majority class, 13% right) by guessing among the values
    while binding nothing: every arm's rows read the order-blind guess (42%). Other rows keep the
    logged reference; a bundle written before (no trivial_references) reads as it did."""
    import pandas as pd

    from harness.symmetry import CAUSAL_KEY

    df = pd.DataFrame({"arm": ["softmax_causal", "gla", "softmax", "softmax_causal", "softmax"],
                       "task": ["repeated", "repeated", "repeated", "recall", "recall"],
                       "reference_error": [0.25, 0.25, 0.25, 0.87, 0.87], "reference_name": ["uniform mixing"] * 5})
    sym = pd.DataFrame([{"arm": "softmax_causal", CAUSAL_KEY: 0.0, "tolerance": 1e-8},
                        {"arm": "gla", CAUSAL_KEY: 0.0, "tolerance": 1e-8},
                        {"arm": "softmax", CAUSAL_KEY: 0.4, "tolerance": 1e-8}])
    recall = {"majority_acc": 0.13, "uniform_acc": 0.05, "order_blind_acc": 0.42}
    plan = {"trivial_references": {"repeated": {"causal": {"majority_acc": 0.06, "uniform_acc": 0.54}},
                                   "recall": {"causal": recall, "bidirectional": recall}}}
    out = zoo_page.reference_rows(df, sym, plan)
    assert out["reference_error"].round(6).tolist() == [0.46, 0.46, 0.25, 0.58, 0.58]
    assert out["reference_name"].tolist() == ["uniform mixing over the prefix"] * 2 + ["uniform mixing"] + \
        ["the most frequent value, binding no key"] * 2
    regression = {"trivial_references": {"repeated": {"causal": {"uniform_rel_mse": 1.4, "identity_rel_mse": 4.0}}}}
    assert zoo_page.reference_rows(df, sym, regression)["reference_error"].tolist() == [1.4, 1.4, 0.25, 0.87, 0.87]
    assert zoo_page.reference_rows(df, sym, {}).equals(df)


def test_the_lead_names_the_arms_that_learned_where_the_references_did_not():
    """The recall piece: every registered reference sat at the order-blind guess, so every verdict
    against them was open and "which mixers match attention" said none, while MLP-Mixer solved the
    task (error 0.5%); the lead says so. Learned is the verdicts' rule: the mean log error at the
    largest n_train δ below the log of the trivial reference (an arm 0.02 below it did not)."""
    import pandas as pd

    from analysis import stats

    def runs(arm: str, acc: float) -> list[dict]:
        return [{"task": "recall", "arm": arm, "task.n_train": 1024, "seed": s, "train.lr": 0.01, "status": "FINISHED",
                 "val/best_error": 1 - acc, "test/acc": acc, "test/majority_acc": 0.6, "test/uniform_acc": 0.1,
                 "task.n_test": 2048.0} for s in range(3)]

    plan = {"arms": [{"name": "m"}, {"name": "n"}], "registered": [{"arm": "softmax"}],
            "tasks": {"recall": {"value": "auc", "delta": 0.1}}}
    df = scorecard.floored(stats.add_error(pd.DataFrame(runs("softmax", 0.55) + runs("m", 0.995) + runs("n", 0.58))))
    assert zoo_page.unlearned(df, plan, ["recall"]) == {"recall": ["m"]}
    learned = scorecard.floored(stats.add_error(pd.DataFrame(runs("softmax", 0.9) + runs("m", 0.995))))
    assert zoo_page.unlearned(learned, plan, ["recall"]) == {}


def test_the_lead_reads_learned_over_the_sizes_as_the_area_verdicts_do():
    """The teacher_general piece at 300 steps: every row against the softmax references read *not
    learned* on the area (the mean log error over n_train), while the lead judged them at the largest
    n_train alone, found them learned there and did not say that no reference learned the task,
    beside "matches attention on generation by a teacher: linear_attention, …". A reference that
    learns only at the largest size has not learned an area task; a one-size task reads that size."""
    import pandas as pd

    from analysis import stats

    def runs(arm: str, acc: dict[int, float]) -> list[dict]:
        return [{"task": "recall", "arm": arm, "task.n_train": n, "seed": s, "train.lr": 0.01, "status": "FINISHED",
                 "val/best_error": 1 - a, "test/acc": a, "test/majority_acc": 0.6, "test/uniform_acc": 0.1,
                 "task.n_test": 2048.0} for n, a in acc.items() for s in range(3)]

    plan = {"arms": [{"name": "m"}], "registered": [{"arm": "softmax"}], "tasks": {"recall": {"value": "auc", "delta": 0.1}}}
    # the trivial reference errs 0.4 (log -0.92, needs <= -1.02): softmax errs 0.3 at 1024 (log -1.20),
    # 0.6 at 128 (log -0.51): learned at the largest size, not over the sizes (area -0.86)
    df = scorecard.floored(stats.add_error(pd.DataFrame(runs("softmax", {128: 0.4, 1024: 0.7}) +
                                                        runs("m", {128: 0.99, 1024: 0.995}))))
    assert zoo_page.unlearned(df, plan, ["recall"]) == {"recall": ["m"]}
    one_size = {"tasks": {"recall": {"value": "error", "delta": 0.1}}}
    assert zoo_page.unlearned(df, {**plan, **one_size}, ["recall"]) == {}  # read at its largest size: learned


def test_the_lead_names_the_causality_whose_references_did_not_learn():
    """The teacher_general piece after its ×4 reruns: the causal reference learned the task at ×4
    steps, the bidirectional ones at neither budget, so the lead said nothing while six bidirectional
    arms "matched attention" by beating references that did not learn. The lead names the references
    of the causality that did not learn, with the arms of that causality that did; the ×4 reruns count
    as learning where they hold every size of the area."""
    import pandas as pd

    from analysis import stats

    def runs(arm: str, acc: float, sizes=(128, 1024), steps: int = 300) -> list[dict]:
        return [{"task": "recall", "arm": arm, "task.n_train": n, "seed": s, "train.lr": 0.01, "status": "FINISHED",
                 "train.max_steps": steps, "val/best_error": 1 - acc, "test/acc": acc, "test/majority_acc": 0.6,
                 "test/uniform_acc": 0.1, "task.n_test": 2048.0} for n in sizes for s in range(3)]

    plan = {"arms": [{"name": "c"}, {"name": "b"}, {"name": "b2"}],
            "registered": [{"arm": "sc", "serves": "causal"}, {"arm": "sb", "serves": "bidirectional"}],
            "tasks": {"recall": {"value": "auc", "delta": 0.1}}}
    frame = lambda rows: scorecard.floored(stats.add_error(pd.DataFrame(rows)))
    grid = frame(runs("sc", 0.5) + runs("sb", 0.5) + runs("c", 0.99) + runs("b", 0.99) + runs("b2", 0.5))
    causal = {"c": True, "b": False, "b2": False}
    assert zoo_page.unlearned(grid, plan, ["recall"], causal=causal) == {"recall": ["c", "b"]}
    x4 = frame(runs("sc", 0.99, steps=1200) + runs("b2", 0.99, (1024,), steps=1200))  # b2 at one size: not an area
    assert zoo_page.unlearned(grid, plan, ["recall"], x4, causal) == {"recall (the bidirectional references)": ["b"]}


def test_the_budget_round_decides_on_the_runs_as_the_page_reads_them(monkeypatch):
    """budget_round chooses its ×4 reruns on the runs after ``prepare`` (the zoo's causal
    references): deciding on the logged references instead, it skipped the causal rows that the page
    then found budget-limited and reread on ×4 runs holding none of their arms ("no runs of
    `linear_attention` on teacher_general" beside its area)."""
    import pandas as pd

    seen = []
    monkeypatch.setattr(scorecard, "_grid_runs", lambda sc, trials, store: pd.DataFrame({"arm": ["gla"]}))
    monkeypatch.setattr(scorecard, "floored", lambda df: df)
    monkeypatch.setattr(scorecard, "decide", lambda df, parts, mixer: seen.append(df) or pd.DataFrame({"open": []}))
    sc = OmegaConf.create({"report": {"budget_factor": 4}})
    assert scorecard.budget_round(sc, [], [([], [])], "", None, [], lambda df: df.assign(prepared=True)) == ([], 0)
    assert seen[-1]["prepared"].all()
    scorecard.budget_round(sc, [], [([], [])], "", None, [])
    assert "prepared" not in seen[-1]


class _Longer(str):
    """A stand-in for the ×4 runs (a non-empty frame as decide() asks)."""

    empty = False

    def __new__(cls):
        return super().__new__(cls, "x4")


def test_a_pair_the_design_does_not_run_reads_not_run_and_is_not_left_open():
    """MQAR is run by the arms measured causal and the control pair only (``zoo.causal_only``):
    a bidirectional arm's cells there read *not run*, not "inconclusive: no runs of …" filed
    under the rows more runs could decide, and a reference the design does not run there says
    so beside the one it does."""
    parts = [{**p, "task": task} for task in ("nearest", "mqar_t32_d16") for p in _parts()]
    plan = {"parts": parts, "causal_only": ["mqar_t32_d16"]}
    causal = {"gla": True, "gla_bidir": False, "softmax_causal": True, "softmax": False, "softmax_pos": False}
    assert zoo_page.designed_out(plan, causal, "gla_bidir", "mqar_t32_d16")
    assert not zoo_page.designed_out(plan, causal, "gla_bidir", "nearest")
    assert not zoo_page.designed_out(plan, causal, "gla", "mqar_t32_d16")
    assert not zoo_page.designed_out(plan, causal, "softmax", "mqar_t32_d16")  # the control pair runs it
    assert zoo_page.designed_out(plan, causal, "softmax_pos", "mqar_t32_d16")
    assert not zoo_page.designed_out({"parts": parts}, causal, "gla_bidir", "mqar_t32_d16")  # an older bundle

    board = [p for p in zoo_page.parts_for(parts, False) if p.get("leaderboard")]
    cells = zoo_page._board_cells(None, board, ["nearest", "mqar_t32_d16"], "gla_bidir",
                                  lambda p: zoo_page._part_out(plan, causal, p, "gla_bidir"))
    assert cells[1] == zoo_page.NOT_RUN and "not run" not in cells[0]
    cells = zoo_page._board_cells(None, board, ["mqar_t32_d16"], "softmax",
                                  lambda p: zoo_page._part_out(plan, causal, p, "softmax"))
    assert cells == ["vs `softmax`: the reference; vs `softmax_pos`: not run"]
    kept = [p for p in zoo_page.parts_for(parts, False) if not zoo_page._part_out(plan, causal, p, "gla_bidir")]
    assert {p["task"] for p in kept} == {"nearest"}  # so no row of them is decided, nor left open
    assert "not among the inconclusive rows" in zoo_page._not_run_words(plan)[0]


class _Block(str):
    """A stand-in for the confirmation block's runs at one budget (a non-empty frame as decide() asks)."""

    empty = False


def test_a_row_open_on_the_seeds_is_decided_on_its_confirmation_block_alone(monkeypatch):
    """Issue 63: a row the exploratory seeds leave open on the interval (or on Holm) is decided
    again on its confirmation block alone, at the budget it was decided at, without the lr-edge
    precondition (one lr per arm); the block's rows are a Holm family of their own, so no row the
    exploratory family decided moves; a row still open there is one more runs of this design
    cannot decide."""
    from analysis import protocol
    from analysis.render_tables import OPEN_WORDS

    calls = []

    def fake(df, spec, check_edge=True, **_):
        calls.append((str(df), spec["name"], check_edge))
        if spec["name"] == "decided" and spec["test"] == "difference":
            return protocol.PartResult(spec, protocol.SUPPORTED, effect=0.5, lo=0.4, hi=0.6, n_pairs=5)
        if df == "x1" and spec["name"] == "x4" and spec["test"] == "difference":
            return protocol.PartResult(spec, protocol.INCONCLUSIVE, [Reason(Rule.BUDGET_FALLING, arm="m", n_train=64,
                                                                            values=(1.0, 0.5))])
        if str(df).startswith("block") and spec["name"] in ("confirmed", "x4") and spec["test"] == "difference":
            return protocol.PartResult(spec, protocol.CONTRADICTED, effect=-0.5, lo=-0.6, hi=-0.4, n_pairs=10,
                                       paired=tuple(range(6000, 6010)), expected=10)
        seeds = range(6000, 6010) if str(df).startswith("block") else range(5)
        return protocol.PartResult(spec, protocol.INCONCLUSIVE, [Reason(Rule.INCLUDES_ZERO)], effect=0.01,
                                   lo=-0.2, hi=0.2, n_pairs=len(seeds), paired=tuple(seeds), expected=len(seeds))

    monkeypatch.setattr(protocol, "decide_part", fake)
    part = {"task": "nearest", "a": "m", "b": "softmax_causal", "delta": 0.1, "choose_b": []}
    parts = [{**part, "name": n} for n in ("confirmed", "decided", "still open", "x4")]
    explored = scorecard.decide("x1", parts, "")
    assert list(explored["open"]) == [Open.SEEDS, None, Open.SEEDS, Open.BUDGET]
    calls.clear()
    table = scorecard.decide("x1", parts, "", longer=_Longer(), factor=4, block=(_Block("block x1"), _Block("block x4")))
    assert list(table["verdict"]) == ["worse", "better", "inconclusive", "worse"]
    assert list(table["open"]) == [None, None, Open.CONFIRMED, None] and not Open.CONFIRMED.removable
    assert list(table["confirmed"]) == [True, False, True, True]
    assert table["reason"][0].startswith("decided on its confirmation block, seeds 6000–6009")
    assert "open on the exploratory seeds" in table["reason"][0]
    assert table["reason"][2].startswith("open on its confirmation block too, seeds 6000–6009 (10 of 10): ")
    assert table["reason"][3].startswith("decided on its confirmation block at ×4 steps, ")  # its ×4 block
    assert table["p_diff_holm"][1] == explored["p_diff_holm"][1]  # the exploratory family is not re-adjusted
    block_calls = [c for c in calls if c[0].startswith("block")]
    assert {(c[0], c[1]) for c in block_calls} == {("block x1", "confirmed"), ("block x1", "still open"), ("block x4", "x4")}
    assert all(edge is False for _, _, edge in block_calls)
    assert "on a confirmation block" in OPEN_WORDS[Open.SEEDS] and "too" in OPEN_WORDS[Open.CONFIRMED]
    # a block row still budget-limited at ×1 is decided on the block's ×4 reruns, as on the grid
    monkeypatch.setattr(protocol, "decide_part", lambda df, spec, check_edge=True, **_: (
        protocol.PartResult(spec, protocol.INCONCLUSIVE, [Reason(Rule.BUDGET_FALLING, arm="m", n_train=64, values=(1.0, 0.5))],
                            n_pairs=10) if str(df) == "block x1" else fake(df, spec, check_edge)))
    falling = scorecard.decide("x1", parts[:1], "", longer=_Longer(), factor=4,
                               block=(_Block("block x1"), _Block("block x4")))
    assert falling["verdict"][0] == "worse" and falling["longer"][0]
    assert falling["reason"][0].startswith("decided on its confirmation block at ×4 steps, ")
    # a block that holds no pairs of a row leaves it as the exploratory seeds read it
    monkeypatch.setattr(protocol, "decide_part", lambda df, spec, check_edge=True, **_: fake(df, spec, check_edge)
                        if not str(df).startswith("block") else protocol.PartResult(spec, protocol.INCONCLUSIVE,
                                                                                    [Reason(Rule.NO_RUNS)]))
    unrun = scorecard.decide("x1", parts[:1], "", block=(_Block("block x1"), _Block("block x4")))
    assert list(unrun["open"]) == [Open.SEEDS] and not unrun["confirmed"][0]


@pytest.mark.parametrize("seeds, said", [
    ("range(3,6)", "are the grid's"), ("range(1000,1002)", "the first confirmation block"),
    ("range(6000", "zoo.confirm_seeds='range(6000'")])
def test_a_confirmation_block_that_is_not_fresh_is_refused(seeds, said):
    cfg = OmegaConf.create({"zoo": {"confirm_seeds": seeds}})
    sc = OmegaConf.create({"scale": {"seeds": "range(5)"}})
    with pytest.raises(zoo.ZooInputError, match=re.escape(said)):
        zoo.confirm_seeds(cfg, sc)
    assert zoo.confirm_seeds(OmegaConf.create({"zoo": {"confirm_seeds": "range(6000,6010)"}}), sc) == list(range(6000, 6010))
    assert zoo.confirm_seeds(OmegaConf.create({"zoo": {"confirm_seeds": ""}}), sc) == []
