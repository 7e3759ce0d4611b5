"""What a command needs to know when it runs as a Ray job (``ray job submit``): Ray starts the
job's driver with the job's configuration in the environment variable
:data:`JOB_CONFIG_ENV` (its ``runtime_env`` and metadata), and, with ``--working-dir``, in a
copy of that folder under the head's ``…/runtime_resources/working_dir_files/``, which Ray
deletes, and which a resubmission after any local change replaces with a new one.

Standard library only: the shell asks before anything heavy is imported.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping

JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # ray._private.runtime_env.constants, set by the job supervisor
COPIES = "working_dir_files"  # the folder of Ray's working-directory copies


def job_runtime_env(environ: Mapping[str, str] = os.environ) -> dict | None:
    """The ``runtime_env`` of the Ray job this process is the driver of (``{}`` if it has
    none), or None when it is not a job's driver."""
    raw = environ.get(JOB_CONFIG_ENV)
    if not raw:
        return None
    try:
        return dict(json.loads(raw).get("runtime_env") or {})
    except (ValueError, AttributeError):  # not Ray's JSON: treat as no job
        return None


def store_in_job_copy(paths: Mapping[str, Path], cwd: Path, environ: Mapping[str, str] = os.environ) -> str | None:
    """Why a local store would lose its runs under this Ray job, as one line: one of ``paths``
    (what → absolute path: the SQLite file, the artifact folder) lies in the job's copy of its
    working folder (the driver's starting folder ``cwd`` when the job has a ``working_dir``, or
    any ``…/working_dir_files/…`` folder); None if none does, or this is not a job.
    """
    job = job_runtime_env(environ)
    if job is None:
        return None
    copy = cwd.resolve() if job.get("working_dir") else None
    for what, path in paths.items():
        path = path.resolve()
        if (copy is not None and (path == copy or copy in path.parents)) or COPIES in path.parts:
            return (f"{what} {path} lies in this Ray job's copy of its working folder (ray job submit "
                    "--working-dir), which Ray deletes and a resubmission replaces with an empty one: "
                    "record through a tracking server (tracking=server tracking.uri=http://HOST:PORT) or "
                    "in a store at an absolute path on a shared folder (tracking.db_path=/shared/mlflow.db)")
    return None


OVERRIDE_ENV = "RAY_OVERRIDE_JOB_RUNTIME_ENV"  # read by ray.init: the driver's fields replace the job's


def driver_runtime_env(own: dict | None, environ=os.environ) -> dict | None:
    """The ``runtime_env`` for the driver's ``ray.init`` (``cluster=ray``): ``own``
    (:func:`tasks.user_code.runtime_env`: the user modules the workers must import), with the
    job's own ``py_modules`` first when this is a Ray job that has some (``ray job submit
    --runtime-env-json '{"py_modules": [...]}'``). Ray refuses a driver's runtime environment
    naming a field the job's names too unless :data:`OVERRIDE_ENV` is ``1`` (then the driver's
    field replaces the job's): in that one case it is set in ``environ``, and the field given
    holds both lists, so nothing of the job's is lost and the user sets nothing."""
    job = job_runtime_env(environ) or {}
    theirs = [str(m) for m in job.get("py_modules") or []]
    if not own or not theirs or not own.get("py_modules"):
        return own
    environ[OVERRIDE_ENV] = "1"
    return {**own, "py_modules": list(dict.fromkeys([*theirs, *own["py_modules"]]))}
