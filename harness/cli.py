"""What the command lines do before anything heavy is imported: ``--help``, and a check of every
config-group choice (``model=…``, ``task=…``, ``+ablation=…``) against the files in ``conf/`` and
of every key of a schema-backed node (``train.max_steps``, ``seed``, with or without ``+``)
against its dataclass, with "did you mean" for a misspelling. Imports only the standard library and Hydra's override
parser, so ``--help`` and a typo's message come back without loading torch, Ray or MLflow.

The dataclass schemas that Hydra's ConfigStore keeps in the same groups (``attention_schema``) are
bases of the presets, not choices, and are never listed.
"""

from __future__ import annotations

import ast
import difflib
import functools
import sys
import textwrap
from pathlib import Path
from typing import Callable, Sequence

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


def ablation_question(name: str, conf: Path = CONF) -> str:
    """The question an ablation asks: the ``# Q:`` paragraph of ``conf/ablation/NAME.yaml``'s
    header, on one line; ``""`` if there is none (or no such file)."""
    path = conf / "ablation" / f"{name}.yaml"
    if not path.is_file():
        return ""
    lines, inside = [], False
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line[1:].strip()
        if text.startswith("Q:"):
            inside, text = True, text[2:].strip()
        elif inside and (not line.startswith("#  ") or not text):
            break
        if inside:
            lines.append(text)
    return " ".join(lines)


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
        if group not in known or override.is_delete() or override.is_sweep_override():
            continue
        value = override.value()
        if not isinstance(value, str):
            continue
        allowed = sorted({o for c in confs for o in options(group, c)})
        if value not in allowed:
            return (f"{override.input_line}: no {group} {value!r}{suggest(value, allowed)} "
                    f"(allowed: {', '.join(allowed)})")
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


def check_keys(args: Sequence[str], conf: Sequence[Path] = (CONF,)) -> str | None:
    """The first override among ``args`` whose key is not a field of its schema-backed node
    (``train.max_step``, also as ``+train.max_step``; ``seed``, ``train``, ``cluster``, …), as
    an error naming the key, the closest field and the allowed ones; ``None`` if all exist.
    Keys under ``task`` and ``model`` (typed by each family's own schema), config groups,
    ``hydra.*`` and deletions (``~key``) are left to Hydra."""
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
        node = "Config"
        for i, part in enumerate(key.split(".")):
            fields = schemas[node]
            if part not in fields:
                where = ".".join(key.split(".")[:i]) or "the top level"
                hint = suggest(part, list(fields))
                return (f"{override.input_line}: no key {part!r} in {where}{hint} "
                        f"(allowed: {', '.join(fields)})")
            node = fields[part]
            if node is None:
                break
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

    try:
        args = get_args_parser().parse_args(list(argv[1:]))
        sweeps = split_sweeps(args.overrides)[1]
    except (SystemExit, SweepError):
        return list(argv), []
    rest = [a for a in argv[1:] if a not in sweeps and a not in ("-m", "--multirun")]
    return [argv[0], *rest], sweeps


def help_text(usage: str, conf: Path = CONF) -> str:
    """``usage``, then every ablation with its question and every group with its options."""
    out = [usage, "Ablations (+ablation=NAME):"]
    width = max(len(name) for name in options("ablation", conf))
    for name in options("ablation", conf):
        question = ablation_question(name, conf)
        wrapped = textwrap.wrap(question, 98 - width) or [""]
        out.append(f"  {name:<{width}}  {wrapped[0]}")
        out += [f"  {'':<{width}}  {line}" for line in wrapped[1:3]]
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
    error = None if dirs is None else check_choices(args, dirs) or check_keys(args, dirs)
    if error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)


def call_main(main: Callable[[], None], entered: Callable[[], bool]) -> None:
    """Call an entry point's ``@hydra.main`` function; Hydra's exit status 1 for a config it
    could not compose (raised before ``main``'s body was entered, ``entered()`` false) becomes 2,
    bad input, with Hydra's own text kept. Shared by ``python -m harness``, ``python -m analysis``
    and ``python -m analysis.report``.

    Raises:
        SystemExit: 2 for a config Hydra could not compose; any other exit as raised.
    """
    try:
        main()
    except SystemExit as exit_:
        if exit_.code == 1 and not entered():
            sys.exit(2)
        raise
