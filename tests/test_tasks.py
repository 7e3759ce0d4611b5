"""The task suite (tasks/, issue 4): every preset's data contract, determinism, disjointness,
docstring examples, learnability; T1's 110-example set; T2 rotation; T3(f) control; T5 lengths."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
import torch

from harness.models import build_model
from harness.expansion import compose_trial
from harness.trial import run_trial
from tasks import build_task, combine
from tasks.arithmetic import ArithmeticConfig, ArithmeticTask, Ops
from tasks.base import generator, haar_orthogonal
from tasks.selection import (SelectionConfig, SelectionKind, SelectionTask, argmax_targets,
                             duplicate_targets, nearest_targets, recall_targets,
                             repeated_targets)
from tasks.teacher import TeacherConfig, TeacherTask, relative_mse
from tasks.teachers import TeacherKind
from tasks.tokens import Embedding, strictly_correct

PRESETS = sorted(p.stem for p in (Path(__file__).parent.parent / "conf" / "task").glob("*.yaml")
                 if p.stem != "external")  # code outside the package: tests/test_external.py
SMALL = ["task.n_train=48", "task.n_val=16", "task.n_test=24"]


def _task_cfg(preset: str, *extra: str):
    return compose_trial([f"task={preset}", *SMALL, *extra], []).config.task


@pytest.fixture(scope="module")
def tasks_by_preset():
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(Path(__file__).parent.parent / "conf"), version_base="1.3"):
        cfgs = {p: _task_cfg(p) for p in PRESETS}
    GlobalHydra.instance().clear()
    return {p: (cfg, build_task(cfg)) for p, cfg in cfgs.items()}


def _same(a, b) -> bool:
    fields = ("x", "y", "tokens", "mask")
    return all((getattr(a, f) is None and getattr(b, f) is None) or torch.equal(getattr(a, f), getattr(b, f))
               for f in fields)


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_yields_well_formed_batches(tasks_by_preset, preset):
    cfg, task = tasks_by_preset[preset]
    train = task.train_set(0)
    assert sum(len(b) for b in train) == cfg.n_train
    assert sum(len(b) for b in task.val_set()) == cfg.n_val
    sets = task.test_sets()
    assert sum(len(b) for b in sets[""]) == cfg.n_test
    for batch in [*train, *sets[""], *(b for key, bs in sets.items() if key for b in bs)]:
        x = task.inputs(batch)
        assert x.shape == (len(batch), batch.n, task.d) and x.dtype == torch.float32
        assert torch.isfinite(x).all()
        if batch.tokens is None:  # regression: targets in embedding space
            assert batch.y.shape == x.shape and torch.isfinite(batch.y).all()
        else:
            assert batch.y.dtype == torch.long and batch.mask.dtype == torch.bool
            assert batch.tokens.min() >= 0 and batch.tokens.max() < task.V
            assert batch.y[batch.mask].min() >= 0 and batch.y[batch.mask].max() < task.V
            assert batch.mask.any(1).all()
    assert task.n_max == max(task.lengths)


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_is_deterministic_and_seeds_differ(tasks_by_preset, preset):
    cfg, task = tasks_by_preset[preset]
    again = build_task(cfg)
    assert all(_same(a, b) for a, b in zip(task.train_set(3), again.train_set(3)))
    assert all(_same(a, b) for a, b in zip(task.test_sets()[""], again.test_sets()[""]))
    assert not all(_same(a, b) for a, b in zip(task.train_set(0), task.train_set(1)))
    assert all(_same(a, b) for a, b in zip(task.val_set(), again.val_set()))


@pytest.mark.parametrize("preset", [p for p in PRESETS if p.startswith("arithmetic")])
def test_finite_tasks_keep_train_val_test_disjoint(tasks_by_preset, preset):
    _, task = tasks_by_preset[preset]
    for n, part in task.parts.items():
        sets = [set(part[s].tolist()) for s in ("test", "val")]
        assert not sets[0] & sets[1]
        assert not (sets[0] | sets[1]) & set(part["train"].tolist())
    rows = lambda bs: {tuple(t.tolist()) for b in bs for t in b.tokens}  # noqa: E731
    train = rows(task.train_set(0)) | rows(task.train_set(1))
    assert not train & rows(task.test_sets()[""]) and not train & rows(task.val_set())


def test_t1_pool_is_exactly_the_110_valid_expressions():
    task = ArithmeticTask(ArithmeticConfig())
    tokens, _ = task.decode(task.pool(2), 2)
    got = {tuple(t.tolist()) for t in tokens}
    want = {tuple(task.encode(f"{a}{o}{b}").tolist()) for a in range(10) for b in range(10)
            for o in "+-" if 0 <= (a + b if o == "+" else a - b) <= 9}
    assert len(want) == 110 and got == want and len(task.pool(2)) == 110


def test_t1_docstring_example_and_answer_in_input_split():
    task = ArithmeticTask(ArithmeticConfig())
    cases = {"2+1": (5, False), "2-1": (3, True), "3+0": (5, True), "1-1": (2, False), "5-0": (7, True)}
    pool = task.pool(2)
    tokens, _ = task.decode(pool, 2)
    for text, (answer, in_input) in cases.items():
        row = (tokens == task.encode(text)).all(1).nonzero().item()
        batch = task.batch(pool[row:row + 1], 2)
        assert batch.tokens[0].tolist() == task.encode(text).tolist()
        assert batch.y[0, -1].item() == answer and batch.mask[0].tolist() == [False, False, True]
        assert batch.groups["answer_in_input"][0].item() is in_input
    assert task.encode("2+1").tolist() == [4, 0, 3]


def test_t1_sizes_and_variants_are_checked():
    with pytest.raises(ValueError, match="n_train=100.*allowed: n_train ≤ 50"):
        ArithmeticTask(ArithmeticConfig(n_train=100))
    with pytest.raises(ValueError, match="allowed: d ≥ V=12"):
        ArithmeticTask(ArithmeticConfig(embedding=Embedding.orthonormal, d=8))
    add = ArithmeticTask(ArithmeticConfig(ops=Ops.add, modular=True, terms=[3], n_train=100))
    assert (add.train_set(0)[0].tokens[:, 1::2] == 0).all()  # only "+"
    eq = ArithmeticTask(ArithmeticConfig(equals=True))
    assert eq.V == 13 and (eq.train_set(0)[0].tokens[:, -1] == 12).all()


def test_strict_argmax_does_not_score_ties():
    logits = torch.tensor([[1.0, 1.0, 0.0], [2.0, 1.0, 0.0]])
    assert strictly_correct(logits, torch.tensor([0, 0])).tolist() == [False, True]


def test_t4_docstring_examples():
    H = torch.tensor([[0.0, 2, 1], [2, 0, 3], [1, 3, 0]])
    assert nearest_targets(torch.tensor([[0, 1, 2]]), H).tolist() == [[1, 2, 1]]
    u = torch.tensor([0.5, -1, 2, 0])
    assert argmax_targets(torch.tensor([[1, 3, 0]]), u).tolist() == [[0, 0, 0]]
    assert duplicate_targets(torch.tensor([[3, 1, 4, 1]])).tolist() == [[1, 1, 1, 1]]
    assert recall_targets(torch.tensor([[2, 5, 0, 7, 1, 4, 0]])).tolist() == [7]
    assert repeated_targets(torch.tensor([[5, 2, 5, 7, 2, 5, 0, 9]])).tolist() == [[5, 2, 5, 5, 2, 5, 5, 5]]


def test_t4c_repeated_has_a_mode_a_pair_and_defeats_uniform_mixing():
    """Every sequence: one token 3 or 4 times, one twice, the rest once (both M occur); uniform
    mixing (the mode everywhere) errs exactly at the pair's two positions, and its logged
    reference accuracy says so; the majority class is far worse."""
    task = SelectionTask(SelectionConfig(kind=SelectionKind.repeated, n=8))
    batch = task.train_set(0)[0]
    modes = set()
    for row in batch.tokens:
        counts = sorted(torch.bincount(row, minlength=16).tolist(), reverse=True)
        assert counts[1] == 2 and counts[2] <= 1 and counts[0] in (3, 4)
        modes.add(counts[0])
    assert modes == {3, 4}
    sums = task.reference_sums(batch)
    hit, total = sums["uniform_acc"]
    assert float(hit) / float(total) == pytest.approx(6 / 8)
    hit, total = sums["majority_acc"]
    assert float(hit) / float(total) < 0.3
    with pytest.raises(ValueError, match="n=6"):
        SelectionTask(SelectionConfig(kind=SelectionKind.repeated, n=6))


def test_uniform_mixing_reference_is_the_strict_argmax_of_input_counts():
    """``uniform_acc`` scores the most frequent input token at every masked position; a tie
    between input tokens is wrong (strict argmax, as for every model)."""
    task = SelectionTask(SelectionConfig(kind=SelectionKind.duplicate, n=4))
    batch = task.train_set(0)[0]
    hit, total = task.reference_sums(batch)["uniform_acc"]
    assert float(hit) == float(total)  # duplicate: the repeated token is the unique mode
    nearest = SelectionTask(SelectionConfig(kind=SelectionKind.nearest, n=4))
    b = nearest.train_set(0)[0]
    counts = torch.nn.functional.one_hot(b.tokens, 16).sum(1).float()  # (B, V)
    expected = strictly_correct(counts[:, None, :].expand(*b.tokens.shape, 16), b.y) & b.mask
    hit, total = nearest.reference_sums(b)["uniform_acc"]
    assert int(hit) == int(expected.sum()) and int(total) == int(b.mask.sum())


def test_t4_duplicates_and_recall_are_well_posed():
    dup = SelectionTask(SelectionConfig(kind=SelectionKind.duplicate, n=8)).train_set(0)[0]
    for row in dup.tokens:
        assert len(set(row.tolist())) == 7
    rec = SelectionTask(SelectionConfig(kind=SelectionKind.recall, n=9)).train_set(0)[0]
    keys = rec.tokens[:, 0:-1:2]
    assert all(len(set(k.tolist())) == 4 for k in keys) and (rec.mask.sum(1) == 1).all()
    with pytest.raises(ValueError, match="n=10"):
        SelectionTask(SelectionConfig(kind=SelectionKind.recall, n=10))
    with pytest.raises(ValueError, match="n=20"):
        SelectionTask(SelectionConfig(kind=SelectionKind.duplicate, n=20))



@pytest.mark.parametrize("V,n", [(16, 9), (8, 7), (32, 9), (6, 5)])
def test_recall_unbound_accuracy_is_the_most_frequent_values_rate_exactly(V, n):
    """The order-blind ceiling on recall (what a permutation-equivariant map can reach): exact
    against enumerating every draw of the values, and the rate of guessing the most frequent value
    on the task's own sampled sequences (5 standard errors). At V = 16, n = 9 it is 0.412, not 1/4:
    the zoo's first two-layer run read a permutation-equivariant arm at 0.40 as beating chance."""
    import collections
    import itertools

    from tasks.selection import recall_unbound_accuracy

    p, m = (n - 1) // 2, V - V // 2
    brute = sum(max(collections.Counter(t).values()) for t in itertools.product(range(m), repeat=p)) / m ** p / p
    assert recall_unbound_accuracy(V, n) == pytest.approx(brute, abs=1e-12)
    task = SelectionTask(SelectionConfig(kind=SelectionKind.recall, n=n, V=V, n_train=4096))
    b = task.train_set(0)[0]
    values = b.tokens[:, 1:-1:2]  # (B, p)
    counts = (values[:, :, None] == values[:, None, :]).sum(-1)  # (B, p): multiplicity of each value
    hit = (counts.max(-1).values.double() / p)  # P(the most frequent value is the answer | tokens)
    se = hit.std().item() / len(hit) ** 0.5
    assert abs(hit.mean().item() - recall_unbound_accuracy(V, n)) < 5 * se
    if (V, n) == (16, 9):
        assert recall_unbound_accuracy(V, n) == pytest.approx(0.412109375)
    with pytest.raises(ValueError, match="n=8"):
        recall_unbound_accuracy(16, 8)


def test_causal_references_mix_over_the_prefix_only(hydra_conf):
    """What a causal model's flat scores give (the zoo's *not learned* bar for causal arms): at
    position t uniform mixing over positions ≤ t: the prefix's most frequent token (strictly) and
    the prefix mean; at the last position it is the whole sequence's, as reference_sums."""
    import math

    task = SelectionTask(SelectionConfig(kind=SelectionKind.repeated, n=8, n_train=64))
    b = task.train_set(0)[0]
    got = task.causal_reference_sums(b)["uniform_acc"]
    hits = 0
    for row, y in zip(b.tokens.tolist(), b.y.tolist()):
        for t in range(len(row)):
            counts = {v: row[: t + 1].count(v) for v in set(row[: t + 1])}
            top = max(counts.values())
            hits += [v for v, c in counts.items() if c == top] == [y[t]]
    assert int(got[0]) == hits and int(got[1]) == b.tokens.numel()
    last = b.index(torch.arange(len(b)))
    last.mask[:, :-1] = False
    assert [int(v) for v in task.causal_reference_sums(last)["uniform_acc"]] == \
        [int(v) for v in task.reference_sums(last)["uniform_acc"]]
    refs = task.trivial_references(causal=True)  # the repeated task at n = 8: 0.54, against 0.75 over the whole sequence
    full = combine([task.reference_sums(s) for s in task.test_sets()[""]])
    assert 0.5 < refs["uniform_acc"] < 0.6 < full["uniform_acc"] and refs["majority_acc"] == full["majority_acc"]

    teacher = build_task(_task_cfg("teacher_general"))
    batch = teacher.test_sets()[""][0]
    prefix = torch.stack([batch.x[:, : t + 1].mean(1) for t in range(batch.x.shape[1])], 1)
    num, den = teacher.causal_reference_sums(batch)["uniform_rel_mse"]
    assert math.isclose(float(num / den), float(((prefix - batch.y) ** 2).sum() / (batch.y ** 2).sum()), rel_tol=1e-9)


def test_recall_order_blind_reference_is_the_expected_hit_of_the_most_frequent_value():
    """On recall's own test set: the mean over sequences of P(the most frequent value is the
    answer), a tie drawn uniformly (brute force here), near its exact expectation
    recall_unbound_accuracy; no order-blind reference for the other kinds."""
    from tasks.selection import recall_unbound_accuracy

    task = SelectionTask(SelectionConfig(kind=SelectionKind.recall, n=9))
    b = task.test_sets()[""][0]
    expected = 0.0
    for row, y in zip(b.tokens.tolist(), b.y[:, -1].tolist()):
        values = row[1:-1:2]
        top = max(values.count(v) for v in values)
        best = {v for v in values if values.count(v) == top}
        expected += (y in best) / len(best)
    num, den = task.order_blind_reference_sums(b)["order_blind_acc"]
    assert float(num / den) == pytest.approx(expected / len(b), abs=1e-12)
    assert abs(task.trivial_references(causal=False)["order_blind_acc"] - recall_unbound_accuracy(16, 9)) < 0.03
    assert SelectionTask(SelectionConfig(kind=SelectionKind.repeated, n=8)).order_blind_reference_sums(b) == {}

def test_t3_docstring_example_outputs_are_convex_mixes():
    task = TeacherTask(TeacherConfig(d=2, n=2, uniform_rel_mse=0.3))
    x = torch.tensor([[[0.3, -0.7], [1.1, 0.2]]], dtype=torch.float64)
    y = task.teacher(x, task.beta)
    s = torch.softmax(task.beta * task.teacher.scores(x), -1)  # (1, n, n), rows sum to 1
    assert torch.allclose(y, s @ x) and torch.allclose(s.sum(-1), torch.ones(1, 2, dtype=torch.float64))


@functools.lru_cache(maxsize=None)
def _teacher(kind: TeacherKind) -> TeacherTask:
    return TeacherTask(TeacherConfig(teacher=kind, n_test=256), dtype=torch.float64)


@pytest.mark.parametrize("kind", list(TeacherKind))
def test_t3_teachers_are_far_from_uniform_mixing(kind):
    task = _teacher(kind)
    ref = combine([task.reference_sums(b) for b in task.test_sets()[""]])
    assert ref["uniform_rel_mse"] >= 0.5


def _rotation_error(kind: TeacherKind, rotate_knowledge: bool) -> float:
    task = _teacher(kind)
    x = task.sample(generator(0, "probe"), 16, 8).x
    Q = haar_orthogonal(task.d, generator(1, "Q"))
    teacher = task.teacher.rotated(Q) if rotate_knowledge else task.teacher
    err = teacher(x @ Q.T, task.beta) - task.teacher(x, task.beta) @ Q.T
    return float(err.norm() / task.teacher(x, task.beta).norm())


def test_t3f_control_teacher_is_not_equivariant_while_the_others_are():
    assert _rotation_error(TeacherKind.control, False) > 1e-3
    assert _rotation_error(TeacherKind.noknow, False) < 1e-10
    for kind in (TeacherKind.softmax, TeacherKind.general, TeacherKind.quartic, TeacherKind.positional,
                 TeacherKind.residual):
        assert _rotation_error(kind, True) < 1e-10


def test_t3f_prime_squashed_teacher_is_psi_after_the_mixing_and_not_b7s_form():
    """C9's control (tasks/teachers.py): F_rows = ψ(S_r(β XXᵀ) X_rows), ψ(u) = tanh(c√d u)/(c√d);
    B7's form ψ applied before the same mixing is a different function (up to the hardmax
    limit), and the teacher is basis-dependent like (f)."""
    import math

    from tasks.teachers import SQUASH_GAIN

    task = _teacher(TeacherKind.squashed)
    x = task.sample(generator(0, "probe"), 64, 8).x
    mix = torch.softmax(task.beta * x @ x.transpose(-1, -2), dim=-1)  # (B, n, n)
    gain = SQUASH_GAIN * math.sqrt(task.d)
    psi = lambda u: torch.tanh(gain * u) / gain  # noqa: E731
    y = task.teacher(x, task.beta)
    assert torch.allclose(y, psi(mix @ x), atol=1e-12)
    b7_form = mix @ psi(x)  # φ before the mixing: the control (f) / coordwise form
    assert relative_mse(b7_form, y) > 0.05
    assert _rotation_error(TeacherKind.squashed, True) > 1e-3


# A short real training on a small teacher (d=8, n=6, k*=2): enough for a matching student.
SHORT = ["task.d=8", "task.n=6", "task.k=2", "task.n_train=256", "task.n_val=64", "task.n_test=128",
         "train.batch_size=32", "train.max_steps=300", "train.eval_every=50", "train.lr=0.01"]


def _calibrated_uniform(task: TeacherTask, part) -> float:
    """Uniform-mixing relative MSE of ``part`` on 4096 fresh sequences of the task's length."""
    x = task.sample(generator(0, "probe"), 4096, task.cfg.n).x.double()
    return relative_mse(x.mean(1, keepdim=True).expand_as(x), part(x, task.beta))


def test_t3c_quartic_teacher_is_learned_by_the_matching_quartic_student(hydra_conf):
    """The quartic teacher X S_r(β Y*ᵀB1 (Y*Y*ᵀ/n) B2 Y*)ᵀ stays calibrated (uniform mixing at
    uniform_rel_mse = 0.6), and M8 (higher_order: softmax with the quartic T_2 term), which
    represents it exactly, beats the zero and the uniform-mixing predictors after 300 steps."""
    cfg = compose_trial(["task=teacher_quartic", "model=higher_order", *SHORT], []).config
    task = build_task(cfg.task)
    assert _calibrated_uniform(task, task.teacher) == pytest.approx(0.6, abs=0.05)
    result = run_trial(cfg)
    m = result.metrics
    assert not result.diverged
    assert m["test/zero_rel_mse"] == pytest.approx(1.0)
    assert m["test/rel_mse"] < 1.0 and m["test/rel_mse"] < m["test/uniform_rel_mse"]


def test_residual_teacher_has_a_residual_path_that_the_residual_student_learns(hydra_conf):
    """teacher_residual, X + W_V* X S_r(β Y*ᵀW*Y*)ᵀ: β calibrated on its attention part, the
    identity predictor is far from perfect, and M6 (residual) beats it and the zero predictor."""
    cfg = compose_trial(["task=teacher_residual", "model=residual", *SHORT], []).config
    task = build_task(cfg.task)
    assert task.cfg.teacher is TeacherKind.residual
    assert _calibrated_uniform(task, task.teacher.head) == pytest.approx(0.6, abs=0.05)
    x = task.sample(generator(0, "probe"), 8, task.cfg.n).x
    head = torch.softmax(task.beta * task.teacher.scores(x), -1) @ x  # (B, n, d)
    torch.testing.assert_close(task.teacher(x, task.beta), x + head @ task.teacher.V.to(x).T)
    result = run_trial(cfg)
    m = result.metrics
    assert m["test/identity_rel_mse"] > 0.1  # predicting the input is not already perfect
    assert m["test/rel_mse"] < 1.0 and m["test/rel_mse"] < m["test/identity_rel_mse"]


@pytest.mark.parametrize("preset,model", [
    ("teacher", "softmax"), ("teacher_general", "mlp"), ("teacher_quartic", "mlp"),
    ("arithmetic", "mlp"), ("arithmetic_learned", "softmax"), ("nearest", "softmax"),
    ("argmax", "softmax"), ("duplicate", "mlp"), ("repeated", "higher_order_gram"), ("recall", "mlp"),
])
def test_loss_decreases_with_a_capable_model(hydra_conf, preset, model):
    cfg = compose_trial([f"task={preset}", f"model={model}", *SMALL], []).config
    task = build_task(cfg.task)
    task.init_parameters(generator(0, "init", "task"))
    net = build_model(cfg.model, task.d, task.n_max, generator(0, "init"))
    batch = task.train_set(0)[0]
    opt = torch.optim.Adam([*net.parameters(), *task.parameters()], lr=3e-2)
    losses = []
    for _ in range(30):
        loss = task.loss(net(task.inputs(batch)), batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0]


import harness.models as _models  # noqa: E402

CONF_MODEL = Path(__file__).parent.parent / "conf" / "model"
needs_rotate = pytest.mark.skipif(not hasattr(_models, "rotate") or not (CONF_MODEL / "value.yaml").exists(),
                                  reason="needs harness.models.rotate and conf/model/value.yaml (issue 3)")

FAST = ["train.max_steps=12", "train.eval_every=4", "task.n_train=64", "task.n_val=32",
        "task.n_test=64", "train.dtype=float64", "train.optimizer=sgd", "train.lr=0.5"]


@needs_rotate
@pytest.mark.parametrize("preset,model", [("arithmetic_mod", "value"), ("arithmetic_learned", "softmax")])
def test_t2_sgd_retrain_in_rotated_embedding_matches_the_unrotated_curve(hydra_conf, preset, model):
    plain = run_trial(compose_trial([f"task={preset}", f"model={model}", *FAST], []).config)
    rotated = run_trial(compose_trial([f"task={preset}", f"model={model}", "task.rotation=retrain",
                                       *FAST], []).config)
    for a, b in zip(plain.curve, rotated.curve):
        for key in ("train/loss", "val/loss"):
            assert b[key] == pytest.approx(a[key], rel=1e-6)
    assert plain.curve[-1]["val/loss"] != plain.curve[0]["val/loss"]  # it did train


@needs_rotate
def test_t2_eval_rotated_knowledge_keeps_accuracy(hydra_conf):
    cfg = compose_trial(["task=arithmetic_rotation", "model=value", *FAST], []).config
    result = run_trial(cfg)
    assert result.metrics["test/rotated/supported"] == 1.0
    assert result.metrics["test/rotated/acc"] == result.metrics["test/acc"]
    assert result.metrics["test/rotated/loss"] == pytest.approx(result.metrics["test/loss"], rel=1e-9)
    assert "test/rotated_fixed/acc" in result.metrics


def test_t5_lengths_beyond_a_models_maximum_are_recorded_unsupported(hydra_conf):
    extra = ["train.max_steps=4", "train.eval_every=2", "task.n_train=32", "task.n_val=16", "task.n_test=32"]
    mlp = run_trial(compose_trial(["task=nearest_length", "model=mlp", *extra], []).config).metrics
    assert mlp["test/n_8/supported"] == 1.0 and "test/n_8/acc" in mlp
    assert mlp["test/n_64/supported"] == 0.0 and "test/n_64/acc" not in mlp
    att = run_trial(compose_trial(["task=nearest_length", "model=softmax", *extra], []).config).metrics
    assert att["test/n_64/supported"] == 1.0 and math.isfinite(att["test/n_64/acc"])
    assert att["test/acc"] == att["test/n_8/acc"]  # one training length: same examples


def test_scaled_readout_is_the_tied_readout_times_a_learned_temperature():
    """``readout=scaled``: ``logits = β Eᵀ F`` with ``β = readout_beta`` at first and a trained
    parameter; a non-positive ``readout_beta`` is refused naming the value."""
    from tasks.tokens import Readout
    tied = SelectionTask(SelectionConfig(kind=SelectionKind.repeated, n=8))
    scaled = SelectionTask(SelectionConfig(kind=SelectionKind.repeated, n=8, readout=Readout.scaled,
                                           readout_beta=4.0))
    out = torch.rand(3, 8, 16)
    torch.testing.assert_close(scaled.logits(out), 4.0 * tied.logits(out))
    assert [name for name, _ in scaled.named_parameters()] == ["log_beta"]
    assert list(tied.parameters()) == []
    with pytest.raises(ValueError, match="readout_beta=0"):
        SelectionTask(SelectionConfig(kind=SelectionKind.repeated, readout=Readout.scaled, readout_beta=0.0))


@pytest.mark.parametrize("preset", PRESETS)
def test_dense_loss_and_metric_sums_are_the_indexed_ones_and_vmap_over_stacked_sets(tasks_by_preset, preset):
    """``loss_dense`` and ``metric_sums_dense`` (what a pack's vmapped validation reads, each
    trial on its own set) give :meth:`loss` and :meth:`metric_sums`: counts exactly, sums to
    rounding; and they run under ``vmap`` with the batch itself mapped (two sets stacked)."""
    from torch.func import vmap

    from tasks import Batch

    _, task = tasks_by_preset[preset]
    batch = task.val_set()[0]
    g = torch.Generator().manual_seed(0)
    out = torch.randn(len(batch), batch.n, task.d, generator=g, dtype=task.dtype)
    with torch.no_grad():  # as validation measures them
        dense, indexed = task.metric_sums_dense(out, batch), task.metric_sums(out, batch)
    assert list(dense) == list(indexed)
    for key, (num, den) in indexed.items():
        assert float(dense[key][1]) == float(den), key
        assert float(dense[key][0]) == pytest.approx(float(num), rel=1e-6, abs=1e-9), key
    with torch.no_grad():
        assert float(task.loss_dense(out, batch)) == pytest.approx(float(task.loss(out, batch)), rel=1e-6)
    fields = [None if getattr(batch, f) is None else torch.stack([getattr(batch, f)] * 2)
              for f in ("x", "y", "tokens", "mask")]
    groups = {k: torch.stack([v] * 2) for k, v in batch.groups.items()}
    dims = [None if f is None else 0 for f in fields]
    def sums(o, *chunk):  # as tensors, as harness.pack._Metrics returns them
        return {k: (torch.as_tensor(a), torch.as_tensor(b)) for k, (a, b) in task.metric_sums_dense(o, Batch(*chunk)).items()}
    stacked = vmap(sums, in_dims=(0, *dims, 0))(torch.stack([out] * 2), *fields, groups)
    for key, (num, den) in indexed.items():
        assert float(stacked[key][1][1]) == float(den), key
