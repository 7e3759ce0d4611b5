"""A pack's wrap-up measures its trials' symmetries once for the pack (harness/pack.py
``measure_pack``: vmapped over the kept parameters, harness/symmetry.py ``measure_stacked``) with the
values of the per-trial form (harness/symmetry.py ``measure`` on each trial's kept state)."""

from __future__ import annotations

import pytest
import torch

import harness.pack
import harness.symmetry
from harness.expansion import compose_trial
from harness.pack import run_pack
from harness.symmetry import KEYS, measure
from harness.trial import _load, prepare, symmetry_input
from tasks.base import generator

POINTS = [(0, 0.003, 64), (1, 0.03, 96), (2, 0.01, 64)]  # (seed, lr, n_train): three trials, one pack
VARIANTS = {
    "elementwise-sigma": ["model=quad_sigma"],  # M3, σ = tanh elementwise; span residual (n + k < d)
    "softmax": ["model=softmax"],  # M4a; span residual
    "knowledge-general": ["model=general"],  # M0: Z g2, pairwise φ1
    "sinusoid-buffer": ["model=transformer_sin"],  # rotate_ maps a buffer (pe_basis ↦ Q pe_basis)
    "learned-embedding": ["task=arithmetic_learned", "model=tokenwise", "task.n_val=20", "task.n_test=40",
                          "train.batch_size=16"],  # x = task.inputs: the kept learned E
}


def _configs(variant: list[str]):
    return [compose_trial(["train.max_steps=3", "train.dtype=float64", "task.n_val=32", "task.n_test=64",
                           *variant, f"seed={s}", f"train.lr={lr}", f"task.n_train={n}"], []).config
            for s, lr, n in POINTS]


def _per_trial(cfgs, results) -> list[dict[str, float]]:
    """The reference: :func:`harness.symmetry.measure` of each trial alone, on its own modules
    holding the kept state the pack returned, with its own generator."""
    reference = []
    for cfg, result in zip(cfgs, results):
        s = prepare(cfg, torch.device("cpu"))
        _load(s.model, s.task, result.state_dict)
        reference.append(measure(s.model, symmetry_input(s), generator(cfg.seed, "symmetry")))
    return reference


def _symmetry_of(results) -> list[dict[str, float]]:
    return [{k: v for k, v in r.metrics.items() if k in KEYS} for r in results]


def _agree(batched, reference) -> bool:
    return all(list(b) == list(r) and all(b[k] == pytest.approx(r[k], rel=1e-10, abs=1e-12) for k in r)
               for b, r in zip(batched, reference))


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_a_packs_symmetry_metrics_measured_once_for_the_pack_are_each_trials_own(hydra_conf, variant,
                                                                                  monkeypatch):
    """Every symmetry metric of the batched wrap-up (one vmapped pass per transformation, each
    trial with its own Q and permutation) is the per-trial form's within 1e-10 in float64, in
    the same key order; the per-trial fallback is not taken. Mutation-checked: every trial's
    parameters rotated by trial 0's Q (all five), the rotated copies without their rotated
    buffers (sinusoid-buffer), one norm over the whole pack instead of each trial's (softmax),
    or trial 0's permutation for all (sinusoid-buffer: not permutation-equivariant) fail it."""
    calls = []
    real = harness.pack.measure_stacked
    monkeypatch.setattr(harness.pack, "measure_stacked", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(harness.pack, "measure_each", None)  # a fallback would fail here
    cfgs = _configs(variant)
    results = run_pack(cfgs)
    batched, reference = _symmetry_of(results), _per_trial(cfgs, results)
    assert calls == [1] and all(set(KEYS[:3]) <= set(b) for b in batched)
    assert len({b[KEYS[1]] for b in batched}) == len(cfgs)  # each trial its own Q: values differ
    assert _agree(batched, reference), (batched, reference)
    if variant[0] in ("model=quad_sigma", "model=softmax"):
        assert all(KEYS[3] in b for b in batched)  # the span residual, one batched QR


def test_one_trials_q_for_the_whole_pack_fails_the_comparison(hydra_conf, monkeypatch):
    """The mutation check: the batched pass given trial 0's Q for every trial (each trial's
    permutation unchanged) no longer agrees with the per-trial form."""
    cfgs = _configs(VARIANTS["softmax"])
    real = harness.symmetry.draws

    def first_q_for_all(d, n, generators):
        qs, perms = real(d, n, generators)
        return qs[:1].expand_as(qs), perms
    monkeypatch.setattr(harness.symmetry, "draws", first_q_for_all)
    results = run_pack(cfgs)
    assert not _agree(_symmetry_of(results), _per_trial(cfgs, results))


def test_where_vmap_refuses_the_model_the_pack_measures_each_trial_alone(hydra_conf, monkeypatch):
    """A model whose forward vmap refuses (a ``RuntimeError`` from the vmapped pass) is measured
    trial by trial, with the same values, and its class is remembered for later packs."""
    def refused(template, states):
        def forward(x):
            raise RuntimeError("vmap: data-dependent control flow")
        return forward
    monkeypatch.setattr(harness.pack, "_vmapped_model", refused)
    monkeypatch.setattr(harness.pack, "_NO_SYMMETRY_VMAP", set())
    cfgs = _configs(VARIANTS["softmax"])
    results = run_pack(cfgs)
    assert _agree(_symmetry_of(results), _per_trial(cfgs, results))
    model_class = type(prepare(cfgs[0], torch.device("cpu")).model)
    assert harness.pack._NO_SYMMETRY_VMAP == {model_class}


def test_measuring_a_pack_leaves_its_models_and_kept_parameters_unchanged(hydra_conf):
    """The rotated copies are rotated in place in tensors of their own: the trials' modules
    (their parameters and buffers) and the pack's stacked kept parameters stay as they were."""
    from harness.pack import measure_pack, prepare_setups

    setups, _ = prepare_setups(_configs(VARIANTS["sinusoid-buffer"]), torch.device("cpu"))
    best = {f"model.{n}": torch.stack([dict(s.model.named_parameters())[n].detach().clone() for s in setups])
            for n, _ in setups[0].model.named_parameters()}
    before = [{k: v.clone() for k, v in s.model.state_dict().items()} for s in setups]
    kept = {k: v.clone() for k, v in best.items()}
    assert len(measure_pack(setups, best)) == len(setups)
    assert all(torch.equal(v, b[k]) for s, b in zip(setups, before) for k, v in s.model.state_dict().items())
    assert all(torch.equal(best[k], v) for k, v in kept.items())
