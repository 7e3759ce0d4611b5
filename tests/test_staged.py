"""The confirmation blocks in the sequential design's stages (issue 64; analysis/staged.py,
analysis/sequential.py): the report's own rounds (:func:`analysis.reporting.run_block`,
:func:`analysis.reporting.run_scale`) on two ablations of the paper suite with a synthetic store
(tests/test_columns.py's), a part decided at the first look spending no further seed while the
rest run on; a column decided on its block's seeds; a block's reading by its design tag."""

from __future__ import annotations

import zlib
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import tests.test_columns as columns
from tests.test_columns import CHEAP, report_rounds  # noqa: F401 - the fixture

BLOCK = list(range(4000, 4010))  # the default scale's confirmation seeds (scale.confirm_seeds)
BORDERLINE = "argmax_hard"  # its arms keep their noise on the block: its part needs more seeds


@pytest.fixture()
def quiet_block(monkeypatch):
    """The synthetic error with a tenth of its per-seed noise on the block's seeds, except on
    :data:`BORDERLINE`'s task: C10's T4a part is then clearly within δ after four seeds, T4b′ not."""
    error = columns._error

    def quieter(trial, shift):
        cfg = trial.config
        noise = 0.002 * ((cfg.seed * 7919 + zlib.crc32(trial.variant.encode())) % 5)
        quiet = int(cfg.seed) in BLOCK and trial.task != BORDERLINE
        return error(trial, shift) - (0.9 * noise if quiet else 0.0)
    monkeypatch.setattr(columns, "_error", quieter)


def _block_runs(ablations, phase):
    from analysis import reporting, stats

    runs = {n: stats.add_error(reporting.collect(None, {n: ablations[n]})) for n in ablations}
    return runs, {n: df[(df["phase"] == phase) & df["seed"].isin(BLOCK)] for n, df in runs.items()}


def test_a_part_decided_at_the_first_look_stops_and_the_others_run_on(report_rounds, quiet_block):
    from analysis import phases, reporting, verdicts
    from analysis.confirm import freeze

    cfg, configs, ablations, store, queued = report_rounds
    synthetic = SimpleNamespace(uri="synthetic")
    explored = reporting._exploratory(synthetic, ablations, configs)
    frozen = freeze(configs, explored)
    ran = reporting.run_block(cfg, ablations, configs, CHEAP, synthetic, frozen, explored, phases.CONFIRMATION,
                              "confirmation block")
    runs, block = _block_runs(ablations, "confirmation")
    assert ran == sum(len(b) for b in block.values())
    assert all(set(b["design"]) == {"sequential 4,7,10"} for b in block.values())  # the design is recorded
    # runs per task, arm and seed: one each, on the first 4 seeds for the parts stopped there
    per = pd.concat(block.values()).groupby(["task", "variant"])["seed"].agg(list)
    assert all(sorted(s) == sorted(set(s)) for s in per)  # no seed run twice
    seeds = per.map(lambda s: sorted(s)).to_dict()
    # T4a's part, quiet on the block, is decided at the first look: its arms ran 4 seeds; parts
    # still open there (the borderline task's; a part whose futility the last look decides) run on
    assert all(s == BLOCK[:4] for (task, _), s in seeds.items() if task == "nearest"), seeds
    assert all(s in (BLOCK[:7], BLOCK) for (task, _), s in seeds.items() if task == BORDERLINE), seeds
    both: dict = {}
    parts = {r.spec["name"]: r for r in verdicts.decide_parts(configs, runs, both)}
    looks = {name: v.get("confirmation_look") for (_, name), v in both.items() if "confirmation" in v}
    first = [name for name, look in looks.items() if look.look == 0]
    later = [name for name, look in looks.items() if look.look >= 1]
    assert first and later and all(looks[n].stopped for n in first)
    t4a = next(n for n in first if "T4a" in n)
    assert parts[t4a].verdict == "supported" and parts[t4a].n_pairs == 4 and not looks[t4a].futile
    # the stability table names the look each block stopped at
    frame = verdicts.stability_frame(configs, runs, None, both)
    named = frame.set_index("part")["confirmation_look"].dropna().to_dict()
    assert named == looks


def test_a_column_is_decided_on_its_own_block_in_stages(report_rounds, quiet_block):
    from analysis import reporting, verdicts
    from analysis.decision import Look

    cfg, configs, ablations, store, queued = report_rounds
    cfg.report.length_n = 0  # the scale column alone; the length column's rounds are the same code
    reporting.run_scale(cfg, ablations, configs, CHEAP, SimpleNamespace(uri="synthetic"))
    runs, block = _block_runs(ablations, "scale")
    assert any(not b.empty for b in block.values())
    sizes = set(pd.concat(block.values())["task.n_train"])
    assert sizes <= {2048, 8192} and set(pd.concat(block.values())["design"]) == {"sequential 4,7,10"}
    frame = verdicts.stability_frame(configs, runs)
    for _, row in frame.iterrows():
        if row["scale"] is None:
            continue
        assert isinstance(row["scale_look"], Look), row["part"]
        # the column's verdict is its block's: paired on the block's seeds, at the look it stopped
        assert set(row["scale_seeds"].paired) <= set(BLOCK) and len(row["scale_seeds"].paired) == row["scale_look"].n
        assert next(b for b in row["beyond"] if b.column == "scale").block.verdict == row["scale"]


def _block(d, seeds=BLOCK, design="sequential 4,7,10"):
    """A synthetic two-arm block: arm ``b`` = arm ``a`` + ``d`` per seed, one lr, 600 steps."""
    rows = []
    for seed, dd in zip(seeds, d):
        for arm, e in (("a", 0.5), ("b", 0.5 + dd)):
            rows.append({"trial_id": f"{arm}{seed}", "status": "FINISHED", "diverged": False, "task": "t", "arm": arm,
                         "variant": arm, "seed": seed, "train.lr": 0.01, "task.n_train": 1024, "train.max_steps": 600,
                         "val/best_error": e, "val/best_loss": e, "test/rel_mse": e, "test/uniform_rel_mse": 2.0,
                         "val/best_error_at_80": e, "val/best_error_at_90": e, "val/evals_last_20": 6.0,
                         "design": design})
    from analysis import stats

    return stats.add_error(pd.DataFrame(rows))


SPEC = {"claim": "C0", "name": "p", "task": "t", "a": "a", "b": "b", "test": "difference", "delta": 0.02,
        "value": "error", "role": "deciding"}


def test_a_block_is_read_in_the_design_its_runs_record():
    from analysis import protocol, sequential, staged, stats

    d = np.array([0.05, 0.06, 0.055, 0.052, 0.003, -0.004, 0.001, 0.0, 0.002, -0.001])
    tagged = _block(d)
    first = protocol.decide_part(tagged, SPEC)
    result, look = staged.decide_confirmation(tagged, first)
    assert (look.look, look.n, look.stopped) == (0, 4, True) and result.verdict == "supported"
    # its interval is the first look's: the t interval at the look's nominal level, wider than 95%
    level = sequential.nominal_level(0, (4, 7, 10), 0.95)
    _, lo, hi = stats.t_interval(d[:4], level)
    assert (result.lo95, result.hi95) == pytest.approx((lo, hi)) and level > 0.99
    fixed, none = staged.decide_confirmation(tagged.drop(columns="design"), first)
    assert none is None and fixed.n_pairs == 10  # untagged: the fixed design, every seed
    assert staged.looks_of(tagged.assign(design="")) is None
    # a difference about 0 at the first look: futile, "the effect is about δ"
    flat = _block(np.array([0.001, -0.001, 0.0005, -0.0004, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
    result, look = staged.decide_confirmation(flat, protocol.decide_part(flat, SPEC))
    assert look.futile and look.n == 4 and result.verdict == "inconclusive"
    assert [r.rule.name for r in result.reasons] == ["ABOUT_DELTA"]


def test_the_stages_run_only_the_open_parts():
    from analysis import staged

    frozen = pd.DataFrame({"ablation": ["x"] * 4, "part": ["p", "p", "q", "q"], "arm": ["a", "b", "a", "c"]})
    built = []

    def build(rows, chunk):
        built.append((sorted(set(rows["part"])), list(chunk)))
        return {"x": [(arm, s) for arm in sorted(set(rows["arm"])) for s in chunk]}
    counts = staged.run_stages(BLOCK, (4, 7, 10), frozen, build, lambda todo: 0, lambda rows: {("x", "q")})
    assert built == [(["p", "q"], BLOCK[:4]), (["q"], BLOCK[4:7]), (["q"], BLOCK[7:])]
    assert counts == [3 * 4, 2 * 3, 2 * 3]
    assert staged.stages(BLOCK, None) == [BLOCK]  # the fixed design: one stage


def test_one_look_at_a_time_is_the_simulated_design():
    """:func:`analysis.sequential.look_step`, which the report's reading walks look by look, stops
    where :func:`analysis.sequential.decide_many` (the simulated and replayed design) stops."""
    from analysis import sequential

    rng = np.random.default_rng(7)
    for spec in ({"test": "difference", "delta": 0.02, "sides": 2}, {"test": "equivalence", "delta": 0.02, "sides": 2},
                 {"test": "equivalence", "delta": 0.02, "sides": 1}):
        d = rng.normal(0.012, 0.015, (200, 10))
        want = sequential.decide_many(d, spec)
        for i, row in enumerate(d):
            for k, n in enumerate(sequential.LOOKS):
                label, stop = sequential.look_step(row[:n], spec, k, sequential.LOOKS)
                if stop or k == len(sequential.LOOKS) - 1:
                    got = ("inconclusive" if stop == "futile" else label, n, stop == "futile")
                    break
            assert got == (want[0][i], want[1][i], want[2][i]), (spec, i)


def test_the_replay_figures_travel_from_the_benchmark_to_the_method_section(tmp_path):
    from analysis import render_prose, sequential
    from benchmarks.sequential import figures

    table = pd.DataFrame({"note": ["", "", "3 paired seeds"], "fixed": ["supported", "inconclusive", "inconclusive"],
                          "sequential": ["supported", "inconclusive (futile)", ""], "seeds": [4, 4, 0],
                          "no futility": ["supported", "inconclusive", ""], "seeds (no futility)": [4, 10, 0]})
    rates = pd.DataFrame({"sequential": [0.04, 0.049], "upper 95%": [0.045, 0.053], "no futility": [0.05, 0.052],
                          "upper 95% (no futility)": [0.055, 0.057], "fixed": [0.05, 0.051]})
    made = figures(table, rates, (4, 7, 10), 10_000, "2000–2009")
    assert (made.parts, made.fixed_runs, made.plain_runs, made.runs, made.same) == (2, 40, 28, 16, 2)
    back = sequential.read_replay(sequential.write_replay(made, tmp_path / sequential.REPLAY_CSV))
    assert back == made and sequential.read_replay(tmp_path / "none.csv") is None
    text = " ".join(render_prose.sequential_design(back))
    assert "30% fewer" in text and "60% with it" in text and "at most 5.2% (exact 95% upper bound 5.7%)" in text
    assert "Jennison & Turnbull" in text and "Lan & DeMets" in text
    # which block was replayed: the committed bundle's own ran in stages, so it is an earlier one
    assert "Replayed on the fixed-design confirmation block of seeds 2000–2009 (2 deciding parts" in text
    assert render_prose.sequential_design(None) == []


def test_the_stability_table_names_the_look_a_staged_block_stopped_at():
    from analysis import render, render_tables, stability
    from analysis.decision import Look

    d = np.array([0.05, 0.06, 0.055, 0.052, 0.003, -0.004, 0.001, 0.0, 0.002, -0.001])
    explore = _block(d[:5], seeds=range(5), design="").assign(phase="exploratory")
    tagged = _block(d).assign(phase="confirmation")
    blocks = stability.split_blocks(pd.concat([explore, tagged], ignore_index=True), 600, None, BLOCK)
    row = stability.stability_row(blocks, SPEC)
    assert row["confirmation_look"] == Look(0, 4, (4, 7, 10), stopped=True) and row["confirmation"] == "supported"
    assert row["scale_look"] is None and row["length_look"] is None
    frame = pd.DataFrame([row])
    lines = "\n".join(render_tables.stability(frame))
    said = render.look(row["confirmation_look"])
    assert said == "stopped at look 1 of 3 (4 paired seeds)" and lines.count(said) == 2  # the row and its block


@pytest.mark.parametrize("bad", ["scale.looks='3,5'", "scale.looks='4,4,10'", "scale.looks=x"])
def test_looks_that_do_not_end_at_the_block_are_refused_before_any_trial(hydra_conf, bad):
    from hydra import compose

    from analysis.reporting import ReportInputError, check_confirm_seeds, looks

    assert looks(compose(config_name="report")) == (4, 7, 10)
    assert looks(compose(config_name="report", overrides=["scale.looks=''"])) is None  # the fixed design
    with pytest.raises(ReportInputError, match="scale.looks"):
        check_confirm_seeds(compose(config_name="report", overrides=[bad]))
