"""What the command lines do before anything heavy is imported: ``--help``, and a check of every
config-group choice (``model=…``, ``task=…``, ``+ablation=…``, each value of a sweep too) against
the files in ``conf/``, of every key of a schema-backed node (``train.max_steps``, ``seed``, with
or without ``+``) against its dataclass and of its value against the field's type, with "did you
mean" for a misspelling, of the sweep functions the harness cannot run (``interval``, ``glob``,
a sweep over ``+ablation``), and of ``ablation.name`` (UTF-8, at most MLflow's 500 characters).
A ``model.target`` is checked by importing the mixer alone (:func:`check_user_code`, torch with it). Imports only the standard library, PyYAML and Hydra's override
parser, so ``--help`` and a typo's message come back without loading torch, Ray or MLflow; only
a ``task.KEY``/``model.KEY`` override loads the task and model registries (torch) to read the
presets' schemas.

The dataclass schemas that Hydra's ConfigStore keeps in the same groups (``attention_schema``) are
bases of the presets, not choices, and are never listed.
"""

from __future__ import annotations

import ast
import difflib
import functools
import os
import sys
import textwrap
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Sequence

CONF = Path(__file__).resolve().parent.parent / "conf"

HARNESS_USAGE = """\
usage: python -m harness [+ablation=NAME] [GROUP=OPTION ...] [KEY=VALUE ...]

Runs the trials of an ablation (without +ablation: one trial of the defaults) on Ray and records
them in MLflow: one experiment per ablation, one parent run per invocation, one child run per
trial. Trials already FINISHED in the store are skipped (resume).

  dry_run=true        list the trials (id, variant, overrides; "done" = already finished in the
                      store) and exit; writes nothing
  force=true          rerun trials that already finished
  cluster=serial      run in this process, no Ray; cluster=ray joins a running cluster
  tracking=server tracking.uri=http://HOST:PORT   record through an MLflow server
  --cfg job           print the composed config and exit (Hydra)

Exit status: 0 all trials finished, 1 some failed (named on stderr), 2 bad input (nothing run,
nothing recorded), 130 interrupted.
"""

ANALYSIS_USAGE = """\
usage: python -m analysis +ablation=NAME [KEY=VALUE ...] [tracking=...]

Redraws an ablation's figures and tables from its MLflow runs (nothing is trained) into
outputs/NAME/<time>/ and prints the end-of-sweep table: the runs of exactly the trials that
python -m harness runs with the same overrides (sweeps such as seed=0,1 included, with or
without -m; --config-dir and hydra.searchpath too). Exit status 2 if the command does not
compose, or the experiment or its runs are missing.
"""

REPORT_USAGE = """\
usage: python -m analysis.report [scale=default|full|tiny] [report.run=false] [report.out=PATH]

Runs the paper suite (finished trials are skipped), then writes docs/report.md with a verdict per
claim and each ablation's figures and tables beside it.
"""


ZOO_USAGE = """\
usage: python -m analysis.zoo [scale=default|quick|tiny] [cluster=...] [zoo.out=DIR] [zoo.runs=BUNDLE]

Scores every mixer of conf/zoo.yaml (zoo.arms) against attention's reference arms
(conf/ablation/scorecard.yaml) in one sweep (finished trials are skipped, the references reused by
trial id), after a pre-flight that refuses an arm whose declared symmetries are not the measured
ones; writes the bundle DIR/zoo/runs.csv.gz (default DIR: docs) and, from it alone, the leaderboard
DIR/zoo.md and a page per mixer DIR/zoo/<arm>.md. zoo.runs=DIR/zoo/runs.csv.gz regenerates them
offline. Targets import from zoo.examples (default: the repository's examples/).

Exit status: 0 written, 1 some trials failed, 2 bad input (nothing run), 130 interrupted.
"""
SCORECARD_USAGE = """\
usage: python -m analysis.scorecard model=external model.target=PACKAGE.MODULE:CLASS [scale=quick|tiny|default|full] [KEY=VALUE ...]

Runs a mixer beside attention's reference arms (conf/ablation/scorecard.yaml; finished trials are
skipped, so the references run once per store) and writes
outputs/scorecard-<mixer>-<scale>[-<hash of the other overrides>]/scorecard.md: its measured
symmetries and, per task and reference, better / equivalent within δ / worse / inconclusive.
Sweeps as in python -m harness (task.n_train=64,256,1024 seed=0,1,2). scale=quick (3 seeds,
3 sizes, 3 lrs, 300 steps) is the first setting that decides; tiny checks the path only.

Exit status: 0 page written, 1 some trials failed, 2 bad input (nothing run), 130 interrupted.
"""


def options(group: str, conf: Path = CONF) -> list[str]:
    """The choices of config group ``group``: the YAML files of ``conf/<group>/``, sorted; for
    ``model`` in the package's own ``conf/``, the installed plug-ins too (:mod:`harness.plugins`)."""
    found = {p.stem for p in (conf / group).glob("*.yaml")}
    if group == "model" and conf == CONF:
        from harness.plugins import plugins

        found |= set(plugins())
    return sorted(found)


def groups(conf: Path = CONF) -> list[str]:
    """The config groups: the folders of ``conf/``."""
    return sorted(p.name for p in conf.iterdir() if p.is_dir())


@dataclass(frozen=True)
class HeaderField:
    """One field of an ablation file's header: a ``# Key: …`` comment line and the lines indented
    under it (``#   …``), e.g. ``Q``, ``Budget``, ``Trials``, ``Parts``, ``Run``, ``Re-registered``.

    Attributes:
        key: the field's first word without its colon (``"Q"``, ``"Parts"``, ``"Re-registered"``;
            a field of prose gets its first word, e.g. ``"Why"``).
        text: the whole field on one line, its key included (``"Q: which forms can …"``): the
            lines stripped and joined with single spaces.
    """

    key: str
    text: str


def ablation_header(name: str, conf: Path = CONF) -> list[HeaderField]:
    """The header of ``conf/ablation/NAME.yaml``: the comment block at its top, as fields in file
    order; Hydra's ``# @package`` directive is not a field. The one reader of that block: the
    ``--help`` text shows the ``Q`` field (:func:`ablation_question`), the report every field but
    ``Parts`` (``analysis.reporting``; the parts are its verdict tables).

    A field starts at a line ``# TEXT`` (one space) and takes the lines under it that start with
    ``#`` and two or more spaces; a bare ``#`` ends it, and the first line not starting with ``#``
    ends the header. Returns ``[]`` if there is no such file (also for a name no file can have:
    too long, or not encodable), so ``--help`` never fails on a stray name.
    """
    path = conf / "ablation" / f"{name}.yaml"
    try:
        if not path.is_file():
            return []
    except (OSError, ValueError):  # a name too long for a file name, or not encodable: no such file
        return []
    fields: list[list[str]] = []
    inside = False  # whether a continuation line belongs to a field (not after a bare "#")
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line[1:].strip()
        if not text:
            inside = False
        elif line.startswith("#  "):
            if inside:
                fields[-1].append(text)
        elif not text.startswith("@package"):
            fields.append([text])
            inside = True
        else:
            inside = False
    return [HeaderField(lines[0].split(None, 1)[0].rstrip(":"), " ".join(lines)) for lines in fields]


def ablation_question(name: str, conf: Path = CONF) -> str:
    """The question an ablation asks: its header's ``Q`` field (:func:`ablation_header`) on one
    line, without ``Q:``; ``""`` if there is none (or no such file)."""
    return next((f.text[1:].lstrip(":").strip() for f in ablation_header(name, conf) if f.key == "Q"), "")


def suggest(value: str, allowed: Sequence[str]) -> str:
    """``"; did you mean X?"`` for the closest of ``allowed``, or ``""``."""
    close = difflib.get_close_matches(value, allowed, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def config_dirs(args: Sequence[str]) -> list[Path] | None:
    """``conf/`` and the config folders the command line adds (``--config-dir DIR``, ``-cd DIR``,
    ``hydra.searchpath=[file:///DIR, ...]``), in which Hydra finds group options too; ``None``
    if one of them is not a local folder (``pkg://``): only Hydra can list its options."""
    dirs = [CONF]
    for i, arg in enumerate(args):
        if arg in ("--config-dir", "-cd") and i + 1 < len(args):
            dirs.append(Path(args[i + 1]))
        elif arg.startswith("--config-dir="):
            dirs.append(Path(arg.split("=", 1)[1]))
        elif arg.startswith("hydra.searchpath="):
            for entry in arg.split("=", 1)[1].strip("[]").split(","):
                entry = entry.strip().strip("'\"")
                if not entry.startswith("file://"):
                    return None
                dirs.append(Path(entry[len("file://"):]))
    return dirs


def check_choices(args: Sequence[str], conf: Path | Sequence[Path] = CONF) -> str | None:
    """The first config-group choice among the command-line ``args`` that the config folders
    ``conf`` lack, as an error message naming it, the closest option and the allowed ones;
    ``None`` if all exist.

    Arguments that are not overrides (``--cfg``), or that do not parse, are left to Hydra.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    confs = [conf] if isinstance(conf, Path) else list(conf)
    lines = [a for a in args if not a.startswith("-") and "=" in a and not a.startswith("hydra.")]
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
    except Exception:  # noqa: BLE001 - Hydra reports its own grammar errors with their position
        return None
    known = {g for c in confs if c.is_dir() for g in groups(c)}
    for override in parsed:
        group = override.key_or_group
        if group not in known or override.is_delete():
            continue
        allowed = sorted({o for c in confs for o in options(group, c)})
        error = sweep_problem(override, allowed)
        if error:
            return error
        values = list(override.sweep_string_iterator()) if override.is_sweep_override() else [override.value()]
        for value in values:
            if isinstance(value, str) and value not in allowed:
                return (f"{override.input_line}: no {group} {value!r}{suggest(value, allowed)} "
                        f"(allowed: {', '.join(allowed)})")
    return None


def sweep_problem(override, allowed: Sequence[str] | None = None) -> str | None:
    """Why the harness cannot run the sweep ``override`` (a parsed override; ``allowed``: its
    group's options, None for a key), as one line; None if it can. Hydra's ``interval()`` is a
    range for optimiser sweepers to sample, ``glob()`` selects a group's options (not expanded
    here), and ``+ablation=a,b`` would sweep the ablation itself, which the harness never did:
    it ran one default trial per value, and neither ablation's grid."""
    from hydra.core.override_parser.types import Glob, IntervalSweep

    value = override.value()
    line = override.input_line
    if isinstance(value, IntervalSweep):
        return (f"{line}: interval() is a range for Hydra's optimiser sweepers to sample; the harness runs "
                f"lists and ranges ({override.key_or_group}=0,1,2 or {override.key_or_group}=range(0,3))")
    if isinstance(value, Glob):
        matched = value.filter(list(allowed or []))
        hint = f"; name them: {override.key_or_group}={','.join(matched)}" if matched else ""
        return f"{line}: glob() is not expanded by the harness{hint}"
    if override.key_or_group == "ablation" and override.is_sweep_override():
        return (f"{line}: one ablation per command; run several with a suite (an ablation file with "
                "suite: [NAME, ...], as conf/ablation/paper.yaml) or one command per ablation")
    return None


@functools.lru_cache(maxsize=None)
def schema_fields(source: Path = Path(__file__).with_name("config.py")) -> dict[str, dict[str, str | None]]:
    """The dataclass schemas of :mod:`harness.config`, read from its source (importing it would
    import every model, i.e. torch): class name → {field name: the field's class if it is one of
    these schemas (a nested node whose keys are checked too), else ``None`` (a leaf, or a node
    of free keys such as ``task``, ``model`` or ``ablation.grid``)}."""
    tree = ast.parse(source.read_text())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)
               and any(getattr(d, "id", None) == "dataclass" for d in n.decorator_list)]
    names = {c.name for c in classes}
    return {c.name: {f.target.id: (f.annotation.id if isinstance(f.annotation, ast.Name)
                                   and f.annotation.id in names else None)
                     for f in c.body if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)}
            for c in classes}


@functools.lru_cache(maxsize=None)
def schema_types(source: Path = Path(__file__).with_name("config.py")) -> tuple[dict[str, dict[str, str]], dict[str, list[str]]]:
    """``(class → {field → its annotation as written}, enum class → its members)`` of
    :mod:`harness.config`, read from its source as :func:`schema_fields` is (no torch)."""
    tree = ast.parse(source.read_text())
    fields, enums = {}, {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        if any(getattr(b, "id", None) == "Enum" for b in node.bases):
            enums[node.name] = [t.id for a in node.body if isinstance(a, ast.Assign)
                                for t in a.targets if isinstance(t, ast.Name)]
        else:
            fields[node.name] = {f.target.id: ast.unparse(f.annotation) for f in node.body
                                 if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)}
    return fields, enums


_BOOLS = ("true", "false", "yes", "no", "on", "off", "y", "n", "1", "0")  # what OmegaConf reads as bool


def type_problem(annotation: str, value: Any, enums: dict[str, list[str]]) -> str | None:
    """Why Hydra's parsed ``value`` cannot be a field annotated ``annotation`` (``int``,
    ``Optional[float]``, an enum of :mod:`harness.config`), as OmegaConf would refuse it: e.g.
    ``"takes an integer, not 'abc'"``; None if it can (or the annotation is not one checked here, or the
    value is an interpolation left to OmegaConf)."""
    optional = annotation.startswith("Optional[")
    kind = annotation[len("Optional["):-1] if optional else annotation
    if value is None:
        return None if optional or kind not in ("int", "float", "bool", *enums) else "cannot be null"
    if isinstance(value, str) and "${" in value:
        return None
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)  # OmegaConf refuses 1e3 too
        return None if ok or (isinstance(value, str) and value.strip().lstrip("+-").isdigit()) else f"takes an integer, not {value!r}"
    if kind == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return None
        try:
            float(value)
            return None
        except (TypeError, ValueError):
            return f"takes a number, not {value!r}"
    if kind == "bool":
        ok = isinstance(value, bool) or value in (0, 1) or str(value).lower() in _BOOLS
        return None if ok else f"takes true or false, not {value!r}"
    if kind in enums:
        members = enums[kind]
        return None if str(value) in members else f"takes one of {', '.join(members)}, not {value!r}{suggest(str(value), members)}"
    return None


def check_types(override, node: str, field: str) -> str | None:
    """The value (each value of a sweep) of ``override`` that field ``field`` of schema ``node``
    cannot hold, as an error naming it; None if all can (:func:`type_problem`)."""
    from hydra.core.override_parser.types import ChoiceSweep

    fields, enums = schema_types()
    annotation = fields.get(node, {}).get(field, "")
    value = override.value()
    values = value.list if isinstance(value, ChoiceSweep) else [] if override.is_sweep_override() else [value]
    for one in values:
        problem = type_problem(annotation, one, enums)
        if problem:
            return f"{override.input_line}: {override.key_or_group} {problem}"
    return None


def preset_family(group: str, preset: str, conf: Sequence[Path] = (CONF,)) -> str | None:
    """The family of a ``task``/``model`` preset: the ``<family>_schema`` of its YAML's defaults
    list (``conf/model/softmax.yaml`` → ``attention``); None if no such file or entry."""
    import yaml

    for folder in conf:
        path = folder / group / f"{preset}.yaml"
        if path.is_file():
            defaults = (yaml.safe_load(path.read_text()) or {}).get("defaults") or []
            for entry in defaults:
                if isinstance(entry, str) and entry.endswith("_schema"):
                    return entry[: -len("_schema")]
    return None


def _chosen_presets(group: str, parsed: Sequence, conf: Sequence[Path]) -> set[str]:
    """The ``task``/``model`` presets a command may compose: its own choice (``task=a,b``), else
    every one its ablation's YAML names (grids and parts), else the default of ``config.yaml``."""
    import yaml

    chosen = {str(v) for o in parsed if o.key_or_group == group and not o.is_delete()
              for v in (o.sweep_string_iterator() if o.is_sweep_override() else [o.value()])}
    if chosen:
        return chosen
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == group and isinstance(value, (str, list)):
                    found.update(v.strip() for v in (value if isinstance(value, list) else value.split(",")))
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for o in parsed:
        if o.key_or_group == "ablation" and isinstance(o.value(), str):
            for folder in conf:
                path = folder / "ablation" / f"{o.value()}.yaml"
                if path.is_file():
                    try:
                        walk(yaml.safe_load(path.read_text()))
                    except yaml.YAMLError:  # named with file and line by check_config_files
                        continue
    if not found:
        defaults = yaml.safe_load((CONF / "config.yaml").read_text())["defaults"]
        found = {d[group] for d in defaults if isinstance(d, dict) and group in d}
    return {f for f in found if isinstance(f, str) and f}


def preset_fields(group: str, presets: Sequence[str], conf: Sequence[Path] = (CONF,)) -> dict[str, list[str]] | None:
    """Preset → the fields of its family's schema (``tasks.registry.TASKS`` or
    ``harness.models.registry.MODELS``: imports torch, so only called for a ``task.``/``model.``
    key); None if a preset's family is not a registered one (``external``: free ``kwargs``)."""
    import dataclasses

    if group == "task":
        from tasks.registry import TASKS as registry
    else:
        from harness.models.registry import MODELS as registry
    fields = {}
    for preset in presets:
        family = preset_family(group, preset, conf)
        if family not in registry:
            return None
        fields[preset] = [f.name for f in dataclasses.fields(registry[family].schema)]
    return fields


def _check_preset_key(override, parsed: Sequence, conf: Sequence[Path]) -> str | None:
    """A ``task.KEY``/``model.KEY`` override (with or without ``+``) whose ``KEY`` no schema of
    the presets the command composes has, as an error naming it, the presets and their keys."""
    group, _, rest = override.key_or_group.partition(".")
    key = rest.split(".")[0]
    presets = sorted(_chosen_presets(group, parsed, conf))
    fields = preset_fields(group, presets, conf) if presets else None
    if not fields:
        return None
    allowed = sorted({f for names in fields.values() for f in names})
    if key in allowed:
        return _check_preset_type(override, group, key, presets, conf) if rest == key else None
    return (f"{override.input_line}: no key {key!r} in {group} preset {', '.join(presets)}"
            f"{suggest(key, allowed)} (allowed: {', '.join(allowed)})")


def _check_preset_type(override, group: str, key: str, presets: Sequence[str], conf: Sequence[Path]) -> str | None:
    """The value (each value of a sweep) of ``override`` that field ``key`` of the presets'
    schemas cannot hold (:func:`type_problem`; checked where every preset that has the field
    gives it one type), as an error naming it; None otherwise."""
    import dataclasses

    from hydra.core.override_parser.types import ChoiceSweep

    if group == "task":
        from tasks.registry import TASKS as registry
    else:
        from harness.models.registry import MODELS as registry
    kinds = set()
    for preset in presets:
        schema = registry[preset_family(group, preset, conf)].schema
        kinds |= {f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
                  for f in dataclasses.fields(schema) if f.name == key}
    if len(kinds) != 1:
        return None
    (kind,) = kinds
    value = override.value()
    values = value.list if isinstance(value, ChoiceSweep) else [] if override.is_sweep_override() else [value]
    for one in values:
        problem = type_problem(kind, one, schema_types()[1])
        if problem:
            return f"{override.input_line}: {override.key_or_group} {problem}"
    return None


def check_keys(args: Sequence[str], conf: Sequence[Path] = (CONF,)) -> str | None:
    """The first override among ``args`` whose key is not a field of its schema-backed node
    (``train.max_step``, also as ``+train.max_step``; ``seed``, ``train``, ``cluster``, …), as
    an error naming the key, the closest field and the allowed ones; ``None`` if all exist.
    Keys under ``task`` and ``model`` (``task.n_trian``, ``+model.sigm``) are checked against the
    schema of each preset the command composes (:func:`_check_preset_key`; this imports the
    registries, torch with them, only when such a key is given). Config groups, ``hydra.*`` and
    deletions (``~key``) are left to Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    lines = [a for a in args if not a.startswith("-") and "=" in a and not a.startswith("hydra.")]
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
    except Exception:  # noqa: BLE001 - Hydra reports its own grammar errors with their position
        return None
    schemas = schema_fields()
    known_groups = {g for c in conf if c.is_dir() for g in groups(c)}
    for override in parsed:
        key = override.key_or_group
        if override.is_delete() or override.package or key in known_groups:
            continue
        error = sweep_problem(override)
        if error:
            return error
        node = "Config"
        for i, part in enumerate(key.split(".")):
            fields = schemas[node]
            if part not in fields:
                where = ".".join(key.split(".")[:i]) or "the top level"
                hint = suggest(part, list(fields))
                return (f"{override.input_line}: no key {part!r} in {where}{hint} "
                        f"(allowed: {', '.join(fields)})")
            parent, node = node, fields[part]
            if node is None:
                if i == len(key.split(".")) - 1:  # a leaf of a schema: its type is known
                    error = check_types(override, parent, part)
                    if error:
                        return error
                break
        if node is None and key.split(".")[0] in ("task", "model") and "." in key:
            error = _check_preset_key(override, parsed, conf)
            if error:
                return error
    return None


def check_user_code(args: Sequence[str]) -> str | None:
    """A ``model.target``/``task.target=package.module:Class`` among ``args`` that does not
    import, names no such class (with "did you mean" among the module's classes of that kind),
    or whose constructor has no parameter for a ``model.kwargs.KEY``/``task.kwargs.KEY`` given
    beside it (with "did you mean"), as one line; None if none is given or all check out.
    Imports torch and the user's module, and only then: the rest of the command line is checked
    already, and the user's own code is the only place these names can be checked."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    lines = [a for a in args if not a.startswith("-") and "=" in a and not a.startswith("hydra.")]
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
    except Exception:  # noqa: BLE001 - Hydra reports its own grammar errors with their position
        return None
    for group in ("model", "task"):
        targets = [o for o in parsed if o.key_or_group == f"{group}.target" and not o.is_sweep_override()]
        if not targets or not isinstance(targets[-1].value(), str):
            continue
        kwargs = [o.key_or_group.split(".", 2)[2].split(".")[0] for o in parsed
                  if o.key_or_group.startswith(f"{group}.kwargs.") and not o.is_delete()]
        error = _check_target(group, targets[-1].value(), kwargs)
        if error:
            return error
    return None


def _check_target(group: str, target: str, kwargs: Sequence[str]) -> str | None:
    """:func:`check_user_code` for one ``group`` (``model``: ``cls(d, n_max, generator,
    **kwargs)``; ``task``: ``cls(cfg, dtype, **kwargs)``)."""
    import inspect

    from tasks.user_code import did_you_mean

    if group == "model":
        from harness.models.external import load_target
    else:
        from tasks.external import load_task_class as load_target
    try:
        cls = load_target(target)
    except ValueError as err:
        return " ".join(str(err).split())
    params = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    names = [n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL][2 if group == "task" else 3:]
    for key in kwargs:
        if key not in params:
            hint = did_you_mean(key, names).replace("mean '", f"mean {group}.kwargs.").replace("'?", "?")
            return f"{group}.kwargs.{key}: {cls.__name__}{inspect.signature(cls)} has no parameter {key!r}{hint}"
    return None


def check_names(args: Sequence[str]) -> str | None:
    """The first ``ablation.name=NAME`` among ``args`` (with ``+``/``++``, quoted or not) that
    cannot name an ablation (:func:`harness.paths.name_problem`: not UTF-8, over-long), as an
    error naming it; None if none. Checked on the raw text: Hydra's parser and its output
    folder (``hydra.run.dir`` holds the name) come after."""
    from harness.paths import name_problem

    for arg in args:
        key, sep, value = arg.lstrip("+").partition("=")
        if sep and key == "ablation.name":
            value = value[1:-1] if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" else value
            problem = name_problem(value)
            if problem:
                shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                shown = shown if len(shown) <= 60 else shown[:40] + "…"
                return f"ablation.name='{shown}' {problem}"
    return None


def take_sweeps(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(argv, sweeps)``: Hydra's ``-m``/``--multirun`` and the command line's sweeps
    (``seed=0,1,2``, :func:`harness.expansion.split_sweeps`) taken out of ``argv`` (``argv[0]`` is
    the program). ``python -m harness`` runs the sweeps as axes of its own sweep and
    ``python -m analysis`` analyses that sweep as one, instead of one Hydra job per value.
    ``argv`` comes back unchanged with no sweeps for ``--help`` or an override that does not
    parse (Hydra rejects it with its own text)."""
    from hydra._internal.utils import get_args_parser

    from harness.expansion import SweepError, split_sweeps

    try:  # Hydra's own parser (private, no public equivalent): its flags and their values stay
        args = get_args_parser().parse_args(list(argv[1:]))
        sweeps = split_sweeps(args.overrides)[1]
    except (SystemExit, SweepError):
        return list(argv), []
    rest = [a for a in argv[1:] if a not in sweeps and a not in ("-m", "--multirun")]
    return [argv[0], *rest], sweeps


def _sentences(text: str, most: int) -> str:
    """``text`` cut to at most about ``most`` characters at the end of a sentence, or, where its
    first sentence is longer, at a word, with "…" (``--help`` never ends a question mid-way)."""
    if len(text) <= most:
        return text
    ends = [i + 1 for i, c in enumerate(text[:most]) if c in ".?!" and (i + 1 == len(text) or text[i + 1] == " ")]
    if ends:
        return text[:ends[-1]]
    return textwrap.shorten(text, most - 2, placeholder=" …")


def help_text(usage: str, conf: Path = CONF) -> str:
    """``usage``, then every ablation with its question and every group with its options."""
    out = [usage, "Ablations (+ablation=NAME):"]
    width = max(len(name) for name in options("ablation", conf))
    for name in options("ablation", conf):
        wrapped = textwrap.wrap(_sentences(ablation_question(name, conf), 3 * (98 - width)), 98 - width) or [""]
        out.append(f"  {name:<{width}}  {wrapped[0]}")
        out += [f"  {'':<{width}}  {line}" for line in wrapped[1:]]
    out += ["", "Config groups (GROUP=OPTION; any key as KEY=VALUE, e.g. train.max_steps=50 seed=3):"]
    for group in groups(conf):
        if group != "ablation":
            text = textwrap.wrap(", ".join(options(group, conf)), 88)
            out.append(f"  {group + ':':<10}{text[0]}")
            out += [f"  {'':<10}{line}" for line in text[1:]]
    return "\n".join(out) + "\n"


def precheck(usage: str, argv: Sequence[str] | None = None) -> None:
    """Answer ``--help``/``-h`` (exit 0) and reject an unknown group choice (exit 2) from
    ``argv`` (default ``sys.argv[1:]``), before the caller imports anything heavy."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--help" in args or "-h" in args:
        print(help_text(usage), end="")
        sys.exit(0)
    dirs = config_dirs(args)
    error = (check_names(args) or (None if dirs is None else check_choices(args, dirs) or check_keys(args, dirs))
             or check_user_code(args))
    if error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)


@dataclass(frozen=True)
class Runtime:
    """What a command needs from the invocation besides its composed config: where it started
    and writes, and its command line. Built from Hydra's runtime by :func:`hydra_shell` (a real
    invocation) or by the tests' in-process fixture (``tests/conftest.py``: ``invoke``).

    Attributes:
        cwd: the folder the command started from (the store stays here, also with
            ``hydra.job.chdir=True``).
        output_dir: this invocation's output folder (``hydra.run.dir``).
        overrides: the command line's overrides as Hydra parsed them (``hydra.overrides.task``).
        sweeps: the command line's sweeps (``seed=0,1,2``), taken out before Hydra composed
            (:func:`take_sweeps`): one more axis of the one sweep.
        searchpath: ``hydra.searchpath=[...]`` overrides, passed on to every composition.
        summarise: what the command draws at the end of each ablation's sweep, passed in by
            the shell (:data:`harness.shell.COMMANDS`: ``python -m harness``'s end-of-sweep
            table, :func:`analysis.summary.summarise`); None: nothing.
    """

    cwd: Path
    output_dir: Path
    overrides: tuple[str, ...] = ()
    sweeps: tuple[str, ...] = ()
    searchpath: tuple[str, ...] = ()
    summarise: Callable[..., None] | None = None

    @classmethod
    def from_hydra(cls, sweeps: Sequence[str] = ()) -> "Runtime":
        """The runtime of the running ``@hydra.main`` job (Hydra's ``HydraConfig``)."""
        from hydra.core.hydra_config import HydraConfig

        hydra_cfg = HydraConfig.get()
        return cls(cwd=Path(hydra_cfg.runtime.cwd), output_dir=Path(hydra_cfg.runtime.output_dir),
                   overrides=tuple(hydra_cfg.overrides.task), sweeps=tuple(sweeps),
                   searchpath=tuple(o for o in hydra_cfg.overrides.hydra if o.startswith("hydra.searchpath=")))


def hydra_shell(config_name: str, run: Callable[[Any, Runtime], int], sweeps: Sequence[str] = ()) -> int:
    """Compose ``conf/<config_name>.yaml`` with ``sys.argv`` under ``@hydra.main`` and return
    ``run(cfg, runtime)``, a command's exit status. Hydra's exit status 1 for a config it could
    not compose (raised before ``run`` was called) becomes 2, bad input, with Hydra's own text
    kept. The one shell of ``python -m harness``, ``python -m analysis`` and ``python -m
    analysis.report``; their tests call ``run`` in-process instead (``tests/conftest.py``).

    Raises:
        SystemExit: what Hydra raises itself (``--cfg``, ``--info``: 0; its own errors).
    """
    import hydra

    called, status = [], [0]

    @hydra.main(version_base="1.3", config_path=str(CONF), config_name=config_name)
    def main(cfg) -> None:
        called.append(True)
        try:
            status[0] = run(cfg, Runtime.from_hydra(sweeps))
        except BrokenPipeError:  # the reader of a pipe stopped (``| head``): no traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own recipe
            status[0] = 128 + 13  # as a shell reports a process ended by SIGPIPE

    try:
        main()
    except SystemExit as exit_:
        if exit_.code == 1 and not called:
            return 2
        raise
    return status[0]
