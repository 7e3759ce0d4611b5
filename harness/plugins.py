"""Mixers that installed packages register: the entry-point group
``attention_symmetry_harness.models`` (``name = package.module:ClassName``).

A package declares, in its ``pyproject.toml``::

    [project.entry-points."attention_symmetry_harness.models"]
    gla = "my_mixers.gated:GatedLinearAttention"

and after ``pip install`` the name is a choice of the ``model`` group: ``model=gla`` is
``model=external model.target=my_mixers.gated:GatedLinearAttention model.variant=gla``
(:mod:`harness.models.external` states the class's contract; ``model.kwargs.*`` as there). A
built-in name wins on a clash: a plug-in named like a preset of ``conf/model/`` (or
``external``) is left out and named on stderr. Standard library only, so ``--help`` and the
command-line checks (:mod:`harness.cli`) can list the plug-ins without importing torch.
"""

from __future__ import annotations

import functools
import sys
from importlib import metadata
from pathlib import Path

GROUP = "attention_symmetry_harness.models"
CONF_MODEL = Path(__file__).resolve().parent.parent / "conf" / "model"


@functools.lru_cache(maxsize=None)
def plugins() -> dict[str, str]:
    """``{name: "package.module:ClassName"}`` of the installed packages' entry points in
    :data:`GROUP`, built-in names (``conf/model/*.yaml``, ``external``, the registry's
    ``*_schema``) left out with one line on stderr. Read once per process."""
    builtin = {p.stem for p in CONF_MODEL.glob("*.yaml")} | {"external"}
    out: dict[str, str] = {}
    for ep in metadata.entry_points(group=GROUP):
        if ep.name in builtin or ep.name.endswith("_schema"):
            print(f"warning: plug-in model {ep.name!r} ({ep.value}, from {_dist(ep)}) is ignored: "
                  "a built-in model has that name", file=sys.stderr)
        elif ep.name not in out:  # two distributions with one name: the first on sys.path wins, as Python's import
            out[ep.name] = ep.value
    return out


def _dist(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "an installed package"
