"""The config files a command selects, parsed before Hydra composes them: a YAML syntax error
or a key given twice is one line naming file and line (Hydra's own report is a traceback of up
to 100 lines). Imports only the standard library and PyYAML: the shell runs it before any
heavy import (:mod:`harness.shell`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import yaml


class ConfigFileError(ValueError):
    """A config file that does not parse, or repeats a key (its message names the file and line)."""


CONF = Path(__file__).resolve().parent.parent / "conf"


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing a mapping that repeats a key (PyYAML keeps the last value
    silently; OmegaConf refuses it later with a 73-line traceback and no line number)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark)
            seen.setdefault(key, key_node.start_mark.line)
        return super().construct_mapping(node, deep=deep)


def _load_yaml(path: Path) -> Any:
    """``path`` parsed, or :class:`ConfigFileError` naming the file and line of a syntax error or of
    a key given twice in one mapping."""
    try:
        return yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as err:
        # where the broken construct starts (an unclosed "[" opened there), else where it broke
        mark = getattr(err, "context_mark", None) or getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = " ".join(str(getattr(err, "problem", None) or err).split())
        kind = "YAML error" if problem.startswith("duplicate key") else "YAML syntax error"
        raise ConfigFileError(f"{where}: {kind}: {problem}") from None


def check_config_files(args: Sequence[str], conf: Path = CONF) -> None:
    """Parse the config files a command selects before Hydra composes them (Hydra reports a YAML
    syntax error with a 100-line traceback): ``conf/config.yaml``'s group choices, those on the
    command line (``model=x``, ``+ablation=y``, sweeps ``model=a,b``) and those an ablation's
    ``defaults`` list overrides, in ``conf`` and each ``hydra.searchpath`` folder.

    Raises:
        ConfigFileError: naming the file and line of the first syntax error or repeated key.
    """
    dirs = [conf]
    for arg in args:
        if arg.startswith("hydra.searchpath="):
            dirs += [Path(p.strip(" '\"")[len("file://"):])
                     for p in arg.split("=", 1)[1].strip("[]").split(",") if "file://" in p]
    choices: dict[str, list[str]] = {}
    for entry in _load_yaml(conf / "config.yaml").get("defaults", []):
        if isinstance(entry, dict):
            choices.update({k: [str(v)] for k, v in entry.items()})
    for arg in args:
        key, sep, value = arg.lstrip("+~").partition("=")
        if sep and "." not in key and not key.startswith("hydra"):
            choices[key] = [v.strip() for v in value.split(",")]
    todo = [(group, value) for group, values in choices.items() for value in values]
    while todo:
        group, value = todo.pop()
        for folder in dirs:
            path = folder / group / f"{value}.yaml"
            if not path.is_file():
                continue
            loaded = _load_yaml(path)
            for entry in (loaded or {}).get("defaults", []) if isinstance(loaded, dict) else []:
                if isinstance(entry, dict):  # ``override /task: teacher_x``
                    todo += [(k.split()[-1].strip("/"), str(v)) for k, v in entry.items()
                             if isinstance(v, str)]
