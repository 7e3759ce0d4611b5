"""The verdict protocol of paper.md §13 (analysis/protocol.py, analysis/stats.py) on synthetic
runs tables with known answers: t-interval and TOST against known values, each precondition
triggered, pooled axes refused, and the runs restricted to an ablation's own trials."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from analysis import protocol, render, stats
from analysis.decision import Method, Rule, Step
from analysis.protocol import CONTRADICTED, INCONCLUSIVE, SUPPORTED
from analysis.trials import arm_label, restrict, swept_axes
from harness.expansion import Trial

SEEDS = range(5)


def _pre(result: protocol.PartResult, step: Step) -> str:
    """A precondition's status as the report prints it."""
    return render.check(step, result.preconditions[step])


LRS = (0.001, 0.003, 0.01)
NOISE = (0.0, 0.004, -0.003, 0.002, -0.004)  # per seed, shared by both arms (paired)


def _runs(errors: dict[str, float], sizes=(64, 256), best_lr=0.003, reference=0.6, **extra) -> pd.DataFrame:
    """Runs of arms with the given test error at the best lr (others +0.05 on validation and
    test), the same per-seed noise for every arm, a flat budget and a uniform-mixing reference."""
    rows = []
    for arm, err in errors.items():
        for lr in LRS:
            for n in sizes:
                for s in SEEDS:
                    e = err + NOISE[s] * (1 + 0.1 * (arm == "b")) + (0 if np.isclose(lr, best_lr) else 0.05) \
                        + (0.02 if n == sizes[0] and len(sizes) > 1 else 0)
                    rows.append({"status": "FINISHED", "diverged": False, "task": "t", "arm": arm,
                                 "variant": arm, "task.n_train": n, "seed": s, "train.lr": lr,
                                 "trial_id": f"{arm}-{lr}-{n}-{s}", "val/best_error": e,
                                 "val/best_loss": e, "test/rel_mse": e, "test/uniform_rel_mse": reference,
                                 "val/best_error_at_80": e, "val/best_error_at_90": e,
                                 "val/evals_last_20": 6.0, **extra})
    return stats.add_error(pd.DataFrame(rows))


def _part(**kw) -> dict:
    return {"claim": "C0", "name": "p", "task": "t", "a": "a", "b": "b", "test": "difference",
            "delta": 0.02, **kw}


def test_t_interval_and_tost_against_known_values():
    mean, lo, hi = stats.t_interval([1, 2, 3, 4, 5])
    # mean 3, sd = sqrt(2.5), t(0.975, 4) = 2.776445
    assert (mean, lo, hi) == pytest.approx((3.0, 3 - 2.776445 * np.sqrt(2.5 / 5), 3 + 2.776445 * np.sqrt(2.5 / 5)),
                                           abs=1e-5)
    assert np.isnan(stats.t_interval([2.0])[1:]).all()  # no interval from one seed
    d = [0.01, -0.02, 0.0, 0.015, -0.005]
    res = stats.tost(d, 0.05)  # 90% interval: mean 0 ± t(0.95, 4) · sd/√5
    half = 2.131847 * np.std(d, ddof=1) / np.sqrt(5)
    assert (res["lo"], res["hi"]) == pytest.approx((0.0 - half, 0.0 + half), abs=1e-7)
    assert res["equivalent"] and res["p"] < 0.05
    assert not stats.tost(d, 0.01)["equivalent"]  # the 90% interval crosses ±0.01
    with pytest.raises(ValueError, match="margin"):
        stats.tost(d, 0.0)


def test_difference_and_equivalence_verdicts():
    df = _runs({"a": 0.10, "b": 0.30})
    assert protocol.decide_part(df, _part()).verdict == SUPPORTED
    assert protocol.decide_part(df, _part(a="b", b="a")).verdict == CONTRADICTED
    two = protocol.decide_part(df, _part(test="equivalence", sides=2))
    assert two.verdict == CONTRADICTED and two.method is Method.TOST90 and render.method(two.method, two.method_p).startswith("TOST")
    close = _runs({"a": 0.100, "b": 0.101, "w": 0.3})  # w: the positive control's worse arm
    assert protocol.decide_part(close, _part(test="equivalence", sides=2, control=["a", "w"])).verdict == SUPPORTED
    # one-sided: a does not beat b by δ or more: true when a is worse, false when far better
    assert protocol.decide_part(_runs({"a": 0.3, "b": 0.1}), _part(test="equivalence", sides=1, delta=0.02,
                                reference=0.9)).verdict in (SUPPORTED, INCONCLUSIVE)
    assert protocol.decide_part(df, _part(test="equivalence", sides=1)).verdict == CONTRADICTED
    result = protocol.decide_part(df, _part())
    assert result.sizes == (256,) and result.paired == (0, 1, 2, 3, 4) and result.expected == 5
    assert render.seeds(result.paired, result.expected) == "0–4 (5 of 5)"
    assert result.effect == pytest.approx(0.2, abs=0.01)
    assert all(c.ok for c in result.preconditions.values())


def test_an_inconclusive_one_sided_part_names_both_bounds_against_delta():
    near = protocol.decide_part(_runs({"a": 0.10, "b": 0.12}), _part(test="equivalence", sides=1))
    assert near.verdict == INCONCLUSIVE and near.lo < 0.02 < near.hi  # the printed (90%) interval straddles δ
    [reason] = near.reasons
    assert reason.rule is Rule.ONE_SIDED_OPEN and reason.values[0] == near.hi
    why = render.reason(reason)
    assert f"upper bound {near.hi:.3g} is not below δ" in why and "95% lower bound" in why and "above it" in why


def test_not_learned_makes_a_part_inconclusive():
    at_chance = _runs({"a": 0.59, "b": 0.80})  # the better arm is within δ of uniform mixing (0.6)
    result = protocol.decide_part(at_chance, _part())
    assert result.verdict == INCONCLUSIVE
    assert result.preconditions[Step.NOT_LEARNED].fails
    assert any(r.rule is Rule.NOT_LEARNED for r in result.reasons)
    # rel MSE above 1 everywhere: the zero predictor (1.0) is the best reference
    worse_than_zero = _runs({"a": 1.5, "b": 2.5}, reference=4.0)
    assert "zero predictor" in _pre(protocol.decide_part(worse_than_zero, _part()), Step.NOT_LEARNED)
    # a teacher with a residual path: predicting the input (0.25) is the bar, not uniform mixing
    residual = _runs({"a": 0.24, "b": 0.5}, reference=0.9, **{"test/identity_rel_mse": 0.25})
    result = protocol.decide_part(residual, _part())
    assert result.verdict == INCONCLUSIVE and "identity 0.25" in _pre(result, Step.NOT_LEARNED)
    assert protocol.decide_part(_runs({"a": 0.1, "b": 0.5}, reference=0.9, **{"test/identity_rel_mse": 0.25}),
                                _part()).preconditions[Step.NOT_LEARNED].ok


def test_budget_limited_makes_a_part_inconclusive():
    df = _runs({"a": 0.10, "b": 0.30})
    df.loc[df["arm"] == "a", "val/best_error_at_80"] += 0.05  # still falling by > δ/2 …
    df.loc[df["arm"] == "a", "val/best_error_at_90"] += 0.02  # … within the last 10%
    result = protocol.decide_part(df, _part(test="equivalence", sides=1))  # a falls: d could move either way
    assert result.verdict == INCONCLUSIVE and result.preconditions[Step.BUDGET].failures[0].rule is Rule.BUDGET_FALLING
    # direction-aware: in a supported difference a's late fall can only widen it; b's could close it
    assert protocol.decide_part(df, _part()).verdict == SUPPORTED
    assert protocol.decide_part(df, _part(a="b", b="a")).verdict == CONTRADICTED  # the lower arm falls: wider still
    closing = _runs({"a": 0.10, "b": 0.30})
    closing.loc[closing["arm"] == "b", "val/best_error_at_80"] += 0.05  # the higher arm still falls …
    closing.loc[closing["arm"] == "b", "val/best_error_at_90"] += 0.02  # … and could close the gap
    assert protocol.decide_part(closing, _part()).verdict == INCONCLUSIVE
    df0 = df.copy()
    df0.loc[df0["arm"] == "a", "val/best_error"] = 0.0  # an arm at 0 cannot fall further
    assert protocol.decide_part(df0, _part(test="equivalence", sides=1)).preconditions[Step.BUDGET].ok
    few = _runs({"a": 0.10, "b": 0.30}, **{"val/evals_last_20": 2.0})
    assert "cannot judge" in _pre(protocol.decide_part(few, _part()), Step.BUDGET)


def test_lr_at_grid_edge_makes_a_part_inconclusive_and_names_the_extension():
    df = _runs({"a": 0.10, "b": 0.30}, best_lr=0.01)  # the largest lr of the grid
    result = protocol.decide_part(df, _part())
    assert result.verdict == INCONCLUSIVE and "largest" in _pre(result, Step.LR_EDGE)
    assert {(e["arm"], e["side"], e["lr"]) for e in result.edges} == {("a", "high", 0.01), ("b", "high", 0.01)}
    assert all(len(e["trial_ids"]) == 5 for e in result.edges)
    # a stated bound is accepted
    assert protocol.decide_part(df, _part(lr_bound=0.01)).preconditions[Step.LR_EDGE].ok
    # the next value past the edge diverged on a seed: the edge is accepted
    beyond = df[df["train.lr"] == 0.01].assign(**{"train.lr": 0.0316, "diverged": False})
    beyond.loc[beyond["seed"] == 0, "diverged"] = True
    extended = pd.concat([df, beyond], ignore_index=True)
    assert protocol.decide_part(extended, _part()).preconditions[Step.LR_EDGE].ok


def test_an_edge_lr_that_won_only_the_tie_break_does_not_bind():
    """Arm a reaches validation error 0 at every lr and the validation loss prefers the largest:
    the edge decided nothing an inner lr did not reach, so *lr at grid edge* passes; with the
    inner lr 0.05 worse on validation error it fails as before."""
    df = _runs({"a": 0.10, "b": 0.30})
    a = df["arm"] == "a"
    df.loc[a, "val/best_error"] = 0.0
    df.loc[a, "val/best_loss"] = 1.0 / df.loc[a, "train.lr"]  # the largest lr has the smallest loss
    result = protocol.decide_part(df, _part())
    assert result.preconditions[Step.LR_EDGE].ok and result.edges == []
    assert result.lr["a @ 256"].ties == (0.001, 0.003), result.lr
    assert "tied on validation error with 0.001, 0.003" in render.lr_choice(result.lr["a @ 256"])
    df.loc[a & (df["train.lr"] < max(LRS)), "val/best_error"] = 0.05
    result = protocol.decide_part(df, _part())
    assert "largest" in _pre(result, Step.LR_EDGE)


def test_selection_uses_validation_error_and_skips_diverged_lrs():
    df = _runs({"a": 0.10, "b": 0.30})
    # at lr 0.01 arm a looks best on test but worse on validation: validation decides
    df.loc[(df["arm"] == "a") & (df["train.lr"] == 0.01), "test/rel_mse"] = 0.0
    chosen = stats.select_lr(df, group=("task", "arm", "task.n_train"))
    assert set(chosen[chosen["arm"] == "a"]["lr_chosen"]) == {0.003}
    df.loc[(df["arm"] == "a") & (df["seed"] == 1), "diverged"] = True  # every lr of a has a diverged seed
    result = protocol.decide_part(df, _part())
    assert result.verdict == INCONCLUSIVE and Rule.DIVERGED in [r.rule for r in result.reasons]


def test_missing_pairs_are_counted_not_dropped_silently():
    df = _runs({"a": 0.10, "b": 0.30})
    df.loc[(df["arm"] == "b") & (df["seed"] == 4), "status"] = "FAILED"
    result = protocol.decide_part(df, _part())
    assert result.paired == (0, 1, 2, 3) and render.seeds(result.paired, result.expected) == "0–3 (4 of 5)"


def test_pooled_axes_are_refused():
    df = _runs({"a": 0.10, "b": 0.30})
    pooled = pd.concat([df, df.assign(trial_id=df["trial_id"] + "-sgd")], ignore_index=True)
    result = protocol.decide_part(pooled, _part())
    assert result.verdict == INCONCLUSIVE and result.reasons[0].rule is Rule.POOLED


def test_auc_part_pairs_seeds_across_sizes():
    df = _runs({"a": 0.10, "b": 0.30}, sizes=(64, 256, 1024))
    result = protocol.decide_part(df, _part(value="auc", delta=0.1))
    assert result.verdict == SUPPORTED and result.sizes == (64, 256, 1024)
    assert result.effect == pytest.approx(np.log(0.3) - np.log(0.1), abs=0.05)
    one = protocol.decide_part(_runs({"a": 0.1, "b": 0.3}, sizes=(256,)), _part(value="auc", delta=0.1))
    assert one.verdict == INCONCLUSIVE and "≥ 2 sizes" in render.reason(one.reasons[0])


def test_claim_verdict_from_deciding_parts_only():
    def r(verdict, role="deciding"):
        return protocol.PartResult({"role": role}, verdict)
    assert protocol.combine([r(SUPPORTED), r(CONTRADICTED, "sanity")]).verdict == SUPPORTED
    mixed = protocol.combine([r(SUPPORTED), r(INCONCLUSIVE)])
    assert mixed.verdict == INCONCLUSIVE and mixed.counts == ((SUPPORTED, 1), (INCONCLUSIVE, 1)) and mixed.deciding == 2
    assert protocol.combine([r(SUPPORTED), r(CONTRADICTED)]).verdict == CONTRADICTED
    none = protocol.combine([r(SUPPORTED, "sanity")])
    assert none.verdict == INCONCLUSIVE and none.deciding == 0
    assert render.combined(none) == "no deciding part in this suite"
    assert render.combined(mixed) == "1 supported, 1 inconclusive of 2 deciding parts"


def _trial(tid: str, variant: str, *overrides: str, extends: str = "") -> Trial:
    return Trial(tid, variant, tuple(overrides), None, "t", extends)


def test_runs_are_restricted_to_the_ablations_trials_and_labelled_by_arm():
    trials = [_trial(f"{m}{r}{o}{s}", m, f"model={m}", f"task.rotation={r}", f"train.optimizer={o}",
                     f"seed={s}", "train.lr=0.05")
              for m in ("softmax", "mlp") for r in ("eval", "none") for o in ("sgd", "adam") for s in (0,)]
    assert swept_axes(trials) == ["task.rotation", "train.optimizer"]
    assert arm_label(trials[0], swept_axes(trials)) == "softmax · rotation=eval · optimizer=sgd"
    runs = pd.DataFrame({"trial_id": [t.trial_id for t in trials] + ["other", "ext"],
                         "extends": [""] * len(trials) + ["", trials[0].trial_id],
                         "status": "FINISHED"})
    out = restrict(runs, trials, "rotation")
    assert "other" not in set(out["trial_id"])  # a run made with other overrides is never mixed in
    assert len(out) == len(trials) + 1
    assert out.set_index("trial_id").loc["ext", "arm"] == "softmax · rotation=eval · optimizer=sgd"
    assert out["arm"].nunique() == 8  # one arm per mode × optimiser × model: nothing pooled


def test_extension_trials_step_past_the_edge_with_the_grid_trials_arm(hydra_conf):
    """The report reruns an edge lr one step further (×√10), per seed, tagged with the grid
    trial it extends (paper.md §13 *lr at grid edge*)."""
    from hydra import compose

    from analysis.rounds import extension_trials as _extension_trials
    from harness.expansion import expand

    cli = ["+ablation=knowledge_size", "scale=tiny"]
    trials = expand(compose(config_name="config", overrides=cli), cli)
    grid = [t for t in trials if t.variant == "softmax_free[k=4]" and t.task == "teacher"]
    edge = {"task": "teacher", "arm": "softmax_free[k=4]", "n_train": 64, "side": "high", "lr": 0.01,
            "trial_ids": [t.trial_id for t in grid], "extends": [""] * len(grid)}
    known = {t.trial_id: t for t in trials}
    new = _extension_trials([edge], known, cli)
    assert len(new) == len(grid) == 2  # one per seed
    assert {t.config.train.lr for t in new} == {0.0316}
    assert {t.extends for t in new} == {t.trial_id for t in grid}
    assert {t.variant for t in new} == {"softmax_free[k=4]"}
    assert {t.phase for t in new} == {"lr_extension"}  # the round's phase rides on the trial, not its id
    untagged = [dataclasses.replace(t, phase="") for t in new]
    assert [t.trial_id for t in untagged] == [t.trial_id for t in new] and untagged == new
    assert {(t.config.seed, t.config.task.n_train) for t in new} == {(t.config.seed, 64) for t in grid}
    low = _extension_trials([{**edge, "side": "low"}], known, cli)
    assert {t.config.train.lr for t in low} == {0.00316}
    # the zoo's and the scorecard's cap: a high edge whose next step passes lr_max is not extended
    assert _extension_trials([edge], known, cli, lr_max=0.0316) == new  # 0.01·√10 prints as 0.0316: at the cap
    assert _extension_trials([edge], known, cli, lr_max=0.02) == []
    assert len(_extension_trials([{**edge, "side": "low"}], known, cli, lr_max=0.001)) == 2  # low side uncapped


def test_lr_cap_rounds_reach_three_from_the_grids_top():
    """issue 63: from 0.03 the rounds go 0.0949, 0.3, 0.949, 3 and stop; 3 printed from 0.949·√10
    (3.0009) is the cap, not past it."""
    from analysis.rounds import at_cap, steps_to

    assert steps_to(0.03, 3.0) == 4 and steps_to(3.0, 3.0) == 0 and steps_to(0.3, 3.0) == 2
    assert not at_cap(0.949, 3.0) and at_cap(3.0, 3.0) and not at_cap(3.0, None)
    with pytest.raises(ValueError, match="lr=0"):
        steps_to(0, 3.0)


def test_a_row_at_the_lr_cap_reads_needs_a_larger_lr():
    from analysis.decision import Reason, Rule
    from analysis.scorecard import _at_cap

    at = Reason(Rule.LR_LARGEST, arm="s4d", n_train=256, values=(3.0, 0.3, 0.949, 3.0))
    assert _at_cap([at]) == "needs lr > 3.0: `s4d` at n_train=256 chose 3, the largest tried"
    below = Reason(Rule.LR_LARGEST, arm="s4d", n_train=256, values=(0.949, 0.3, 0.949))
    assert _at_cap([below]) == "" and _at_cap([]) == ""
    assert _at_cap([Reason(Rule.DIVERGED, arm="s4d"), at]) == ""  # another rule leaves the row open first


def test_choose_b_picks_the_arm_with_the_lowest_validation_error_never_test():
    """C10: the best elementwise σ is chosen on validation (paper.md §13), then decided as b."""
    df = _runs({"a": 0.10, "exp": 0.11, "tanh": 0.40, "relu": 0.12})
    # relu looks best on test but not on validation: validation decides
    df.loc[df["arm"] == "relu", "test/rel_mse"] = 0.0
    df = stats.add_error(df)
    result = protocol.decide_part(df, _part(b="best σ", choose_b=["exp", "tanh", "relu"],
                                            test="equivalence", sides=1))
    assert result.spec["b"] == "exp" and result.choice.best == "exp" and result.choice.among == ("exp", "tanh", "relu")
    assert "`exp`" in render.choice(result.choice) and "validation" in render.choice(result.choice)
    assert result.mean_b == pytest.approx(0.11, abs=0.01)
    best, why = protocol.choose_arm(df, "t", ["tanh", "relu"])
    assert best == "relu" and why.n_train == 256 and "n_train=256" in render.choice(why)


def test_budget_reruns_lengthen_the_chosen_lr_and_are_kept_apart(hydra_conf):
    """The budget ablation reruns each deciding part's arms at ×factor steps at the chosen lr
    and the decided size; those runs never enter the main verdicts (analysis/budget.py)."""
    from hydra import compose

    from analysis.budget import budget_trials, compare, split_budget
    from analysis.render_tables import budget as budget_lines
    from analysis.trials import restrict
    from harness.expansion import expand

    cli = ["+ablation=residual_value", "scale=tiny"]
    conf = compose(config_name="config", overrides=cli)
    trials = expand(conf, cli)
    rows = []
    for t in trials:  # value beats softmax everywhere; the residual beats value on its teacher
        err = {"softmax": 0.3, "value": 0.2, "residual": 0.05, "multihead": 0.06, "softmax_narrow": 0.5}[t.variant]
        err += 0.002 * t.config.seed
        rows.append({"trial_id": t.trial_id, "status": "FINISHED", "diverged": False, "task": t.task,
                     "variant": t.variant, "task.n_train": t.config.task.n_train, "seed": t.config.seed,
                     "train.lr": t.config.train.lr, "train.max_steps": t.config.train.max_steps,
                     "val/best_error": err, "val/best_loss": err, "test/rel_mse": err,
                     "test/uniform_rel_mse": 0.9, "val/best_error_at_80": err, "val/best_error_at_90": err,
                     "val/evals_last_20": 6.0})
    runs = stats.add_error(restrict(pd.DataFrame(rows), trials, "residual_value"))
    new = budget_trials({"residual_value": conf}, {"residual_value": runs},
                        {"residual_value": trials}, ["scale=tiny"], factor=4)["residual_value"]
    deciding = [p for p in conf.ablation.parts if p.role.value == "deciding"]
    # each deciding part's 2 arms and its positive control's (an arm shared with the part once), 2 seeds each
    arms = {(p.task, arm) for p in deciding for arm in (p.a, p.b, *p.control)}
    assert len(new) == len(arms) * 2 and {t.variant for t in new} <= {arm for _, arm in arms}
    assert {t.config.train.max_steps for t in new} == {4 * conf.train.max_steps}
    assert {t.config.train.eval_every for t in new} == {4 * conf.train.eval_every}
    known = {t.trial_id: t for t in trials}
    for t in new:  # same point as the trial it extends, only longer
        base = known[t.extends]
        assert (t.variant, t.task, t.config.seed, t.config.task.n_train, t.config.train.lr) == \
            (base.variant, base.task, base.config.seed, base.config.task.n_train, base.config.train.lr)
    longer = pd.DataFrame([{**r, "trial_id": t.trial_id, "extends": t.extends, "train.max_steps": 4 * r["train.max_steps"]}
                           for t in new for r in rows if r["trial_id"] == t.extends])
    both = stats.add_error(restrict(pd.concat([pd.DataFrame(rows), longer]), trials, "residual_value"))
    main, extra = split_budget(both, conf.train.max_steps)
    assert len(main) == len(trials) and len(extra) == len(new)
    lines = budget_lines(compare({"residual_value": conf}, {"residual_value": main}, {"residual_value": extra}), 4)
    assert len(lines) == 2 + len(deciding), lines
    assert all("| no |" in line for line in lines[2:]), lines


def test_error_at_a_test_length_reads_that_length_and_its_own_reference():
    """value = error_n64: 1 − test/n_64/acc, judged against the majority class at n = 64."""
    df = _runs({"a": 0.10, "b": 0.30})
    df["test/n_64/acc"] = 1 - df["test/rel_mse"] * 2  # a: 0.8, b: 0.4
    df["test/n_64/majority_acc"] = 0.5
    result = protocol.decide_part(df, _part(value="error_n64"))
    assert result.mean_a == pytest.approx(0.2, abs=0.02) and result.mean_b == pytest.approx(0.6, abs=0.02)
    assert result.verdict == SUPPORTED and result.preconditions[Step.NOT_LEARNED].ok
    df["test/n_64/majority_acc"] = 0.81  # the reference at n = 64 is better than arm a there
    assert "majority class at n = 64" in _pre(protocol.decide_part(df, _part(value="error_n64")), Step.NOT_LEARNED)
    missing = protocol.decide_part(_runs({"a": 0.1, "b": 0.3}), _part(value="error_n64"))
    assert missing.verdict == INCONCLUSIVE and missing.reasons[0].names == ("test/n_64/acc",)


def test_p_for_contradiction_matches_the_interval_rules():
    """p < 0.05 exactly when the part's 95% interval contradicts (paper.md §13, step 5)."""
    rng = np.random.default_rng(0)
    for spec in (_part(), _part(test="equivalence", sides=1), _part(test="equivalence", sides=2)):
        for shift in np.linspace(-0.06, 0.06, 25):
            d = shift + 0.01 * rng.standard_normal(5)
            verdict = protocol._test(d, spec)[0]
            assert (protocol.p_contradiction(d, spec) < protocol.ALPHA) == (verdict == CONTRADICTED), (spec, shift)
    assert np.isnan(protocol.p_contradiction(np.array([0.1]), _part()))


def test_holm_matches_the_published_step_down_values():
    # Holm (1979) by hand: sorted 0.01, 0.02, 0.04 → ×3, ×2, ×1 = 0.03, 0.04, 0.04 (running max)
    assert protocol.holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert protocol.holm([0.5, np.nan]) == pytest.approx([1.0, 1.0])  # NaN counts as 1, capped at 1


def test_holm_removes_a_contradiction_of_a_three_part_claim():
    """One part of three is contradicted at p ≈ 0.03 (95% interval just below 0): unadjusted the
    claim would be contradicted; Holm multiplies its p by 3, so the claim is inconclusive and
    says why. A strong contradiction (p ≈ 1e-4) survives the correction."""
    def part(d, name):
        r = protocol.PartResult({"role": "deciding", "test": "difference", "delta": 0.02, "name": name},
                                SUPPORTED if stats.t_interval(d)[1] > 0 else
                                CONTRADICTED if stats.t_interval(d)[2] < 0 else INCONCLUSIVE)
        r.p = protocol.p_contradiction(np.asarray(d), r.spec)
        return r
    weak = [-0.02, -0.01, -0.015, -0.03, -0.002]
    assert stats.t_interval(weak)[2] < 0 and 0.01 < protocol.p_contradiction(np.array(weak), _part()) < 0.05
    parts = [part(weak, "weak"), part([0.1, 0.12, 0.09, 0.11, 0.1], "s1"), part([0.2, 0.21, 0.19, 0.2, 0.22], "s2")]
    assert parts[0].verdict == CONTRADICTED
    assert protocol.combine(parts).verdict == CONTRADICTED  # unadjusted (p_holm not filled)
    protocol.adjust(parts)
    assert parts[0].p_holm == pytest.approx(3 * parts[0].p)
    combined = protocol.combine(parts)
    assert combined.verdict == INCONCLUSIVE and combined.holm_removed == 1
    assert combined.counts == ((SUPPORTED, 2), (INCONCLUSIVE, 1))  # the removed part counts as inconclusive
    why = render.combined(combined)
    assert "1 contradicted before Holm" in why and "2 supported" in why
    strong = [part([-0.1, -0.11, -0.09, -0.1, -0.12], "strong"), *parts[1:]]
    protocol.adjust(strong)
    assert protocol.combine(strong).verdict == CONTRADICTED
    assert render.combined(protocol.combine(strong)).endswith("(contradicted after Holm's correction)")


def test_an_equivalence_carries_its_90_and_95_percent_intervals():
    result = protocol.decide_part(_runs({"a": 0.10, "b": 0.101}), _part(test="equivalence", sides=1))
    assert result.lo95 < result.lo < result.hi < result.hi95  # the 95% interval contains the 90% one
    assert result.p == pytest.approx(1.0) or result.p > 0.05


def test_a_part_carries_both_arms_parameter_counts():
    df = _runs({"a": 0.10, "b": 0.30})
    df["n_params"] = df["arm"].map({"a": 2061.0, "b": 1349.0})
    assert protocol.decide_part(df, _part()).params == {"a": 2061.0, "b": 1349.0}
    assert protocol.decide_part(_runs({"a": 0.10, "b": 0.30}), _part()).params == {}  # not logged: none shown


def test_an_equivalence_without_power_is_inconclusive():
    """paper.md §13 "Power for equivalences": the positive control must be contradicted by the
    same test; both arms at 0, or both at a floor arm's error, decide nothing; a contradicted
    equivalence needs no power."""
    df = _runs({"a": 0.100, "b": 0.101, "w": 0.3, "same": 0.102})
    eq = dict(test="equivalence", sides=1)
    ok = protocol.decide_part(df, _part(**eq, control=["a", "w"]))
    assert ok.verdict == SUPPORTED and ok.preconditions[Step.NO_POWER].ok and ok.control.verdict == CONTRADICTED
    none = protocol.decide_part(df, _part(**eq))
    assert none.verdict == INCONCLUSIVE and none.test_alone == SUPPORTED
    assert [r.rule for r in none.preconditions[Step.NO_POWER].failures] == [Rule.NO_CONTROL]
    weak = protocol.decide_part(df, _part(**eq, control=["a", "same"]))  # a "known-different" pair that is not
    assert weak.verdict == INCONCLUSIVE and "positive control not contradicted" in _pre(weak, Step.NO_POWER)
    floor = protocol.decide_part(df, _part(**eq, control=["a", "w"], floor="same"))
    assert floor.verdict == INCONCLUSIVE and "floor arm `same`" in _pre(floor, Step.NO_POWER)
    absent = protocol.decide_part(df, _part(**eq, control=["a", "nobody"], floor="nothing"))
    assert "no runs of `nobody`" in render.control(absent.control)
    assert "floor arm `nothing` has no runs" in _pre(absent, Step.NO_POWER)
    zero = _runs({"a": 0.001, "b": 0.002, "w": 0.3}, reference=0.6)
    at_zero = protocol.decide_part(zero, _part(**eq, control=["a", "w"]))
    assert at_zero.verdict == INCONCLUSIVE and "within δ of 0 error" in _pre(at_zero, Step.NO_POWER)
    far = protocol.decide_part(_runs({"a": 0.1, "b": 0.3}), _part(**eq))  # a beats b by far: no power needed
    assert far.verdict == CONTRADICTED and all(r.rule.step is not Step.NO_POWER for r in far.reasons)
    assert Step.NO_POWER not in protocol.decide_part(df, _part()).preconditions  # differences: not a precondition


def test_a_part_reads_only_its_registered_readout():
    """Token tasks (paper.md §13 "Readout"): runs under another readout are stability rows and
    never enter the verdict (they would otherwise pool two runs per seed)."""
    scaled, tied = _runs({"a": 0.10, "b": 0.30}), _runs({"a": 0.30, "b": 0.10})
    both = pd.concat([scaled.assign(**{"task.readout": "scaled"}),
                      tied.assign(**{"task.readout": "tied", "trial_id": tied["trial_id"] + "-tied"})], ignore_index=True)
    assert protocol.decide_part(both, _part(readout="scaled")).verdict == SUPPORTED
    assert protocol.decide_part(both, _part(readout="tied")).verdict == CONTRADICTED
    assert protocol.decide_part(both, _part()).reasons[0].rule is Rule.POOLED
    assert "under readout learned" in render.reason(protocol.decide_part(both, _part(readout="learned")).reasons[0])


def _steps_runs(first: dict[str, list[float]], budget: float = 600.0) -> pd.DataFrame:
    """Runs whose ``val/first_step_below/0.003`` per seed is ``first[arm]`` (``-1``: never), at
    the best lr of :func:`_runs` (other lrs reach it later, and have a higher validation error)."""
    df = _runs({arm: 0.001 for arm in first}, sizes=(256,))
    best = np.isclose(df["train.lr"], 0.003)
    step = [first[arm][s] for arm, s in zip(df["arm"], df["seed"])]
    df["val/first_step_below/0.003"] = np.where(best, step, -1.0)
    df["train.max_steps"] = budget
    return df


def test_steps_to_target_is_a_fraction_of_the_budget_and_never_reached_counts_as_it():
    """paper.md §13 C12(b): steps-to-target; a run that never reaches the target within its
    budget (recorded as -1) counts as the whole budget, a run that recorded nothing is not
    usable (NaN), and a target nobody recorded is refused by name."""
    df = pd.DataFrame({"val/first_step_below/0.003": [60.0, -1.0, np.nan], "train.max_steps": [600.0, 600.0, 600.0]})
    assert protocol.steps_to(df, 0.003).tolist()[:2] == [0.1, 1.0]
    assert np.isnan(protocol.steps_to(df, 0.003).iloc[2])
    with pytest.raises(KeyError, match="first_step_below/0.01"):
        protocol.steps_to(df, 0.01)


def test_a_steps_to_target_equivalence_decides_with_its_positive_control():
    """Both arms reach the target within 20 steps of each other (δ = 0.1 of the budget = 60
    steps): supported, with the control (reaching it 240 steps later) contradicted; the test
    reads the steps, not the errors, which are equal here (the floor the old design decided at)."""
    df = _steps_runs({"a": [80, 100, 80, 60, 80], "b": [60, 80, 80, 60, 60], "w": [300, 340, 320, 300, 360]})
    eq = dict(test="equivalence", sides=2, delta=0.1, value="steps_to_0.003")
    ok = protocol.decide_part(df, _part(**eq, control=["a", "w"]))
    assert ok.verdict == SUPPORTED, ok.reasons
    assert ok.mean_a == pytest.approx(80 / 600) and ok.mean_b == pytest.approx(68 / 600)
    assert ok.control.verdict == CONTRADICTED and ok.preconditions[Step.BUDGET].ok
    slow = protocol.decide_part(df, _part(**eq, b="w", control=["a", "w"]))  # 0.4 of the budget apart
    assert slow.verdict == CONTRADICTED


def test_a_steps_to_target_part_needs_both_arms_to_reach_the_target():
    """Not learned for steps-to-target: an arm that misses the target on a seed is not a task it
    learns (its censored value would understate the gap); both arms never reaching it: no power."""
    df = _steps_runs({"a": [80, 100, 80, 60, 80], "b": [60, -1, 80, 60, 60], "w": [300, 340, 320, 300, 360],
                      "never": [-1] * 5, "neither": [-1] * 5})
    eq = dict(test="equivalence", sides=2, delta=0.1, value="steps_to_0.003")
    miss = protocol.decide_part(df, _part(**eq, control=["a", "w"]))
    assert miss.verdict == INCONCLUSIVE
    assert "`b` reached validation error ≤ 0.003 on 4 of 5 seeds" in _pre(miss, Step.NOT_LEARNED)
    stuck = protocol.decide_part(df, _part(**eq, a="never", b="neither", control=["a", "w"]))
    assert stuck.test_alone == SUPPORTED and stuck.verdict == INCONCLUSIVE
    assert "within δ of the budget" in _pre(stuck, Step.NO_POWER)
    diff = protocol.decide_part(df, _part(test="difference", delta=0.1, value="steps_to_0.003", b="never"))
    assert diff.verdict == SUPPORTED  # a difference judges only the arm that came out lower
    missing = protocol.decide_part(df, _part(**{**eq, "value": "steps_to_0.01"}, control=["a", "w"]))
    assert missing.verdict == INCONCLUSIVE and "first_step_below/0.01" in render.reason(missing.reasons[0])
