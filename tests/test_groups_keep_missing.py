"""Every run is checked whatever its config columns hold (issue 60 item 4): a run whose group key
is missing (a regression run without ``task.readout`` beside token runs with one, a run logged
before a key existed) stays in its group. pandas 3 keeps a missing value missing through
``astype(str)`` and ``groupby`` drops missing keys unless told not to, so the blow-up rule never
saw 255 regression runs of the committed bundle. These tests fail under that behaviour on any
pandas version: the frames hold real missing keys."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import protocol, stats

ROOT = Path(__file__).resolve().parents[1]


def _mixed(blown: float | None = 20.0) -> pd.DataFrame:
    """One ablation's frame: a regression task (no ``task.readout`` column value: NaN) with arms
    ``value`` and ``plain`` on 6 seeds at one lr, and a token task whose runs carry a readout; with
    ``blown``, seed 3 of the regression arm ``value`` has its validation error × ``blown``."""
    rng = np.random.default_rng(0)
    rows = []
    for arm in ("value", "plain"):
        for seed in range(6):
            err = 0.05 * (1 + 0.05 * rng.standard_normal()) * (1.0 if arm == "value" else 1.4)
            if blown and arm == "value" and seed == 3:
                err *= blown
            rows.append({"status": "FINISHED", "diverged": False, "task": "teacher", "arm": arm,
                         "variant": arm, "task.n_train": 256, "seed": seed, "train.lr": 0.01,
                         "trial_id": f"r-{arm}-{seed}", "val/best_error": err, "val/best_loss": err,
                         "test/rel_mse": err, "val/rel_mse": err, "val/zero_rel_mse": 1.0,
                         "train.max_steps": 600.0, "task.readout": np.nan})
        for seed in range(6):
            acc = 0.9 + 0.01 * rng.standard_normal()
            rows.append({"status": "FINISHED", "diverged": False, "task": "arithmetic", "arm": arm,
                         "variant": arm, "task.n_train": 256, "seed": seed, "train.lr": 0.01,
                         "trial_id": f"t-{arm}-{seed}", "val/best_error": 1 - acc, "val/best_loss": 1 - acc,
                         "test/acc": acc, "val/majority_acc": 0.2, "val/uniform_acc": 0.3,
                         "train.max_steps": 600.0, "task.readout": "last"})
    return stats.add_error(pd.DataFrame(rows))


def test_a_blown_up_regression_run_beside_token_runs_with_readouts_is_caught():
    """×20 on one regression run with no readout, in a frame whose token runs have one: flagged,
    and that run only (before: its group key was missing and groupby dropped every regression run)."""
    df = _mixed()
    flagged = df.loc[stats.blowup(df), "trial_id"].tolist()
    assert flagged == ["r-value-3"]
    assert not stats.blowup(_mixed(blown=None)).any()


def test_a_part_on_runs_with_a_missing_readout_counts_and_names_its_blown_up_run():
    """The part's decision sees the blown-up run among its pairs and names it by arm, seed and
    trial id (a power problem was printed instead, and no blown-up run counted)."""
    df = _mixed()
    part = {"claim": "C0", "name": "p", "task": "teacher", "a": "plain", "b": "value",
            "test": "difference", "delta": 0.02}
    result = protocol.decide_part(df[df["task"] == "teacher"], part, check_edge=False)
    assert result.blowups == 1
    assert result.blown_runs == (("value", 3, "r-value-3"),)


def test_groups_over_config_columns_keep_runs_with_missing_keys():
    """Counted per (task, arm, readout): every one of the 24 runs is in a group, the 12 regression
    runs under a missing readout."""
    df = _mixed()
    table = stats.counts(df, by=("task", "arm", "task.readout"))
    assert table["total"].sum() == len(df) == 24
    assert table.loc[table["task.readout"].isna(), "total"].sum() == 12
    chosen = stats.select_lr(df, group=("task", "arm", "task.n_train", "task.readout"))
    assert len(chosen) == len(df)


def test_every_groupby_in_analysis_keeps_missing_keys():
    """Each ``.groupby(...)`` call in analysis/ passes ``dropna=False``: a missing config value is
    a group of its own, never a run left out, whatever pandas version runs it."""
    missing = []
    for path in sorted((ROOT / "analysis").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "groupby"):
                kw = {k.arg: k.value for k in node.keywords}
                if not (isinstance(kw.get("dropna"), ast.Constant) and kw["dropna"].value is False):
                    missing.append(f"{path.name}:{node.lineno}")
    assert not missing, f"groupby without dropna=False: {missing}"


def test_an_ablation_section_counts_the_blown_up_runs_of_its_reruns(tmp_path):
    """A section's trial line counts its exploratory runs; blown-up runs of its confirmation block
    (C9′ rests on 3 of `control`'s) are counted beside them, never hidden under "0 blown up"."""
    from analysis import render_tables, reporting

    explore = _mixed(blown=None)
    block = _mixed().assign(seed=lambda d: d["seed"] + 2000)  # one blown-up run, seed 2003
    every = stats.add_error(pd.concat([explore, block], ignore_index=True).drop(columns=[stats.BLOWUP]))
    shown = every[every["seed"] < 2000]
    sweeps = pd.DataFrame(columns=["ablation", "start_time", "end_time"])
    section = reporting._ablation_section("control", shown, sweeps, tmp_path, "r/control", None, every)
    assert section.counts["blowup"] == 0 and section.reruns == (24, 1)  # the values, then their words
    line = next(x for x in render_tables.ablation_section(section) if x.startswith("Trials:"))
    assert "0 blown up;" in line and "24 runs, 1 blown up." in line


def test_theory_states_each_registered_steps_to_target():
    """docs/theory.md's claims table gives every registered steps-to-target part's target as the
    ablation files register it (C12(b): 1e-6, not the 0.003 of its first registration)."""
    from omegaconf import OmegaConf

    table = (ROOT / "docs" / "theory.md").read_text()
    targets = {str(part["value"]).removeprefix("steps_to_")
               for path in sorted((ROOT / "conf" / "ablation").glob("*.yaml"))
               for part in (OmegaConf.load(path).get("ablation") or {}).get("parts") or []
               if str(part.get("value", "")).startswith("steps_to_")}
    assert targets, "no steps-to-target part registered"
    for target in targets:
        mantissa, _, exponent = f"{float(target):g}".partition("e")  # 1e-06 is written 1e-6
        written = f"{mantissa}e{int(exponent)}" if exponent else mantissa
        assert f"error is ≤ {written}" in table, (target, written)
