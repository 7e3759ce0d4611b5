"""harness/plugins.py: a mixer package registers its models through the entry-point group
``attention_symmetry_harness.models``; built-in names win on a clash; the name is a ``model``
choice and runs on Ray. The package is exposed through a temporary ``.dist-info`` folder on
``sys.path`` (and on ``PYTHONPATH`` for the driver and its Ray workers): nothing is installed,
the venv is left unchanged."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from harness.plugins import GROUP, plugins

ROOT = Path(__file__).resolve().parent.parent


def _plugin_package(folder: Path, entries: dict[str, str]) -> Path:
    """``folder`` holding the package ``gla_plugin`` (the example gated linear attention) and
    ``gla_plugin-0.1.dist-info`` declaring ``entries`` in :data:`GROUP`, as pip would lay it out."""
    (folder / "gla_plugin").mkdir(parents=True)
    (folder / "gla_plugin" / "__init__.py").write_text((ROOT / "examples/my_mixers/gated.py").read_text())
    info = folder / "gla_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gla-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    return folder


@pytest.fixture()
def fresh_plugins():
    plugins.cache_clear()
    yield
    plugins.cache_clear()


def test_entry_points_found_and_builtins_win(tmp_path, monkeypatch, capsys, fresh_plugins):
    from harness.cli import check_choices, options

    folder = _plugin_package(tmp_path, {"gla_test": "gla_plugin:GatedLinearAttention",
                                        "softmax": "gla_plugin:GatedLinearAttention"})
    monkeypatch.syspath_prepend(str(folder))
    assert plugins() == {"gla_test": "gla_plugin:GatedLinearAttention"}  # softmax stays the built-in
    assert "plug-in model 'softmax'" in capsys.readouterr().err
    assert "gla_test" in options("model")
    assert check_choices(["model=gla_test"]) is None
    assert "did you mean gla_test?" in check_choices(["model=gla_tset"])


@pytest.mark.e2e
def test_plugin_runs_on_ray_by_name_and_prints_no_ray_token_line_and_no_matplotlib_info(tmp_path, run_cli):
    """The plug-in's one trial on an embedded Ray instance, by its name. The same run is the
    ordinary one-trial run whose output is checked (it was a run of its own in
    tests/test_summary.py): Ray's token-authentication warning and matplotlib.category's INFO
    lines (a one-point panel's categorical x) were printed on every run."""
    folder = _plugin_package(tmp_path / "site", {"gla_test": "gla_plugin:GatedLinearAttention"})
    run = tmp_path / "run"
    run.mkdir()
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    out = run_cli(["harness", "model=gla_test", "model.kwargs.k=4", "train.max_steps=4", "train.eval_every=2",
                   "cluster=local", "cluster.num_cpus=1"], run, env={"PYTHONPATH": path})
    assert out.returncode == 0, out.stderr[-3000:]
    printed = out.stdout + out.stderr
    assert "Token authentication" not in printed and "token-auth" not in printed, printed[-3000:]
    assert "matplotlib" not in printed and "plot: " in out.stdout
    with sqlite3.connect(run / "mlflow.db") as con:
        tags = dict(con.execute("SELECT t.key, t.value FROM tags t JOIN runs r ON r.run_uuid = t.run_uuid "
                                "WHERE r.status = 'FINISHED' AND t.key IN ('variant', 'node', 'trial_id')").fetchall())
        params = dict(con.execute("SELECT key, value FROM params WHERE key LIKE 'model.%'").fetchall())
    assert tags["variant"] == "gla_test[kwargs.k=4]" and "trial_id" in tags
    assert params["model.target"] == "gla_plugin:GatedLinearAttention" and params["model.kwargs.k"] == "4"
