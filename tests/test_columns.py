"""The report's columns beyond the measured regime (issue 64; analysis/scale.py, analysis/length.py)
run in-process through the report's own rounds (:func:`analysis.reporting.run_scale`,
:func:`analysis.reporting.run_length`) on two ablations of the paper suite at the default scale,
every trial "trained" by a synthetic store (no training, no MLflow): every deciding part is rerun
in both columns (T4b′, chosen at n_train 256, at 8× its own), the rounds tag their trials' phase,
the stability table decides each part there, and the first screen states per row whether its
answer holds, moves or was not run. The registered next confirmation block is checked too."""

from __future__ import annotations

import zlib
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis.decision import Beyond, Holds

ABLATIONS = ("sigma_vs_softmax", "practical")
CHEAP = ["scale.seeds='0,1,2'"]  # three seeds keep the synthetic grid small; the columns' logic is the same


# C10's arms: softmax within δ of the best elementwise σ (exp), its control (tanh) δ·5 worse
LEVELS = {"quad_sigma[sigma=softmax]": 0.10, "quad_sigma[sigma=exp]": 0.105, "quad_sigma[sigma=tanh]": 0.2,
          "quad_sigma[sigma=relu]": 0.25}


def _error(trial, shift: float) -> float:
    """A synthetic test error: per arm a fixed level, per seed a little noise, the middle lr of
    the grid best (no lr edge), and ``shift`` added to the arms whose variant names ``exp`` (at a
    longer sequence: so C10's parts move there, the best σ now tanh, δ·5 behind softmax)."""
    cfg = trial.config
    level = LEVELS.get(trial.variant, 0.05 + (zlib.crc32(trial.variant.encode()) % 50) / 500)
    noise = 0.002 * ((cfg.seed * 7919 + zlib.crc32(trial.variant.encode())) % 5)
    lr_cost = 0.0 if np.isclose(float(cfg.train.lr), 0.01) else 0.05
    return level + noise + lr_cost + (shift if "exp" in trial.variant else 0.0)


def _record(trial) -> dict:
    cfg = trial.config
    n = int(getattr(cfg.task, "n", 8) or 8)
    e = _error(trial, 0.2 if n > 8 else 0.0)
    steps = int(cfg.train.max_steps)
    return {"trial_id": trial.trial_id, "extends": trial.extends, "phase": trial.phase or None, "design": trial.design,
            "status": "FINISHED", "diverged": False, "task": trial.task, "variant": trial.variant,
            "seed": int(cfg.seed), "train.lr": float(cfg.train.lr), "task.n_train": int(cfg.task.n_train),
            "task.n": n, "train.max_steps": steps, "task.readout": getattr(getattr(cfg.task, "readout", None),
                                                                            "value", None),
            "val/best_error": e, "val/best_loss": e, "test/rel_mse": e, "test/uniform_rel_mse": 0.9,
            "val/best_error_at_80": e, "val/best_error_at_90": e, "val/evals_last_20": 6.0,
            "val/first_step_below/1e-06": round(steps * min(0.9, e * 3)), "n_params": 100}


@pytest.fixture()
def report_rounds(hydra_conf, monkeypatch):
    """The report's config and its two ablations' configs and trials at the default scale, with
    ``run_suite`` recording each queued trial's synthetic run and ``collect`` reading them back."""
    from hydra import compose

    from analysis import reporting
    from analysis.trials import restrict
    from harness.expansion import expand

    cfg = compose(config_name="report", overrides=["report.extend_lr=1", *CHEAP])
    configs = {n: compose(config_name="config", overrides=[f"+ablation={n}", *CHEAP]) for n in ABLATIONS}
    ablations = {n: expand(configs[n], [f"+ablation={n}", *CHEAP]) for n in ABLATIONS}
    store: dict[str, list[dict]] = {n: [_record(t) for t in ablations[n]] for n in ABLATIONS}
    queued: list[tuple[str, str]] = []

    def run_suite(cfg, todo, cli, store_):
        for name, trials in todo.items():
            queued.extend((name, t.phase) for t in trials)
            store[name] += [_record(t) for t in trials]

    def collect(uri, abls):
        frames = [restrict(pd.DataFrame(store[n]), abls[n], n).assign(role="trial") for n in abls if store.get(n)]
        return pd.concat(frames, ignore_index=True)

    monkeypatch.setattr(reporting, "run_suite", run_suite)
    monkeypatch.setattr(reporting, "collect", collect)
    return cfg, configs, ablations, store, queued


def test_every_deciding_part_runs_in_both_columns_and_the_first_screen_says_what_holds(report_rounds):
    from analysis import answer, render, reporting, stats, verdicts

    cfg, configs, ablations, store, queued = report_rounds
    cfg.report.confirm = False  # the columns' first rounds; their blocks are tests/test_staged.py's
    cli, synthetic = CHEAP, SimpleNamespace(uri="synthetic")
    at_scale = reporting.run_scale(cfg, ablations, configs, cli, synthetic)
    longer = reporting.run_length(cfg, ablations, configs, cli, synthetic)
    assert at_scale > 0 and longer > 0
    assert {phase for _, phase in queued} == {"scale", "length"}  # each round tags its trials
    runs = {n: stats.add_error(reporting.collect(None, {n: ablations[n]})) for n in ABLATIONS}
    scale_runs = {n: df[df["phase"] == "scale"] for n, df in runs.items()}
    # T4b′ (argmax_hard, chosen at n_train 256) at 8× its own; T4a at 8 × 1024
    sizes = scale_runs["sigma_vs_softmax"].groupby("task")["task.n_train"].unique().map(set).to_dict()
    assert sizes["argmax_hard"] == {2048} and sizes["nearest"] == {8192}
    assert set(runs["practical"].loc[runs["practical"]["phase"] == "length", "task.n"]) == {32}
    frame = verdicts.stability_frame(configs, runs)
    assert len(frame) == sum(1 for c in configs.values() for p in c.ablation.parts if p.role.value == "deciding")
    for _, row in frame.iterrows():
        main = row[row["decided_on"]]
        for b in row["beyond"]:
            assert isinstance(b, Beyond) and b.status is not Holds.NOT_RUN, (row["part"], b)
            assert (b.status is Holds.HOLDS) == (b.block.verdict == main), (row["part"], b)
    statuses = {b.status for bs in frame["beyond"] for b in bs}
    assert Holds.HOLDS in statuses and Holds.MOVES in statuses  # exp's shift at n = 32 moves a C10 part
    parts = verdicts.decide_parts(configs, runs)
    by_part = {(r["claim"], r["part"]): r for r in frame.to_dict("records")}
    table = answer.rows(parts, by_part, {})
    said = answer.trust(parts, frame, {}, {})
    screen = "\n".join(render.first_screen(table, render.trust(said)))
    lines = [x for row in table for x in row.lines if x.expected is not None]
    assert lines and all(len(x.beyond) == 2 for x in lines)
    assert screen.count("at n_train ") >= len(lines) and screen.count("at n = 32: ") >= len(lines)
    assert "moves to" in screen and "holds" in screen
    held = said.held
    assert held.ran == len(frame) and held.not_run == 0 and held.holds < held.ran and held.moved
    assert "so their answer is not settled" in render.trust(said)
    for x in lines:  # a part whose verdict moves is never called firm
        if any(b.status is Holds.MOVES for b in x.beyond):
            assert "firm" not in render._firm(x)


def test_the_next_confirmation_block_is_registered_on_unspent_fresh_seeds(hydra_conf):
    """5000–5009, registered (scale.next_confirm_seeds) before it runs: no spent block's seeds,
    none of the exploratory grid's nor of the current block (4000–4009, which joins SPENT_BLOCKS
    once its verdicts are committed)."""
    from hydra import compose

    from analysis.confirm import check_unspent, seeds_of

    cfg = compose(config_name="report")
    nxt = seeds_of(str(cfg.scale.next_confirm_seeds))
    assert nxt == list(range(5000, 5010))
    check_unspent(nxt)
    assert not set(nxt) & (set(seeds_of(str(cfg.scale.confirm_seeds))) | set(seeds_of(str(cfg.scale.seeds))))


@pytest.mark.parametrize("bad", ["report.scale_parts=some", "report.length_n=-1"])
def test_a_bad_column_setting_is_refused_before_any_trial(hydra_conf, bad):
    from hydra import compose

    from analysis.reporting import ReportInputError, check_columns

    check_columns(compose(config_name="report"))
    with pytest.raises(ReportInputError, match=bad.split("=")[0]):
        check_columns(compose(config_name="report", overrides=[bad]))
