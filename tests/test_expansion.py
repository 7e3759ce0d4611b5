"""Config composition, grid expansion and trial ids (harness/config.py, harness/expansion.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra import compose

from harness.expansion import SweepError, compose_trial, expand, expand_suite, trial_id

CONF = Path(__file__).resolve().parent.parent / "conf"

ABLATIONS = sorted(p.stem for p in (CONF / "ablation").glob("*.yaml"))


def _expand(cli: list[str]):
    cfg = compose(config_name="config", overrides=cli)
    return expand(cfg, cli)


def _stated_count(name: str) -> int:
    header = (CONF / "ablation" / f"{name}.yaml").read_text()
    match = re.search(r"^# Trials:.*?=\s*(\d+)", header, re.MULTILINE)
    assert match, f"ablation {name} must state its trial count in a '# Trials: ... = N' line"
    return int(match.group(1))


@pytest.mark.parametrize("name", ABLATIONS)
def test_every_ablation_composes_to_its_stated_trial_count(hydra_conf, name):
    """The paper suite (every ablation of paper.md §13 at once) also checks that each part's
    arms and task are among what its ablation runs: a part whose arm label or task is misspelt
    would read 'inconclusive: no runs' forever (one expansion of the suite for both checks)."""
    cli = [f"+ablation={name}"]
    ablations = expand_suite(compose(config_name="config", overrides=cli), cli)
    trials = [t for _, ts in ablations for t in ts]
    assert len(trials) == _stated_count(name)
    for _, ts in ablations:  # unique within an ablation (two ablations may share a trial)
        assert len({t.trial_id for t in ts}) == len(ts)
    if len(ablations) == 1:
        assert all(t.config.ablation.name == name for t in trials)
    if name == "paper":
        _every_part_names_arms_and_a_task_its_ablation_runs(ablations)


def _every_part_names_arms_and_a_task_its_ablation_runs(ablations) -> None:
    from analysis.protocol import spec_dict
    from analysis.trials import arms

    assert len(ablations) > 10
    for name, trials in ablations:
        labels = arms(trials).assign(task=[t.task for t in trials])
        for part in map(spec_dict, trials[0].config.ablation.parts):
            mine = set(labels[labels["task"] == part["task"]]["arm"])
            assert mine, f"{name}: no trial on task {part['task']!r}"
            wanted = [part["a"], *(part["choose_b"] or [part["b"]]), *part["control"],
                      *([part["floor"]] if part["floor"] else [])]  # positive controls and floors too
            assert set(wanted) <= mine, f"{name}: {sorted(set(wanted) - mine)} not among {sorted(mine)}"


def test_smoke_grid_is_the_cross_product(hydra_conf):
    trials = _expand(["+ablation=smoke"])
    points = {(t.variant, t.config.task.n_train, t.config.seed) for t in trials}
    assert points == {(m, n, s) for m in ("softmax", "relu_attention", "mlp")
                      for n in (64, 256, 1024) for s in (0, 1)}
    assert {t.config.model.name for t in trials} == {"attention", "mlp"}


def test_cli_value_replaces_the_grid_axis_and_applies_to_every_trial(hydra_conf):
    trials = _expand(["+ablation=smoke", "train.max_steps=50", "seed=0"])
    assert len(trials) == 9
    assert {t.config.seed for t in trials} == {0}
    assert {t.config.train.max_steps for t in trials} == {50}


def test_without_ablation_one_trial_of_the_defaults(hydra_conf):
    trials = _expand([])
    assert len(trials) == 1
    assert trials[0].variant == "softmax" and trials[0].overrides == ()


def test_model_overrides_in_the_grid_name_the_variant(hydra_conf):
    trial = compose_trial(["+ablation=smoke"], ["model=softmax", "model.d1=4"])
    assert trial.variant == "softmax[d1=4]"


def test_trial_id_is_stable_and_ignores_where_a_trial_runs(hydra_conf):
    base = compose_trial([], [])
    again = compose_trial([], [])
    assert base.trial_id == again.trial_id
    for where in (["cluster=serial"], ["tracking=server"], ["cluster.cpus_per_trial=2"],
                  ["tracking.db_path=elsewhere.db"],
                  ["+ablation=smoke", "train.max_steps=500"]):  # same trial, other ablation
        assert compose_trial(where, []).trial_id == base.trial_id, where


@pytest.mark.parametrize("change", [
    "seed=1", "train.lr=0.01", "train.max_steps=7", "task.n_train=65", "task.teacher_seed=3",
    "model.sigma=relu", "model.residual=true", "model=mlp", "train.dtype=float64",
])
def test_any_change_of_what_a_trial_is_gives_a_new_id(hydra_conf, change):
    assert compose_trial([change], []).trial_id != compose_trial([], []).trial_id


def test_results_version_is_part_of_the_id(hydra_conf, monkeypatch):
    cfg = compose(config_name="config")
    before = trial_id(cfg)
    monkeypatch.setattr("harness.expansion.RESULTS_VERSION", 10**6)
    assert trial_id(cfg) != before


@pytest.mark.parametrize("override, named", [
    ("model.sigmaa=relu", "model.sigmaa"),
    ("train.lr=abc", "train.lr"),
    ("model.sigma=foo", "model.sigma"),
    ("seed=x", "seed"),
])
def test_mistyped_key_or_wrong_type_fails_at_compose_time_naming_the_key(hydra_conf, override, named):
    with pytest.raises(SweepError, match=re.escape(named)):
        compose_trial([override], [])


def test_bad_sigma_lists_the_allowed_values(hydra_conf):
    with pytest.raises(SweepError, match="softmax"):
        compose_trial(["model.sigma=foo"], [])


def test_unparsable_grid_is_rejected(hydra_conf):
    cfg = compose(config_name="config", overrides=["+ablation=smoke", "ablation.grid.seed='range(('"])
    with pytest.raises(SweepError, match="grid"):
        expand(cfg, ["+ablation=smoke"])


@pytest.mark.parametrize("name", ["smoke", "sigma_vs_softmax", "knowledge_forms", "rotation",
                                  "finite_information", "practical", "arithmetic"])
def test_fast_composition_gives_the_full_path_ids_configs_and_identities(hydra_conf, name):
    from omegaconf import OmegaConf

    from harness.expansion import Composer, grid_points, identity_dict

    cli = [f"+ablation={name}", "scale=tiny"]
    cfg = compose(config_name="config", overrides=cli)
    points = grid_points(OmegaConf.to_container(cfg.ablation.grid, resolve=True), set())
    fast, full = Composer(cli), Composer(cli, fast=False)
    for point in points:
        a, b = fast.trial(point), full.trial(point)
        assert (a.trial_id, a.variant, a.task, a.overrides) == (b.trial_id, b.variant, b.task, b.overrides)
        assert a.config == b.config
        assert a.identity == b.identity == identity_dict(b.config)


def test_fast_composition_rejects_what_the_full_path_rejects(hydra_conf):
    from harness.expansion import Composer

    for point in (["train.lr=fast"], ["task.n_trian=3"], ["model.sigma=softmx"]):
        with pytest.raises(SweepError, match="cannot compose trial"):
            Composer([]).trial(point)


def test_extra_grids_add_points_without_a_full_cross_product(hydra_conf):
    """ablation.extra_grids: the trials are the union of grid and grid ⊕ each entry; a key that
    is not a grid axis is refused, naming it and the allowed ones."""
    from omegaconf import open_dict

    cli = ["+ablation=smoke"]
    cfg = compose(config_name="config", overrides=cli)
    with open_dict(cfg):
        cfg.ablation.grid = {"model": "softmax", "task.n_train": "64", "seed": "range(2)"}
        cfg.ablation.extra_grids = [{"model": "mlp,softmax", "task.n_train": "64,256"}]
    trials = expand(cfg, cli)
    points = {(t.variant, t.config.task.n_train, t.config.seed) for t in trials}
    assert points == {(v, n, s) for v in ("softmax", "mlp") for n in (64, 256) for s in (0, 1)}
    assert len(trials) == len(points)  # the grid's own points are not repeated
    with open_dict(cfg):
        cfg.ablation.extra_grids = [{"train.lr": "0.1"}]
    with pytest.raises(SweepError, match=r"train.lr.*allowed"):
        expand(cfg, cli)


def test_the_full_scale_paper_suite_passes_preflight(hydra_conf):
    """Every size ``scale=full`` sets is possible for its task (T1(i)'s pool of 8,000 expressions
    holds no 8,192 training examples: arithmetic_mod keeps its 1,024). The default scale is
    checked by every report run, tiny by the report tests."""
    from harness.validate import preflight

    cli = ["+ablation=paper", "scale=full"]
    ablations = expand_suite(compose(config_name="config", overrides=cli), cli)
    trials = [t for _, ts in ablations for t in ts]
    assert {a for a, _ in ablations} >= {"arithmetic_mod", "control", "rotation"}
    preflight(trials, "cpu", "auto")  # raises on an impossible size
