"""The task health table (analysis/health.py) on synthetic runs tables, and its path through the
results bundle (the offline regeneration gives the same table)."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis import render_tables, stats
from analysis.bundle import read_bundle, split, write_bundle
from analysis.health import NO_RUNS, NOTHING, OK, UNDECIDABLE, Judged, arm_errors, task_health
from analysis.render_tables import health as health_lines
from tests import synthetic_runs


def _teacher_runs(task: str, errors: dict[tuple[str, float], tuple[float, float]], sizes=(64, 256),
                  seeds=range(3), uniform: float = 0.6, identity: float | None = None) -> pd.DataFrame:
    """Raw runs of ``task``: for each (arm, lr), test error ``(val, test)`` at the largest size
    (twice that at smaller ones), the same for every seed."""
    rows = []
    for (arm, lr), (val, test) in errors.items():
        for n in sizes:
            scale = 1.0 if n == max(sizes) else 2.0
            for s in seeds:
                row = {"run_id": f"{task}-{arm}-{lr}-{n}-{s}", "status": "FINISHED", "diverged": False,
                       "task": task, "variant": arm, "arm": arm, "task.n_train": n, "seed": s,
                       "train.lr": lr, "val/best_error": val * scale + 0.001 * s,
                       "test/rel_mse": test * scale + 0.001 * s, "test/uniform_rel_mse": uniform,
                       "test/zero_rel_mse": 1.0}
                if identity is not None:
                    row["test/identity_rel_mse"] = identity
                rows.append(row)
    return stats.add_error(pd.DataFrame(rows))


@pytest.fixture()
def runs() -> dict[str, pd.DataFrame]:
    # teacher_quartic: every student worse than predicting zero (the old 4.1-4.7); teacher: lr
    # 0.01 is chosen on validation, where the test error is 0.2 (0.1 at the unchosen lr 0.1)
    quartic = _teacher_runs("teacher_quartic", {("softmax_free", 0.01): (4.2, 4.1),
                                                ("higher_order", 0.01): (4.8, 4.7)})
    teacher = _teacher_runs("teacher", {("softmax", 0.01): (0.2, 0.2), ("softmax", 0.1): (0.5, 0.1),
                                        ("mlp", 0.01): (0.9, 0.9)}, identity=3.7)
    return {"higher_order": quartic, "forms": teacher, "tokens": synthetic_runs.tokens()}


PARTS = {"higher_order": [{"claim": "C6", "name": "q", "task": "teacher_quartic", "a": "higher_order",
                           "b": "softmax_free", "delta": 0.02}],
         "forms": [{"claim": "C9", "name": "s", "task": "teacher", "a": "softmax", "b": "mlp",
                    "delta": 0.02},
                   {"claim": "C10", "name": "o", "task": "teacher", "a": "softmax", "b": "mlp",
                    "delta": 0.02, "role": "observation"}]}


def test_a_task_where_nothing_beats_the_reference_is_flagged_and_one_that_learns_is_not(runs):
    table = task_health(runs, PARTS).set_index("task")
    quartic, teacher = table.loc["teacher_quartic"], table.loc["teacher"]
    assert quartic["status"] == NOTHING
    assert quartic["reference"] == "uniform mixing" and quartic["reference_error"] == pytest.approx(0.6)
    assert quartic["margin"] < 0 and quartic["decidable"] == (0, 1) and not quartic["parts"][0].ok
    assert quartic["best"] == ("softmax_free", "") and quartic["best_error"] == pytest.approx(4.101)
    assert quartic["worst"] == ("higher_order", "")
    assert teacher["status"] == OK and teacher["decidable"] == (1, 1)  # the observation is not judged
    assert [(k, round(v, 6)) for k, v in teacher["references"]] == [("uniform mixing", 0.6), ("identity", 3.7),
                                                                    ("zero predictor", 1.0)]
    # at the lr chosen on validation (0.01), not the one with the lower test error
    assert teacher["best"] == ("softmax", "") and teacher["best_error"] == pytest.approx(0.201)
    assert teacher["margin"] == pytest.approx(0.6 - 0.201)
    assert teacher["n_train"] == (256,)
    tokens = table.loc["arithmetic"]  # no part uses it: only the learning check
    assert tokens["reference"] == "majority class" and tokens["reference_error"] == pytest.approx(0.8)
    assert tokens["status"] == OK and tokens["parts"] == ()
    assert list(table.index) == ["arithmetic", "teacher", "teacher_quartic"]  # natural order


def test_a_part_whose_margin_no_arm_reaches_makes_the_task_undecidable(runs):
    parts = {"forms": [{**PARTS["forms"][0], "delta": 0.5}]}  # 0.6 − 0.201 < 0.5
    row = task_health(runs, parts).set_index("task").loc["teacher"]
    assert row["status"] == UNDECIDABLE and row["parts"] == (Judged("C9", "forms", 0.5, False, True),)
    base = PARTS["forms"][0]
    parts = {**PARTS, "size": [{**base, "claim": "C12"}], "absent": [{**base, "task": "teacher_control"}]}
    table = task_health(runs, parts).set_index("task")  # two parts whose ablations have no runs
    assert table.loc["teacher", "status"] == UNDECIDABLE
    assert Judged("C12", "size", 0.02, False, False) in table.loc["teacher", "parts"]
    assert table.loc["teacher_control", "status"] == NO_RUNS


def test_the_identity_predictor_is_a_reference_where_it_is_best():
    runs = {"ladder": _teacher_runs("teacher_residual", {("residual", 0.01): (0.01, 0.01),
                                                         ("value", 0.01): (0.3, 0.3)},
                                    uniform=0.9, identity=0.25)}
    row = task_health(runs, {}).set_index("task").loc["teacher_residual"]
    assert row["reference"] == "identity" and row["reference_error"] == pytest.approx(0.25)
    assert row["worst_error"] == pytest.approx(0.301) and row["status"] == OK


def test_diverged_and_failed_runs_are_left_out_and_arms_are_per_ablation(runs):
    df = runs["forms"].copy()
    df.loc[(df["arm"] == "mlp") & (df["seed"] == 0), "diverged"] = True  # every lr of mlp now diverged
    errs = arm_errors({"forms": df, "other": runs["forms"]})
    assert "mlp" not in set(errs[errs["ablation"] == "forms"]["arm"])
    assert set(errs[errs["ablation"] == "other"]["arm"]) == {"softmax", "mlp"}
    row = task_health({"forms": df, "other": runs["forms"]}, {}).set_index("task").loc["teacher"]
    assert row["best"] in (("softmax", "forms"), ("softmax", "other"))


def test_markdown_section_and_the_bundle_gives_the_same_table(runs, tmp_path):
    direct = task_health(runs, PARTS)
    lines = health_lines(direct)
    text = "\n".join(lines)
    assert "| `teacher_quartic` |" in text and f"**{render_tables.HEALTH_WORDS[NOTHING]}**" in text
    assert "uniform mixing 0.6 · identity 3.7 · zero predictor 1" in text and "C6 `higher_order` δ=0.02 ✗" in text and "C9 `forms` δ=0.02 ✓" in text
    bundle = pd.concat([df.assign(ablation=name, role="trial") for name, df in runs.items()],
                       ignore_index=True)
    derived = [c for c in bundle if c.startswith(("error", "reference_", "lr_"))]  # the report adds them
    path = write_bundle(bundle.drop(columns=derived), tmp_path / "runs.csv.gz")
    again, _ = split(read_bundle(path))
    offline = task_health({name: stats.add_error(df) for name, df in again.items()}, PARTS)
    pd.testing.assert_frame_equal(offline, direct)
    assert health_lines(offline) == lines
