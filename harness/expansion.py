"""Ablation grid → override lists → one composed, resolved config per trial, with stable ids.

The grid is parsed with Hydra's own override grammar (``a,b,c``, ``range(5)``, ``glob(...)``)
and expanded to its cross product. Each trial is composed with ``hydra.compose`` from
``[*cli_overrides, *grid_point]``; a key given on the command line replaces that grid axis.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import re
from enum import Enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from hydra import compose
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, ValidationError, ValueNode, open_dict
from omegaconf._impl import select_node

from harness.config import Config, to_plain
from harness.models.external import REGIME_KEY, variant_name
from harness.naming import preset
from harness.paths import SINGLE, one_off_experiment
from harness.records import NOT_IDENTITY, Trial, drop_neutral  # the shared types (importers of harness.expansion.Trial too)

# Bump whenever a code change alters what a trial computes (training, data, metrics): every
# trial then gets a new id, and resume never mistakes an old result for a current one.
RESULTS_VERSION = 4  # 3: checkpoints selected on the validation error metric; 4: the quartic teacher mixes
# with softmax, a causal elementwise σ divides row i by i + 1, teachers log identity_rel_mse


class SweepError(ValueError):
    """Bad input found while expanding or composing an ablation (before any trial starts)."""


def identity_dict(cfg: DictConfig | Config) -> dict[str, Any]:
    """The resolved config as plain data, without where it runs or is recorded."""
    container = (OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
                 if isinstance(cfg, DictConfig) else to_plain(cfg))  # a resolved object: the same data
    return drop_neutral({key: value for key, value in container.items() if key not in NOT_IDENTITY})


def trial_id(cfg: DictConfig | Config) -> str:
    """Stable id of what a trial is: SHA-256 of its identity config and ``RESULTS_VERSION``."""
    return identity_id(identity_dict(cfg))


def identity_id(identity: dict[str, Any]) -> str:
    """:func:`trial_id` from an :func:`identity_dict` already computed."""
    payload = json.dumps({"results_version": RESULTS_VERSION, "config": identity}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def split_sweeps(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(plain, sweeps)``: command-line overrides without and with a sweep (``seed=0,1,2``,
    ``seed=range(3)``); a sweep on the command line is an axis of the sweep.

    Raises:
        SweepError: if an override does not parse.
    """
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception as err:
        raise SweepError(f"command-line override does not parse: {err}") from err
    plain = [o.input_line for o in parsed if not o.is_sweep_override() or o.is_hydra_override()]
    return plain, [o.input_line for o in parsed if o.is_sweep_override() and not o.is_hydra_override()]


def _plain_copy(tree: Any) -> Any:
    """A copy of nested dicts and lists of scalars (much cheaper than ``copy.deepcopy``)."""
    if isinstance(tree, dict):
        return {k: _plain_copy(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_plain_copy(v) for v in tree]
    return tree


def _with_value(obj: Any, path: list[str], value: Any) -> Any:
    """``obj`` (dataclasses and dicts) with the leaf at ``path`` replaced; shallow copies along the
    path only, every other node shared."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        out = dict(obj)
        out[head] = _with_value(obj[head], rest, value)
        return out
    out = copy.copy(obj)
    setattr(out, head, _with_value(getattr(obj, head), rest, value))
    return out


_INTERPOLATION = re.compile(r"\$\{([^}]*)\}")


def _referenced(tree: Any, found: set[str]) -> set[str]:
    """Keys that interpolations ``${...}`` in an unresolved container refer to."""
    if isinstance(tree, dict):
        for value in tree.values():
            _referenced(value, found)
    elif isinstance(tree, list):
        for value in tree:
            _referenced(value, found)
    elif isinstance(tree, str):
        found.update(m.strip() for m in _INTERPOLATION.findall(tree))
    return found


@dataclass
class _Base:
    """One Hydra composition and what the fast path reuses from it."""

    cfg: DictConfig
    choices: dict
    identity: dict | None = None  # identity_dict(cfg)
    obj: Any = None  # OmegaConf.to_object(cfg)
    referenced: set | None = None  # keys interpolations refer to


def grid_points(grid: dict[str, str], replaced: set[str], sweeps: Sequence[str] = ()) -> list[list[str]]:
    """Cross product of the grid's axes (Hydra grammar), leaving out the ``replaced`` keys, and
    of the command line's ``sweeps`` (override strings such as ``seed=0,1,2``).

    Raises:
        SweepError: if an axis does not parse.
    """
    lines = [f"{key}={value}" for key, value in grid.items() if key not in replaced] + list(sweeps)
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
    except Exception as err:  # Hydra raises OverrideParseException with the offending text
        raise SweepError(f"ablation grid does not parse: {err}") from err
    axes = [
        [f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()]
        if o.is_sweep_override() else [o.input_line]
        for o in parsed
    ]
    for o, values in zip(parsed, axes):
        if not values:  # the cross product would be empty: an invocation that runs nothing
            raise SweepError(f"{o.input_line} gives no values; a grid axis needs at least one")
    return [list(point) for point in itertools.product(*axes)]


def _variant(choices: DictConfig, overrides: Sequence[str]) -> str:
    if choices["model"] == "external":  # a class by import path: its class name (harness/models/external.py)
        return variant_name(overrides) or "external"
    # model.blocks is the regime's depth (as train.lr, its trials' own params), not the arm's name:
    # the zoo's references keep their preset names at two blocks (harness/models/stack.py)
    extra = [o.split("=", 1) for o in overrides if o.lstrip("+~").startswith("model.")
             and o.lstrip("+~").split("=", 1)[0] != REGIME_KEY]
    suffix = ",".join(f"{key.split('.', 1)[1]}={value}" for key, value in extra)
    return f"{choices['model']}[{suffix}]" if suffix else str(choices["model"])


def _eval_seed_of_the_trial(identity: dict, obj: Any) -> tuple[dict, Any]:
    """``task.eval_seed`` unset (None, tasks/base.py) is the trial's seed: set in the config
    object and in the identity, so a trial's id says which evaluation sets it used (seed 0's is
    0, the shared sets every trial used before, left out as neutral: the id from before; an
    explicit ``task.eval_seed=s`` at seed ``s`` is the same trial)."""
    task = getattr(obj, "task", None)
    if task is None or not hasattr(task, "eval_seed") or task.eval_seed is not None:
        return identity, obj
    obj = dataclasses.replace(obj, task=dataclasses.replace(task, eval_seed=int(obj.seed)))
    return drop_neutral({**identity, "task": {**identity["task"], "eval_seed": int(obj.seed)}}), obj


class Composer:
    """Composes the trials of one invocation.

    Hydra composes once per combination of config-group choices in a grid point (``model=…``,
    ``task=…``) with the command-line overrides; a point's value overrides (``task.n_train=64``,
    ``seed=3``), parsed by Hydra's override grammar, are then set on a copy with OmegaConf, whose
    structured-config checks reject unknown keys and wrong types as Hydra would. A point that
    adds or deletes keys (``+key=``, ``~key``) is composed by Hydra in full.

    Fast path (``fast=True``): each distinct value override is checked and converted once per
    composition, and a point that sets only scalar leaves no interpolation refers to is built
    from the composition's resolved identity and config object, copying only what it changes;
    ids and configs are those of the full path (``tests/test_expansion.py`` compares them).
    """

    def __init__(self, cli_overrides: Sequence[str], fast: bool = True) -> None:
        self.cli = list(cli_overrides)
        self.parser = OverridesParser.create()
        self.groups = set(GlobalHydra.instance().config_loader().list_groups(""))
        self.fast = fast
        self._cache: dict[tuple[str, ...], _Base] = {}
        self._parsed: dict[str, Any] = {}  # override line → parsed Override
        self._values: dict[tuple, tuple[Any, Any]] = {}

    def _compose(self, overrides: list[str]) -> _Base:
        cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
        choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
        with open_dict(cfg):
            del cfg["hydra"]
        return _Base(cfg, choices)

    def _value(self, groups: tuple[str, ...], base: _Base, override) -> tuple[Any, Any] | None:
        """A value override checked and converted by its leaf node's type, once per composition
        and line: ``(object value, plain value)``; ``None`` where the full path must decide
        (no such scalar leaf, a value OmegaConf rejects or an interpolation: it raises there)."""
        key = (groups, override.input_line)
        if key not in self._values:
            self._values[key] = None
            node = select_node(base.cfg, override.key_or_group)
            value = override.value()
            if isinstance(node, ValueNode) and not (isinstance(value, str) and "${" in value):
                leaf = copy.deepcopy(node)
                try:
                    leaf._set_value(value)  # OmegaConf's own validation and conversion
                except ValidationError:
                    return None
                typed = leaf._value()
                self._values[key] = (typed, typed.name if isinstance(typed, Enum) else typed)
        return self._values[key]

    def _fast(self, groups: tuple[str, ...], base: _Base, values: list) -> tuple[dict, Any] | None:
        """``(identity, config object)`` of a point that sets only scalar leaves that no
        interpolation refers to, from the composition ``base``; ``None`` otherwise."""
        if base.identity is None:
            base.identity = identity_dict(base.cfg)
            base.obj = OmegaConf.to_object(base.cfg)
            base.referenced = _referenced(OmegaConf.to_container(base.cfg, resolve=False), set())
        for o in values:
            k = o.key_or_group
            if any(r == k or r.startswith(k + ".") or k.startswith(r + ".") or r.startswith(".")
                   for r in base.referenced):
                return None
        identity, obj = _plain_copy(base.identity), base.obj
        for o in values:
            converted = self._value(groups, base, o)
            if converted is None:
                return None
            value, plain = converted
            path = o.key_or_group.split(".")
            obj = _with_value(obj, path, value)
            if path[0] not in NOT_IDENTITY:
                node = identity
                for part in path[:-1]:
                    node = node[part]
                node[path[-1]] = plain
        return drop_neutral(identity), obj  # e.g. task.eval_seed=0 set explicitly: the same id

    def extension(self, base: Trial, changes: dict[str, str]) -> Trial:
        """``base``'s grid point with the keys of ``changes`` set to new values (e.g. another
        ``train.lr``, or more ``train.max_steps``), tagged ``extends = base.trial_id`` so the
        analysis reads it with ``base``'s arm (lr-edge and budget reruns, paper.md §13).

        Raises:
            SweepError: as :meth:`trial`.
        """
        keep = [o for o in base.overrides if o.split("=", 1)[0] not in changes]
        point = keep + [f"{key}={value}" for key, value in changes.items()]
        return dataclasses.replace(self.trial(point), extends=base.trial_id)

    def trial(self, point: Sequence[str]) -> Trial:
        """The trial of one grid point.

        Raises:
            SweepError: if it cannot be composed (unknown key or group option, wrong type),
                with Hydra's or OmegaConf's message and its cause.
        """
        overrides = [*point, *self.cli]
        try:
            for line in point:  # Hydra's grammar is slow: parse each distinct line once
                if line not in self._parsed:
                    self._parsed[line] = self.parser.parse_overrides([line])[0]
            parsed = [self._parsed[line] for line in point]
            plain = not any(o.is_add() or o.is_force_add() or o.is_delete() or o.is_sweep_override()
                            or o.is_hydra_override() for o in parsed)
            groups = tuple(o.input_line for o in parsed if o.key_or_group in self.groups)
            if plain:
                key = groups
                if key not in self._cache:
                    self._cache[key] = self._compose([*groups, *self.cli])
                base = self._cache[key]
                values = [o for o in parsed if o.key_or_group not in self.groups]
                done = self._fast(groups, base, values) if self.fast else None
                if done is not None:
                    identity, obj = _eval_seed_of_the_trial(*done)
                    return Trial(identity_id(identity), _variant(base.choices, overrides), tuple(point),
                                 obj, str(base.choices["task"]), identity=identity)
                cfg = copy.deepcopy(base.cfg)
                for o in values:
                    OmegaConf.update(cfg, o.key_or_group, o.value(), merge=True)
                choices = base.choices
            else:
                composed = self._compose(overrides)
                cfg, choices = composed.cfg, composed.choices
            identity, obj = _eval_seed_of_the_trial(identity_dict(cfg), OmegaConf.to_object(cfg))
        except Exception as err:
            cause = f" ({err.__cause__})" if err.__cause__ else ""
            raise SweepError(f"cannot compose trial {list(point)}: {err}{cause}") from err
        return Trial(identity_id(identity), _variant(choices, overrides), tuple(point), obj,
                     str(choices["task"]), identity=identity)


def compose_trial(cli_overrides: Sequence[str], point: Sequence[str]) -> Trial:
    """Compose one trial from the command-line overrides and one grid point (see :class:`Composer`).

    Raises:
        SweepError: if it cannot be composed.
    """
    return Composer(cli_overrides).trial(point)


def expand(cfg: DictConfig, cli_overrides: Sequence[str]) -> list[Trial]:
    """All trials of the invocation whose composed config is ``cfg``.

    ``cli_overrides`` are the command line's overrides (Hydra's ``overrides.task``); a key given
    there replaces the grid axis of the same key, and a sweep given there (``seed=0,1,2``) is an
    axis itself. Without a grid or a sweep, the result is one trial. Each ``ablation.extra_grids``
    entry adds the cross product of the grid with that entry's axes replaced (points already in
    the grid are not repeated).

    Raises:
        SweepError: for a grid that does not parse, an ``extra_grids`` key that is not a grid
            axis, or a trial that does not compose.
    """
    if cfg.ablation.suite:
        raise SweepError(f"{cfg.ablation.name!r} is a suite; expand it with expand_suite()")
    if cfg.ablation.name != SINGLE and not cfg.ablation.grid:
        raise SweepError(f"ablation {cfg.ablation.name!r} has an empty grid; give ablation.grid "
                         "at least one axis, e.g. seed: range(5)")
    parser = OverridesParser.create()
    replaced = {o.key_or_group for o in parser.parse_overrides(list(cli_overrides))}
    plain, sweeps = split_sweeps(cli_overrides)
    grid = OmegaConf.to_container(cfg.ablation.grid, resolve=True) if cfg.ablation.grid else {}
    points = grid_points(grid, replaced, sweeps) if grid or sweeps else [[]]
    extras = cfg.ablation.get("extra_grids")
    for extra in OmegaConf.to_container(extras, resolve=True) if extras else []:
        unknown = sorted(set(extra) - set(grid))
        if unknown:
            raise SweepError(f"ablation {cfg.ablation.name!r}: extra_grids key(s) {unknown} are not "
                             f"axes of its grid; allowed: {sorted(grid)}")
        known = {tuple(p) for p in points}
        points += [p for p in grid_points({**grid, **extra}, replaced, sweeps) if tuple(p) not in known]
    composer = Composer(plain)
    trials = [composer.trial(point) for point in points]
    seen: dict[str, Trial] = {}
    for trial in trials:
        if trial.trial_id in seen:
            raise SweepError(
                f"grid points {list(seen[trial.trial_id].overrides)} and {list(trial.overrides)} "
                "compose to the same trial; remove the duplicate axis value"
            )
        seen[trial.trial_id] = trial
    return trials


def expand_suite(cfg: DictConfig, cli_overrides: Sequence[str],
                 composed: Mapping[str, DictConfig] | None = None) -> list[tuple[str, list[Trial]]]:
    """The ablations to run: ``[(name, trials)]``; one entry unless ``cfg`` is a suite, whose
    ablations are composed with the same command-line overrides (``+ablation=SUITE`` replaced),
    or taken from ``composed`` (name → the config composed with ``+ablation=name`` and those
    overrides, as the report composes them to read their parts: one composition less each).

    Raises:
        SweepError: as :func:`expand`, or for a suite naming an unknown ablation.
    """
    if not cfg.ablation.suite:
        trials = expand(cfg, cli_overrides)
        return [(experiment_name(cfg, trials), trials)]
    rest = [o for o in cli_overrides if not o.lstrip("+~").startswith("ablation=")]
    out = []
    for name in cfg.ablation.suite:
        cli = [f"+ablation={name}", *rest]
        try:
            sub = (composed or {}).get(name) or compose(config_name="config", overrides=split_sweeps(cli)[0])
        except Exception as err:
            raise SweepError(f"suite {cfg.ablation.name!r}: cannot compose ablation {name!r}: {err}") from err
        out.append((sub.ablation.name, expand(sub, cli)))
    return out


def experiment_name(cfg: DictConfig, trials: Sequence[Trial]) -> str:
    """The MLflow experiment of the ablation ``cfg`` whose trials are ``trials``: its
    ``ablation.name``, or for a one-off run (no ``+ablation``, no grid) one experiment per task
    and model preset (:func:`harness.paths.one_off_experiment`, ``single/teacher/softmax``)."""
    if cfg.ablation.name != SINGLE or cfg.ablation.grid or not trials:
        return str(cfg.ablation.name)
    return one_off_experiment([t.task for t in trials], [preset(t.variant) for t in trials])
