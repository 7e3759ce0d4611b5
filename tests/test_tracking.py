"""One trial end to end into MLflow in tmp_path, read back through the analysis loader."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient

from analysis.load import load_runs
from analysis.plots import sample_efficiency
from harness.config import TrackingConfig, TrackingKind
from harness.records import Outcome
from harness.scheduler import SerialScheduler
from harness.expansion import compose_trial
from harness.store import resolve_store
from harness.tracking import Tracker
from tests.recording import claim, log_trial

FAST = ["train.max_steps=30", "train.eval_every=10", "task.n_train=32", "task.n_val=32",
        "task.n_test=64", "cluster=serial"]


def test_store_is_made_absolute_with_artifacts_beside_it(tmp_path):
    store = resolve_store(TrackingConfig(db_path="sub/runs.db"), tmp_path)
    assert store.uri == f"sqlite:///{tmp_path}/sub/runs.db"
    assert store.artifact_root == (tmp_path / "sub" / "mlartifacts").as_uri()
    with pytest.raises(ValueError, match="tracking.uri"):
        resolve_store(TrackingConfig(kind=TrackingKind.server, uri=None), tmp_path)


def test_trial_recorded_in_mlflow_and_read_back_typed(hydra_conf, tmp_path):
    trials = [compose_trial(FAST, ["seed=0"]), compose_trial(FAST, ["seed=1"])]
    store = resolve_store(TrackingConfig(), tmp_path)
    tracker = Tracker(store)
    experiment = tracker.experiment("unit")
    parent = tracker.start_parent(experiment, "unit", len(trials), 0, FAST)
    with SerialScheduler(trials[0].config.cluster) as scheduler:
        outcomes = list(scheduler.run(trials))
    assert all(o.error is None for o in outcomes)
    failed = Outcome(trials[0], None, "Traceback ...\nRuntimeError: boom", "here")
    for outcome in [*outcomes, failed]:
        log_trial(tracker, experiment, parent, "unit", outcome)
    tracker.end_run(parent)

    df = load_runs("unit", store.uri)
    assert len(df) == 3
    assert sorted(df["status"]) == ["FAILED", "FINISHED", "FINISHED"]
    ok = df[df["status"] == "FINISHED"].sort_values("seed")
    assert ok["seed"].tolist() == [0, 1]
    for column in ("seed", "task.n_train", "train.lr", "test/rel_mse", "n_params"):
        assert pd.api.types.is_numeric_dtype(df[column]), column
    assert df["model.residual"].dtype == "boolean"
    assert set(df["trial_id"]) == {t.trial_id for t in trials}
    assert (ok["test/rel_mse"].to_numpy() == [o.result.metrics["test/rel_mse"]
                                               for o in sorted(outcomes, key=lambda o: o.trial.config.seed)]).all()

    client = MlflowClient(store.uri)
    child = client.get_run(ok["run_id"].iloc[0])
    assert child.data.tags["mlflow.parentRunId"] == parent
    assert {"trial_id", "ablation", "variant", "task", "git_commit", "node"} <= set(child.data.tags)
    assert child.data.tags["task"] == "teacher"
    assert "symmetry/permutation_err" in child.data.metrics
    history = client.get_metric_history(child.info.run_id, "val/loss")
    assert [m.step for m in history] == [10, 20, 30]
    local = Path(client.download_artifacts(child.info.run_id, "model_state.pt", str(tmp_path)))
    state = torch.load(local)
    assert {"W_Q", "W_K"} <= set(state)
    bad = client.get_run(df[df["status"] == "FAILED"]["run_id"].iloc[0])
    assert "boom" in bad.data.tags["error"]
    assert str(tmp_path) in client.get_experiment(experiment).artifact_location
    assert not (Path.cwd() / "mlruns").exists()

    paths = sample_efficiency(df, tmp_path / "plot")
    assert all(p.stat().st_size > 1000 for p in paths)


def test_long_params_are_kept_in_full_in_config_yaml_and_never_look_alike(hydra_conf, tmp_path):
    """Two trials whose ``task.train_lengths`` (2,101 entries) differ only in the last entry get
    different ids and different param values (MLflow cuts a param at 6,000 characters); each
    run's resolved config is its ``config.yaml`` artifact, with the full list."""
    import yaml

    trials = [compose_trial([*FAST, "task=teacher_length",
                             f"task.train_lengths=[{','.join(['4'] * 2100 + [str(last)])}]"], [])
              for last in (4, 16)]
    assert trials[0].trial_id != trials[1].trial_id
    tracker = Tracker(resolve_store(TrackingConfig(), tmp_path))
    experiment = tracker.experiment("unit")
    parent = tracker.start_parent(experiment, "unit", 2, 0, [])
    runs = [claim(tracker, experiment, parent, "unit", t) for t in trials]
    for run_id in runs:  # a run's params ride on its next write: here its closing
        tracker.end_run(run_id, "KILLED")
    client = MlflowClient(tracker.store.uri)
    params = [client.get_run(r).data.params["task.train_lengths"] for r in runs]
    assert params[0] != params[1] and all("config.yaml" in p and len(p) < 6000 for p in params)
    for run_id, last in zip(runs, (4, 16)):
        path = client.download_artifacts(run_id, "config.yaml", str(tmp_path))
        config = yaml.safe_load(Path(path).read_text())
        assert len(config["task"]["train_lengths"]) == 2101
        assert config["task"]["train_lengths"][-1] == last
        assert config["seed"] == 0 and config["train"]["max_steps"] == 30


def test_inf_and_nan_are_never_stored_as_numbers(hydra_conf, tmp_path):
    """A non-finite metric is named in the run's ``nonfinite`` tag instead of being stored (MLflow
    would store inf as 1.797e308, which tables average); the loader reads it back as NaN with the
    ``nonfinite`` flag, and so it reads the 1.797e308 of runs recorded before."""
    import dataclasses
    import math

    from mlflow.entities import Metric

    trial = compose_trial(FAST, ["seed=0"])
    with SerialScheduler(trial.config.cluster) as scheduler:
        (outcome,) = list(scheduler.run([trial]))
    result = outcome.result
    bad = dataclasses.replace(result, metrics={**result.metrics, "test/rel_mse": math.inf,
                                               "val/best_loss": math.nan},
                              curve=[*result.curve, {"step": 40, "train/loss": math.inf}])
    tracker = Tracker(resolve_store(TrackingConfig(), tmp_path))
    experiment = tracker.experiment("unit")
    parent = tracker.start_parent(experiment, "unit", 2, 0, [])
    run_id = log_trial(tracker, experiment, parent, "unit", dataclasses.replace(outcome, result=bad))
    # another trial id: the loader keeps one FINISHED run per trial (harness/leases.py)
    other = dataclasses.replace(outcome, trial=dataclasses.replace(trial, trial_id="0" * 16))
    old = log_trial(tracker, experiment, parent, "unit", other)
    client = MlflowClient(tracker.store.uri)
    later = result.end_ms + 1000  # an older harness stored inf, which MLflow made 1.797e308
    # after the last step too: the final metrics are logged at the curve's last step, and MLflow's
    # latest value is the one of the largest step
    client.log_batch(old, metrics=[Metric("test/rel_mse", float("inf"), later, int(result.curve[-1]["step"]) + 1)])
    stored = client.get_run(run_id)
    assert "test/rel_mse" not in stored.data.metrics and "val/best_loss" not in stored.data.metrics
    assert set(stored.data.tags["nonfinite"].split(",")) == {"test/rel_mse=inf", "val/best_loss=nan",
                                                             "train/loss@40=inf"}
    assert all(math.isfinite(m.value) for m in client.get_metric_history(run_id, "train/loss"))
    df = load_runs("unit", tracker.store.uri).set_index("run_id")
    assert df.loc[[run_id, old], "test/rel_mse"].isna().all()
    assert df.loc[run_id, "nonfinite"] and df.loc[old, "nonfinite"]
    assert df.loc[run_id, "test/uniform_rel_mse"] == result.metrics["test/uniform_rel_mse"]


def _finishing_between_reads(monkeypatch, reader: Tracker, owner: Tracker, parent: str, run_id: str) -> None:
    """Make ``owner``'s driver close its trial run FINISHED and then its parent run (the order a
    driver closes them in) just before ``reader`` first reads that parent, i.e. after ``reader``
    has read the trial run as RUNNING."""
    real = reader.client.get_run
    done: list[bool] = []

    def get_run(wanted: str):
        if wanted == parent and not done:
            done.append(True)
            owner.end_run(run_id, "FINISHED")
            owner.end_run(parent, "FINISHED")
        return real(wanted)

    monkeypatch.setattr(reader.client, "get_run", get_run)


def test_a_run_finished_while_another_driver_reads_the_store_is_not_taken_for_stale(
        hydra_conf, tmp_path, monkeypatch):
    """A driver reads the RUNNING runs, their driver then finishes them and closes its parent,
    and only then is that parent read (closed): the runs are not closed as stale (that turned
    FINISHED results into KILLED ones), and a claim of their trial is lost, not won (that ran
    the trial twice)."""
    store = resolve_store(TrackingConfig(), tmp_path)
    owner, reader = Tracker(store), Tracker(store)
    experiment = owner.experiment("unit")
    trials = [compose_trial(FAST, [f"seed={seed}"]) for seed in (0, 1)]
    for trial in trials:
        parent = owner.start_parent(experiment, "unit", 1, 0, [])
        run_id = claim(owner, experiment, parent, "unit", trial)
        with monkeypatch.context() as patch:
            _finishing_between_reads(patch, reader, owner, parent, run_id)
            if trial is trials[0]:
                assert reader.close_stale(experiment) == 0
            else:
                mine = reader.start_parent(experiment, "unit", 1, 0, [])
                assert claim(reader, experiment, mine, "unit", trial) is None
        assert MlflowClient(store.uri).get_run(run_id).info.status == "FINISHED"
    assert sorted(owner.finished_trials(experiment)) == sorted(t.trial_id for t in trials)
    assert all(len(runs) == 1 for runs in owner.finished_trials(experiment).values())


def test_a_store_error_reading_a_parent_never_makes_its_runs_stale(hydra_conf, tmp_path, monkeypatch):
    """A parent run that cannot be read for a reason other than its absence (a busy store:
    database locked, a timeout) leaves its runs alone; a parent that does not exist does not."""
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, TEMPORARILY_UNAVAILABLE

    store = resolve_store(TrackingConfig(), tmp_path)
    owner, reader = Tracker(store), Tracker(store)
    experiment = owner.experiment("unit")
    parent = owner.start_parent(experiment, "unit", 1, 0, [])
    run_id = claim(owner, experiment, parent, "unit", compose_trial(FAST, ["seed=0"]))
    real = reader.client.get_run
    for code, closed in ((TEMPORARILY_UNAVAILABLE, 0), (RESOURCE_DOES_NOT_EXIST, 1)):
        def get_run(wanted: str, code=code):
            if wanted == parent:
                raise MlflowException("cannot read it", error_code=code)
            return real(wanted)

        monkeypatch.setattr(reader.client, "get_run", get_run)
        assert reader.close_stale(experiment) == closed
    assert real(run_id).info.status == "KILLED"


@pytest.mark.parametrize("groups", [["model=softmax", "task=teacher"], ["model=transformer", "task=arithmetic"],
                                    ["model=gru", "task=nearest_length"], ["model=higher_order", "task=argmax"]])
def test_config_yaml_is_the_resolved_config_as_omegaconf_writes_it(hydra_conf, groups):
    """``config.yaml`` is written from plain data (:func:`harness.config.to_plain`), not through
    OmegaConf's structured nodes; it holds what OmegaConf's container holds, enums by name."""
    import yaml
    from omegaconf import OmegaConf

    from harness.config import to_plain

    config = compose_trial(groups, ["seed=3", "train.lr=0.003"]).config
    expected = OmegaConf.to_container(OmegaConf.structured(config), enum_to_str=True)
    assert to_plain(config) == expected
    assert yaml.safe_load(yaml.safe_dump(to_plain(config), sort_keys=False)) == expected
    assert expected["train"]["optimizer"] == "adam"  # an enum, by name


def test_the_resume_listing_is_mlflows_search_of_finished_trial_runs(tmp_path):
    """The resume listing of a SQLite store (one SQL query of the trial_id tags,
    harness.mlflow_sql.finished_runs) answers what MLflow's own search answers: FINISHED runs with a
    trial_id, of this experiment only, deleted runs left out, every run id of a trial kept; given
    a sweep's trial ids, of those only."""
    from harness.leases import search_all

    store = resolve_store(TrackingConfig(), tmp_path)
    tracker = Tracker(store)
    client = tracker.client
    experiment, other = tracker.experiment("unit"), tracker.experiment("other")

    def run(exp: str, status: str | None, **tags: str) -> str:
        run_id = client.create_run(exp, tags=tags).info.run_id
        if status is not None:
            client.set_terminated(run_id, status)
        return run_id

    twice = [run(experiment, "FINISHED", trial_id="a"), run(experiment, "FINISHED", trial_id="a")]
    run(experiment, "FINISHED", trial_id="b")
    client.delete_run(run(experiment, "FINISHED", trial_id="deleted"))
    run(experiment, "FAILED", trial_id="failed")
    run(experiment, "KILLED", trial_id="killed")
    run(experiment, None, trial_id="running")
    run(experiment, "FINISHED")  # a parent run: no trial_id
    run(other, "FINISHED", trial_id="elsewhere")

    listed = tracker.finished_trials(experiment)
    searched: dict[str, list[str]] = {}
    for found in search_all(client, experiment, "attributes.status = 'FINISHED'"):
        if "trial_id" in found.data.tags:
            searched.setdefault(found.data.tags["trial_id"], []).append(found.info.run_id)
    assert sorted(listed) == ["a", "b"]
    assert {k: sorted(v) for k, v in listed.items()} == {k: sorted(v) for k, v in searched.items()}
    assert sorted(listed["a"]) == sorted(twice)
    only = tracker.finished_trials(experiment, {"a", "failed", "elsewhere", "nope"})  # a sweep's own
    assert {k: sorted(v) for k, v in only.items()} == {"a": sorted(twice)}
    assert tracker.finished_trials(experiment, set()) == {}
    # by the experiment's name, as a sweep's checks read it once (harness.store.finished_trials)
    from harness.store import finished_trials

    by_name = finished_trials(store, "unit")
    assert {k: sorted(v) for k, v in by_name.items()} == {k: sorted(v) for k, v in searched.items()}
    assert {k: sorted(v) for k, v in finished_trials(store, "unit", {"a", "nope"}).items()} == {"a": sorted(twice)}
    assert finished_trials(store, "missing") == {}


def test_a_batch_of_claims_and_records_is_two_transactions_and_keeps_every_value(hydra_conf, tmp_path):
    """16 trials claimed in one bakery round and recorded in one batch are two transactions of
    the batched writer (:mod:`harness.bulk`: the claimed runs with their tags and ticket; every
    record's params, metrics, tags and closing) and 5 MLflow client calls a round (the parent's
    choosing mark set and cleared, the live rivals read before the tickets, the choosers, the
    rivals live; the rivals finished are one SQL query on a SQLite store), with the claim's
    lease read and at most one a second for the records' lease checks, each one SQL row of the
    parent (:meth:`harness.bulk.BulkStore.run_state`, no ``get_run``); artifacts are written
    without a call. (Before the batched writer: 3 client calls a trial, create_run,
    log_batch and set_terminated, each a transaction; 11 before batches.) Every run still holds
    every tag, param, metric and artifact."""
    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(16)]
    store = resolve_store(TrackingConfig(), tmp_path)
    tracker = Tracker(store)
    experiment = tracker.experiment("unit")
    parent = tracker.start_parent(experiment, "unit", 16, 0, FAST)
    with SerialScheduler(trials[0].config.cluster) as scheduler:
        (outcome,) = scheduler.run([trials[0]])
    calls: list[str] = []
    depth = [0]  # calls made by MLflow's own methods are not counted
    client = tracker.client
    for name in ("create_run", "get_run", "search_runs", "set_tag", "log_batch", "log_text",
                 "log_artifact", "set_terminated", "delete_run"):
        def counted(*args, _name=name, _call=getattr(client, name), **kwargs):
            if not depth[0]:
                calls.append(_name)
            depth[0] += 1
            try:
                return _call(*args, **kwargs)
            finally:
                depth[0] -= 1
        setattr(client, name, counted)
    state_reads = []
    run_state = tracker.bulk.run_state
    tracker.bulk.run_state = lambda run_id: state_reads.append(run_id) or run_state(run_id)
    commits = tracker.bulk.commits
    start = time.monotonic()
    run_ids = tracker.claim_batch(experiment, parent, "unit", trials)
    assert all(run_ids) and len(set(run_ids)) == 16
    assert tracker.bulk.commits - commits == 1  # the claimed runs: one transaction
    assert tracker.finish_trials([(run_id, outcome, []) for run_id in run_ids]) == [True] * 16
    assert tracker.bulk.commits - commits == 2  # the 16 records: one more
    seconds = time.monotonic() - start
    counts = Counter(calls)
    assert counts == {"set_tag": 2, "search_runs": 3}, counts  # no get_run: the lease reads are SQL
    assert 1 <= len(state_reads) <= 2 + seconds, state_reads  # the claim's lease read; records' once a second

    reader = MlflowClient(store.uri)
    for run_id, trial in zip(run_ids, trials):
        run = reader.get_run(run_id)
        assert run.info.status == "FINISHED"
        assert {"trial_id", "ticket", "node", "diverged", "device", "processor", "pack_size", "pack_members",
                "compiled"} <= set(run.data.tags)
        assert run.data.tags["trial_id"] == trial.trial_id
        assert run.data.params["seed"] == str(trial.config.seed) and len(run.data.params) == len(tracker._params(trial))
        assert run.data.metrics["test/rel_mse"] == outcome.result.metrics["test/rel_mse"]
        names = {a.path for a in reader.list_artifacts(run_id)}
        assert {"config.yaml", "model_state.pt"} <= names


def test_a_dropped_claimed_run_is_deleted_and_forgotten(hydra_conf, tmp_path):
    """A run claimed ahead and dropped (the sweep stopped before it started) is closed KILLED,
    tagged with why and deleted, and the tracker keeps nothing of it: no artifact location, no
    parent, no params waiting for a write (each claimed-ahead run once stayed until the process
    ended)."""
    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(2)]
    store = resolve_store(TrackingConfig(), tmp_path)
    tracker = Tracker(store)
    experiment = tracker.experiment("unit")
    parent = tracker.start_parent(experiment, "unit", 2, 0, FAST)
    kept, dropped = tracker.claim_batch(experiment, parent, "unit", trials)
    assert dropped in tracker.artifacts and tracker._pending_params(dropped)
    tracker.drop(dropped, "not started: the sweep stopped first")
    run = MlflowClient(store.uri).get_run(dropped)
    assert (run.info.status, run.info.lifecycle_stage) == ("KILLED", "deleted")
    assert run.data.tags["claim"] == "not started: the sweep stopped first"
    assert dropped not in tracker.artifacts and tracker._pending_params(dropped) == []
    assert kept in tracker.artifacts and tracker._pending_params(kept)  # the other claim untouched


def test_batches_keep_every_value_within_mlflows_log_batch_limits():
    """A record's params, metrics and tags go in as few ``log_batch`` calls as MLflow allows (100
    params, 100 tags, 1,000 metrics and 1,000 values in all per call), in order, none lost."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.utils.validation import MAX_ENTITIES_PER_BATCH, MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH

    from harness.tracking import batches

    metrics = [Metric(f"m{i}", float(i), 0, 0) for i in range(2500)]
    params = [Param(f"p{i}", str(i)) for i in range(250)]
    tags = [RunTag(f"t{i}", str(i)) for i in range(5)]
    out = batches(metrics, params, tags)
    assert len(out) == 3
    for m, p, t in out:
        assert len(p) <= MAX_PARAMS_TAGS_PER_BATCH and len(t) <= MAX_PARAMS_TAGS_PER_BATCH
        assert len(m) <= MAX_METRICS_PER_BATCH and len(m) + len(p) + len(t) <= MAX_ENTITIES_PER_BATCH
    assert [x for b in out for x in b[0]] == metrics and [x for b in out for x in b[1]] == params
    assert [x for b in out for x in b[2]] == tags
    assert batches() == [([], [], [])] and batches(params=params[:3]) == [([], params[:3], [])]


def test_a_trials_phase_is_a_tag_of_its_run_and_never_part_of_its_identity(hydra_conf, tmp_path):
    """The round that started a trial (``Trial.phase``) is written as the run's ``phase`` tag, and a
    trial without one has no such tag; the phase changes neither the trial id nor equality, so a
    round that starts a trial another round ran reuses its finished run."""
    import dataclasses
    plain = compose_trial(FAST, ["seed=0"])
    confirming = dataclasses.replace(plain, phase="confirmation", design="sequential 4,7,10")  # a staged block's
    assert confirming.trial_id == plain.trial_id and confirming == plain
    tracker = Tracker(resolve_store(TrackingConfig(), tmp_path))
    experiment = tracker.experiment("unit")
    parent = tracker.start_parent(experiment, "unit", 2, 0, FAST)
    tagged, untagged = (claim(tracker, experiment, parent, "unit", t)
                        for t in (confirming, compose_trial(FAST, ["seed=1"])))
    reader = MlflowClient(tracker.store.uri)
    assert reader.get_run(tagged).data.tags["phase"] == "confirmation"
    assert reader.get_run(tagged).data.tags["design"] == "sequential 4,7,10"
    assert "phase" not in reader.get_run(untagged).data.tags and "design" not in reader.get_run(untagged).data.tags
