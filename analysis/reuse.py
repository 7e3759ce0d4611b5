"""An ablation's figures and tables redrawn only when their inputs changed (issue 29 item 6:
regeneration from the bundle in under a minute on 2 cores; drawing the figures is most of it).

:func:`write_once` calls :func:`analysis.outputs.write_all` unless the folder holds a
``inputs.sha256`` whose digest equals the one of this call's inputs and every file it lists
still exists. The digest covers the ablation's runs (as CSV text), the drawing arguments, the
source of every module that draws or tabulates (so a change of a figure's code redraws it) and
the versions of matplotlib, seaborn and pandas. A fresh clone regenerating ``docs/report.md``
from the committed bundle therefore reuses the committed figures byte for byte; any other
folder draws them. The end-of-sweep summary (:mod:`analysis.summary`) logs the stamp with the
figures to the sweep's parent run, so a no-op resume finds them there by the same digest.
"""

from __future__ import annotations

import hashlib
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

STAMP = "inputs.sha256"
# the modules that draw or tabulate, by name: their source is read, not imported (a digest that
# finds the figures drawn never imports matplotlib); editing one redraws every stamped folder,
# docs/report/ included
DRAWING = tuple(f"analysis.{m}" for m in ("curves", "lengths", "outputs", "plots", "stats", "tables",
                                          "trials"))


def digest(df: pd.DataFrame, **kwargs: Any) -> str:
    """SHA-256 of the runs, the drawing arguments, the drawing code and the libraries' versions."""
    h = hashlib.sha256(df.to_csv(index=False).encode())
    h.update(repr(sorted(kwargs.items())).encode())
    for module in DRAWING:
        h.update(Path(find_spec(module).origin).read_bytes())
    h.update(" ".join(version(p) for p in ("matplotlib", "seaborn", "pandas")).encode())
    return h.hexdigest()


def read_stamp(text: str) -> tuple[str, list[str]]:
    """A stamp's digest and the file names it lists (relative to its folder)."""
    recorded, *names = text.splitlines()
    return recorded, names


def write_once(df: pd.DataFrame, out: Path, **kwargs: Any) -> list[Path]:
    """:func:`analysis.outputs.write_all` ``(df, out, **kwargs)``, or nothing when ``out`` already
    holds what that call would write (module docstring). Returns the paths written or reused
    (the stamp ``out / STAMP`` is written, not listed)."""
    stamp, key = out / STAMP, digest(df, **kwargs)
    if stamp.exists():
        recorded, names = read_stamp(stamp.read_text())
        if recorded == key and all((out / n).exists() for n in names):
            return [out / n for n in names]
    from analysis import outputs  # matplotlib, only once something is drawn

    paths: Sequence[Path] = outputs.write_all(df, out, **kwargs)
    names = sorted({str(Path(p).relative_to(out)) for p in paths if Path(p).is_relative_to(out)})
    stamp.write_text("\n".join([key, *names]) + "\n")
    return list(paths)
