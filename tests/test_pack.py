"""Packed trials (harness/pack.py) compute what the same trials compute alone (harness/trial.py),
and the scheduler runs packs behind its one-outcome-per-trial interface."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from harness.config import ClusterConfig, Optimizer, SchedulerKind
from harness.pack import (StackedOptimizer, cannot_pack, pack_key, resolve_pack_size, run_pack,
                          runs_alone)
from harness.expansion import compose_trial
from harness.trial import run_trial

# every step evaluated, so the curve's train/loss is the per-step loss
PER_STEP = ["train.eval_every=1", "task.n_val=32", "task.n_test=64"]
POINTS = [(0, 0.003, 64), (1, 0.03, 256)]  # (seed, lr, n_train) of a pack's trials


def _configs(extra, points=POINTS):
    return [compose_trial([*extra, f"seed={s}", f"train.lr={lr}", f"task.n_train={n}"], []).config
            for s, lr, n in points]


def _count_vmapped_validations(monkeypatch):
    """Count the pack's vmapped validation passes: ``calls`` (``harness.pack._vmapped_val``
    calls, a refused one included) and ``done`` (those that returned metrics)."""
    import harness.pack

    real, counter = harness.pack._vmapped_val, type("Calls", (), {"calls": 0, "done": 0})()

    def counted(pack):
        counter.calls += 1
        out = real(pack)
        counter.done += 1
        return out

    monkeypatch.setattr(harness.pack, "_vmapped_val", counted)
    return counter


def _worst_relative(lone, packed, key="train/loss"):
    worst = 0.0
    for a, b in zip(lone, packed):
        assert [p["step"] for p in a.curve] == [p["step"] for p in b.curve]
        for pa, pb in zip(a.curve, b.curve):
            worst = max(worst, abs(pa[key] - pb[key]) / abs(pa[key]))
    return worst


def _same_fields(a, b):
    assert list(a.metrics) == list(b.metrics)
    assert [list(p) for p in a.curve] == [list(p) for p in b.curve]
    assert {k: v.shape for k, v in a.state_dict.items()} == {k: v.shape for k, v in b.state_dict.items()}
    assert list(a.state_dict) == list(b.state_dict)
    assert (a.n_params, a.diverged, sorted(a.info)) == (b.n_params, b.diverged, sorted(b.info))


ARITH = ["task.n_val=20", "task.n_test=40", "train.batch_size=16"]
FAMILIES = [
    ["model=softmax"],                                   # attention (M4a)
    ["model=mlp"],                                       # flattened MLP (B1)
    ["model=general"],                                   # M0 (pairwise φ1, Deep-Sets context)
    ["task=arithmetic_learned", "model=tokenwise", *ARITH],  # learned E and U, masked CE
    ["task=arithmetic_retrain", "model=transformer", *ARITH],  # M10 (norms, FFN); T2 rotated init
]
ARITH_POINTS = [(0, 0.003, 30), (1, 0.03, 50)]


@pytest.mark.parametrize("vmap_eval", [False, True], ids=["eval-per-trial", "eval-vmapped"])
@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: "-".join(x.split("=")[1] for x in f[:2]))
def test_float64_packed_per_step_loss_matches_lone_within_1e_10_for_50_steps(hydra_conf, family, vmap_eval,
                                                                            monkeypatch):
    """Validated trial by trial or vmapped over the pack (token tasks included; each trial on
    its own seed's validation set, stacked), the curve, the metrics and the kept (best, by
    index in the stacked tensors) state are the lone ones."""
    points = ARITH_POINTS if "arithmetic" in " ".join(family) else POINTS
    cfgs = _configs(["train.max_steps=50", "train.dtype=float64", *PER_STEP, *family], points)
    vmapped = _count_vmapped_validations(monkeypatch)
    lone, packed = [run_trial(c) for c in cfgs], run_pack(cfgs, vmap_eval=vmap_eval)
    assert vmapped.calls == vmapped.done == (50 if vmap_eval else 0)  # every evaluation, none refused
    assert _worst_relative(lone, packed) <= 1e-10
    assert _worst_relative(lone, packed, "val/loss") <= 1e-10
    for a, b in zip(lone, packed):
        _same_fields(a, b)
        for pa, pb in zip(a.curve, b.curve):  # every validation metric, the references of each trial's own set included
            for key in (k for k in pa if k.startswith("val/")):
                assert pb[key] == pytest.approx(pa[key], rel=1e-10, abs=1e-12, nan_ok=True), key
        for key, value in a.metrics.items():
            assert b.metrics[key] == pytest.approx(value, rel=1e-8, abs=1e-12), key
        assert b.metrics["train/best_step"] == a.metrics["train/best_step"]
        for key, value in a.state_dict.items():
            assert torch.allclose(b.state_dict[key], value, rtol=1e-8, atol=1e-10), key  # ~0 biases: rounding
        assert (b.info["pack_size"], a.info["pack_size"]) == (len(cfgs), 1)


@pytest.mark.parametrize("vmap_eval, shared", [(False, []), (True, []), (True, ["task.eval_seed=0"])],
                         ids=["eval-per-trial", "eval-vmapped-own-sets", "eval-vmapped-one-set"])
def test_a_pack_of_16_matches_its_lone_trials_within_the_readme_tolerance(hydra_conf, vmap_eval, shared,
                                                                        monkeypatch):
    """At today's CPU pack size (16) the per-step losses are the lone trials' within the
    README's float32 tolerance (≤ 1e-5 relative over 20 steps), and the validation losses too,
    validated vmapped on each seed's own set (stacked) or on the one set all share."""
    points = [(s, (0.003, 0.01, 0.03)[s % 3], (64, 256)[s % 2]) for s in range(16)]
    cfgs = _configs(["train.max_steps=20", "train.eval_every=1", "task.n_val=32", "task.n_test=32", *shared], points)
    vmapped = _count_vmapped_validations(monkeypatch)
    lone, packed = [run_trial(c) for c in cfgs], run_pack(cfgs, vmap_eval=vmap_eval)
    assert vmapped.done == (20 if vmap_eval else 0)  # one batched pass per evaluation
    assert _worst_relative(lone, packed) <= 1e-5
    assert _worst_relative(lone, packed, "val/loss") <= 1e-5


@pytest.mark.parametrize("family", [["model=softmax"], ["model=transformer"]], ids=["softmax", "transformer"])
def test_float32_packed_per_step_loss_matches_lone_within_1e_5_for_20_steps(hydra_conf, family):
    cfgs = _configs(["train.max_steps=20", *PER_STEP, *family])
    lone, packed = [run_trial(c) for c in cfgs], run_pack(cfgs)
    assert _worst_relative(lone, packed) <= 1e-5
    for a, b in zip(lone, packed):
        _same_fields(a, b)


def test_a_diverging_trial_stops_alone_and_the_others_go_on(hydra_conf):
    cfgs = _configs(["train.max_steps=40", "train.eval_every=10", "task.n_val=32", "task.n_test=64",
                     "model=mlp"], [(0, 1e30, 64), (1, 0.003, 64)])
    lone, packed = [run_trial(c) for c in cfgs], run_pack(cfgs)
    assert [r.diverged for r in packed] == [r.diverged for r in lone] == [True, False]
    assert len(packed[0].curve) == len(lone[0].curve) < len(packed[1].curve) == 4
    assert math.isfinite(packed[0].metrics["test/rel_mse"])
    assert packed[1].metrics["test/rel_mse"] == pytest.approx(lone[1].metrics["test/rel_mse"], rel=1e-4)


@pytest.mark.parametrize("kind", [Optimizer.adam, Optimizer.sgd])
def test_stacked_optimizer_is_the_lone_optimizer_on_each_slice(kind):
    g = torch.Generator().manual_seed(0)
    lrs = [0.003, 0.01, 0.3]
    start = torch.randn(3, 5, 4, generator=g)
    grads = [torch.randn(3, 5, 4, generator=g) for _ in range(5)]
    stacked = start.clone()
    opt = StackedOptimizer([stacked], lrs, kind)
    for grad in grads:
        opt.step([grad])
    for i, lr in enumerate(lrs):
        p = torch.nn.Parameter(start[i].clone())
        lone = torch.optim.Adam([p], lr=lr) if kind is Optimizer.adam else torch.optim.SGD([p], lr=lr)
        for grad in grads:
            p.grad = grad[i].clone()
            lone.step()
        assert torch.allclose(stacked[i], p.detach(), rtol=1e-6, atol=0)  # bit-exact in practice


def test_what_can_be_packed_together(hydra_conf):
    a, b = _configs(["model=softmax"], [(0, 0.003, 64), (3, 0.03, 1024)])
    assert pack_key(a) == pack_key(b) and cannot_pack(a) is None
    other = compose_trial(["model=softmax", "task.n_train=32"], []).config  # minibatch of 32
    assert pack_key(other) != pack_key(a)
    assert pack_key(compose_trial(["model=softmax", "model.d1=4"], []).config) != pack_key(a)
    assert "vmap" in cannot_pack(compose_trial(["model=gru"], []).config)
    assert "several training lengths" in cannot_pack(compose_trial(["task=teacher_length"], []).config)
    with pytest.raises(ValueError, match="differ only in"):
        run_pack([a, other])
    with pytest.raises(ValueError, match="cannot pack"):
        run_pack(_configs(["model=gru", "train.max_steps=2"], POINTS[:2]))
    assert resolve_pack_size("auto", "cpu") >= 4 and resolve_pack_size("3", "cpu") == 3
    for bad in ("0", "-2", "wide"):
        with pytest.raises(ValueError, match="allowed: auto or a positive integer"):
            resolve_pack_size(bad, "cpu")


def test_plan_groups_splits_and_keeps_unpackable_trials_alone(hydra_conf):
    from harness.scheduler import plan

    trials = [compose_trial(["model=softmax"], [f"seed={s}", f"train.lr={lr}"])
              for s in range(5) for lr in (0.003, 0.01)]
    trials += [compose_trial(["model=gru"], [f"seed={s}"]) for s in range(2)]
    units = plan(trials, 4)
    assert sorted(t.trial_id for u in units for t in u) == sorted(t.trial_id for t in trials)
    assert sorted(len(u) for u in units) == [1, 1, 3, 3, 4]  # 10 packable: 3 near-equal packs
    assert all(len(u) == 1 for u in units if u[0].config.model.name == "gru")
    assert len(plan(trials, 16, min_units=6)) >= 6  # split to fill free slots
    assert all(len(u) == 1 for u in plan(trials, 1))
    assert plan([], 16, min_units=4) == []  # nothing left to run (all finished)


def test_auto_runs_the_mlp_alone_on_a_cpu_and_the_dry_run_says_why(hydra_conf, capsys):
    """``pack_size=auto`` packs per device and family: on a CPU the MLP baseline (no faster packed,
    benchmarks/RESULTS.md) runs alone, on CUDA it is packed; an explicit size packs it anywhere.
    The dry run's packing line names every trial that runs alone and why."""
    from harness.console import print_packs
    from harness.scheduler import plan

    trials = [compose_trial([f"model={m}"], [f"seed={s}"]) for m in ("softmax", "mlp") for s in range(4)]
    trials.append(compose_trial(["model=gru"], []))
    mlp = [t for t in trials if t.config.model.name == "mlp"]
    assert resolve_pack_size("auto", "cpu", mlp[0].config) == 1
    assert resolve_pack_size("auto", "cpu", trials[0].config) > 1
    assert "no faster" in runs_alone(mlp[0].config, "auto", "cpu")
    assert runs_alone(mlp[0].config, "auto", "cuda") is None and runs_alone(mlp[0].config, 4, "cpu") is None
    sizes = {u[0].config.model.name: sorted(len(v) for v in plan(trials, "auto", "cpu")
                                            if v[0].config.model.name == u[0].config.model.name)
             for u in plan(trials, "auto", "cpu")}
    assert sizes == {"attention": [4], "mlp": [1, 1, 1, 1], "gru": [1]}
    assert sorted(len(u) for u in plan(trials, "auto", "cuda")) == [1, 4, 4]
    assert sorted(len(u) for u in plan(trials, 4, "cpu")) == [1, 4, 4]
    mixed = [trials[0], mlp[0], mlp[1]]  # units of one length keep the trials' order
    assert plan(mixed, "auto", "cpu") == [[trials[0]], [mlp[0]], [mlp[1]]]
    print_packs(trials, "auto", "cpu")
    out = capsys.readouterr().out
    assert "4 trials in 1 packs" in out and "5 alone" in out, out
    assert "cannot pack: 1 trials (gru)" in out and "vmap" in out, out
    assert "run alone: 4 trials (mlp)" in out and "no faster" in out, out


def test_serial_scheduler_runs_a_pack_with_one_start_and_one_outcome_per_trial(hydra_conf):
    from harness.scheduler import SerialScheduler

    trials = [compose_trial(["train.max_steps=20", "train.eval_every=10", "task.n_val=32",
                             "task.n_test=64"], [f"seed={s}"]) for s in range(3)]
    started, outcomes = [], []
    cfg = ClusterConfig(scheduler=SchedulerKind.serial, pack_size="auto")
    with SerialScheduler(cfg) as scheduler:
        for outcome in scheduler.run(trials, started.append):
            assert outcome.trial in started
            outcomes.append(outcome)
    assert sorted(o.trial.trial_id for o in outcomes) == sorted(t.trial_id for t in trials)
    assert all(o.error is None for o in outcomes)
    lone = run_trial(trials[0].config)
    first = next(o.result for o in outcomes if o.trial is trials[0])
    assert first.info["pack_size"] == 3  # what its MLflow tags record: its pack, size and members
    assert sorted(first.info["pack_members"].split(",")) == sorted(t.trial_id for t in trials)
    assert first.metrics["test/rel_mse"] == pytest.approx(lone.metrics["test/rel_mse"], rel=1e-4)


def test_a_vetoed_trial_is_dropped_from_its_pack_and_the_others_report_their_curves(hydra_conf):
    from harness.scheduler import SerialScheduler

    trials = [compose_trial(["train.max_steps=20", "train.eval_every=10", "task.n_val=32",
                             "task.n_test=64"], [f"seed={s}"]) for s in range(3)]
    vetoed = trials[1]  # a claim lost to another driver: on_start returns False
    started, points = [], []
    cfg = ClusterConfig(scheduler=SchedulerKind.serial, pack_size="4")
    with SerialScheduler(cfg) as scheduler:
        outcomes = list(scheduler.run(trials, lambda t: started.append(t) or t is not vetoed,
                                      lambda t, point: points.append((t.trial_id, point["step"]))))
    assert len(started) == 3
    assert sorted(o.trial.trial_id for o in outcomes) == sorted(t.trial_id for t in trials if t is not vetoed)
    assert all(o.error is None for o in outcomes)
    by_trial = {o.trial.trial_id: [s for tid, s in points if tid == o.trial.trial_id] for o in outcomes}
    assert by_trial == {o.trial.trial_id: [p["step"] for p in o.result.curve] for o in outcomes}
    assert all(steps == [10, 20] for steps in by_trial.values())
    assert not any(tid == vetoed.trial_id for tid, _ in points)


def test_a_pack_that_fails_falls_back_to_its_trials_one_by_one(hydra_conf, monkeypatch):
    import harness.scheduler as scheduler

    def broken(cfgs, device, **kwargs):
        raise RuntimeError("pack failure")

    monkeypatch.setattr(scheduler, "run_pack", broken)
    trials = [compose_trial(["train.max_steps=10", "train.eval_every=5", "task.n_val=32",
                             "task.n_test=64"], [f"seed={s}"]) for s in range(2)]
    trials.append(compose_trial(["train.max_steps=10", "train.eval_every=5", "task.n_val=32",
                                 "task.n_test=64", "task.n_train=100000000"], []))  # fails alone
    outcomes = scheduler.execute_pack(trials, "cpu", 1)
    assert [o.trial for o in outcomes] == trials
    assert [o.error is None for o in outcomes] == [True, True, False]
    assert outcomes[0].result.metrics == run_trial(trials[0].config).metrics  # lone: bit for bit


def test_over_a_full_budget_packed_and_lone_agree_within_a_tenth_of_the_seed_spread(hydra_conf):
    cfgs = _configs(["train.max_steps=300", "train.eval_every=20", "task.n_val=128",
                     "task.n_test=256"], [(s, 0.01, 256) for s in range(5)])
    lone = [r.metrics["test/rel_mse"] for r in map(run_trial, cfgs)]
    packed = [r.metrics["test/rel_mse"] for r in run_pack(cfgs)]
    spread = statistics.stdev(lone)
    assert max(abs(a - b) for a, b in zip(lone, packed)) <= 0.1 * spread, (lone, packed)


@pytest.mark.gpu
def test_a_pack_on_cuda_matches_the_lone_cpu_trials(hydra_conf, monkeypatch):
    """On CUDA the pack validates vmapped (each seed on its own validation set, stacked)."""
    cfgs = _configs(["train.max_steps=50", "train.dtype=float64", *PER_STEP])
    vmapped = _count_vmapped_validations(monkeypatch)
    lone, packed = [run_trial(c) for c in cfgs], run_pack(cfgs, "cuda")
    assert all(r.info["device"].startswith("cuda") for r in packed) and vmapped.done == 50
    assert _worst_relative(lone, packed) <= 1e-10
    assert _worst_relative(lone, packed, "val/loss") <= 1e-10
    assert resolve_pack_size("auto", "cuda") > resolve_pack_size("auto", "cpu")


def test_a_units_points_reach_the_driver_in_batches_and_before_its_outcomes(hydra_conf, monkeypatch):
    """A pack's learning-curve points go to the driver's points actor as lists of (index, point):
    one put at most every ``every_s`` seconds and one when the unit ends, not one per point."""
    from harness.scheduler import Progress, execute_unit

    class Queue:  # the actor's stand-in: what each put (harness.scheduler._put) carried
        def __init__(self):
            self.puts = []

    monkeypatch.setattr("harness.scheduler._put", lambda points, batch: points.puts.append(batch))

    trials = [compose_trial(["train.max_steps=6", "train.eval_every=2", "task.n_val=16", "task.n_test=16"],
                            [f"seed={s}"]) for s in range(3)]
    sent = {}
    for every_s in (3600.0, 0.0):
        queue = Queue()
        outcomes = execute_unit(trials, "cpu", 1, Progress(queue, [7, 8, 9], every_s=every_s))
        sent[every_s] = [pair for batch in queue.puts for pair in batch]
        assert [o.error for o in outcomes] == [None] * 3
        for index, outcome in zip([7, 8, 9], outcomes):
            assert [p["step"] for i, p in sent[every_s] if i == index] == [2, 4, 6]
        if every_s:
            assert len(queue.puts) == 1  # all 9 points in one put, at the end of the unit
        else:
            assert len(queue.puts) >= 3
    assert [(i, p["step"]) for i, p in sent[3600.0]] == [(i, p["step"]) for i, p in sent[0.0]]


def test_a_packs_trials_build_one_validation_and_test_set(hydra_conf):
    """A pack's trials of one evaluation seed share the first one's validation and test sets
    (the same for every n_train), each its own training data."""
    from harness.trial import prepare

    cpu = torch.device("cpu")
    for family in (["model=softmax", "task.eval_seed=0"], ["task=nearest", "model=softmax", "task.eval_seed=0"]):
        cfgs = _configs(family)
        first = prepare(cfgs[0], cpu)
        other, alone = prepare(cfgs[1], cpu, shared=first), prepare(cfgs[1], cpu)
        assert other.val[0].y is first.val[0].y  # not built again
        for mine, own in ((other.val, alone.val), *((other.tests[k], alone.tests[k]) for k in alone.tests)):
            assert all(torch.equal(a.y, b.y) for a, b in zip(mine, own))
        assert torch.equal(other.train[0].y, alone.train[0].y) and not torch.equal(other.train[0].y[:64], first.train[0].y[:64])
    with pytest.raises(ValueError, match="cannot share data"):
        prepare(_configs(["task.n_val=16"])[0], cpu, shared=prepare(_configs([])[0], cpu))


def test_a_pack_of_several_seeds_evaluates_each_on_its_own_seeds_sets(hydra_conf):
    """``task.eval_seed`` unset is the trial's seed: a pack of seeds 0 and 1 (one pack key) builds
    one validation set per seed, each the set its trial builds alone; the vmapped validation
    reads each trial's set stacked on the trial axis (seed 1's twice)."""
    from harness.pack import _build, pack_key
    from harness.trial import prepare

    cpu = torch.device("cpu")
    cfgs = _configs(["model=softmax"], points=[(0, 0.01, 64), (1, 0.01, 64), (1, 0.03, 128)])
    assert len({pack_key(c) for c in cfgs}) == 1
    pack = _build(cfgs, cpu, compiled=False, vmap_eval=True)
    alone = [prepare(c, cpu) for c in cfgs]
    for setup, own in zip(pack.setups, alone):
        assert all(torch.equal(a.y, b.y) for a, b in zip(setup.val, own.val))
    assert not torch.equal(pack.setups[0].val[0].y, pack.setups[1].val[0].y)  # seed 0's set is not seed 1's
    assert pack.setups[2].val[0].y is pack.setups[1].val[0].y  # one set per seed, built once
    (size, fields), = pack.val_chunks  # one chunk: (x, y, tokens, mask, groups) of each trial's set, stacked
    y = fields[1]
    assert size == len(alone[0].val[0]) and y.shape == (3, *alone[0].val[0].y.shape)
    assert all(torch.equal(y[i], own.val[0].y) for i, own in enumerate(alone))


def test_metrics_vmap_refuses_validate_per_trial_in_this_pack_and_the_next(hydra_conf, monkeypatch):
    """A task whose dense metrics vmap refuses (boolean indexing: a data-dependent shape) is
    validated trial by trial, with the lone results (to rounding), from its first refusal on: the next pack
    of its task class (sets stacked alike) does not try again."""
    import harness.pack
    from tasks.base import RegressionTask

    def indexed(self, out, batch):  # what a user's task might write
        err = (out - batch.y) ** 2
        return {"rel_mse": (err[err > 0].sum(), (batch.y ** 2).sum()), "mse": (err.sum(), err.numel())}

    monkeypatch.setattr(RegressionTask, "metric_sums_dense", indexed)
    monkeypatch.setattr(harness.pack, "_NO_METRICS_VMAP", set())
    vmapped = _count_vmapped_validations(monkeypatch)
    cfgs = _configs(["train.max_steps=5", "train.dtype=float64", *PER_STEP])
    first, second = run_pack(cfgs, vmap_eval=True), run_pack(cfgs, vmap_eval=True)
    assert (vmapped.calls, vmapped.done) == (1, 0)  # refused once, never retried
    lone = [run_trial(c) for c in cfgs]
    assert max(_worst_relative(lone, first, "val/loss"), _worst_relative(lone, second, "val/loss")) <= 1e-10


def test_auto_pack_size_comes_from_the_committed_table_within_a_memory_bound(hydra_conf, capsys):
    """``pack_size=auto``: the smallest measured size within 5% of the family's fastest (per
    device), the device default for a family without a row, never more than the memory bound;
    the dry run says what it chose and why."""
    from harness.console import print_packs
    from harness.pack_table import DEFAULT_PACK, auto_pack_size, measured_pack

    assert measured_pack("cpu", "mlp")[0] == 1  # lone is fastest: packs are no faster
    assert measured_pack("cpu", "deepsets")[0] == 64  # 0.277 s at 64 against 0.297 at 16: beyond 5%
    # softmax measured again (1.31x faster at 64), relu from the older run: each relative to its
    # own fastest size, 16 averages 1.19x the fastest: 64
    assert measured_pack("cpu", "attention")[0] == 64
    assert measured_pack("cpu", "no_such_family")[0] == DEFAULT_PACK["cpu"]
    assert measured_pack("cuda", "attention")[0] == DEFAULT_PACK["cuda"]  # no GPU rows yet
    assert auto_pack_size("cuda", "attention", 1e9, 16e9) == 4  # a quarter of 16 GB over 1 GB a trial
    assert auto_pack_size("cpu", "deepsets", 1.0, 1e12) == 64
    trials = [compose_trial(["model=deepsets"], [f"seed={s}"]) for s in range(3)]
    assert resolve_pack_size("auto", "cpu", trials[0].config) == 64
    print_packs(trials, "auto", "cpu")
    assert "auto: deepsets -> pack 64 (measured" in capsys.readouterr().out


def test_train_compile_is_how_a_pack_runs_not_what_a_trial_is(hydra_conf, monkeypatch):
    """``train.compile`` leaves the trial id alone; ``auto`` compiles only where a committed
    row says the steps saved exceed the compile time; a bad value fails naming the allowed ones."""
    import harness.pack_table as table
    from harness.expansion import SweepError
    from harness.pack import resolve_compile

    off, on, auto = (compose_trial(["model=softmax", f"train.compile={m}"], []) for m in ("off", "on", "auto"))
    assert off.trial_id == on.trial_id == auto.trial_id == compose_trial(["model=softmax"], []).trial_id
    assert [resolve_compile(t.config, "cpu", 16) for t in (off, on, auto)] == [False, True, False]
    row = table.CompileRow("cpu", "attention", 16, eager_ms=5.0, compiled_ms=3.0, compile_s=30.0, source="test")
    monkeypatch.setattr(table, "COMPILE_ROWS", (row,))
    assert table.auto_compile("cpu", "attention", 16, 600)[0] is False  # 1.2 s saved < 30 s
    assert table.auto_compile("cpu", "attention", 64, 60_000)[0] is True  # 120 s saved > 30 s
    assert resolve_compile(auto.config, "cuda", 16) is False  # no GPU row: off
    with pytest.raises(SweepError, match="off, on, auto|compile"):
        compose_trial(["train.compile=maybe"], [])


def test_compiled_packs_validated_vmapped_and_per_trial_are_cached_apart(hydra_conf, monkeypatch):
    """The per-process cache of compiled pack functions keys on whether the pack validates
    vmapped: a compiled pack validated per trial leaves no cached entry without the vmapped
    validation for a later pack that asks for it, nor the other way round."""
    import harness.pack

    monkeypatch.setattr(harness.pack, "compile_fn", lambda fn, dev: fn)  # the cache, not inductor
    monkeypatch.setattr(harness.pack, "_COMPILED", {})
    vmapped = _count_vmapped_validations(monkeypatch)
    cfgs = _configs(["train.max_steps=3", "train.compile=on", *PER_STEP])
    done = []
    for vmap_eval in (None, True, None):  # None: a CPU's default, per trial
        run_pack(cfgs, vmap_eval=vmap_eval)
        done.append(vmapped.done)
    assert done == [0, 3, 3]


@pytest.mark.slow
def test_a_compiled_pack_matches_the_eager_pack_within_1e_5_for_20_steps(hydra_conf, monkeypatch):
    """``train.compile=on`` (inductor, on a CPU) gives the eager pack's per-step and validation
    losses to 1e-5 relative over 20 float32 steps (measured: ~3e-7), its validation compiled
    and vmapped over the two seeds' own sets (as on CUDA; a CPU validates per trial by default).
    Costs 26-37 CPU-s with a cold inductor cache (C++ compilation), ~13 with a warm one: slow."""
    eager = run_pack(_configs(["train.max_steps=20", *PER_STEP]))
    vmapped = _count_vmapped_validations(monkeypatch)
    compiled = run_pack(_configs(["train.max_steps=20", "train.compile=on", *PER_STEP]), vmap_eval=True)
    assert vmapped.done == 20
    assert all(r.info["compiled"] for r in compiled) and not eager[0].info["compiled"]
    assert _worst_relative(eager, compiled) <= 1e-5
    assert _worst_relative(eager, compiled, "val/loss") <= 1e-5


@pytest.mark.gpu
def test_a_compiled_pack_on_cuda_with_cuda_graphs_matches_the_lone_cpu_trials(hydra_conf, monkeypatch):
    """On CUDA (validation vmapped, step under CUDA graphs) a float64 pack gives the lone CPU
    trials' per-step losses within 1e-10 relative over 50 steps, TF32 irrelevant in float64."""
    common = ["train.max_steps=50", "train.dtype=float64", *PER_STEP]
    lone = [run_trial(c) for c in _configs(common)]
    vmapped = _count_vmapped_validations(monkeypatch)
    packed = run_pack(_configs([*common, "train.compile=on"]), "cuda")
    assert vmapped.done == 50
    assert all(r.info["compiled"] and r.info["device"].startswith("cuda") for r in packed)
    assert _worst_relative(lone, packed) <= 1e-10
    assert _worst_relative(lone, packed, "val/loss") <= 1e-10
