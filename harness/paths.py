"""Folder names derived from user-given names (an ablation's name is an MLflow experiment name,
stored as given): one safe path component each, by a mapping that cannot merge two names.

The experiment of a one-off run (:func:`one_off_experiment`) is named here too: the
``hydra.run.dir`` resolver needs it below :mod:`harness.config`.

Used by ``hydra.run.dir`` (``outputs/<folder>/...``, through the ``folder_name`` resolver that
:func:`harness.config.register_configs` registers) and by the experiment's artifact location
``<artifact_root>/<folder>`` (:meth:`harness.tracking.Tracker.experiment`).
"""

from __future__ import annotations

import hashlib
import re
from typing import Sequence

SINGLE = "single"  # ablation.name of a run without +ablation (harness.config.AblationConfig)
MAX_NAME = 500  # MLflow's longest experiment name (mlflow.utils.validation.MAX_EXPERIMENT_NAME_LENGTH)

# Kept as it is: lower-case letters, digits, ``_`` and ``-``, not starting with ``-``, at most 64
# characters (every conf/ablation name). Upper case is left out because macOS and Windows
# folders ignore case (``Smoke`` and ``smoke`` would share one).
_KEPT = re.compile(r"[a-z0-9_][a-z0-9_-]{0,63}")
# The form a mapped name takes; a name that already looks like it is mapped too, so that no
# kept name equals another name's mapped form.
_MAPPED = re.compile(r".*-[0-9a-f]{8}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an ablation's name (an MLflow experiment, a folder), as the end of
    a one-line error; None if it can. Refused: the empty name, a name that is not UTF-8 text
    (bytes of another encoding arrive from the command line as lone surrogates, which neither
    MLflow nor a file name can store) and one longer than MLflow's experiment names
    (:data:`MAX_NAME` characters; the folders take a hashed short form, :func:`folder_name`)."""
    if not name:
        return "is empty"
    bad = next((c for c in name if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:
        at = name.index(bad)
        return (f"is not UTF-8 text (byte 0x{ord(bad) & 0xFF:02x} at character {at}); "
                "allowed: any UTF-8 text of 1 to 500 characters")
    if len(name) > MAX_NAME:
        return f"is {len(name)} characters long; allowed: 1 to {MAX_NAME} (MLflow's experiment names)"
    return None


def folder_name(name: str) -> str:
    """The one path component that stands for ``name`` in a folder path.

    A name of lower-case letters, digits, ``_`` and ``-`` (at most 64 characters) is kept as it
    is (``smoke``); any other name becomes a slug of its safe characters plus the first 8 hex
    digits of its SHA-256 (``a/b`` → ``a_b-<hash>``, ``../../escaped`` → ``escaped-<hash>``), so
    ``a/b`` and ``a_b`` never share a folder, the result never contains ``/`` and is never ``.``
    or ``..``. Two different names map to one folder only if their slugs and their 32-bit hash
    prefixes are both equal (odds 2^-32 for two names of equal slug).

    Raises:
        ValueError: for an empty name.
    """
    if not name:
        raise ValueError("a name must not be empty (ablation.name)")
    if _KEPT.fullmatch(name) and not _MAPPED.fullmatch(name):
        return name
    slug = _UNSAFE.sub("_", name).strip("_-")[:48] or "name"
    # surrogateescape: a name refused by name_problem still gets a folder when Hydra resolves
    # hydra.run.dir before the refusal can be printed
    return f"{slug}-{hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"


def one_off_experiment(tasks: Sequence[str], models: Sequence[str]) -> str:
    """The MLflow experiment of a one-off invocation (``python -m harness`` without
    ``+ablation``): ``single/<task>/<model>`` from the task and model presets of its trials
    (``single/teacher/softmax``; a command-line sweep over presets joins them with ``,`` in
    natural order: ``single/teacher/mlp,softmax``), so unrelated one-off runs no longer share
    one ``single`` table and plot. Its folders (``outputs/``, the artifact location) are
    :func:`harness.paths.folder_name` of it, e.g. ``single_teacher_softmax-<hash>``.

    Raises:
        ValueError: ``tasks`` or ``models`` is empty.
    """
    from natsort import natsorted

    if not tasks or not models:
        raise ValueError("a one-off experiment needs at least one task and one model preset")
    return "/".join([SINGLE, ",".join(natsorted(set(tasks))), ",".join(natsorted(set(models)))])
