"""Smaller bad inputs (issue 27, failure 7): each exits 2 with one line naming the value, and
nothing is written (no store, no parent run, no output folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

FAST = ["train.max_steps=40", "train.eval_every=20", "task.n_val=64", "task.n_test=128"]
CONF = Path(__file__).resolve().parent.parent / "conf"


def _extra_conf(root: Path) -> Path:
    conf = root / "extra"
    (conf / "ablation").mkdir(parents=True)
    (conf / "model").mkdir()
    (conf / "ablation" / "broken.yaml").write_text(
        "# @package _global_\nablation:\n  name: broken\n  grid:\n    seed: [0, 1\n")
    preset = [line for line in (CONF / "model" / "softmax.yaml").read_text().splitlines()
              if not line.startswith(("defaults", "  -"))]
    (conf / "model" / "noschema.yaml").write_text("\n".join(preset) + "\n")
    return conf


@pytest.mark.parametrize("override, named", [
    ("train.lr=inf", "train.lr"),
    ("+ablation=smoke seed=range(0)", "seed=range(0)"),
    ("+ablation=broken", "broken.yaml:5"),
    ("model=noschema", "noschema"),
    ("model=softmax,noschema", "noschema"),
])
@pytest.mark.integration
def test_each_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, invoke, override, named):
    work = tmp_path / "work"
    work.mkdir()
    conf = _extra_conf(tmp_path)
    code, out, err = invoke("harness", ["cluster=serial", *FAST, *override.split(),
                                        f"hydra.searchpath=[file://{conf}]"], work)
    assert code == 2, (out[-2000:], err[-3000:])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], lines
    assert not (work / "mlflow.db").exists() and not (work / "mlartifacts").exists()  # no parent run
    written = [p.relative_to(work) for p in work.rglob("*") if p.is_file()]
    # at most Hydra's own record of the command (written before the harness sees it)
    assert all(".hydra" in p.parts or p.suffix == ".log" for p in written), written


@pytest.mark.integration
def test_a_yaml_error_names_file_and_line_for_a_default_group_choice(tmp_path, invoke):
    """A broken preset reached through an ablation's defaults list, not the command line."""
    conf = tmp_path / "extra"
    (conf / "ablation").mkdir(parents=True)
    (conf / "task").mkdir()
    (conf / "task" / "teacher_x.yaml").write_text("defaults:\n  - teacher_schema\n  - _self_\nn: [1, 2\n")
    (conf / "ablation" / "uses.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /task: teacher_x\nablation:\n  name: uses\n"
        "  grid:\n    seed: range(2)\n")
    work = tmp_path / "work"
    work.mkdir()
    code, _, err = invoke("harness", ["cluster=serial", "+ablation=uses", f"hydra.searchpath=[file://{conf}]"], work)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "teacher_x.yaml:4" in lines[0], lines


@pytest.mark.parametrize("cluster, niceness, message", [
    ("local", 20, "cluster.worker_niceness must be 0-19"),
    ("local", -1, "cluster.worker_niceness must be 0-19"),
    ("ray", 5, "cluster.worker_niceness=5 is for the workers that cluster=local starts"),
    ("serial", 5, "cluster.worker_niceness=5 is for the workers that cluster=local starts"),
])
def test_a_worker_niceness_out_of_range_or_for_another_cluster_is_refused(cluster, niceness, message):
    from harness.config import ClusterConfig, SchedulerKind
    from harness.expansion import SweepError
    from harness.validate import check_cluster

    check_cluster(ClusterConfig(scheduler=SchedulerKind(cluster), worker_niceness=0))  # the default passes
    with pytest.raises(SweepError, match=message):
        check_cluster(ClusterConfig(scheduler=SchedulerKind(cluster), worker_niceness=niceness))
