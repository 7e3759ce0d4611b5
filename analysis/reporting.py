"""The report's machinery behind ``python -m analysis.report`` (:mod:`analysis.report`): run the
suite, its lr-edge extensions, freeze the exploratory choices, run the budget reruns, the
confirmation block and the readout reruns (:func:`run_reruns`), export the results bundle, decide
every part and write the Markdown and the stability table.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
from hydra import compose
from omegaconf import DictConfig, OmegaConf

from analysis import phases, protocol, stability, stats
from analysis import verdicts as verdicts_of
from analysis.budget import budget_lines, budget_trials, split_budget
from analysis.confirm import FROZEN, confirmation_trials, freeze, read_frozen, readout_trials, seeds_of, write_frozen
from analysis.bundle import collect, planned, read_bundle, split, write_bundle
from analysis.claims import Evidence, check
from analysis.health import health_lines, task_health
from analysis.outputs import write_all
from analysis.paper import CLAIMS
from analysis.plots import FORMATS
from analysis.trials import grid_axes
from harness.config import PartConfig
ROOT = Path(__file__).resolve().parent.parent
EVIDENCE_SCALES = ("default", "full")
PATH_CHECK = "path check, not evidence"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def commit_line() -> tuple[str, str]:
    """``(harness commit, margins commit)``: HEAD (``+dirty`` if code or configs changed, the
    report's own output under ``docs/`` not counted) and the last commit that changed a part
    of an ablation file (``ablation.parts``: claim, arms, test, δ, …), where the margins are
    pre-registered; a change of the grid or of comments does not move it."""
    head = _git("rev-parse", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs")
    # a part's own keys ("name" and "task" are also keys elsewhere in an ablation file)
    part_keys = "|".join(f.name for f in dataclasses.fields(PartConfig) if f.name not in ("name", "task"))
    margins = _git("log", "-1", "--format=%h", "-E", f"-G^[[:space:]]*-?[[:space:]]*({part_keys}):",
                   "--", "conf/ablation") or "unknown"
    return head[:12] + ("+dirty" if dirty else ""), margins


def store_name(uri: str) -> str:
    """The store by kind and name, never by a machine path: ``SQLite file `mlflow.db```, or
    ``MLflow server `host:port```."""
    if uri.startswith("sqlite:"):
        return f"SQLite file `{Path(uri.split(':///', 1)[-1]).name}`"
    return f"MLflow server `{uri.split('://', 1)[-1].split('/', 1)[0]}`"


# ----------------------------------------------------------------------------- running
def _compose_suite(suite: str, cli: list[str]) -> tuple[DictConfig, dict[str, DictConfig]]:
    """The suite's composed config and each of its ablations' (name → config; the report reads
    their questions and parts). Their trials are :func:`harness.sweep.expand_suite`'s."""
    cfg = compose(config_name="config", overrides=[f"+ablation={suite}", *cli])
    names = list(cfg.ablation.suite) or [cfg.ablation.name]
    return cfg, {n: compose(config_name="config", overrides=[f"+ablation={n}", *cli]) for n in names}


def _extension_trials(edges: list[dict[str, Any]], trials: dict[str, Any], cli: list[str]) -> list:
    """One trial per seed past each edge: the grid trial's point with ``train.lr`` one step
    (×√10) beyond the chosen lr, tagged ``extends`` with the grid trial's id."""
    from harness.sweep import Composer

    composer, out, seen = Composer(cli), [], set()
    for edge in edges:
        lr = edge["lr"] * (math.sqrt(10) if edge["side"] == "high" else 1 / math.sqrt(10))
        lr = float(f"{lr:.3g}")
        for run_id, ext in zip(edge["trial_ids"], edge["extends"] or [""] * len(edge["trial_ids"])):
            base = trials.get(ext) or trials.get(run_id)
            if base is None:
                continue
            trial = composer.extension(base, {"train.lr": str(lr)})
            if trial.trial_id not in seen and trial.trial_id not in trials:
                seen.add(trial.trial_id)
                out.append(trial)
    return out


def run_suite(cfg: DictConfig, ablations: dict[str, list], cli: list[str], store) -> None:
    """Run the suite's trials (``ablations``: name → its expanded trials; or a round of reruns)
    in this process as ``python -m harness +ablation=<report.suite>`` runs them
    (:meth:`harness.driver.Sweep.main`: checks, one queue on one Ray instance, finished trials
    skipped, the exit status),
    without its end-of-sweep figures. Bad input exits 2 before any trial starts and an interrupt
    exits 130; failed or unrecorded trials are named on stderr and the report goes on (it
    counts them)."""
    from harness.driver import Sweep

    sweep = Sweep(list(ablations.items()), OmegaConf.to_object(cfg.cluster), store,
                  [f"+ablation={cfg.report.suite}", *cli], cfg.tracking.lease_s)
    if sweep.main() == 2:  # bad input, nothing run or recorded (1: named on stderr, counted)
        sys.exit(2)


def _exploratory(store, ablations: dict[str, list], configs: dict[str, DictConfig]) -> dict[str, pd.DataFrame]:
    """Each ablation's exploratory runs in the store (the grid and its lr extensions,
    :mod:`analysis.phases`), with ``error``: budget, confirmation and readout reruns left out."""
    runs, _ = split(collect(store.uri, ablations))
    return {name: phases.exploratory(stats.add_error(runs[name]), int(conf.train.max_steps),
                                     verdicts_of.confirm_seeds(conf))
            for name, conf in configs.items() if name in runs}


def run_extensions(cfg: DictConfig, ablations: dict[str, list], configs: dict[str, DictConfig],
                   cli: list[str], store) -> int:
    """Extend the lr grid past the edges that deciding parts chose, up to ``report.extend_lr``
    rounds (paper.md §13), on the exploratory runs only. Returns the number of extension trials run."""
    total = 0
    for _ in range(cfg.report.extend_lr):
        runs = _exploratory(store, ablations, configs)
        todo: dict[str, list] = {}
        for name, conf in configs.items():
            df = runs.get(name, pd.DataFrame())
            parts = [p for p in conf.ablation.parts if protocol.spec_dict(p)["role"] == "deciding"]
            edges = [e for p in parts for e in protocol.decide_part(df, p).edges] if not df.empty else []
            known = {t.trial_id: t for t in ablations[name]}
            new = _extension_trials(edges, known, [f"+ablation={name}", *cli])
            if new:
                todo[name] = new
        if not todo:
            break
        for name, trials in todo.items():
            print(f"{name}: {len(trials)} trials past an lr grid edge", flush=True)
            total += len(trials)
        run_suite(cfg, todo, cli, store)  # one queue: small groups fill packs
    return total


def freeze_choices(configs: dict[str, DictConfig], runs: dict[str, pd.DataFrame], path: Path) -> pd.DataFrame:
    """The exploratory choices every rerun round reads (:func:`analysis.confirm.freeze`): those
    already in ``path`` (``frozen.csv`` next to the bundle, as committed), else frozen from
    ``runs`` (the exploratory block) and written there first. Where the file exists and the
    exploratory block would now choose otherwise, says so on stderr and keeps the file's."""
    now = freeze(configs, runs)
    if not path.exists():
        write_frozen(now, path)
        print(f"froze the exploratory choices of {now['part'].nunique()} parts: {path.name}", flush=True)
        return read_frozen(path)
    kept = read_frozen(path)
    keys = ["ablation", "part", "role", "arm", "n_train"]
    both = now.merge(kept, on=keys, how="outer", suffixes=("", "_kept"), indicator=True)
    moved = both[(both["_merge"] != "both") | ~pd.Series(
        [math.isclose(a, b) if pd.notna(a) and pd.notna(b) else False for a, b in zip(both["lr"], both["lr_kept"])],
        index=both.index)]
    if not moved.empty:
        print(f"warning: {len(moved)} exploratory choices differ from {path.name}; the reruns use the file's "
              "(delete it to freeze again)", file=sys.stderr)
    return kept


def _round(cfg: DictConfig, todo: dict[str, list], what: str, cli: list[str], store) -> int:
    """Run one rerun round as one queue (small groups fill packs); returns its trial count."""
    for name, trials in todo.items():
        print(f"{name}: {len(trials)} trials ({what})", flush=True)
    if todo:
        run_suite(cfg, todo, cli, store)
    return sum(len(t) for t in todo.values())


def run_reruns(cfg: DictConfig, ablations: dict[str, list], configs: dict[str, DictConfig],
               cli: list[str], store, frozen_path: Path) -> dict[str, int]:
    """After the exploratory block: freeze its choices (:func:`freeze_choices`), then the budget
    reruns (evidence scales, ``report.budget_factor`` > 1), the confirmation block and the
    readout reruns (:func:`confirm_enabled`), each round one queue. Returns trials per round."""
    budget = cfg.report.budget_factor > 1 and cfg.scale.name in EVIDENCE_SCALES
    if not (budget or confirm_enabled(cfg)):  # no round to run: nothing to freeze (a tiny report)
        return {}
    runs = _exploratory(store, ablations, configs)
    rounds: dict[str, dict[str, list]] = {}
    frozen = freeze_choices(configs, runs, frozen_path)
    if budget:
        rounds[f"×{cfg.report.budget_factor} steps, budget reruns"] = budget_trials(
            configs, runs, ablations, cli, cfg.report.budget_factor, frozen)
    if confirm_enabled(cfg):
        seeds = seeds_of(str(cfg.scale.confirm_seeds))
        rounds["confirmation block"] = confirmation_trials(configs, runs, ablations, cli, seeds, frozen)
        rounds["readout reruns"] = readout_trials(configs, runs, ablations, cli, frozen)
    return {what: _round(cfg, todo, what, cli, store) for what, todo in rounds.items()}


def check_confirm_seeds(cfg: DictConfig) -> None:
    """Exit 2 (one line on stderr) before any trial starts when the confirmation block would run
    on seeds the exploratory grid also runs (``scale.seeds`` ∩ ``scale.confirm_seeds``): the
    phases are told apart by seed (:mod:`analysis.phases`), so the block must be fresh seeds."""
    if not confirm_enabled(cfg):
        return
    shared = sorted(set(seeds_of(str(cfg.scale.seeds))) & set(seeds_of(str(cfg.scale.confirm_seeds))))
    if shared:
        print(f"error: scale.confirm_seeds={cfg.scale.confirm_seeds} shares seeds {shared} with scale.seeds="
              f"{cfg.scale.seeds}; allowed: seeds the exploratory grid does not run (1000–1009 by default)",
              file=sys.stderr)
        sys.exit(2)


def confirm_enabled(cfg: DictConfig) -> bool:
    """``report.confirm``: true or false as given; unset (null), at the evidence scales only."""
    value = cfg.report.get("confirm")
    return cfg.scale.name in EVIDENCE_SCALES if value is None else bool(value)


# ----------------------------------------------------------------------------- writing
def _num(x: float) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def _pre(result: protocol.PartResult) -> str:
    if not result.preconditions:
        return "–"
    return "<br>".join(f"{k}: {v}" for k, v in result.preconditions.items())


def _also95(result: protocol.PartResult) -> str:
    """An equivalence's 95% interval (its contradiction test) beside the printed 90% one."""
    if result.spec["test"] == "difference" or math.isnan(result.lo95):
        return ""
    return f"; 95% [{_num(result.lo95)}, {_num(result.hi95)}]"


def _params(result: protocol.PartResult, arm: str) -> str:
    """An arm's parameter count (paper.md §13: every part prints both arms')."""
    n = result.params.get(arm)
    return f" ({int(n):,} params)" if n is not None and not math.isnan(n) else ""


def _p_text(result: protocol.PartResult) -> str:
    """'p (Holm p)'; the Holm-adjusted p only for deciding parts (protocol.adjust)."""
    if math.isnan(result.p):
        return "–"
    return f"{result.p:.2g}" + (f" ({result.p_holm:.2g})" if not math.isnan(result.p_holm) else "")


def _part_rows(results: list[protocol.PartResult], tiny: bool) -> list[str]:
    head = ["| part | role | task · n_train · seeds | arms a vs b (mean value) | effect d = b − a "
            "[interval] (method) | δ | p for contradiction (Holm within the claim) | preconditions | "
            "lr chosen (of grid) | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for r in results:
        s = r.spec
        kind = s["test"] if s["test"] == "difference" else f"equivalence ({s['sides']}-sided)"
        value = {"error": "test error", "auc": "mean log test error over n_train",
                 "absent_error": "test error on absent answers"}.get(
            s["value"], s["value"].replace("error_n", "test error at length n = "))
        verdict = PATH_CHECK if tiny else f"**{r.verdict}**" + (
            "<br>" + "; ".join(r.reasons) if r.reasons else "") + (
            f"<br>(the interval alone: {r.test_alone})" if r.test_alone else "")
        lrs = "<br>".join(([r.choice] if r.choice else []) + [f"{k}: {v}" for k, v in r.lr.items()]) or "–"
        rows.append(
            f"| {s['name']} ({kind}; {value}) | {s['role']} | {s['task']} · {r.n_train or '–'} · "
            f"{r.seeds or '–'} | `{s['a']}` {_num(r.mean_a)}{_params(r, s['a'])} vs `{s['b']}` "
            f"{_num(r.mean_b)}{_params(r, s['b'])} | "
            f"{_num(r.effect)} [{_num(r.lo)}, {_num(r.hi)}] ({r.method or '–'}){_also95(r)} | {s['delta']} | "
            f"{_p_text(r)} | {_pre(r)} | {lrs} | {verdict} |")
    return head + rows


def _summary_table(decided: list[protocol.PartResult]) -> list[str]:
    """Parts by role and verdict, and the inconclusive ones by reason."""
    rows = []
    for r in decided:
        reasons = [x.split(":")[0] for x in r.reasons] if r.verdict == protocol.INCONCLUSIVE else []
        rows.append({"role": r.spec["role"], "verdict": r.verdict,
                     "reason": ", ".join(sorted(set(reasons))) or "–"})
    if not rows:
        return ["No statistical part was decided.", ""]
    table = pd.DataFrame(rows).value_counts().rename("parts").reset_index()
    return [table.sort_values(["role", "verdict", "reason"]).to_markdown(index=False), ""]


def open_seconds(sweeps: pd.DataFrame) -> float:
    """Σ (end − start) over sweep runs, in seconds (NaN if none). Times are timestamps or the
    strings a bundle holds, where a time on a whole second has no fraction
    (``23:38:13+00:00`` beside ``23:38:13.123000+00:00``), so they are read as ISO 8601."""
    if sweeps.empty:
        return float("nan")
    when = {k: pd.to_datetime(sweeps[k], utc=True, format="ISO8601") for k in ("start_time", "end_time")}
    return float((when["end_time"] - when["start_time"]).dt.total_seconds().sum())


def _ablation_section(name: str, df: pd.DataFrame, sweeps: pd.DataFrame, folder: Path,
                      rel: str, plan: int | None = None) -> list[str]:
    header = (ROOT / "conf" / "ablation" / f"{name}.yaml").read_text()
    question = " ".join(line[2:].strip() for line in header.splitlines()
                        if line.startswith("# ") and not line.startswith(("# @package", "# Parts", "#   C")))
    mine = sweeps[sweeps["ablation"] == name] if not sweeps.empty else sweeps
    wall = open_seconds(mine)
    n = stats.counts(df, by=()).iloc[0].to_dict() if not df.empty else {}
    ext = int((df.get("extends", pd.Series(dtype=str)).fillna("").astype(str) != "").sum()) if not df.empty else 0
    lines = [f"### `{name}`", "", question, "",
             f"Trials: {n.get('total', 0)}" + (f" runs of the {plan} trials this ablation composes to"
                                                if plan is not None else "") + f" ({n.get('finished', 0)} finished, {n.get('failed', 0)} failed, "
             f"{n.get('killed', 0)} killed, {n.get('diverged', 0)} diverged; {ext} past an lr grid edge); "
             f"its sweeps were open {wall / 60:.1f} min over {len(mine)} invocation(s) (a suite's "
             "ablations run as one queue, so their times overlap).", ""]
    for fig in sorted(folder.glob("*.png")):
        lines += [f"![{name} {fig.stem}]({rel}/{fig.name})", ""]
    for table in sorted(folder.glob("*.md")):
        lines += [f"<details><summary>{table.stem.replace('_', ' ')}</summary>", "",
                  table.read_text(), "</details>", ""]
    return lines


def _completeness(runs: dict[str, pd.DataFrame], plan: dict[str, int]) -> list[str]:
    """A warning line when some ablation has fewer grid trials finished than it composes to."""
    short = []
    for name, n in plan.items():
        df = runs.get(name, pd.DataFrame())
        grid = df[df.get("extends", pd.Series("", index=df.index)).fillna("").astype(str) == ""] if len(df) else df
        done = int((grid["status"] == "FINISHED").sum()) if len(grid) else 0
        if done < n:
            short.append(f"`{name}` {done} of {n}")
    if not short:
        return []
    return [f"**Incomplete store: these ablations have fewer finished trials than they compose to** "
            f"({', '.join(short)}). Their parts are decided on what exists or are inconclusive "
            "(\"no runs\"); rerun the command to complete them.", ""]


def write_report(cfg: DictConfig, configs: dict[str, DictConfig], bundle: pd.DataFrame, out: Path,
                 source: str) -> dict[str, str]:
    """Write the report to ``out`` from a bundle (:mod:`analysis.bundle`); returns
    ``{claim id: verdict}``."""
    from harness.counterexample import measure_counterexample, measure_gram_identity
    from harness.fip import enumerate_terms
    from harness.variant_table import measure_presets

    tiny = cfg.scale.name not in EVIDENCE_SCALES
    folder = out.with_suffix("")
    runs, sweeps = split(bundle)
    runs = {name: stats.add_error(runs[name]) if name in runs else pd.DataFrame(
        columns=["status", "variant", "task", "arm"]) for name in configs}
    longer = {}  # the budget ablation's reruns, kept apart from everything else
    for name, conf in configs.items():
        runs[name], longer[name] = split_budget(runs[name], int(conf.train.max_steps))
    factor = int(cfg.report.budget_factor)
    budget = budget_lines(configs, runs, longer, factor) if any(not d.empty for d in longer.values()) else []
    presets = pd.DataFrame(measure_presets())
    evidence = Evidence(runs, presets, enumerate_terms(6), {**measure_counterexample(), **measure_gram_identity()})
    scale = cfg.scale
    parts = verdicts_of.decide_parts(configs, runs)
    head, margins = commit_line()
    verdicts, lines_claims, lines_checks, evidence_lines = {}, [], [], []
    for claim in CLAIMS:
        status, checks = check(claim, evidence)
        mine = [r for r in parts if r.spec["claim"] == claim.id]
        if claim.kind in ("E", "E/S"):  # C5b's S half (Adam deviates) is a measured check too
            verdict, why = f"check {status}", "implementation check (E), not evidence"
        else:
            protocol.adjust(mine)
            verdict, why = protocol.combine(mine)
        shown = PATH_CHECK if tiny else verdict
        verdicts[claim.id] = shown
        if claim.kind in ("E", "E/S"):
            lines_checks.append(f"| {claim.id} | {claim.statement} | {len(checks)} | **{shown}** |")
        else:
            n_dec = sum(r.spec["role"] == "deciding" for r in mine)
            lines_claims.append(f"| {claim.id} | {claim.statement} | {claim.paper or '–'} | {n_dec} | "
                                f"**{shown}** | {why} |")
        evidence_lines += [f"### {claim.id}: {claim.statement} — **{shown}**", ""]
        if claim.paper:
            evidence_lines += [f"*The paper*: {claim.paper}.", ""]
        if mine:
            evidence_lines += _part_rows(mine, tiny) + [""]
        if checks:
            evidence_lines += ["Exact checks (implementation, not evidence):", "",
                               "| check | status | measured |", "|---|---|---|",
                               *[f"| {p.what} | {p.verdict} | {p.evidence} |" for p in checks], ""]
    sections = []
    for name, conf in configs.items():
        if not runs[name].empty:
            write_all(runs[name], folder / name, ablation=name, scale=scale.name,
                      axes=grid_axes(conf.ablation.grid.keys(), runs[name]), figures=list(conf.ablation.figures),
                      formats=("png",) if tiny else FORMATS)  # the report shows PNGs; PDFs for papers
        sections += _ablation_section(name, runs[name], sweeps, folder / name, f"{folder.name}/{name}",
                                      planned(bundle).get(name))
    total = sum(len(df) for df in runs.values())
    health = task_health(runs, {name: list(conf.ablation.parts) for name, conf in configs.items()})
    sym = presets[["id", "preset", "params", "symmetry/rotation_knowledge_err", "symmetry/rotation_err",
                   "symmetry/permutation_err"]]
    lines = [
        "# The paper, tested: Ma & Ying (2022) against the harness", "",
        f"Generated by `python -m analysis.report` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC "
        f"from {source}, harness commit `{head}`.",
        "",
        f"**Scale: `{scale.name}`**: seeds `{scale.seeds}`, n_train `{scale.n_train}` (parts decided at "
        f"one size: `{scale.n_train_max}`), learning rates `{scale.lrs}` (`{scale.lrs_high}` too where an "
        "ablation says so; " + (f"extended past a chosen edge at most {cfg.report.extend_lr}× by ×√10" if not tiny
          else "no reruns past an edge at this scale") + "), "
        f"{scale.steps} steps per trial ({scale.long_steps} where an ablation says so), validation every "
        f"{scale.eval_every} steps ({scale.long_eval_every}). {total} trial runs "
        f"in {len(configs)} ablations" + (f" ({sum(planned(bundle).values())} trials composed; the rest are "
        "reruns past an lr grid edge, or missing where fewer)" if planned(bundle) else "") +
        (f", and {sum(len(d) for d in longer.values())} budget-ablation reruns at ×{factor} steps"
         if budget else "") + ". "
        f"Margins pre-registered in the ablation files at commit `{margins}`. "
        "Do not edit by hand: rerun the command.", "",
        *_completeness(runs, planned(bundle)),
        *([f"**This is a check of the path at scale `{scale.name}`, not evidence**: budgets and seeds "
           "are far too small for any verdict.", ""] if tiny else []),
        "## Verdicts (statistical claims)", "",
        "| claim | statement | the paper says | deciding parts | verdict | why |",
        "|---|---|---|---|---|---|", *lines_claims, "",
        "## Checks (exact identities: implementation checks, not evidence)", "",
        "| claim | statement | checks | status |", "|---|---|---|---|", *lines_checks, "",
        "## Parts by role, verdict and reason", "", *_summary_table(parts),
        "## Task health", "", *health_lines(health),
        *(["## Budget ablation: do the verdicts move with more steps?", "",
           f"Each deciding part's arms rerun at ×{factor} the steps (validation ×{factor} as far apart), "
           "at the size the part was decided at and each arm's lr chosen on validation, every seed; "
           "the part decided again on those runs alone (lr fixed: no lr-edge precondition). "
           f"{sum(len(d) for d in longer.values())} reruns.", "", *budget, ""] if budget else []),
        "## How verdicts are decided", "", (protocol.__doc__ or "").split("\n\n", 1)[1].strip(), "",
        "## Evidence per claim", "", *evidence_lines,
        "## Exact symmetry of every variant (random O(1) weights, float64)", "",
        sym.to_markdown(index=False, floatfmt=".1e"), "",
        "## Ablations", "", *sections,
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return verdicts


def _out_path(cfg: DictConfig) -> Path:
    """The report's Markdown file: ``report.out`` (a ``.md`` file, or a folder that gets
    ``report.md``; relative to the working directory), else the scale's default. Figures, tables
    and the bundle go to the folder of the same name without ``.md``.

    Raises:
        SystemExit(2): ``report.out`` names neither a folder nor a ``.md`` file, or a file stands
            where one of its folders goes; checked before any trial starts, so a long suite never
            ends on a path it cannot write.
    """
    if cfg.report.out:
        out = Path(cfg.report.out)
        out = out if out.is_absolute() else Path.cwd() / out
        if out.suffix == "" or out.is_dir():
            out = out / "report.md"
        files = [p for p in (out.with_suffix(""), *out.parents) if p.exists() and not p.is_dir()]
        problem = ("must be a folder (the report is written as report.md inside it) or a path ending in .md"
                   if out.suffix != ".md" else f"cannot be written: {out} is a folder" if out.is_dir()
                   else f"cannot be written: {files[0]} is a file where a folder goes" if files else "")
        if problem:
            print(f"error: report.out={cfg.report.out!r} {problem}", file=sys.stderr)
            sys.exit(2)
        return out
    if cfg.scale.name in EVIDENCE_SCALES:
        return ROOT / "docs" / "report.md"
    return Path.cwd() / "outputs" / f"report-{cfg.scale.name}" / "report.md"


def write_stability(configs: dict[str, DictConfig], bundle: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The stability table of the bundle's runs, every phase (:func:`analysis.verdicts.stability_frame`),
    written to ``path`` (``stability.csv`` next to the bundle) where some part is deciding."""
    runs, _ = split(bundle)
    frame = verdicts_of.stability_frame(configs, {n: stats.add_error(df) for n, df in runs.items()})
    if not frame.empty:
        stability.write_csv(frame, path)
    return frame


def generate(cfg: DictConfig, cli: list[str]) -> None:
    """Run, export and write as :mod:`analysis.report` describes; prints each claim's verdict."""
    out = _out_path(cfg)
    bundle_path = out.with_suffix("") / "runs.csv.gz"
    suite_cfg, configs = _compose_suite(cfg.report.suite, cli)
    if cfg.report.runs:
        source_path = Path(cfg.report.runs)
        source_path = source_path if source_path.is_absolute() else Path.cwd() / source_path
        bundle = read_bundle(source_path)
        source = f"the results bundle `{source_path.name}`"
    else:
        from harness.sweep import SweepError, expand_suite
        from harness.store import resolve_store

        store = resolve_store(OmegaConf.to_object(cfg.tracking), Path.cwd())
        try:
            ablations = dict(expand_suite(suite_cfg, [f"+ablation={cfg.report.suite}", *cli]))
        except SweepError as err:  # bad input: exit 2 before any trial starts
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)
        check_confirm_seeds(cfg)
        if cfg.report.run:
            run_suite(cfg, ablations, cli, store)
        if cfg.report.run and cfg.report.extend_lr > 0 and cfg.scale.name in EVIDENCE_SCALES:
            run_extensions(cfg, ablations, configs, cli, store)
        if cfg.report.run:
            run_reruns(cfg, ablations, configs, cli, store, bundle_path.parent / FROZEN)
        write_bundle(collect(store.uri, ablations), bundle_path)
        bundle = read_bundle(bundle_path)
        source = f"the {store_name(store.uri)} (exported to `{bundle_path.parent.name}/{bundle_path.name}`)"
    write_stability(configs, bundle, bundle_path.parent / "stability.csv")
    verdicts = write_report(cfg, configs, bundle, out, source)
    for claim, verdict in verdicts.items():
        print(f"{claim}: {verdict}")
    print(f"report: {out}")

