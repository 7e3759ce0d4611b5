"""The store is checked before it is used (issue 27, failures 3 and 4, and the dry run on a
folder named ``store%41``): a damaged SQLite file or an experiment whose artifacts live
elsewhere exits 2 before anything is written."""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
from pathlib import Path

import pytest

from harness.paths import folder_name
from harness.store import sqlite_uri

FAST = ["train.max_steps=40", "train.eval_every=20", "task.n_val=64", "task.n_test=128"]
RUN = ["harness", "cluster=serial", *FAST]


@pytest.fixture(scope="module")
def populated(tmp_path_factory, run_in_process_module):
    """A folder whose store holds one finished single-trial sweep (made once per module)."""
    folder = tmp_path_factory.mktemp("populated")
    assert run_in_process_module(RUN, folder).returncode == 0
    return folder


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _copy(populated: Path, to: Path) -> Path:
    shutil.copy(populated / "mlflow.db", to / "mlflow.db")
    shutil.copytree(populated / "mlartifacts", to / "mlartifacts")
    return to / "mlflow.db"


def _truncate(db: Path) -> None:
    os.truncate(db, db.stat().st_size // 2)


def _garbage_page(db: Path) -> None:
    with open(db, "r+b") as handle:  # 4 KB of garbage over the third page
        handle.seek(2 * 4096)
        handle.write(bytes((i * 7919 + 13) % 251 for i in range(4096)))


@pytest.mark.integration
@pytest.mark.parametrize("damage", [_truncate, _garbage_page])
def test_a_damaged_store_exits_2_naming_the_file_and_is_not_written(tmp_path, run_in_process, populated, damage):
    db = _copy(populated, tmp_path)
    damage(db)
    before = _digest(db)
    proc = run_in_process(RUN, tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(db) in lines[0] and "damaged" in lines[0], lines
    assert "backup" in lines[0] and "tracking.db_path=" in lines[0]  # what to do
    assert _digest(db) == before
    assert not (tmp_path / "outputs").exists() or not list((tmp_path / "outputs").rglob("*.png"))


@pytest.mark.integration
def test_a_copied_store_exits_2_naming_both_artifact_folders(tmp_path, run_in_process, populated):
    from mlflow.tracking import MlflowClient

    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(populated / "mlflow.db", copy / "mlflow.db")
    before = _digest(copy / "mlflow.db")
    original = sorted(p.relative_to(populated) for p in (populated / "mlartifacts").rglob("*"))
    proc = run_in_process([*RUN, "seed=1", "tracking.db_path=copy/mlflow.db"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()
    assert len(line) == 1, line
    assert (populated / "mlartifacts").as_uri() in line[0] and (copy / "mlartifacts").as_uri() in line[0]
    assert "tracking.relocate_artifacts=true" in line[0]
    assert _digest(copy / "mlflow.db") == before
    # on purpose: new runs' artifacts go beside the copy; the original folder is not touched
    proc = run_in_process([*RUN, "seed=1", "tracking.db_path=copy/mlflow.db",
                    "tracking.relocate_artifacts=true"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.relative_to(populated) for p in (populated / "mlartifacts").rglob("*")) == original
    client = MlflowClient(sqlite_uri(copy / "mlflow.db"))
    experiment = client.get_experiment_by_name("single/teacher/softmax")
    assert experiment.artifact_location == (copy / "mlartifacts" / folder_name("single/teacher/softmax")).as_uri()
    newest = client.search_runs([experiment.experiment_id], "tags.trial_id != ''",
                                order_by=["attributes.start_time DESC"])[0]
    assert newest.info.artifact_uri.startswith((copy / "mlartifacts").as_uri())
    assert list((copy / "mlartifacts").rglob("config.yaml"))


@pytest.mark.integration
def test_dry_run_sees_the_finished_trials_of_a_store_in_a_percent_folder(tmp_path, invoke):
    folder = tmp_path / "store%41"
    folder.mkdir()
    assert invoke(RUN[0], [*RUN[1:], "tracking.db_path=store%41/mlflow.db"], tmp_path)[0] == 0
    code, out, err = invoke(RUN[0], [*RUN[1:], "tracking.db_path=store%41/mlflow.db", "dry_run=true"], tmp_path)
    assert code == 0, err[-3000:]
    assert "1 already finished (done)" in out, out


def test_store_does_not_import_tracking():
    tree = ast.parse((Path(__file__).parent.parent / "harness" / "store.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert "harness.tracking" not in imported, imported
