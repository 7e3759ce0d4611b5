"""Minimal pairs (paper.md §13 "Minimal pairs"): before any trial runs, each part's two arms
must differ, in their resolved trial configs, in exactly the keys the part declares.

A part (:class:`harness.config.PartConfig`) declares ``differ``: the leaf keys of the trial
config (``model.*``, ``task.*``, ``train.*``; ``train.lr`` is never compared, it is selected per
arm on validation) its arms ``a`` and ``b`` may differ in, exact keys, no wildcards, e.g.
``differ: [model.zg2]``. ``differ: [family]`` declares a comparison *between families* (C9's
equivariant forms against baselines): the arms may differ in any ``model.*`` key and in nothing
else, and the baseline ``b`` must have at least ``a``'s parameters (capacity-matched).

Every deciding part must declare ``differ``; sanity parts and observations may (then they are
checked too). The arms are labelled as :func:`analysis.trials.arm_label` labels them (the
variant plus the other swept axes); the two arms are compared at a common ``task.n_train`` and
seed (the largest size both have), one trial each.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any, Sequence

import torch

from harness.models import build_model, count_parameters
from harness.expansion import SweepError, Trial

FAMILY = "family"  # differ: [family]: a comparison between families, capacity-matched
COMPARED = ("model", "task", "train")  # the trial config's sections (the trial's identity)
EXEMPT = frozenset({"train.lr"})  # selected per arm on validation
NOT_ARM = ("task", "task.n_train", "seed", "train.lr", "model")  # as in analysis.trials


def leaves(cfg: Any) -> dict[str, Any]:
    """The trial config's ``model``, ``task`` and ``train`` leaves as ``{"model.k": 8, …}``
    (enums as their values), ``train.lr`` left out."""
    out: dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        if dataclasses.is_dataclass(node):
            for f in dataclasses.fields(node):
                walk(f"{prefix}.{f.name}", getattr(node, f.name))
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}.{key}", value)
        else:
            out[prefix] = node.value if hasattr(node, "value") else node
    for section in COMPARED:
        walk(section, getattr(cfg, section))
    return {k: v for k, v in out.items() if k not in EXEMPT}


def differences(a: Any, b: Any) -> dict[str, tuple[Any, Any]]:
    """``{key: (value in a, value in b)}`` for every compared leaf where two trial configs differ
    (a key only one side has counts, with ``None`` on the other)."""
    la, lb = leaves(a), leaves(b)
    return {k: (la.get(k), lb.get(k)) for k in sorted(set(la) | set(lb)) if la.get(k) != lb.get(k)}


def _point(trial: Trial) -> dict[str, str]:
    return dict(o.lstrip("+~").split("=", 1) for o in trial.overrides if "=" in o)


def arm_labels(trials: Sequence[Trial]) -> dict[str, str]:
    """``{trial_id: arm}`` by the rule of :func:`analysis.trials.arm_label` (which sits above
    this layer): the variant plus ``· key=value`` per swept axis other than the task, size,
    seed, lr and model keys."""
    values: dict[str, set[str]] = defaultdict(set)
    for trial in trials:
        for key, value in _point(trial).items():
            values[key].add(value)
    axes = [k for k, v in values.items() if len(v) > 1 and k not in NOT_ARM and not k.startswith("model.")]
    return {t.trial_id: " · ".join([t.variant, *(f"{k.rsplit('.', 1)[-1]}={_point(t)[k]}"
                                                  for k in axes if k in _point(t))]) for t in trials}


def _one_pair(trials: Sequence[Trial], arms: dict[str, str], part: Any) -> tuple[Trial, Trial] | None:
    """One trial of each arm on the part's task, at the largest common n_train and a common seed."""
    mine = [t for t in trials if t.task == part.task and not t.extends]
    by = {arm: [t for t in mine if arms[t.trial_id] == arm] for arm in (part.a, part.b)}
    if not by[part.a] or not by[part.b]:
        return None
    at = lambda t: (t.config.task.n_train, t.config.seed)  # noqa: E731
    common = sorted({at(t) for t in by[part.a]} & {at(t) for t in by[part.b]})
    pick = (lambda arm: next(t for t in by[arm] if at(t) == common[-1])) if common else (lambda arm: by[arm][0])
    return pick(part.a), pick(part.b)


def n_params(trial: Trial) -> int:
    """Trainable parameters of the trial's model, built cheaply on the CPU (the number each run
    logs as ``n_params``)."""
    from tasks import build_task  # the task's d and n_max size the model

    task = build_task(trial.config.task, torch.float32)
    return count_parameters(build_model(trial.config.model, task.d, task.n_max, torch.Generator().manual_seed(0)))


def check_part(part: Any, a: Trial, b: Trial) -> str:
    """'' or why the part's arms are not the pair it declares (names every extra and every
    missing difference, with both values)."""
    declared = list(part.differ or [])
    found = differences(a.config, b.config)
    where = f"part {part.claim} {part.name!r} ({part.a} vs {part.b} on {part.task})"
    if declared == [FAMILY]:
        extra = {k: v for k, v in found.items() if not k.startswith("model.")}
        if extra:
            return f"{where}: a comparison between families may differ only in model.* keys; also differ: " + \
                "; ".join(f"{k} ({va!r} vs {vb!r})" for k, (va, vb) in extra.items())
        pa, pb = n_params(a), n_params(b)
        return "" if pb >= pa else (f"{where}: not capacity-matched: the baseline `{part.b}` has {pb} "
                                    f"parameters, fewer than `{part.a}`'s {pa}")
    if FAMILY in declared or any("*" in k for k in declared):
        return f"{where}: differ must list exact leaf keys, or be [family] alone; got {declared}"
    extra = {k: v for k, v in found.items() if k not in declared}
    missing = [k for k in declared if k not in found]
    problems = (["they also differ in " + "; ".join(f"{k} ({va!r} vs {vb!r})" for k, (va, vb) in extra.items())]
                if extra else []) + ([f"declared but equal: {missing}"] if missing else [])
    return f"{where}: declared differ {declared}, but " + ", and ".join(problems) if problems else ""


def check_pairs(trials: Sequence[Trial]) -> None:
    """Check every part of every ablation among ``trials`` (grouped by ``config.ablation.name``)
    that declares ``differ``; a deciding part must declare it.

    Raises:
        SweepError: naming the part and each extra or missing difference, or the capacity gap
            (the command exits 2 before any trial starts).
    """
    groups: dict[str, list[Trial]] = defaultdict(list)
    for trial in trials:
        groups[trial.config.ablation.name].append(trial)
    for mine in groups.values():
        arms = arm_labels(mine)
        for part in mine[0].config.ablation.parts:
            role = getattr(part.role, "value", part.role)
            if not part.differ:
                if role == "deciding":
                    raise SweepError(f"part {part.claim} {part.name!r}: a deciding part must declare `differ` "
                                     "(the leaf keys its arms differ in, or [family])")
                continue
            for b in list(part.choose_b) or [part.b]:  # a choice among arms: a against each candidate
                one = dataclasses.replace(part, b=b) if dataclasses.is_dataclass(part) else {**part, "b": b}
                pair = _one_pair(mine, arms, one)
                problem = check_part(one, *pair) if pair else ""
                if problem:
                    raise SweepError(problem)
