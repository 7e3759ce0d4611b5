"""A trial run's files (``config.yaml``, ``model_state.pt``, ``error.txt``) written into its
artifact location without a call to the tracking store.

MLflow's ``MlflowClient.log_artifact``/``log_text`` read the run (``get_run``) to learn where its
artifacts go, once per run: a fifth of a trial's tracking CPU on a SQLite store. The location is
known from ``create_run``'s answer (``RunInfo.artifact_uri``), so :class:`Artifacts` asks MLflow's
artifact-repository registry for the repository of that URI instead: a local folder is written
in place (no temporary copy), anything else (a tracking server's ``mlflow-artifacts:``, S3, …)
goes through the repository's own ``log_artifact``.
"""

from __future__ import annotations

import tempfile
import urllib.parse
from pathlib import Path
from typing import Callable, Optional

from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

from harness.store import file_uri_path

Write = Callable[[Path], None]  # writes one file at the path it is given


def local_folder(artifact_uri: str) -> Optional[Path]:
    """The folder of a ``file:`` artifact URI (or a plain path), None for any remote scheme."""
    parsed = urllib.parse.urlparse(artifact_uri)
    if parsed.scheme == "file":
        return file_uri_path(artifact_uri)
    if parsed.scheme == "":
        return Path(artifact_uri)
    return None


class Artifacts:
    """Where each open trial run's artifacts go (``run id → artifact URI``, from ``create_run``).

    ``tracking_uri``: the store's URI (a server's proxied ``mlflow-artifacts:`` repository
    uploads through it).
    """

    def __init__(self, tracking_uri: str) -> None:
        self.tracking_uri = tracking_uri
        self._uris: dict[str, str] = {}

    def known(self, run_id: str, artifact_uri: str) -> None:
        """Remember where ``run_id``'s artifacts go (its ``RunInfo.artifact_uri``)."""
        self._uris[run_id] = artifact_uri

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._uris

    def forget(self, run_id: str) -> None:
        """The run is closed: drop its entry."""
        self._uris.pop(run_id, None)

    def put(self, run_id: str, name: str, write: Write, artifact_uri: Optional[str] = None) -> None:
        """Write the file ``name`` of run ``run_id`` with ``write(path)``: in place in a local
        artifact folder, else into a temporary folder and through the artifact repository.

        Raises:
            KeyError: ``run_id``'s location is neither known nor given.
            OSError, MlflowException: the write or the upload failed.
        """
        uri = artifact_uri or self._uris[run_id]
        folder = local_folder(uri)
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            write(folder / name)
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            write(path)
            get_artifact_repository(uri, tracking_uri=self.tracking_uri).log_artifact(str(path))
