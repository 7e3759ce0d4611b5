"""``python -m analysis.report [scale=default|full|tiny] [report.run=false] [report.out=PATH]``

Runs the ``paper`` suite (``python -m harness +ablation=paper``; finished trials are skipped, so
on a complete store this only reads), then writes the report: every ablation's figures and tables
(from MLflow runs only) into ``docs/report/<ablation>/`` and ``docs/report.md`` with, per claim of
paper.md §13, a verdict derived by the rules of :mod:`analysis.claims`. The figures and tables are
also logged as artifacts (``report/``) of each ablation's latest parent run.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import hydra
import mlflow
import pandas as pd
from hydra import compose
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from analysis import lengths, plots, stats, tables
from analysis.claims import Evidence, decide
from analysis.load import load_runs
from analysis.paper import CLAIMS
from harness.config import register_configs
from harness.fip import enumerate_terms
from harness.models.table import measure_presets
from harness.tracking import Tracker, git_commit, resolve_store

register_configs()
RULES = (sys.modules["analysis.claims"].__doc__ or "").split("\n\n", 1)[1].strip()


def _sweeps(name: str, uri: str) -> pd.DataFrame:
    """The ablation's ended parent (sweep) runs with their ``wall_s``, newest first."""
    mlflow.set_tracking_uri(uri)
    sweeps = mlflow.search_runs(experiment_names=[name], filter_string="tags.role = 'sweep'")
    if sweeps.empty:
        return sweeps
    sweeps = sweeps.dropna(subset=["end_time"])
    wall = pd.to_datetime(sweeps["end_time"], utc=True) - pd.to_datetime(sweeps["start_time"], utc=True)
    return sweeps.assign(wall_s=wall.dt.total_seconds())


def ablation_outputs(name: str, df: pd.DataFrame, out: Path) -> list[Path]:
    """Figures (PNG, PDF) and tables (CSV, Markdown) of one ablation's runs into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = tables.write_table(stats.counts(df), out / "counts")
    if stats.finished(stats.add_error(df), "error").empty:
        return paths
    paths += plots.sample_efficiency(df, out / "sample_efficiency")
    paths += tables.write_table(tables.sample_efficiency_table(df), out / "sample_efficiency_table")
    if not lengths.per_length(stats.finished(df)).empty:
        paths += plots.length_generalisation(df, out / "length_generalisation")
    if any(c.startswith("symmetry/") for c in df.columns):
        paths += tables.write_table(tables.symmetry_table(df), out / "symmetry")
    return paths


def _ablation_section(name: str, df: pd.DataFrame, sweeps: pd.DataFrame, folder: Path, rel: str) -> list[str]:
    header = (Path(__file__).resolve().parent.parent / "conf" / "ablation" / f"{name}.yaml").read_text()
    question = " ".join(line[2:].strip() for line in header.splitlines()
                        if line.startswith("# ") and not line.startswith("# @package"))
    wall = sweeps["wall_s"].sum() if not sweeps.empty else float("nan")
    n = stats.counts(df, by=()).iloc[0].to_dict() if not df.empty else {}
    lines = [f"### `{name}`", "", question, "",
             f"Trials: {n.get('total', 0)} ({n.get('finished', 0)} finished, {n.get('failed', 0)} failed, "
             f"{n.get('killed', 0)} killed, {n.get('diverged', 0)} diverged); sweep wall time "
             f"{wall / 60:.1f} min over {len(sweeps)} invocation(s).", ""]
    for fig in ("sample_efficiency", "length_generalisation"):
        if (folder / f"{fig}.png").exists():
            lines += [f"![{name} {fig}]({rel}/{fig}.png)", ""]
    for table in ("sample_efficiency_table", "symmetry"):
        if (folder / f"{table}.md").exists():
            lines += [f"<details><summary>{table.replace('_', ' ')}</summary>", "",
                      (folder / f"{table}.md").read_text(), "</details>", ""]
    return lines


def write_report(cfg: DictConfig, names: list[str], store, out: Path) -> dict[str, str]:
    """Write the report to ``out``; returns ``{claim id: verdict}``."""
    folder = out.with_suffix("")
    runs: dict[str, pd.DataFrame] = {}
    for name in names:
        try:
            runs[name] = stats.add_error(load_runs(name, store.uri))
        except LookupError:
            runs[name] = pd.DataFrame(columns=["status", "variant", "task"])
    presets = pd.DataFrame(measure_presets())
    evidence = Evidence(runs, presets, enumerate_terms(6))
    decided = [(c, *decide(c, evidence)) for c in CLAIMS]
    tracker = Tracker(store)
    sections, total, wall = [], 0, 0.0
    for name in names:
        df, sweeps = runs[name], _sweeps(name, store.uri) if not runs[name].empty else pd.DataFrame()
        paths = ablation_outputs(name, df, folder / name) if not df.empty else []
        if not sweeps.empty:
            for path in paths:
                tracker.client.log_artifact(sweeps.iloc[0]["run_id"], str(path), "report")
            wall += sweeps["wall_s"].sum()
        total += len(df)
        sections += _ablation_section(name, df, sweeps, folder / name, f"{folder.name}/{name}")
    lines = [
        "# The paper, tested: Ma & Ying (2022) against the harness", "",
        f"Generated by `python -m analysis.report` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"from the MLflow store `{store.uri}`, harness commit `{git_commit()}`. "
        f"**Scale: `{cfg.scale.name}`** (seeds `{cfg.scale.seeds}`, n_train `{cfg.scale.n_train}`, "
        f"learning rates `{cfg.scale.lrs}`, {cfg.scale.steps} steps per trial). "
        f"{total} trials in {len(names)} ablations; summed sweep wall time {wall / 60:.1f} min on "
        "this machine. Do not edit by hand: rerun the command.", "",
        "## Verdicts", "", "| claim | statement | type | verdict |", "|---|---|---|---|",
        *[f"| {c.id} | {c.statement} | {c.kind} | **{v}** |" for c, v, _ in decided], "",
        "## How verdicts are decided", "", RULES, "",
        "## Evidence per claim", "",
    ]
    for claim, verdict, parts in decided:
        lines += [f"### {claim.id}: {claim.statement} — **{verdict}**", "",
                  "| part | verdict | evidence |", "|---|---|---|",
                  *[f"| {p.what} | {p.verdict} | {p.evidence} |" for p in parts], ""]
    sym = presets[["id", "preset", "params", "symmetry/rotation_knowledge_err", "symmetry/rotation_err",
                   "symmetry/permutation_err"]]
    lines += ["## Exact symmetry of every variant (random O(1) weights, float64)", "",
              sym.to_markdown(index=False, floatfmt=".1e"), "",
              "## Ablations", "", *sections]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return {c.id: v for c, v, _ in decided}


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    cli = [o for o in HydraConfig.get().overrides.task if not o.startswith(("report.", "+ablation"))]
    suite = cfg.report.suite
    if cfg.report.run:
        proc = subprocess.run([sys.executable, "-m", "harness", f"+ablation={suite}", *cli])
        if proc.returncode not in (0, 1):  # 1: some trials failed; the report counts them
            sys.exit(proc.returncode)
    names = list(compose(config_name="config", overrides=[f"+ablation={suite}", *cli]).ablation.suite)
    store = resolve_store(OmegaConf.to_object(cfg.tracking), Path.cwd())
    out = Path(cfg.report.out)
    verdicts = write_report(cfg, names, store, out if out.is_absolute() else Path.cwd() / out)
    for claim, verdict in verdicts.items():
        print(f"{claim}: {verdict}")
    print(f"report: {out}")


if __name__ == "__main__":
    main()
