"""A user's class named by import path (``package.module:ClassName``), and the modules such
classes came from, so a cluster's workers can import them too.

Shared by ``model=external`` (:mod:`harness.models.external`) and ``task=external``
(:mod:`tasks.external`); it sits in ``tasks/``, the package at the bottom of the import graph,
so that neither points up to the other.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import sys
import sysconfig
from pathlib import Path

_LOADED: dict[str, str] = {}  # top-level module name → file or package folder: what workers must import
OWN_PACKAGES = ("harness", "tasks", "analysis")  # workers import these already


def load_class(target: str, base: type, key: str, what: str) -> type:
    """The class named by ``target`` (``package.module:ClassName``), imported, a subclass of
    ``base``; its module is remembered for :func:`runtime_env`.

    Args:
        target: the import path.
        base: the class it must subclass (``nn.Module``, ``TaskBase``).
        key: the config key that named it (``model.target``), for messages.
        what: what ``base`` is, for messages (``an nn.Module class``).

    Raises:
        ValueError: a malformed path, a module that does not import (with its error), a missing
            attribute, or an attribute that is not a subclass of ``base``; the message names
            ``key`` and what is wrong.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{key}={target!r}: expected 'package.module:ClassName'")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # any error of the user's module: report it, do not crash
        raise ValueError(f"{key}={target!r}: cannot import {module_name!r} "
                         f"({type(err).__name__}: {err}); is its folder on PYTHONPATH "
                         "or the current directory?") from err
    cls = getattr(module, attr, None)
    if cls is None:
        found = sorted(n for n, v in vars(module).items() if inspect.isclass(v) and issubclass(v, base))
        raise ValueError(f"{key}={target!r}: module {module_name!r} has no {attr!r}"
                         f"{did_you_mean(attr, found)} ({what.split(' ', 1)[-1].replace('class', 'classes')} there: {', '.join(found) or 'none'})")
    if not (inspect.isclass(cls) and issubclass(cls, base)):
        raise ValueError(f"{key}={target!r}: {attr!r} is not {what}")
    remember(module_name)
    return cls


def did_you_mean(name: str, allowed: list[str]) -> str:
    """``"; did you mean X?"`` for the closest of ``allowed`` to ``name`` (difflib), or ``""``."""
    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def remember(module_name: str) -> None:
    """Note the top-level package (or single-file module) of ``module_name`` for
    :func:`runtime_env`, unless it is installed (site-packages) or one of this project's packages."""
    top = module_name.split(".")[0]
    if top in OWN_PACKAGES:
        return
    spec = getattr(sys.modules.get(top), "__file__", None)
    if spec is None:
        return
    path = Path(spec).resolve()
    path = path.parent if path.name == "__init__.py" else path
    installed = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    if any(p in path.parents for p in installed):
        return
    _LOADED[top] = str(path)


def runtime_env() -> dict | None:
    """Ray's ``runtime_env`` that makes every user module loaded so far (by composition and the
    pre-flight checks, before the scheduler starts) importable on a cluster's workers:
    ``{"py_modules": [package folder or .py file, ...]}``; ``None`` when there is none.

    A local instance (``cluster=local``) does not need it: its workers inherit the driver's
    ``PYTHONPATH`` and Ray adds the driver's current directory to their ``sys.path``.
    """
    return {"py_modules": sorted(set(_LOADED.values()))} if _LOADED else None
