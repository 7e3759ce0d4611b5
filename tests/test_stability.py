"""The stability table (analysis/stability.py, paper.md §13 "Confirmation block") on synthetic
runs: blocks split by seed, steps and readout; slack to the thresholds; the leave-one-seed-out
flag; a claim unstable on opposite decisive labels or on a flip that decides it."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import render, render_tables, stability, stats
from analysis.decision import Beyond, Flip, Holds, Interval, NotRun, Step, Unstable
from analysis.protocol import CONTRADICTED, INCONCLUSIVE, SUPPORTED
from tests import scratch_git

LRS = (0.001, 0.003, 0.01)


def _runs(d: dict[int, float], a: float = 0.10, lrs=LRS, steps: int = 600, readout: str = "scaled",
          n_train: int = 256, n: int = 8) -> pd.DataFrame:
    """Arms a and b on task t; per seed b's test error is a's plus ``d[seed]``; lr 0.003 is best
    on validation (others +0.05); flat budget; a uniform-mixing reference of 0.6."""
    rows = []
    for arm in ("a", "b"):
        for lr in lrs:
            for s, gap in d.items():
                e = a + 0.001 * (s % 7) + (gap if arm == "b" else 0) + (0 if np.isclose(lr, 0.003) else 0.05)
                rows.append({"status": "FINISHED", "diverged": False, "task": "t", "arm": arm, "variant": arm,
                             "task.n_train": n_train, "seed": s, "train.lr": lr,
                             "trial_id": f"{arm}-{lr}-{s}-{steps}-{readout}-{n_train}-{n}", "task.n": n,
                             "val/best_error": e, "val/best_loss": e, "test/rel_mse": e,
                             "test/uniform_rel_mse": 0.6, "val/best_error_at_80": e, "val/best_error_at_90": e,
                             "val/evals_last_20": 6.0, "train.max_steps": steps, "task.readout": readout})
    return stats.add_error(pd.DataFrame(rows))


PART = {"claim": "C0", "name": "a beats b", "task": "t", "a": "a", "b": "b", "test": "difference", "delta": 0.02}
EXPLORE = {s: 0.05 + 0.002 * s for s in range(5)}
CONFIRM = {s: 0.05 + 0.002 * (s % 5) for s in range(1000, 1010)}


def _all(confirm=CONFIRM, explore=EXPLORE) -> pd.DataFrame:
    return pd.concat([_runs(explore), _runs(confirm, lrs=(0.003,)),
                      _runs(explore, lrs=(0.003,), steps=2400), _runs(explore, readout="tied")], ignore_index=True)


def test_blocks_are_split_by_seed_steps_and_readout():
    blocks = stability.split_blocks(_all(), steps=600, readout="scaled")
    assert set(blocks["exploratory"]["seed"]) == set(range(5)) and len(blocks["exploratory"]) == 2 * 3 * 5
    assert set(blocks["confirmation"]["seed"]) == set(range(1000, 1010))
    assert set(blocks["x4"]["train.max_steps"]) == {2400} and set(blocks["readout=tied"]["task.readout"]) == {"tied"}


def test_a_stable_part_has_one_verdict_everywhere_and_its_slack():
    row = stability.stability_row(stability.split_blocks(_all(), 600, "scaled"), PART)
    assert [row[k] for k in ("exploratory", "confirmation", "x4", "readout=tied")] == [SUPPORTED] * 4
    assert row["decided_on"] == "confirmation" and render.block_seeds(row["confirmation_seeds"]) == "1000–1009 (10 of 10)"
    assert render.block_lrs(row["confirmation_lr"]) == "a @ 256: 0.003; b @ 256: 0.003" and row["confirmation_runs"] == 20
    assert row["confirmation_steps"] == "600" and row["readout=tied_readout"] == "tied" and row["readout_moved"] == []
    assert row["support_delta"] > 2 and row["support_se"] > 2 and row["contradict_delta"] < 0
    assert not row["opposite"] and not row["x4_moved"] and row["loo_flip"] == "" and row["loo"] is None
    learned = pd.concat([_all(), _runs({s: -g for s, g in EXPLORE.items()}, lrs=(0.003,), readout="learned")])
    moved = stability.stability_row(stability.split_blocks(learned, 600, "scaled"), PART)
    assert moved["readout=learned"] == CONTRADICTED and moved["readout_moved"] == ["learned"]
    assert stability.claim_unstable([row]) is None


def test_slack_is_measured_in_delta_and_standard_errors():
    from analysis.protocol import decide_part

    result = decide_part(_runs(EXPLORE), PART)
    got = stability.slack(result)
    assert got["support_delta"] == pytest.approx(result.lo / 0.02)
    assert got["support_se"] == pytest.approx(result.lo / result.se)
    assert got["contradict_delta"] == pytest.approx(-result.hi / 0.02)


def test_opposite_labels_on_the_confirmation_block_make_the_claim_unstable():
    flipped = {s: -g for s, g in CONFIRM.items()}  # b better on the fresh seeds
    row = stability.stability_row(stability.split_blocks(_all(confirm=flipped), 600, "scaled"), PART)
    assert row["exploratory"] == SUPPORTED and row["confirmation"] == CONTRADICTED and row["opposite"]
    assert stability.claim_unstable([row]) == Unstable(opposite=(PART["name"],))
    assert "opposite decisive labels" in render.unstable(stability.claim_unstable([row]))


def test_a_leave_one_seed_out_flip_is_flagged_and_decides_the_claim():
    """d = [0.03, 0.035, 0.028, 0.032, 0.0]: supported on five seeds (lower 95% bound 0.007),
    inconclusive without seed 0; with no confirmation block the exploratory block decides."""
    explore = dict(enumerate([0.03, 0.035, 0.028, 0.032, 0.0]))
    one = _runs(explore)
    one["test/rel_mse"] = one["test/rel_mse"] - 0.001 * (one["seed"] % 7)  # a's per-seed noise out: d exactly as given
    blocks = stability.split_blocks(stats.add_error(one), 600, "scaled")
    row = stability.stability_row(blocks, PART)
    assert row["exploratory"] == SUPPORTED and row["decided_on"] == "exploratory"
    assert row["loo_flip"].startswith("without seed 0: verdict supported → inconclusive"), row["loo_flip"]
    assert row["loo"] == Flip(0, SUPPORTED, INCONCLUSIVE)  # claim_unstable reads this value, not the words
    assert stability.claim_unstable([row]) == Unstable(part=PART["name"], flip=row["loo"])
    assert "changes the claim" in render.unstable(stability.claim_unstable([row]))
    worded = {**row, "loo_flip": "without seed 0: verdict supported → contradicted"}  # words alone decide nothing
    assert stability.claim_unstable([worded]) == stability.claim_unstable([row])
    assert row["confirmation"] == "–" and row["confirmation_runs"] == 0  # no block: no verdict to show


def test_the_csv_is_written_only_with_a_confirmation_block(tmp_path: Path):
    stable = stability.stability_row(stability.split_blocks(_all(), 600, "scaled"), PART)
    assert stability.write_stability([stable], tmp_path / "stability.csv")
    assert pd.read_csv(tmp_path / "stability.csv")["confirmation"].tolist() == [SUPPORTED]
    none = stability.stability_row(stability.split_blocks(_runs(EXPLORE), 600, "scaled"), PART)
    assert not stability.write_stability([none], tmp_path / "none.csv") and not (tmp_path / "none.csv").exists()


def test_the_confirmation_block_reruns_deciding_parts_and_controls_at_the_frozen_lr(hydra_conf):
    """analysis/confirm.py: every arm of every deciding part and of its positive control, at its
    chosen lr and decided size, once per fresh seed, tagged with the trial it repeats."""
    from hydra import compose

    from analysis.confirm import confirmation_trials, seeds_of
    from analysis.trials import restrict
    from harness.expansion import expand

    assert seeds_of("range(1000,1010)") == list(range(1000, 1010)) and seeds_of("1000,1003") == [1000, 1003]
    cli = ["+ablation=knowledge_size", "scale=tiny"]
    conf = compose(config_name="config", overrides=cli)
    trials = expand(conf, cli)
    rows = [{"trial_id": t.trial_id, "status": "FINISHED", "diverged": False, "task": t.task, "variant": t.variant,
             "task.n_train": t.config.task.n_train, "seed": t.config.seed, "train.lr": t.config.train.lr,
             "val/best_error": 0.1 * t.config.model.k ** -1, "val/best_loss": 0.1, "test/rel_mse": 0.1 / t.config.model.k,
             "test/uniform_rel_mse": 0.9, "val/best_error_at_80": 0.1, "val/best_error_at_90": 0.1,
             "val/evals_last_20": 6.0} for t in trials]
    runs = stats.add_error(restrict(pd.DataFrame(rows), trials, "knowledge_size"))
    seeds = seeds_of(str(conf.scale.confirm_seeds))
    new = confirmation_trials({"knowledge_size": conf}, {"knowledge_size": runs}, {"knowledge_size": trials},
                              ["scale=tiny"], seeds)["knowledge_size"]
    # k=4 vs 2 on teacher; k=8 vs 4 and the control k=4 vs 2 on teacher_noisy2: five distinct
    # (task, arm) pairs, each once per seed
    assert {t.variant for t in new} == {"softmax_free[k=2]", "softmax_free[k=4]", "softmax_free[k=8]"}
    assert len({(t.task, t.variant) for t in new}) == 5
    assert len(new) == 5 * len(seeds) and {t.config.seed for t in new} == set(seeds)
    assert all(t.config.task.eval_seed == t.config.seed for t in new)  # fresh evaluation sets
    known = {t.trial_id: t for t in trials}
    assert all(known[t.extends].variant == t.variant for t in new)
    with pytest.raises(ValueError, match="already run"):
        confirmation_trials({"knowledge_size": conf}, {"knowledge_size": runs}, {"knowledge_size": trials},
                            ["scale=tiny"], [0, 1000])


def test_readout_reruns_cover_each_token_part_and_its_control(hydra_conf):
    """knowledge_forms: every nearest part's arms (and its positive control's) rerun under tied
    at the chosen lr; the W_V part's also under learned; T3d parts (no readout) not at all."""
    from hydra import compose

    from analysis.confirm import readout_trials
    from analysis.trials import restrict
    from harness.expansion import expand

    cli = ["+ablation=knowledge_forms", "scale=tiny"]
    conf = compose(config_name="config", overrides=cli)
    trials = expand(conf, cli)
    rows = [{"trial_id": t.trial_id, "status": "FINISHED", "diverged": False, "task": t.task, "variant": t.variant,
             "task.n_train": t.config.task.n_train, "seed": t.config.seed, "train.lr": t.config.train.lr,
             "task.readout": getattr(getattr(t.config.task, "readout", None), "value", None),
             "val/best_error": 0.1, "val/best_loss": 0.1, "test/rel_mse": 0.1, "test/uniform_rel_mse": 0.9,
             "val/best_error_at_80": 0.1, "val/best_error_at_90": 0.1, "val/evals_last_20": 6.0} for t in trials]
    runs = stats.add_error(restrict(pd.DataFrame(rows), trials, "knowledge_forms"))
    new = readout_trials({"knowledge_forms": conf}, {"knowledge_forms": runs}, {"knowledge_forms": trials},
                         ["scale=tiny"])["knowledge_forms"]
    by = {(t.variant, t.config.task.readout.value) for t in new}
    assert {t.task for t in new} == {"nearest"}
    assert {v for v, r in by if r == "tied"} == {"general", "general_nozg2", "value", "softmax", "xg", "mlp"}
    assert {v for v, r in by if r == "learned"} == {"value", "softmax", "xg", "mlp"}  # the W_V part and its control
    assert all(t.extends for t in new)


# ----------------------------------------------------------------------------- phases and verdicts
def _phased() -> pd.DataFrame:
    """Every phase once over: the grid (seeds 0–4, three lrs), an lr extension of a grid trial,
    the confirmation block (tagged extends, like the extensions), budget and readout reruns, and
    the scale column's reruns (a larger n_train and budget, every lr)."""
    grid = _runs(EXPLORE)
    base = grid[(grid["arm"] == "a") & (grid["seed"] == 0)]["trial_id"].iloc[0]
    ext = _runs(EXPLORE, lrs=(0.0003,)).assign(extends=base)
    block = _runs(CONFIRM, lrs=(0.003,)).assign(extends=base)
    longer = _runs(EXPLORE, lrs=(0.003,), steps=2400).assign(extends=base)
    tied = _runs(EXPLORE, lrs=(0.003,), readout="tied").assign(extends=base)
    scale = _runs(EXPLORE, steps=5000, n_train=8192).assign(extends=base)  # the scale column: every lr again
    length = _runs(EXPLORE, n=32).assign(extends=base)  # the length column: a longer sequence, every lr again
    frames = {"exploratory": grid.assign(extends=""), "lr_extension": ext, "confirmation": block,
              "budget": longer, "readout": tied, "scale": scale, "length": length}
    return pd.concat([f.assign(expected=k) for k, f in frames.items()], ignore_index=True)


def test_every_run_gets_exactly_one_phase_from_its_params():
    from analysis import phases

    df = _phased()
    got = phases.phase_column(df, steps=600, confirm_seeds=range(1000, 1010))
    assert (got == df["expected"]).all(), df.assign(got=got)[got != df["expected"]]
    assert phases.phase_counts(df, 600, range(1000, 1010))["confirmation"] == len(CONFIRM) * 2
    explore = phases.exploratory(df, 600, range(1000, 1010))
    assert set(explore["expected"]) == {"exploratory", "lr_extension"}
    # the grid alone, recorded without extends or readout columns, is all exploratory
    bare = _runs(EXPLORE).drop(columns=["task.readout", "train.max_steps"])
    assert set(phases.phase_column(bare, 600)) == {"exploratory"}


def test_a_recorded_phase_tag_is_read_and_an_untagged_run_is_still_told_by_its_params():
    """A round tags the runs it starts (analysis.rounds, harness Trial.phase → the ``phase`` tag):
    the tag wins over the params (a confirmation rerun on a seed the params would call
    exploratory), and runs without it (today's bundle) are told apart as before."""
    from analysis import phases

    df = _phased()
    tagged = df.assign(phase=None)
    tagged.loc[tagged["expected"] == "exploratory", "phase"] = "confirmation"  # what a round recorded
    got = phases.phase_column(tagged, steps=600, confirm_seeds=range(1000, 1010))
    assert (got[df["expected"] == "exploratory"] == "confirmation").all()
    rest = df["expected"] != "exploratory"
    assert (got[rest] == df.loc[rest, "expected"]).all()  # no tag (None): from the params


def _recorded() -> pd.DataFrame:
    """:func:`_phased` as the rounds record it: every run tagged with its phase, the block runs
    (the confirmation block's and the scale column's block on seeds 1000–1009) with the design."""
    df = _phased()
    scale_block = _runs(CONFIRM, steps=5000, n_train=8192, lrs=(0.003,)).assign(
        extends=df["trial_id"].iloc[0], expected="scale")
    df = pd.concat([df, scale_block], ignore_index=True).assign(phase=lambda f: f["expected"], design=None)
    df.loc[pd.to_numeric(df["seed"]) >= 1000, "design"] = "sequential 4,7,10"
    return df


def test_a_spent_blocks_bundle_reads_its_own_seeds_after_the_default_moves_on():
    """Offline regeneration of a bundle whose block is spent (its seeds in SPENT_BLOCKS,
    ``scale.confirm_seeds`` moved to the next block's): the configs read the bundle's recorded
    block, so every split is what it was with the block's own seeds, the scale column's block
    included (read with the moved seeds it would be taken for the column's lr-choice runs)."""
    from omegaconf import OmegaConf

    from analysis.confirm import recorded_block, with_recorded_block
    from analysis.verdicts import confirm_seeds

    bundle = _recorded()
    assert recorded_block(bundle) == list(range(1000, 1010))
    moved = {"x": OmegaConf.create({"scale": {"confirm_seeds": "range(4000,4010)"}})}
    read = with_recorded_block(moved, bundle)
    assert confirm_seeds(read["x"]) == list(range(1000, 1010))
    assert confirm_seeds(moved["x"]) == list(range(4000, 4010))  # the caller's configs untouched
    own = stability.split_blocks(bundle, 600, "scaled", range(1000, 1010))
    got = stability.split_blocks(bundle, 600, "scaled", confirm_seeds(read["x"]))
    assert len(own["scale_confirmation"]) == 20 and set(own["confirmation"]["seed"]) == set(CONFIRM)
    assert all(got[k]["trial_id"].tolist() == own[k]["trial_id"].tolist() for k in own)
    wrong = stability.split_blocks(bundle, 600, "scaled", range(4000, 4010))
    assert wrong["scale_confirmation"].empty and len(wrong["scale"]) > len(own["scale"])  # what the fix avoids
    # a bundle recorded before the tags (the fixed block of 2000–2009): its seeds from 1000 on
    assert recorded_block(_phased().drop(columns=["expected"])) == list(range(1000, 1010))


def test_a_store_holding_two_blocks_reads_the_configured_one():
    """The next block run on a store that holds the spent one: its seeds are the configured
    ones, so the configs keep them and the confirmation block is the new seeds only."""
    from omegaconf import OmegaConf

    from analysis.confirm import with_recorded_block
    from analysis.verdicts import confirm_seeds

    nxt = {s + 3000: d for s, d in CONFIRM.items()}
    store = pd.concat([_recorded(), _runs(nxt, lrs=(0.003,)).assign(
        extends="x", phase="confirmation", design="sequential 4,7,10")], ignore_index=True)
    conf = {"x": OmegaConf.create({"scale": {"confirm_seeds": "range(4000,4010)"}})}
    assert confirm_seeds(with_recorded_block(conf, store)["x"]) == list(range(4000, 4010))
    blocks = stability.split_blocks(store, 600, "scaled", range(4000, 4010))
    assert set(blocks["confirmation"]["seed"]) == set(nxt)  # the spent block's runs are not pooled in


def test_scale_reruns_are_their_own_block_a_flag_column_and_never_the_budgets():
    """The scale column (analysis/scale.py): runs above the grid's n_train are phase ``scale``
    (not ``budget``, though longer), stay out of the budget split and the exploratory runs, and
    decide the part again on their own lrs; a part whose own arms have none reads "– (not run)",
    though another part's scale runs share one of its arms."""
    from analysis import phases, stability
    from analysis.budget import split_budget

    df = _phased()
    main, longer = split_budget(df, 600)
    assert set(longer["expected"]) == {"budget"} and "scale" in set(main["expected"])
    blocks = stability.split_blocks(df, 600, "scaled", range(1000, 1010))
    assert set(blocks["scale"]["expected"]) == {"scale"} and len(blocks["scale"]) == len(EXPLORE) * 2 * len(LRS)
    row = stability.stability_row(blocks, PART)
    assert row["scale"] == "supported" and row["scale_effect"].startswith("d = ") and row["scale_moved"] is False
    assert row["scale_lr"] and all("8192" in k for k in row["scale_lr"])  # lrs chosen again at scale, at its size
    assert row["beyond"][0] == Beyond("scale", Holds.HOLDS, row["scale_block"], size=8192)
    # only a's scale runs (another part's control, say): b's part is not decided there
    one_arm = {**blocks, "scale": blocks["scale"][blocks["scale"]["arm"] == "a"]}
    assert stability.stability_row(one_arm, PART)["scale"] is None
    assert stability.stability_row(one_arm, PART)["beyond"][0] == Beyond("scale", Holds.NOT_RUN, why=NotRun.NO_RUNS)
    del blocks["scale"]
    assert stability.stability_row(blocks, PART)["scale"] is None
    assert not phases.exploratory(df, 600, range(1000, 1010))["expected"].isin(["scale"]).any()


def _beyond(column_d: dict[int, float], column: str = "length") -> Beyond:
    """The length column's answer for PART (decided on its confirmation block) where the column's
    runs have per-seed differences ``column_d``."""
    grid = _all()
    base = grid["trial_id"].iloc[0]
    rerun = _runs(column_d, n=32).assign(extends=base, phase=column)
    row = stability.stability_row(stability.split_blocks(pd.concat([grid, rerun], ignore_index=True), 600, "scaled"),
                                  PART)
    return row["beyond"][stability.COLUMNS.index(column)]


def test_a_column_holds_moves_or_is_not_shown_on_fewer_seeds():
    """The columns beyond the measured regime (issue 64): the same label holds; a reversed label
    moves; an inconclusive column whose estimate at the confirmation block's precision would give
    the verdict is *not shown (fewer seeds)*; one whose estimate sits near 0 moves."""
    assert _beyond(EXPLORE).status is Holds.HOLDS and _beyond(EXPLORE).size == 32
    reversed_ = _beyond({s: -g for s, g in EXPLORE.items()})
    assert reversed_.status is Holds.MOVES and reversed_.block.verdict == CONTRADICTED
    # three seeds, the same effect (0.05) with a wide spread: inconclusive on three, clear on ten
    wide = _beyond({0: 0.005, 1: 0.1, 2: 0.045})
    assert wide.block.verdict == INCONCLUSIVE and wide.status is Holds.FEWER_SEEDS, wide
    near_zero = _beyond({0: -0.01, 1: 0.012, 2: 0.0})  # the effect itself gone: a move, whatever the seeds
    assert near_zero.block.verdict == INCONCLUSIVE and near_zero.status is Holds.MOVES
    assert _beyond({}).status is Holds.NOT_RUN and _beyond({}).why is NotRun.NO_RUNS
    assert render.beyond(wide).startswith("at n = 32: not shown (fewer seeds; d = ")
    assert render.beyond(near_zero).startswith("at n = 32: moves to inconclusive (")


def test_a_task_of_fixed_length_says_so_in_the_length_column():
    from analysis import length

    terms = _all().assign(**{"task.terms": "[3]"})
    row = stability.stability_row(stability.split_blocks(terms, 600, "scaled"), PART)
    assert row["beyond"][1] == Beyond("length", Holds.NOT_RUN, why=NotRun.FIXED_LENGTH)
    assert "the task's sequence length is fixed" in render.beyond(row["beyond"][1])
    assert length.fixed_length(_all().drop(columns="task.n")) and not length.fixed_length(_all())
    with pytest.raises(ValueError, match="report.length_n"):
        length.changes(0)


def test_a_task_undefined_at_the_columns_length_says_so_and_gets_no_length_trials():
    """T3d's teacher is calibrated so that uniform mixing has relative error 0.6 at n = 8; at
    n = 32 no temperature reaches that (0.731-0.981), and T4c′ (repeated) needs n ≤ V + 3: those
    tasks "at n = 32" do not exist, so the length column leaves their parts out and says why (the
    run of 2026-12-06 stopped at their pre-flights instead). Other tasks stay defined."""
    from analysis import length
    from tasks.registry import undefined_at

    general = {"task.name": "teacher", "task.teacher": "general", "task.d": 16.0, "task.k": 4.0,
               "task.teacher_seed": 0.0, "task.uniform_rel_mse": 0.6}
    said = undefined_at(general, 32)
    assert said and "not reachable for teacher=general, n=32" in said and "0.731" in said
    assert undefined_at(general, 8) is None
    assert undefined_at({**general, "task.teacher": "softmax"}, 32) is None
    repeated = {"task.name": "selection", "task.kind": "repeated", "task.V": 16.0, "task.d": 16.0}
    assert "allowed: 7 ≤ n ≤ V + 3 = 19" in undefined_at(repeated, 32) and undefined_at(repeated, 8) is None
    assert undefined_at({"task.name": "selection", "task.kind": "nearest"}, 32) is None
    assert undefined_at({"task.name": "external"}, 32) is None
    runs = _all().assign(**{k: v for k, v in general.items()})
    row = stability.stability_row(stability.split_blocks(runs, 600, "scaled"), PART, length_n=32)
    assert row["beyond"][1] == Beyond("length", Holds.NOT_RUN, why=NotRun.UNDEFINED_AT_N)
    assert "the task is not defined at that length" in render.beyond(row["beyond"][1])
    assert stability.stability_row(stability.split_blocks(runs, 600, "scaled"), PART)["beyond"][1].why is NotRun.NO_RUNS
    # the part's own task decides, not the ablation's first run (C12(b)'s T3a read T3d's reason)
    nearest = _all().assign(**{"task.name": "selection", "task.kind": "nearest"})
    for first, own, why in ((runs, nearest, NotRun.NO_RUNS), (nearest, runs, NotRun.UNDEFINED_AT_N)):
        mixed = pd.concat([first.assign(task="u"), own.assign(task="t")], ignore_index=True)
        assert stability.stability_row(stability.split_blocks(mixed, 600, "scaled"), PART,
                                       length_n=32)["beyond"][1].why is why


def test_scale_and_length_trials_rerun_every_grid_lr_of_each_deciding_parts_arms(hydra_conf):
    """sigma_vs_softmax's deciding parts (T4a; T4b′, chosen at n_train 256): their arms (softmax,
    the three choose_b candidates; the control's tanh among them) rerun at every grid lr and
    seed, tagged with the grid trial they repeat: the scale column at 8× each part's own n_train
    and report.scale_steps; the length column at task.n = 32, the grid's n_train and steps.
    ``report.scale_parts=scale_check`` keeps the first column's one part."""
    from hydra import compose

    from analysis import length, scale
    from analysis.trials import restrict
    from harness.expansion import expand

    cli = ["+ablation=sigma_vs_softmax", "scale=tiny"]
    conf = compose(config_name="config", overrides=cli)
    trials = expand(conf, cli)
    rows = [{"trial_id": t.trial_id, "status": "FINISHED", "task": t.task, "variant": t.variant, "seed": t.config.seed,
             "task.n_train": t.config.task.n_train, "train.lr": t.config.train.lr, "task.n": t.config.task.n,
             "task.readout": getattr(getattr(t.config.task, "readout", None), "name", None)} for t in trials]
    runs = restrict(pd.DataFrame(rows), trials, "sigma_vs_softmax")
    configs, by_name = {"sigma_vs_softmax": conf}, {"sigma_vs_softmax": runs}
    assert [s["name"][:25] for s in scale.registered(configs, "scale_check")["sigma_vs_softmax"]] == \
        ["neutral selection task (T"]
    assert len(scale.registered(configs)["sigma_vs_softmax"]) == 2
    with pytest.raises(ValueError, match="report.scale_parts"):
        scale.registered(configs, "some")
    new = scale.scale_trials(configs, by_name, {"sigma_vs_softmax": trials}, ["scale=tiny"],
                             scale.rerun_sizes(8, 5000, 100))["sigma_vs_softmax"]
    grid = [t for t in trials if t.task in ("nearest", "argmax_hard")]
    assert len(new) == len(grid) and {t.task for t in new} == {"nearest", "argmax_hard"}
    known = {t.trial_id: t for t in trials}
    for t in new:
        base = known[t.extends]
        assert (t.variant, t.config.seed, t.config.train.lr) == (base.variant, base.config.seed, base.config.train.lr)
        assert (t.config.task.n_train, t.config.train.max_steps, t.config.train.eval_every) == \
            (8 * base.config.task.n_train, 5000, 100)
    longer = length.length_trials(configs, by_name, {"sigma_vs_softmax": trials}, ["scale=tiny"], 32)["sigma_vs_softmax"]
    assert len(longer) == len(grid) and {t.config.task.n for t in longer} == {32}
    for t in longer:
        base = known[t.extends]
        assert (t.config.task.n_train, t.config.train.max_steps) == (base.config.task.n_train, base.config.train.max_steps)
    assert scale.enabled(8192, 1024) and not scale.enabled(8192, 8192) and not scale.enabled(0, 1024)
    assert scale.factor(8192, 1024) == 8 and length.enabled(32, [8]) and not length.enabled(0, [8])


def _conf(part=PART, steps: int = 600):
    from omegaconf import OmegaConf

    return OmegaConf.create({"ablation": {"parts": [part, {**part, "name": "observed", "role": "observation"}]},
                             "train": {"max_steps": steps}, "scale": {"confirm_seeds": "range(1000,1010)"}})


def test_a_deciding_part_is_decided_on_its_block_and_nothing_leaks_into_the_exploratory_decision():
    from analysis import verdicts

    df = _phased().drop(columns="expected")
    first, block = verdicts.decide_both(_conf(), df, PART)
    assert first.paired == (0, 1, 2, 3, 4) and first.n_runs == 10  # grid seeds at the chosen lr only
    assert block is not None and block.paired == tuple(range(1000, 1010)) and block.n_runs == 20
    # one lr per arm on the block (an edge of its one-point grid): the lr edge is the exploratory block's to judge
    assert block.edges == [] and block.preconditions[Step.LR_EDGE].ok
    deciding, observed = verdicts.decide_parts({"abl": _conf()}, {"abl": df})
    assert deciding.paired == block.paired and observed.paired == first.paired  # an observation stays exploratory
    _, none = verdicts.decide_both(_conf(), df[~df["seed"].isin(CONFIRM)], PART)
    assert none is None


def test_the_stability_frame_has_a_row_per_deciding_part_and_an_unstable_claim_says_so(tmp_path: Path):
    from analysis import verdicts

    df, conf = _phased().drop(columns="expected"), _conf({**PART, "readout": "scaled"})
    frame = verdicts.stability_frame({"abl": conf}, {"abl": df})
    assert len(frame) == 1 and frame["decided_on"].iloc[0] == "confirmation" and frame["unstable"].iloc[0] == ""
    assert frame["x4_runs"].iloc[0] == 10 and frame["readout=tied_runs"].iloc[0] == 10
    lines = render_tables.stability(frame)
    assert any(line.startswith("| claim") for line in lines) and max(len(x) for x in lines[2].splitlines()) < 200
    stability.write_csv(frame, tmp_path / "s" / "stability.csv")
    assert pd.read_csv(tmp_path / "s" / "stability.csv")["part"].tolist() == [PART["name"]]
    decided = verdicts.decide_parts({"abl": conf}, {"abl": df})
    assert verdicts.combine_claim(decided[:1], frame).verdict == SUPPORTED
    flipped = {s: -0.05 - 0.002 * (s % 5) for s in CONFIRM}  # b now beats a on the block
    df2 = pd.concat([df[~df["seed"].isin(CONFIRM)], _runs(flipped, lrs=(0.003,)).assign(extends="x")])
    frame2 = verdicts.stability_frame({"abl": conf}, {"abl": df2})
    claim = verdicts.combine_claim(verdicts.decide_parts({"abl": conf}, {"abl": df2})[:1], frame2)
    assert claim.verdict == verdicts.UNSTABLE and claim.unstable.opposite == (PART["name"],)
    why = render.claim_why(claim)  # the words: why unstable, then what the parts alone say
    assert "opposite decisive labels" in why and f"on the parts alone: {claim.combined.verdict}" in why


def test_frozen_choices_are_kept_and_their_commit_named(tmp_path: Path, capsys):
    from analysis import render_prose
    from analysis.confirm import FROZEN, freeze, frozen_state, read_frozen, write_frozen
    from analysis.reporting import freeze_choices

    df = _runs(EXPLORE)
    conf = _conf({**PART, "control": []})
    frozen = freeze({"abl": conf}, {"abl": df})
    assert set(frozen["arm"]) == {"a", "b"} and set(frozen["lr"]) == {0.003} and set(frozen["role"]) == {"deciding"}
    path = tmp_path / FROZEN
    assert not frozen_state(tmp_path).exists
    assert render_prose.frozen(frozen_state(tmp_path)).startswith("No exploratory choices")
    git = functools.partial(scratch_git.git, tmp_path)
    git("init", "-q")
    write_frozen(frozen.assign(lr=0.01), path)  # a committed choice other than the runs would make now
    assert frozen_state(tmp_path).commit == ""  # written, never committed
    assert render_prose.frozen(frozen_state(tmp_path)).endswith("not committed")
    git("add", FROZEN)
    git("commit", "-qm", "freeze")
    state = frozen_state(tmp_path)
    assert state.commit == git('rev-parse', '--short', 'HEAD') and not state.changed
    assert f"frozen at commit `{state.commit}`" in render_prose.frozen(state)
    kept = freeze_choices({"abl": conf}, {"abl": df}, path)
    assert set(kept["lr"]) == {0.01} and "differ from frozen.csv" in capsys.readouterr().err
    write_frozen(read_frozen(path).assign(lr=0.03), path)
    assert frozen_state(tmp_path).changed
    assert "differ from their last commit" in render_prose.frozen(frozen_state(tmp_path))


def test_confirmation_seeds_the_grid_also_runs_exit_2_naming_them():
    """Refused before any trial (:class:`ReportInputError`: ``python -m analysis.report``'s
    ``run`` prints it as one line and returns 2, ``tests/test_refusals.py``)."""
    from omegaconf import OmegaConf

    from analysis.reporting import ReportInputError, check_confirm_seeds, confirm_enabled

    cfg = lambda confirm, seeds: OmegaConf.create({"report": {"confirm": confirm},  # noqa: E731
                                                   "scale": {"name": "tiny", "seeds": "range(5)", "confirm_seeds": seeds}})
    check_confirm_seeds(cfg(True, "range(1000,1002)"))  # fresh seeds: nothing to say
    check_confirm_seeds(cfg(None, "3,1000"))  # block off at the tiny scale: not checked
    assert not confirm_enabled(cfg(None, "")) and confirm_enabled(cfg(True, ""))
    with pytest.raises(ReportInputError) as err:
        check_confirm_seeds(cfg(True, "3,1000"))
    assert "scale.confirm_seeds=3,1000 shares seeds [3]" in str(err.value)


def test_a_confirmation_block_at_an_evidence_scale_refuses_a_spent_blocks_seeds():
    """A verdict must replicate on seeds nobody has used (issue 51): at the default scale the
    first block's 1000-1009 (and the audit's, the pilots') are refused, naming the block; the
    tiny scale, a check of the path, may reuse them; 4000-4009 (the default) pass; 3000-3009, whose
    verdicts docs/report.md of 2026-12-06 holds, is spent."""
    from omegaconf import OmegaConf

    from analysis.confirm import SPENT_BLOCKS, check_unspent
    from analysis.reporting import ReportInputError, check_confirm_seeds

    cfg = lambda name, seeds: OmegaConf.create({"report": {"confirm": True},  # noqa: E731
                                                "scale": {"name": name, "seeds": "range(5)", "confirm_seeds": seeds}})
    check_confirm_seeds(cfg("default", "range(4000,4010)"))
    check_confirm_seeds(cfg("tiny", "range(1000,1002)"))
    for seeds, block in (("range(1000,1010)", "first confirmation block"), ("150", "pilots"), ("4000,12", "audit"), ("2005", "second confirmation block"),
                          ("range(3000,3010)", "third confirmation block")):
        with pytest.raises(ReportInputError, match=block) as err:
            check_confirm_seeds(cfg("default", seeds))
        assert "allowed: seeds no block has used" in str(err.value)
    assert all(not set(range(4000, 4010)) & set(r) for r in SPENT_BLOCKS.values())
    with pytest.raises(ValueError, match=r"\[1005\]"):
        check_unspent([4000, 1005])


def test_the_report_shows_exploratory_runs_only():
    from analysis import verdicts

    df = _phased()
    shown = verdicts.exploratory_runs({"abl": _conf()}, {"abl": df})["abl"]
    assert set(shown["expected"]) == {"exploratory", "lr_extension"} and len(shown) == 30 + 10


def test_with_no_deciding_part_decided_the_section_says_so_and_the_csv_is_empty(tmp_path: Path):
    """A report whose deciding parts all lacked runs (a partial store) prints one sentence in
    place of the tables, and its CSV has no rows; a part with an effect but no interval (too few
    pairs) reads ``d = …, no interval``, and with neither ``no interval``."""
    from types import SimpleNamespace

    empty = stability.mark_once(pd.DataFrame())
    assert empty.empty
    assert render_tables.stability(empty) == ["No deciding part was decided, so there is no stability table.", ""]
    path = stability.write_csv(empty, tmp_path / "stability.csv")
    assert path.read_text().strip() == ""
    nan = float("nan")
    few = stability.block_value(SimpleNamespace(verdict=INCONCLUSIVE, effect=0.25, lo95=nan, hi95=nan, n_pairs=1,
                                                reasons=[]))
    assert render.block_interval(few) == "d = 0.25, no interval"
    assert render.block_interval(dataclasses.replace(few, interval=Interval())) == "no interval"
