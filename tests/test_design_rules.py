"""The design rules of paper.md §13 that audits found by hand (issue 45 item 2), each on
synthetic frames with a known answer: blown-up runs (tagged, counted, kept in the pairs, the
part decided again without them and by Hodges–Lehmann), the measurement's resolution, one
comparison one part, and conditions that travel with the verdict; a test over random frames
that none of these rules turns an undecided part into a decided one; and the two parts of
today's bundle the rules were written for (C12(b), C9′)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from analysis import protocol, render, stability, stats, verdicts
from analysis.decision import Reason, Rule, Step
from analysis.protocol import CONTRADICTED, INCONCLUSIVE, SUPPORTED, PartResult

ROOT = Path(__file__).resolve().parents[1]
LRS = (0.003, 0.01, 0.03)


def _frame(values: dict[str, list[float]], best_lr: float = 0.01, worse: float = 0.05, n: int = 256,
           val: dict[str, list[float]] | None = None, **extra) -> pd.DataFrame:
    """Runs of arms with the given test error per seed at ``best_lr`` (the other lrs ``worse``
    higher), validation equal to test unless ``val`` says otherwise (per arm, per seed, at
    ``best_lr``), relative MSE (zero predictor 1)."""
    rows = []
    for arm, errs in values.items():
        for lr in LRS:
            for seed, e in enumerate(errs):
                at = np.isclose(lr, best_lr)
                v = (val or {}).get(arm, errs)[seed] if at else e + worse
                rows.append({"status": "FINISHED", "diverged": False, "task": "t", "arm": arm, "variant": arm,
                             "task.n_train": n, "seed": seed, "train.lr": lr, "trial_id": f"{arm}-{lr}-{seed}",
                             "val/best_error": v, "val/best_loss": v, "test/rel_mse": e if at else e + worse,
                             "test/uniform_rel_mse": 0.9, "val/best_error_at_80": v, "val/best_error_at_90": v,
                             "val/evals_last_20": 6.0, "train.max_steps": 600.0, "train.eval_every": 20.0, **extra})
    return stats.add_error(pd.DataFrame(rows))


def _part(**kw) -> dict:
    return {"claim": "C0", "name": "p", "task": "t", "a": "a", "b": "b", "test": "difference", "delta": 0.02, **kw}


# ----------------------------------------------------------------------------- blown-up runs
def test_blowup_is_above_nothing_learned_or_far_above_the_other_seeds_and_nothing_else():
    """A run at 6 beside seeds at 0.3 (above the zero predictor's 1) and one at 0.5 beside seeds
    at 0.003 (two decades, within a decade of learning nothing) blew up; an arm at 1.01 on every
    seed learned nothing (not a blow-up), and a seed at 1e-5 beside seeds at 1e-8 sits on
    another floor."""
    df = _frame({"a": [0.30, 0.31, 6.2, 0.29, 0.30], "b": [0.003, 0.5, 0.0031, 0.0029, 0.003],
                 "nothing": [1.01, 1.02, 1.01, 1.03, 1.01], "floor": [1e-8, 2e-8, 1e-5, 1e-8, 1.5e-8]})
    at = df[np.isclose(df["train.lr"], 0.01)]
    flagged = {(r.arm, int(r.seed)) for r in at.itertuples() if r.blowup}
    assert flagged == {("a", 2), ("b", 1)}
    counted = stats.counts(at, by=("arm",)).set_index("arm")["blowup"]
    assert counted.to_dict() == {"a": 1, "b": 1, "floor": 0, "nothing": 0}


def test_an_lr_with_a_blown_up_exploratory_seed_is_not_eligible():
    """The lr with the lowest mean validation error is passed over when one of its seeds blew up
    (exploratory selection), and chosen when the rule is off (a confirmation block's frozen lr)."""
    df = _frame({"a": [0.30, 0.31, 0.30, 0.29, 0.30]}, val={"a": [0.10, 0.10, 1.2, 0.10, 0.10]}, worse=0.2)
    df = df.assign(blowup=stats.blowup(df))
    assert df["blowup"].sum() == 1
    assert stats.select_lr(df, group=("task", "arm"), exclude_blowup=True)["lr_chosen"].iloc[0] != 0.01
    assert stats.select_lr(df, group=("task", "arm"))["lr_chosen"].iloc[0] == 0.01


def test_hodges_lehmann_interval_is_the_exact_signed_rank_inversion():
    """The exact null of the signed-rank statistic matches scipy's exact p-values, the estimate is
    the median of the Walsh averages, and the 95% interval's ends are where scipy's exact test
    (two-sided) crosses 5%; with 5 pairs no 95% interval exists."""
    rng = np.random.default_rng(3)
    null = stats.signed_rank_null(9)
    for _ in range(5):
        d = rng.normal(0.2, 1.0, 9)
        t_plus = int(np.argsort(np.argsort(np.abs(d)))[d > 0].sum() + (d > 0).sum())  # ranks from 1
        p = min(1.0, 2 * min(null[:t_plus + 1].sum(), null[t_plus:].sum()))
        assert p == pytest.approx(sps.wilcoxon(d, method="exact").pvalue)
    d = rng.normal(1.0, 1.0, 12)
    est, lo, hi = stats.hodges_lehmann(d)
    i, j = np.triu_indices(d.size)
    assert est == pytest.approx(np.median((d[i] + d[j]) / 2))
    for edge, inside in ((lo, lo + 1e-9), (hi, hi - 1e-9)):
        assert sps.wilcoxon(d - inside, method="exact").pvalue >= 0.05
        assert sps.wilcoxon(d - (edge - 1e-6 if edge is lo else edge + 1e-6), method="exact").pvalue < 0.05
    assert stats.hodges_lehmann(d[:5])[1:] == (-np.inf, np.inf)


def test_a_part_decided_by_blown_up_runs_is_inconclusive_and_keeps_them_in_the_pairs():
    """10 seeds, `a` 0.05 below `b`; three seeds of `a` blow up to 6. The t-interval then
    includes 0 while without those seeds (and by Hodges–Lehmann) `a` wins: the part is
    *inconclusive: decided by 3 blown-up runs*, with the runs still in its pairs. With one
    blown-up run that moves nothing, the verdict stands and the run is counted."""
    rng = np.random.default_rng(0)
    base = 0.30 + rng.normal(0, 0.003, 10)
    a = list(base)
    for s in (2, 5, 7):
        a[s] = 6.0 + s / 10
    df = _frame({"a": a, "b": list(base + 0.05)})
    r = protocol.decide_part(df, _part(), check_edge=False)
    assert r.verdict == INCONCLUSIVE and r.blowups == 3
    assert r.reasons[0].rule is Rule.BLOWUP and r.reasons[0].values == (3,) and r.paired == tuple(range(10)) and r.expected == 10
    assert r.robust.seeds == (2, 5, 7) and r.robust.without_verdict == SUPPORTED
    assert [(b.arm, b.seed) for b in r.blown_up] == [("a", 2), ("a", 5), ("a", 7)]
    assert render.reason(r.reasons[0]).startswith("decided by 3 blown-up runs: 3 blown-up run(s) on seed(s) 2, 5, 7; "
                                                  "without them")
    far = list(base + 0.5)
    far[4] = 1.8  # above nothing learned (1) and ≥ 2× the other seeds' median (0.8): blown up
    df1 = _frame({"a": list(base), "b": far})
    kept = protocol.decide_part(df1, _part(), check_edge=False)
    assert kept.blowups == 1 and kept.verdict == SUPPORTED, kept.reasons


# ----------------------------------------------------------------------------- resolution
def _steps(first: dict[str, list[float]]) -> pd.DataFrame:
    df = _frame({arm: [0.001] * len(v) for arm, v in first.items()})
    step = [first[arm][s] for arm, s in zip(df["arm"], df["seed"])]
    return df.assign(**{"val/first_step_below/0.003": np.where(np.isclose(df["train.lr"], 0.01), step, -1.0)})


def test_a_measurement_that_cannot_show_delta_is_inconclusive():
    """C12(b)'s design: both arms reach the target at step 60 on every seed (validation every
    20 of 600 steps, δ = 0.1): the largest difference the measurement could show is 60 − 20
    steps = 0.067 of the budget < δ, so the equivalence is *inconclusive: the measurement
    cannot show δ*, with its control contradicted; arms reaching it at step 200 can show δ."""
    df = _steps({"a": [60] * 5, "b": [60] * 5, "w": [400, 420, 380, 400, 440], "a2": [200, 220, 200, 180, 200],
                 "b2": [200, 200, 220, 200, 200]})
    eq = dict(test="equivalence", sides=2, delta=0.1, value="steps_to_0.003", control=["a", "w"])
    r = protocol.decide_part(df, _part(**eq))
    assert r.verdict == INCONCLUSIVE and r.reasons[0].rule is Rule.RESOLUTION
    assert r.resolution == pytest.approx(40 / 600)
    ok = protocol.decide_part(df, _part(**{**eq, "a": "a2", "b": "b2"}))
    assert ok.verdict == SUPPORTED, ok.reasons


def test_an_error_equivalence_bounded_by_its_arms_distance_from_zero():
    """C8(a)'s design: the arm a term would lower sits 0.025 above the floor 0, δ = 0.02, the
    exploratory half-width 0.008: it cannot show δ (one-sided: ``d = b − a`` ≤ b's headroom)."""
    noise = np.array([0.008, -0.008, 0.004, -0.004, 0.0])
    df = _frame({"a": list(0.020 + noise), "b": list(0.025 + 2 * noise), "w": list(0.4 + noise)})
    r = protocol.decide_part(df, _part(test="equivalence", sides=1, control=["a", "w"]))
    assert r.test_alone == SUPPORTED and r.verdict == INCONCLUSIVE
    assert Rule.RESOLUTION in [x.rule for x in r.reasons]


def test_no_power_holds_at_exactly_delta():
    """Both arms exactly δ from 0 (0.1 of the budget, δ = 0.1): no power (≤, not <)."""
    df = _steps({"a": [60] * 5, "b": [60] * 5, "w": [400, 420, 380, 400, 440]})
    r = protocol.decide_part(df, _part(test="equivalence", sides=2, delta=0.1, value="steps_to_0.003",
                                       control=["a", "w"]))
    assert [x.rule for x in r.preconditions[Step.NO_POWER].failures][:1] == [Rule.AT_ZERO]
    assert render.check(Step.NO_POWER, r.preconditions[Step.NO_POWER]).startswith("fails: both arms within δ of 0")


# ----------------------------------------------------------------------------- one comparison
def test_one_comparison_is_one_part_across_claims():
    """Two claims' parts on the same trial ids name each other, count once across claims and
    show as one stability row naming both claims; each keeps its claim's verdict."""
    ids = ("x1", "x2", "y1", "y2")
    one = PartResult({"claim": "C8", "name": "(b) W_V", "role": "deciding"}, SUPPORTED, trial_ids=ids)
    two = PartResult({"claim": "C12", "name": "(a) W_V", "role": "deciding"}, SUPPORTED, trial_ids=ids)
    other = PartResult({"claim": "C12", "name": "(c) k", "role": "deciding"}, SUPPORTED, trial_ids=("z",))
    verdicts.mark_shared([one, two, other])
    assert one.shared_with == ("C12 (a) W_V",) and two.shared_with == ("C8 (b) W_V",) and other.shared_with == ()
    assert [r.spec["name"] for r in verdicts.distinct([one, two, other])] == ["(b) W_V", "(c) k"]
    frame = stability.mark_once(pd.DataFrame({"claim": ["C8", "C12", "C12"], "part": ["(b) W_V", "(a) W_V", "(c) k"],
                                              "trial_ids": [",".join(ids), ",".join(ids), "z"]}))
    assert frame["claims"].tolist() == ["C8, C12", "C8, C12", "C12"] and frame["repeat"].tolist() == [False, True, False]


# ----------------------------------------------------------------------------- conditions
def _r(verdict: str, effect: float, lo: float, hi: float, reasons=(), delta=0.02) -> PartResult:
    return PartResult({"delta": delta}, verdict, list(reasons), effect=effect, lo95=lo, hi95=hi, n_runs=10)


def test_conditions_travel_with_the_verdict():
    """C8's W_V pair: contradicted under the scaled (registered) and tied readouts, inconclusive
    under a learned one; C10 T4a: inconclusive, with the sign reversed under the tied readout;
    a verdict that holds everywhere says nothing."""
    main = _r(CONTRADICTED, 0.0305, 0.025, 0.036)
    text = render.conditions(stability.conditions(main, {"readout=learned": _r(INCONCLUSIVE, 0.0225, 0.016, 0.029,
                                                              [Reason(Rule.ONE_SIDED_OPEN, values=(0.027, 0.016))]),
                                       "readout=tied": _r(CONTRADICTED, 0.044, 0.035, 0.052)}, "scaled"))
    assert text == ("contradicted under the scaled and tied readouts; not shown under the learned readout (the "
                    "interval decides neither way; d = 0.0225 [0.016, 0.029], excluding the main estimate 0.0305)")
    flipped = render.conditions(stability.conditions(_r(INCONCLUSIVE, 0.020, 0.014, 0.027),
                                   {"readout=tied": _r(SUPPORTED, -0.022, -0.042, -0.002), "x4": _r(INCONCLUSIVE, 0.02, 0.01, 0.03)},
                                   "scaled"))
    assert flipped == ("inconclusive under the scaled readout and at ×4 budget; supported under the tied readout "
                       "(d = -0.022 [-0.042, -0.002], excluding the main estimate 0.02)")
    reversed_ = render.conditions(stability.conditions(_r(SUPPORTED, 0.2, 0.1, 0.3),
                                                       {"x4": _r(CONTRADICTED, -0.1, -0.2, -0.05)}))
    assert reversed_.startswith("supported as registered; reversed under ×4 budget (contradicted")
    assert stability.conditions(main, {"x4": _r(CONTRADICTED, 0.03, 0.02, 0.04)}, "scaled") is None
    moved = stability.conditions(main, {"readout=learned": _r(INCONCLUSIVE, 0.0225, 0.016, 0.029,
                                                              [Reason(Rule.ONE_SIDED_OPEN, values=(0.027, 0.016))]),
                                        "readout=tied": _r(CONTRADICTED, 0.044, 0.035, 0.052)}, "scaled")
    assert render.conditions(moved, details=False) == ("contradicted under the scaled and tied readouts; not shown under the "
                                       "learned readout")
    assert render.short_label({"name": "(a) selection: adding W_V", "a": "value", "b": "softmax", "task": "t"}) \
        == "(a) selection, `value` vs `softmax`"
    assert render.short_label({"name": "teacher (T3f′ squashed: ψ after) reverses", "a": "coordwise",
                                 "b": "softmax", "task": "t"}) == "`coordwise` vs `softmax` on t"


# ----------------------------------------------------------------------------- only weaker
def _random_frame(rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    n_seeds = int(rng.choice([5, 10]))
    level = 10 ** rng.uniform(-3, -0.7)
    gap = rng.choice([0.0, 0.5, 1.0, 3.0]) * level * rng.choice([-1, 1])
    noise = rng.normal(0, rng.uniform(0.02, 0.3) * level, (2, n_seeds))
    arms = {"a": level + noise[0], "b": np.clip(level + gap + noise[1], 1e-6, None), "w": level * 20 + noise[0]}
    arms = {k: np.abs(v) for k, v in arms.items()}
    val = {k: v.copy() for k, v in arms.items()}
    for arm in ("a", "b"):  # some seeds blow up at the chosen lr
        blown = rng.random(n_seeds) < rng.choice([0.0, 0.2, 0.4])
        arms[arm] = np.where(blown, rng.uniform(1.5, 8.0, n_seeds), arms[arm])
        val[arm] = np.where(blown, arms[arm], val[arm])
    test = rng.choice(["difference", "equivalence"])
    spec = _part(test=str(test), sides=int(rng.choice([1, 2])), delta=float(rng.choice([0.5, 1.0, 3.0]) * level),
                 control=["a", "w"])
    return _frame({k: list(v) for k, v in arms.items()}, val={k: list(v) for k, v in val.items()}), spec


def test_no_new_rule_turns_an_undecided_part_into_a_decided_one(monkeypatch):
    """Over 24 random frames (numpy, fixed seed: random levels, gaps, spreads, seed counts,
    blown-up seeds, tests and margins), a part decided with every rule of issue 45 is either
    inconclusive or has the verdict the protocol gave without them (blow-ups ignored, no
    resolution limit); and the rules do void some verdicts (the test is not vacuous)."""
    rng = np.random.default_rng(45)
    frames = [_random_frame(rng) for _ in range(24)]
    now = [protocol.decide_part(df, spec, check_edge=i % 2 == 0) for i, (df, spec) in enumerate(frames)]
    monkeypatch.setattr(protocol, "_resolve_limit", lambda result, explored: None)
    before = [protocol.decide_part(df.assign(blowup=False), spec, check_edge=i % 2 == 0)
              for i, (df, spec) in enumerate(frames)]
    voided = 0
    for new, old in zip(now, before):
        assert new.verdict in (INCONCLUSIVE, old.verdict), (new.reasons, old.reasons)
        voided += new.verdict == INCONCLUSIVE and old.verdict != INCONCLUSIVE
    assert voided >= 3, voided


# ----------------------------------------------------------------------------- today's bundle
@pytest.mark.integration
def test_todays_bundle_c12b_shows_delta_and_c9_control_counts_its_blown_up_runs(hydra_conf):
    """On the committed bundle (seeds 3000-3009 in stages): C12(b) (1/√d1, steps-to-target 1e-6
    since issue 51; at 0.003 it read *inconclusive: the measurement cannot show δ*) passes the
    resolution rule and is decided, and C9′ (B7 vs M4 on T3f′) counts the 4 blown-up runs of its
    block (the 2000-2009 block's verdict was decided by 3) and stops inconclusive at its second
    look, the effect about δ."""
    from hydra import compose

    from analysis.bundle import read_bundle, split
    from analysis.confirm import with_recorded_block

    bundle = read_bundle(ROOT / "docs" / "report" / "runs.csv.gz")
    runs, _ = split(bundle)
    got = {}
    for name in ("control", "practical"):  # the bundle's block is spent: it reads its recorded seeds
        conf = with_recorded_block({name: compose(config_name="config", overrides=[f"+ablation={name}"])}, bundle)[name]
        df = stats.add_error(runs[name])
        df = df[pd.to_numeric(df["train.max_steps"]) <= int(conf.train.max_steps)]
        for part in conf.ablation.parts:
            spec = protocol.spec_dict(part)
            if spec["role"] == "deciding" and (spec["task"] == "teacher_squashed" or "1/√d1" in spec["name"]):
                first, block = verdicts.decide_both(conf, df, part)
                got[spec["task"]] = block
    assert got["teacher_squashed"].verdict == INCONCLUSIVE
    assert got["teacher_squashed"].reasons[0].rule is Rule.ABOUT_DELTA and got["teacher_squashed"].blowups == 4
    c12b = next(r for t, r in got.items() if t != "teacher_squashed")
    assert c12b.verdict == SUPPORTED and c12b.preconditions[Step.RESOLUTION].ok, c12b.reasons


def test_blown_up_runs_are_tagged_in_the_store():
    """Each blown-up run gets the tag ``blowup=true`` through the MLflow client, no other run."""
    df = _frame({"a": [0.30, 0.31, 6.2, 0.29, 0.30]}).assign(run_id=lambda d: "r" + d.index.astype(str))

    class Client:
        tags: list = []

        def set_tag(self, run_id, key, value):
            self.tags.append((run_id, key, value))

    client = Client()
    assert verdicts.tag_blowups(client, {"x": df}) == int(df["blowup"].sum()) >= 1
    assert client.tags == [(r, "blowup", "true") for r in df.loc[df["blowup"], "run_id"]]
