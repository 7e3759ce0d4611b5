"""The paths ``python -m analysis.report`` writes and reads, checked before the suite starts
(issue 47): a ``report.out`` that cannot be written and a ``report.runs`` that is no results
bundle each end the command with one line and exit status 2, before any trial runs, instead of
a traceback after the suite (which takes hours at ``scale=default``)."""

from __future__ import annotations

import os
import tempfile
import zlib
from pathlib import Path

import pandas as pd


class ReportInputError(ValueError):
    """Bad input to ``python -m analysis.report``, found before any trial starts: exit status 2
    with the message as one ``error:`` line (:func:`analysis.report.run`); an empty message when
    the line was printed already (the suite's own checks, :meth:`harness.sweep.Sweep.main`)."""


def _refuse(key: str, given: str, problem: str) -> None:
    """Bad input: nothing run, nothing written (exit status 2 with one line).

    Raises:
        ReportInputError: naming the key, the value given and what is wrong with it.
    """
    raise ReportInputError(f"{key}={given!r} {problem}")


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (the folder the missing ones go into)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor)


def writable_problem(out: Path) -> str | None:
    """Why the report ``out`` (``…/report.md``) and its folder ``out.with_suffix("")`` (figures,
    tables, bundle) cannot be written, or None. Probed by creating (and removing) a temporary
    folder where the first missing folder would go, so a read-only file system, a folder
    without write permission and a path through a file are all found (``os.access`` alone
    answers yes to root on a read-only mount)."""
    for target in (out.with_suffix(""), out):
        if target.exists() and not os.access(target, os.W_OK):
            return f"cannot be written: {target} is not writable"
    base = _nearest_existing(out.with_suffix(""))
    if not base.is_dir():
        return f"cannot be written: {base} is a file where a folder goes"
    try:
        with tempfile.TemporaryDirectory(dir=base, prefix=".report-probe-"):
            pass
    except OSError as err:
        return f"cannot be written: {base}: {err.strerror or err}"
    return None


def check_out(out: Path, given: str) -> None:
    """Refuse (:class:`ReportInputError`) if the report ``out`` cannot be written (:func:`writable_problem`);
    ``given``: the ``report.out`` text, named in the line (the scale's default if empty)."""
    problem = writable_problem(out)
    if problem:
        _refuse("report.out", given or str(out), problem)


def read_runs(path: Path, given: str) -> pd.DataFrame:
    """The results bundle ``report.runs`` names (:func:`analysis.bundle.read_bundle`), or exit 2
    with one line saying why it cannot be read as one (missing, a folder, not gzip, not CSV, no
    ``ablation`` column, no rows)."""
    from analysis.bundle import read_bundle

    what = "cannot be read as a results bundle (the runs.csv.gz that python -m analysis.report writes)"
    if not path.exists():
        _refuse("report.runs", given, f"{what}: {path} does not exist")
    if path.is_dir():
        _refuse("report.runs", given, f"{what}: {path} is a folder")
    try:
        bundle = read_bundle(path)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, pd.errors.ParserError,
            pd.errors.EmptyDataError, ValueError) as err:
        _refuse("report.runs", given, f"{what}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    if "ablation" not in bundle.columns or bundle.empty:
        _refuse("report.runs", given, f"{what}: it has no 'ablation' column or no rows")
    return bundle
