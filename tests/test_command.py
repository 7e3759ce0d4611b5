"""The three commands as functions (``run(cfg, runtime) -> int``), called in-process by the
``invoke`` fixture: what one invocation does once, and the fixture itself against the real shell."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.integration

TINY = ["cluster=serial", "train.max_steps=20", "train.eval_every=10", "task.n_val=32", "task.n_test=64",
        "task.n_train=64", "summary=false"]


def _counting(monkeypatch, owner, name: str) -> list:
    """Wrap ``owner.name`` (a module's function or a class's method) so that each call is
    counted: returns the list of its calls' positional arguments."""
    original, calls = getattr(owner, name), []

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_one_invocation_runs_the_preflight_once_and_reads_the_finished_trials_once(
        tmp_path, invoke, monkeypatch):
    """A run, its no-op resume and a forced rerun each build the trials to run once and read the
    store's finished trials once per ablation; the queue plans from that one read."""
    from harness import sweep
    from harness.tracking import Tracker

    preflights = _counting(monkeypatch, sweep, "preflight")
    reads = _counting(monkeypatch, sweep, "finished_trials")
    queue_reads = _counting(monkeypatch, Tracker, "finished_trials")
    outs = []
    for round_, extra in enumerate(([], [], ["force=true"])):
        code, out, err = invoke("harness", [*TINY, "seed=0,1", *extra], tmp_path)
        assert code == 0, err[-3000:]
        outs.append(out)
        assert len(preflights) == round_ + 1 and len(reads) == round_ + 1
        built = {t.trial_id for t in preflights[-1][0]}
        assert len(built) == (2 if round_ != 1 else 0)  # the no-op resume builds nothing
    assert [("2 trials: 0 already finished (skipped), 2 finished now" in outs[0]),
            ("2 trials: 2 already finished (skipped), 0 finished now" in outs[1]),
            ("2 trials: 0 already finished (skipped), 2 finished now" in outs[2])] == [True] * 3, outs
    assert queue_reads == []  # the plan used the checks' read, not a second one


def test_a_dry_run_in_process_lists_the_trials_and_writes_nothing(tmp_path, invoke):
    code, out, err = invoke("harness", ["+ablation=smoke", "seed=0", "dry_run=true"], tmp_path)
    assert code == 0, err[-3000:]
    lines = out.strip().splitlines()
    assert lines[:2] == ["== smoke", "9 trials"]
    assert any("mlp" in line and "task.n_train=1024" in line for line in lines[2:])
    assert list(tmp_path.iterdir()) == []  # no store, no output folder


def test_the_fixture_answers_what_the_shell_answers(tmp_path, invoke):
    """--help (0), an unknown group choice, a mistyped key and a bad value (2, one line)."""
    code, out, _ = invoke("harness", ["--help"], tmp_path)
    assert code == 0 and out.startswith("usage: python -m harness")
    for args, named in ((["model=sofmax"], "did you mean softmax?"), (["train.max_step=5"], "max_steps"),
                        (["train.lr=inf", "cluster=serial"], "train.lr")):
        code, _, err = invoke("harness", args, tmp_path)
        assert code == 2 and len(err.strip().splitlines()) == 1 and named in err, err
    assert list(tmp_path.iterdir()) == []


def test_analysis_and_report_run_in_process(tmp_path, invoke):
    """``python -m analysis`` on a finished one-off sweep, and the report's bad ``report.out``."""
    code, _, err = invoke("harness", [*TINY, "seed=0,1"], tmp_path)
    assert code == 0, err[-3000:]
    code, out, err = invoke("analysis", [*TINY, "seed=0,1"], tmp_path)
    assert code == 0, err[-3000:]
    assert "2 trial runs {'FINISHED': 2}" in out
    (tmp_path / "afile").write_text("")
    code, _, err = invoke("analysis.report", ["scale=tiny", "report.out=afile/x.md"], tmp_path)
    assert code == 2 and "is a file where a folder goes" in err, err


def test_a_sweep_in_process_on_the_shared_ray_through_the_shared_server(tmp_path, invoke, shared_ray,
                                                                        shared_mlflow_server):
    """The fixtures for tests that need *a* Ray and *a* server, not their lifetimes: a sweep
    joins the running instance (``cluster=ray``), records through the server, and leaves both
    running for the next test; the store on the server has the trials, nothing is local
    (:func:`harness.store.finished_trials` of a server store: an experiment it lacks has none;
    this was tests/test_store.py's own run through a server of its own)."""
    from harness.store import Store, finished_trials

    fast = [a for a in TINY if not a.startswith("cluster=")]
    args = ["cluster=ray", f"cluster.address={shared_ray}", "tracking=server",
            f"tracking.uri={shared_mlflow_server}", "task=nearest", "model=deepsets", *fast, "seed=0,1"]
    code, out, err = invoke("harness", args, tmp_path)
    assert code == 0, err[-3000:]
    assert "joined Ray cluster at" in err
    assert len(finished_trials(Store(shared_mlflow_server, None), "single/nearest/deepsets")) == 2
    assert finished_trials(Store(shared_mlflow_server, None), "nope") == {}
    assert not (tmp_path / "mlflow.db").exists()
    import ray

    assert not ray.is_initialized()  # the driver disconnected; the instance itself runs on
    code, out, err = invoke("harness", args, tmp_path)  # and a second sweep joins it again
    assert code == 0 and "2 already finished (skipped), 0 finished now" in out, err[-3000:]


def test_a_trial_a_rival_finishes_after_the_one_read_is_not_run_again(tmp_path, invoke, monkeypatch):
    """The finished trials are read once, in the checks; a rival that finishes a trial after that
    read (while Ray starts, which can outlast a short lease) is seen by the claims, which read the
    rivals finished since the checks' read less the lease, not since the plan: the trial keeps
    one FINISHED run."""
    from mlflow.tracking import MlflowClient

    from harness.sweep import Sweep

    # 2 s, not shorter: at load ~16 on 2 cores a 0.2-s lease was missed by the live driver's own
    # heartbeat and the sweep ended with its lease lost (exit 1)
    args = [*TINY, "tracking.lease_s=2.0"]
    assert invoke("harness", [*args, "seed=0"], tmp_path)[0] == 0
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("single/teacher/softmax").experiment_id
    check, rival = Sweep.check, {}

    def check_then_a_rival_finishes(self, dry_run=False):
        check(self, dry_run)
        trial = next(t for t in self.ablations[0][1] if "seed=1" in t.overrides)
        parent = client.create_run(experiment, tags={"role": "sweep"}).info.run_id
        run = client.create_run(experiment, tags={"trial_id": trial.trial_id, "mlflow.parentRunId": parent})
        client.set_terminated(run.info.run_id, "FINISHED")
        client.set_terminated(parent, "FINISHED")
        rival[trial.trial_id] = run.info.run_id
        time.sleep(6.0)  # three leases pass before the plan

    monkeypatch.setattr(Sweep, "check", check_then_a_rival_finishes)
    code, out, err = invoke("harness", [*args, "seed=0,1"], tmp_path)
    assert code == 0, err[-3000:]
    (trial_id, run_id), = rival.items()
    finished = client.search_runs([experiment], f"tags.trial_id = '{trial_id}' and attributes.status = 'FINISHED'")
    assert [r.info.run_id for r in finished] == [run_id]


def test_a_dry_run_says_what_auto_packing_and_compilation_choose(tmp_path, invoke):
    """``train.compile=auto`` and ``on`` in a dry run: one line per model family saying the pack
    size ``auto`` chose and whether the pack is compiled, with the reason (harness/console.py)."""
    code, out, err = invoke("harness", ["+ablation=smoke", "dry_run=true", "train.compile=auto"], tmp_path)
    assert code == 0, err[-2000:]
    assert "auto: attention -> pack" in out and "compile: attention -> off (train.compile=auto" in out, out[-2000:]
    code, out, err = invoke("harness", ["+ablation=smoke", "dry_run=true", "train.compile=on"], tmp_path)
    assert code == 0, err[-2000:]
    assert "compile: attention -> on (train.compile=on)" in out, out[-2000:]
    assert not (tmp_path / "mlflow.db").exists()


def test_a_report_whose_ray_cannot_start_exits_1_with_one_line(tmp_path, invoke, monkeypatch):
    """A busy machine where Ray does not start: the report says so in one line and exits 1 (the
    same command resumes later), no traceback (analysis/report.py)."""
    from analysis import reporting
    from harness.scheduler import RayStartError

    def no_ray(*args, **kwargs):
        raise RayStartError("Ray did not start (a busy machine?): nothing was run or recorded")

    monkeypatch.setattr(reporting, "generate", no_ray)
    code, _, err = invoke("analysis.report", ["scale=tiny"], tmp_path)
    assert code == 1 and err.strip().splitlines() == [
        "error: Ray did not start (a busy machine?): nothing was run or recorded"], err[-2000:]
