"""Pre-flight checks: every trial's task and model are built once before any trial starts, so
impossible sizes or options fail the invocation with exit status 2 and nothing in MLflow."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Sequence

import torch

from harness import augment
from harness.augment import task_label
from harness.config import ClusterConfig, SchedulerKind
from harness.models import MODELS, build_model
from harness.external_check import check as check_external
from harness.pack import resolve_pack_size
from harness.pairs import check_pairs
from harness.expansion import SweepError, Trial
from harness.trial import DTYPES, STEPS_TO_TARGETS, check_finite, resolve_device
from tasks import TASKS, build_task
from tasks.base import resolve_eval_seed


def _positive(trial: Trial) -> None:
    train = trial.config.train
    sizes = {"train.max_steps": train.max_steps, "train.batch_size": train.batch_size,
             "train.eval_every": train.eval_every}
    bad = {key: value for key, value in sizes.items() if value <= 0}
    if bad:
        raise ValueError(f"must be positive: {bad}")
    if not (train.lr > 0 and math.isfinite(train.lr)):  # refuses nan, 0 and inf
        raise ValueError(f"train.lr must be positive and finite, got {train.lr}")


def _has_schema(trial: Trial) -> None:
    """A preset without its ``defaults: [<family>_schema]`` line composes to a plain dict,
    which nothing below can read (an ``AttributeError`` in the model registry)."""
    for group, registry in (("model", MODELS), ("task", TASKS)):
        if not dataclasses.is_dataclass(getattr(trial.config, group)):
            raise ValueError(f"the {group} preset of {trial.variant if group == 'model' else trial.task!r} "
                             f"has no schema: its conf/{group}/<name>.yaml must start with "
                             f"'defaults: [<family>_schema, _self_]'; families: {sorted(registry)}")


def check_cluster(cfg: ClusterConfig) -> None:
    """Every ``cluster`` value, before anything starts or is written.

    Raises:
        SweepError: naming the bad value and what is allowed.
    """
    if not cfg.cpus_per_trial > 0:
        raise SweepError(f"cluster.cpus_per_trial must be positive (fractions allowed), got {cfg.cpus_per_trial}")
    if not cfg.gpus_per_trial >= 0:
        raise SweepError(f"cluster.gpus_per_trial must be 0 or positive (fractions allowed), got {cfg.gpus_per_trial}")
    if cfg.max_retries < 0:
        raise SweepError(f"cluster.max_retries must be 0 or positive, got {cfg.max_retries}")
    if cfg.num_cpus is not None and cfg.num_cpus <= 0:
        raise SweepError(f"cluster.num_cpus must be positive (or null: all cores), got {cfg.num_cpus}")
    if cfg.scheduler is not SchedulerKind.local and cfg.num_cpus is not None:
        raise SweepError(f"cluster.num_cpus={cfg.num_cpus} sizes the Ray instance that cluster=local "
                         f"starts; cluster={cfg.scheduler.value} cannot use it (a running cluster has "
                         "its own size; cluster=serial runs one trial at a time)")
    if not 0 <= cfg.worker_niceness <= 19:
        raise SweepError(f"cluster.worker_niceness must be 0-19 (19 yields the most CPU time to other "
                         f"processes; below 0 needs privileges), got {cfg.worker_niceness}")
    if cfg.scheduler is not SchedulerKind.local and cfg.worker_niceness != 0:
        raise SweepError(f"cluster.worker_niceness={cfg.worker_niceness} is for the workers that "
                         f"cluster=local starts; cluster={cfg.scheduler.value} cannot use it (a running "
                         "cluster's is set where it starts: RAY_worker_niceness=N ray start ...)")
    if cfg.scheduler is not SchedulerKind.ray and cfg.address is not None:
        raise SweepError(f"cluster.address={cfg.address!r} is for cluster=ray (join a running "
                         f"cluster); cluster={cfg.scheduler.value} does not join one")


def check_part_values(trials: Sequence[Trial]) -> None:
    """A part's ``value: steps_to_<t>`` must name a target every run records
    (:data:`harness.trial.STEPS_TO_TARGETS`): otherwise its verdict could only ever read
    "no runs with val/first_step_below/<t>", found after the whole sweep.

    Raises:
        SweepError: naming the part, the bad value and the allowed ones.
    """
    allowed = ", ".join(f"steps_to_{t:g}" for t in STEPS_TO_TARGETS)
    by_ablation = {t.config.ablation.name: t.config.ablation.parts for t in trials}
    for part in (p for parts in by_ablation.values() for p in parts):
        match = re.fullmatch(r"steps_to_(.*)", str(part.value))
        try:
            ok = match is None or any(math.isclose(float(match[1]), t) for t in STEPS_TO_TARGETS)
        except ValueError:
            ok = False
        if not ok:
            raise SweepError(f"part {part.claim} {part.name!r}: value={part.value!r}; allowed "
                             f"steps-to-target values: {allowed}")


PREFLIGHT_N = 256  # examples per split and length that the preflight's data check draws


def check_data(task, seed: int) -> None:
    """The task's generated data is finite: up to :data:`PREFLIGHT_N` examples of each split
    (training of ``seed``, validation, test) at each of its lengths, drawn from the streams the
    trial draws from; float tensors ``x`` and ``y`` of each :class:`tasks.base.Batch` (token ids
    are integers). A NaN or inf in the data would otherwise be trained on and reported as
    "diverged". A sample, not every example (the whole sets cost a suite's preflight seconds).

    Raises:
        ValueError: naming the split, the tensor, how many values are not finite, and that the
            task's data (its ``sample``), not the training, is at fault.
    """
    cfg = task.cfg
    lengths = {"train": (task.lengths, cfg.n_train), "val": (task.lengths, cfg.n_val),
               "test": (sorted({*task.lengths, *task.test_ns}), cfg.n_test)}
    sets = {split: [task.sample_split(split, n, min(size, PREFLIGHT_N), seed) for n in ns]
            for split, (ns, size) in lengths.items() if size > 0}
    check_finite(sets)


def _streams(task_cfg):
    """A task's config without its set sizes: what its data streams depend on."""
    sizes = {k: 0 for k in ("n_train", "n_val", "n_test") if hasattr(task_cfg, k)}
    return dataclasses.replace(task_cfg, **sizes) if sizes and dataclasses.is_dataclass(task_cfg) else task_cfg


def preflight(trials: Sequence[Trial], device: str, pack_size: str = "auto") -> None:
    """Check the device and ``cluster.pack_size``, and build each distinct task and model of
    ``trials`` (cheaply, on the CPU), each task's data checked finite (:func:`check_data`).

    Raises:
        SweepError: naming the first trial whose config cannot be built, and why.
    """
    try:
        if not device.startswith("cuda"):  # CUDA is checked where trials run (the scheduler)
            resolve_device(device)
        resolve_pack_size(pack_size, device)
    except ValueError as err:
        raise SweepError(str(err)) from err
    tasks: dict[str, object] = {}
    built: set[str] = set()
    checked: set[str] = set()  # the task configs whose data was checked, sizes left out
    for trial in trials:
        cfg = trial.config
        task_key, model_key = repr(cfg.task), repr((cfg.model, cfg.task))  # dataclass reprs
        try:
            _has_schema(trial)
            _positive(trial)
            if task_key not in tasks:
                tasks[task_key] = build_task(resolve_eval_seed(cfg.task, cfg.seed), DTYPES[cfg.train.dtype])
                data_key = repr(_streams(cfg.task))
                if data_key not in checked:  # once per data stream, not per n_train
                    check_data(tasks[task_key], cfg.seed)
                    checked.add(data_key)
            augment.check(cfg.train.augment, tasks[task_key], task_label(cfg.task))
            if model_key not in built:
                task = tasks[task_key]
                model = build_model(cfg.model, task.d, task.n_max, torch.Generator().manual_seed(0))
                check_external(cfg.model, model, task.d, task.n_max)  # shape, declared symmetries
                built.add(model_key)
        except (ValueError, KeyError, TypeError) as err:
            raise SweepError(f"trial {trial.variant} {list(trial.overrides)}: {err}") from err
    check_part_values(trials)
    check_pairs(trials)  # i28: each part's arms differ in exactly its declared keys (harness/pairs.py)
