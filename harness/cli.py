"""What the command lines do before anything heavy is imported: ``--help``, and a check of every
config-group choice (``model=…``, ``task=…``, ``+ablation=…``) against the files in ``conf/``,
with "did you mean" for a misspelling. Imports only the standard library and Hydra's override
parser, so ``--help`` and a typo's message come back without loading torch, Ray or MLflow.

The dataclass schemas that Hydra's ConfigStore keeps in the same groups (``attention_schema``) are
bases of the presets, not choices, and are never listed.
"""

from __future__ import annotations

import difflib
import sys
import textwrap
from pathlib import Path
from typing import Sequence

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
usage: python -m analysis +ablation=NAME [tracking=...]

Redraws an ablation's figures and tables from its MLflow runs (nothing is trained) into
outputs/NAME/<time>/. Exit status 2 if the experiment is missing.
"""

REPORT_USAGE = """\
usage: python -m analysis.report [scale=default|full|tiny] [report.run=false] [report.out=PATH]

Runs the paper suite (finished trials are skipped), then writes docs/report.md with a verdict per
claim and each ablation's figures and tables beside it.
"""


def options(group: str, conf: Path = CONF) -> list[str]:
    """The choices of config group ``group``: the YAML files of ``conf/<group>/``, sorted."""
    return sorted(p.stem for p in (conf / group).glob("*.yaml"))


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


def check_choices(args: Sequence[str], conf: Path = CONF) -> str | None:
    """The first config-group choice among the command-line ``args`` that ``conf/`` lacks, as an
    error message naming it, the closest option and the allowed ones; ``None`` if all exist.

    Arguments that are not overrides (``--cfg``), or that do not parse, are left to Hydra.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    lines = [a for a in args if not a.startswith("-") and "=" in a]
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
    except Exception:  # noqa: BLE001 - Hydra reports its own grammar errors with their position
        return None
    known = set(groups(conf))
    for override in parsed:
        group = override.key_or_group
        if group not in known or override.is_delete() or override.is_sweep_override():
            continue
        value = override.value()
        if not isinstance(value, str):
            continue
        allowed = options(group, conf)
        if value not in allowed:
            return (f"{override.input_line}: no {group} {value!r}{suggest(value, allowed)} "
                    f"(allowed: {', '.join(allowed)})")
    return None


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
    # options from another config folder (hydra.searchpath) are Hydra's to find and check
    error = None if any(a.startswith("hydra.searchpath=") for a in args) else check_choices(args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
