"""The report's machinery behind ``python -m analysis.report`` (:mod:`analysis.report`): run the
suite, its lr-edge extensions, freeze the exploratory choices, run the budget reruns, the
confirmation block and the readout reruns (:func:`run_reruns`), export the results bundle, decide
every part and write the Markdown and the stability table. Everything here is values
(:class:`Report`, :class:`Header`, :class:`AblationSection`, :class:`ClaimResult`,
:class:`Source`); the render modules word them (:func:`analysis.render_tables.document`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
from hydra import compose
from omegaconf import DictConfig, OmegaConf

from analysis import (answer, calibration, phases, protocol, render_prose, render_tables, rounds, sequential, stability, staged,
                      stats, trail)
from analysis import length as length_column
from analysis import scale as scale_column
from analysis import verdicts as verdicts_of
from analysis.budget import budget_trials, compare, split_budget
from analysis.confirm import (FROZEN, check_unspent, confirmation_trials, freeze, frozen_state, read_frozen,
                              readout_trials, seeds_of, with_recorded_block, write_frozen)
from analysis.bundle import collect, planned, read_bundle, read_measurements, split, write_bundle
from analysis.claims import Evidence, check
from analysis.health import task_health
from analysis.reuse import write_once
from analysis.paper import CLAIMS
from analysis.trials import grid_axes
from analysis.report_paths import ReportInputError
from analysis.report_values import AblationSection, ClaimResult, Header, Report, Source
from harness.cli import ablation_header
from harness.config import PartConfig

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE_SCALES = ("default", "full")


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _part_changes(*args: str) -> str:
    """``git log`` of the commits that changed a part of an ablation file (``ablation.parts``:
    claim, arms, test, δ, …); a change of the grid or of comments is not one."""
    # a part's own keys ("name" and "task" are also keys elsewhere in an ablation file)
    part_keys = "|".join(f.name for f in dataclasses.fields(PartConfig) if f.name not in ("name", "task"))
    return _git("log", *args, "--format=%h", "-E", f"-G^[[:space:]]*-?[[:space:]]*({part_keys}):",
                "--", "conf/ablation")


def commit_line() -> tuple[str, str]:
    """``(harness commit, margins commit)``: HEAD (``+dirty`` if code or configs changed, the
    report's own output under ``docs/`` not counted) and the last commit that changed a part
    of an ablation file, where the margins are pre-registered; a change of the grid or of
    comments does not move it."""
    head = _git("rev-parse", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs")
    return head[:12] + ("+dirty" if dirty else ""), _part_changes("-1") or "unknown"


def first_registration() -> str:
    """The first commit that registered parts in an ablation file (as :func:`commit_line` finds
    the last): where the trail of registrations starts (issue 28 item 7). ``git log -1
    --reverse`` limits before reversing, so the oldest is the last line of the full log."""
    changes = _part_changes().splitlines()
    return changes[-1] if changes else "unknown"


def store_source(uri: str, exported: str) -> Source:
    """The store of ``uri`` as a :class:`Source` (an SQLite file by its name, a server by
    ``host:port``), its runs exported to ``exported``."""
    if uri.startswith("sqlite:"):
        return Source("sqlite", Path(uri.split(':///', 1)[-1]).name, exported)
    return Source("server", uri.split('://', 1)[-1].split('/', 1)[0], exported)


# ----------------------------------------------------------------------------- running
def _compose_suite(suite: str, cli: list[str]) -> tuple[DictConfig, dict[str, DictConfig]]:
    """The suite's composed config and each of its ablations' (name → config; the report reads
    their questions and parts). Their trials are :func:`harness.expansion.expand_suite`'s."""
    cfg = compose(config_name="config", overrides=[f"+ablation={suite}", *cli])
    names = list(cfg.ablation.suite) or [cfg.ablation.name]
    return cfg, {n: compose(config_name="config", overrides=[f"+ablation={n}", *cli]) for n in names}


def run_suite(cfg: DictConfig, ablations: dict[str, list], cli: list[str], store) -> None:
    """Run the suite's trials (``ablations``: name → its expanded trials; or a round of reruns)
    in this process as ``python -m harness +ablation=<report.suite>`` runs them
    (:meth:`harness.sweep.Sweep.main`: checks, one queue on one Ray instance, finished trials
    skipped, the exit status),
    without its end-of-sweep figures. Bad input raises :class:`ReportInputError` (its line
    printed) before any trial starts and an interrupt
    exits 130; failed or unrecorded trials are named on stderr and the report goes on (it
    counts them)."""
    from harness.sweep import Sweep

    sweep = Sweep(list(ablations.items()), OmegaConf.to_object(cfg.cluster), store,
                  [f"+ablation={cfg.report.suite}", *cli], cfg.tracking.lease_s)
    if sweep.main() == 2:  # bad input, nothing run or recorded (1: named on stderr, counted)
        raise ReportInputError("")  # its one line is printed


def _column_runs(store, ablations: dict[str, list], configs: dict[str, DictConfig], phase: str) -> dict[str, pd.DataFrame]:
    """Each ablation's reruns of one column in the store (phase ``scale`` or ``length``,
    :mod:`analysis.phases`)."""
    runs, _ = split(collect(store.uri, ablations))
    out = {}
    for name, conf in configs.items():
        if name in runs:
            df = phases.with_phase(stats.add_error(runs[name]), int(conf.train.max_steps), verdicts_of.confirm_seeds(conf))
            fresh = pd.to_numeric(df["seed"], errors="coerce").isin(verdicts_of.confirm_seeds(conf) or [])
            # the exploratory seeds only: the column's block (its confirmation seeds) never chooses its lrs
            out[name] = df[(df["phase"] == phase) & ~fresh].drop(columns="phase").reset_index(drop=True)
    return out


def looks(cfg: DictConfig) -> tuple[int, ...] | None:
    """The sequential design's looks for the blocks (``scale.looks``, :mod:`analysis.sequential`);
    None for the fixed design ("").

    Raises:
        ReportInputError: looks that are not strictly increasing seed counts ≥ 2 ending at the
            block's size (``scale.confirm_seeds``).
    """
    text = str(cfg.scale.get("looks") or "").strip()
    if not text:
        return None
    try:
        return sequential.check_looks([int(x) for x in text.split(",")], len(seeds_of(str(cfg.scale.confirm_seeds))))
    except ValueError as err:
        raise ReportInputError(f"scale.looks={text}: {err}") from err


def _open_parts(store, ablations: dict[str, list], configs: dict[str, DictConfig], rows: pd.DataFrame,
                column: str | None) -> set[tuple[str, str]]:
    """The (ablation, part) of ``rows`` (frozen rows) whose block the store's runs leave open at
    their last look (:mod:`analysis.staged`): the main block (``column`` None) as
    :func:`analysis.verdicts.decide_all` decides it, a column's as the stability table does."""
    runs, _ = split(collect(store.uri, ablations))
    out = set()
    for (name, part_name), _ in rows.groupby(["ablation", "part"], sort=False, dropna=False):
        conf = configs[name]
        part = next(p for p in conf.ablation.parts if str(p.name) == part_name)
        df = stats.add_error(runs[name]) if name in runs else pd.DataFrame()
        if df.empty:
            out.add((name, part_name))
            continue
        if column is None:
            look = verdicts_of.decide_all(conf, df, part)[2]
        else:
            blocks = stability.split_blocks(df, int(conf.train.max_steps), protocol.spec_dict(part)["readout"],
                                            verdicts_of.confirm_seeds(conf))
            look = stability.column_decision(blocks, part, column)[1]
        if look is None or not look.stopped:
            out.add((name, part_name))
    return out


def run_block(cfg: DictConfig, ablations: dict[str, list], configs: dict[str, DictConfig], cli: list[str], store,
              frozen: pd.DataFrame, runs: dict[str, pd.DataFrame], phase: str, what: str,
              column: str | None = None, changes=None) -> int:
    """A confirmation block (the main one, or a column's: ``column`` with ``changes(frozen row)``,
    its reruns on the exploratory seeds as ``runs``, its lrs in ``frozen``) on the seeds of
    ``scale.confirm_seeds`` (:func:`analysis.confirm.confirmation_trials`), run in the stages of
    ``scale.looks`` (:func:`analysis.staged.run_stages`: after each look only the parts still
    open go on), every trial tagged ``phase`` and the design (:func:`analysis.sequential.design_tag`).
    Returns the trials run."""
    seeds, stages = seeds_of(str(cfg.scale.confirm_seeds)), looks(cfg)
    design = sequential.design_tag(stages)

    def build(rows: pd.DataFrame, chunk: list[int]) -> dict[str, list]:
        todo = confirmation_trials(configs, runs, ablations, cli, chunk, rows, changes)
        return {name: rounds.tag(trials, phase, design) for name, trials in todo.items()}
    return sum(staged.run_stages(seeds, stages, frozen, build,
                                 lambda todo: _round(cfg, todo, what, cli, store, phase),
                                 lambda rows: _open_parts(store, ablations, configs, rows, column)))


def _run_column_block(cfg: DictConfig, ablations: dict[str, list], configs: dict[str, DictConfig], cli: list[str],
                      store, column: str, changes, what: str) -> int:
    """A column's block (issue 64): its parts' arms rerun on the confirmation seeds at the lrs the
    column chose on its exploratory-seed runs (:func:`analysis.confirm.freeze` of those runs),
    staged as the main block (:func:`run_block`). Nothing where the block is off
    (:func:`confirm_enabled`)."""
    if not confirm_enabled(cfg):
        return 0
    runs = _column_runs(store, ablations, configs, column)
    frozen = freeze(configs, runs)
    if frozen.empty:
        return 0
    return run_block(cfg, ablations, configs, cli, store, frozen, runs, column, f"{what}, its block", column, changes)


def _run_column(cfg: DictConfig, ablations: dict[str, list], configs: dict[str, DictConfig], cli: list[str], store,
                phase: str, first: dict[str, list], edges_of, changes, what: str) -> int:
    """One column's rounds (:mod:`analysis.scale`, :mod:`analysis.length`): its first round
    (``first``), then up to ``report.extend_lr`` rounds one lr step past an edge its parts choose
    on its runs (``edges_of(runs)``, each rerun with ``changes``), every trial tagged ``phase``.
    Returns the number of trials."""
    added = {name: {t.trial_id for t in trials} for name, trials in first.items()}
    n = _round(cfg, first, what, cli, store, phase) + _edge_rounds(
        cfg, ablations, cli, store, added, lambda: _column_runs(store, ablations, configs, phase),
        edges_of, f"{what}, past an lr grid edge", changes, phase)
    fixed = changes if callable(changes) else (lambda row: dict(changes))
    block = (lambda row: fixed({"n_train": row["n_train"]})) if phase == phases.SCALE else fixed
    return n + _run_column_block(cfg, ablations, configs, cli, store, phase, block, what)


def run_scale(cfg: DictConfig, ablations: dict[str, list], configs: dict[str, DictConfig],
              cli: list[str], store) -> int:
    """The scale column's reruns (:mod:`analysis.scale`): the registered parts' grid trials at
    8× their n_train (``report.scale_n_train`` / ``scale.n_train_max``) and
    ``report.scale_steps``, then the lr-edge rounds at scale (:func:`_run_column`). Returns the
    number of trials."""
    if not scale_column.enabled(cfg.report.scale_n_train, int(cfg.scale.n_train_max)) or cfg.scale.name not in EVIDENCE_SCALES:
        return 0
    times = scale_column.factor(cfg.report.scale_n_train, int(cfg.scale.n_train_max))
    sizes = scale_column.rerun_sizes(times, cfg.report.scale_steps, cfg.report.scale_eval_every)
    parts = str(cfg.report.scale_parts)
    first = scale_column.scale_trials(configs, _exploratory(store, ablations, configs), ablations, cli, sizes, parts)
    return _run_column(cfg, ablations, configs, cli, store, phases.SCALE, first,
                       lambda runs: scale_column.scale_edges(configs, runs, parts), sizes,
                       f"scale column, {times}× n_train, {cfg.report.scale_steps} steps")


def run_length(cfg: DictConfig, ablations: dict[str, list], configs: dict[str, DictConfig],
               cli: list[str], store) -> int:
    """The length column's reruns (:mod:`analysis.length`): the registered parts' grid trials at
    ``task.n = report.length_n`` where their task can change n, then the lr-edge rounds there
    (:func:`_run_column`). Returns the number of trials."""
    n, parts = int(cfg.report.length_n), str(cfg.report.scale_parts)
    if n <= 0 or cfg.scale.name not in EVIDENCE_SCALES:
        return 0
    first = length_column.length_trials(configs, _exploratory(store, ablations, configs), ablations, cli, n, parts)
    return _run_column(cfg, ablations, configs, cli, store, phases.LENGTH, first,
                       lambda runs: length_column.length_edges(configs, runs, parts), length_column.changes(n),
                       f"length column, n = {n}")


def _edge_rounds(cfg: DictConfig, ablations: dict[str, list], cli: list[str], store, added: dict[str, set],
                 read, edges_of, what: str, changes: dict[str, str] | None = None, phase: str = phases.LR_EXTENSION) -> int:
    """The report's lr-edge rounds (:func:`analysis.rounds.edge_rounds`, up to
    ``report.extend_lr``): one trial per seed past each edge of the block ``read()`` returns
    (:func:`analysis.rounds.extension_trials`, with ``changes``), each round one queue tagged
    ``phase``. Returns the trials run."""
    def build(name: str, edges: list) -> list:
        return rounds.extension_trials(edges, {t.trial_id: t for t in ablations[name]}, [f"+ablation={name}", *cli],
                                       changes, phase)
    return rounds.edge_rounds(int(cfg.report.extend_lr), added, read, edges_of, build,
                              lambda todo: _round(cfg, todo, what, cli, store, phase))


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
    rounds (paper.md §13, :func:`_edge_rounds`), on the exploratory runs only. Returns the number
    of extension trials run."""
    def edges_of(runs: dict[str, pd.DataFrame]) -> dict[str, list]:
        out = {}
        for name, conf in configs.items():
            df = runs.get(name, pd.DataFrame())
            parts = [p for p in conf.ablation.parts if protocol.spec_dict(p)["role"] == "deciding"]
            out[name] = [e for p in parts for e in protocol.decide_part(df, p).edges] if not df.empty else []
        return out
    added = {name: {t.trial_id for t in trials} for name, trials in ablations.items()}
    return _edge_rounds(cfg, ablations, cli, store, added, lambda: _exploratory(store, ablations, configs),
                        edges_of, "past an lr grid edge")


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


def _round(cfg: DictConfig, todo: dict[str, list], what: str, cli: list[str], store, phase: str) -> int:
    """Run one rerun round as one queue (small groups fill packs), each trial tagged ``phase``
    (:func:`analysis.rounds.tag`); returns its trial count."""
    todo = {name: rounds.tag(trials, phase) for name, trials in todo.items()}
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
    todo: dict[str, tuple[str, dict[str, list]]] = {}  # what → (phase, trials)
    frozen = freeze_choices(configs, runs, frozen_path)
    if budget:
        todo[f"×{cfg.report.budget_factor} steps, budget reruns"] = (phases.BUDGET, budget_trials(
            configs, runs, ablations, cli, cfg.report.budget_factor, frozen))
    if confirm_enabled(cfg):
        todo["readout reruns"] = (phases.READOUT, readout_trials(configs, runs, ablations, cli, frozen))
    done = {what: _round(cfg, trials, what, cli, store, phase) for what, (phase, trials) in todo.items()}
    if confirm_enabled(cfg):  # in the sequential design's stages (scale.looks)
        done["confirmation block"] = run_block(cfg, ablations, configs, cli, store, frozen, runs, phases.CONFIRMATION,
                                               "confirmation block")
    done["scale column"] = run_scale(cfg, ablations, configs, cli, store)  # flags: last
    done["length column"] = run_length(cfg, ablations, configs, cli, store)
    return done


def check_confirm_seeds(cfg: DictConfig) -> None:
    """Refuse (:class:`ReportInputError`) before any trial starts when the confirmation block would run
    on seeds the exploratory grid also runs (``scale.seeds`` ∩ ``scale.confirm_seeds``): the
    phases are told apart by seed (:mod:`analysis.phases`), so the block must be fresh seeds;
    and, at the evidence scales, on a spent block's seeds (:func:`analysis.confirm.check_unspent`)."""
    if not confirm_enabled(cfg):
        return
    looks(cfg)  # the stages must end at the block's size
    seeds = seeds_of(str(cfg.scale.confirm_seeds))
    shared = sorted(set(seeds_of(str(cfg.scale.seeds))) & set(seeds))
    if shared:
        raise ReportInputError(
            f"scale.confirm_seeds={cfg.scale.confirm_seeds} shares seeds {shared} with scale.seeds="
            f"{cfg.scale.seeds}; allowed: seeds the exploratory grid does not run (4000–4009 by default)")
    if cfg.scale.name in EVIDENCE_SCALES:  # a verdict must replicate on seeds nobody has used
        try:
            check_unspent(seeds)
        except ValueError as err:
            raise ReportInputError(f"scale.confirm_seeds={cfg.scale.confirm_seeds}: {err}") from err


def check_columns(cfg: DictConfig) -> None:
    """Refuse (:class:`ReportInputError`) before any trial starts a ``report.scale_parts`` that is
    not one of :data:`analysis.scale.PARTS` or a negative ``report.length_n`` (0: no length column)."""
    if str(cfg.report.scale_parts) not in scale_column.PARTS:
        raise ReportInputError(f"report.scale_parts={cfg.report.scale_parts}; allowed: {', '.join(scale_column.PARTS)}")
    if int(cfg.report.length_n) < 0:
        raise ReportInputError(f"report.length_n={cfg.report.length_n}; allowed: a sequence length ≥ 1, or 0 (no length column)")


def confirm_enabled(cfg: DictConfig) -> bool:
    """``report.confirm``: true or false as given; unset (null), at the evidence scales only."""
    value = cfg.report.get("confirm")
    return cfg.scale.name in EVIDENCE_SCALES if value is None else bool(value)


# ----------------------------------------------------------------------------- writing
def open_seconds(sweeps: pd.DataFrame) -> float:
    """Σ (end − start) over sweep runs, in seconds (NaN if none). Times are timestamps or the
    strings a bundle holds, where a time on a whole second has no fraction
    (``23:38:13+00:00`` beside ``23:38:13.123000+00:00``), so they are read as ISO 8601."""
    if sweeps.empty:
        return float("nan")
    when = {k: pd.to_datetime(sweeps[k], utc=True, format="ISO8601") for k in ("start_time", "end_time")}
    return float((when["end_time"] - when["start_time"]).dt.total_seconds().sum())


def _rerun_counts(shown: pd.DataFrame, every: pd.DataFrame | None) -> tuple[int, int] | None:
    """``(runs, blown up)`` of the ablation's runs outside its exploratory block (confirmation,
    readout and scale reruns): a part decided on those runs (C9′ on the confirmation block) must
    not sit under a section that says "0 blown up". None where there are none."""
    if every is None or len(every) <= len(shown):
        return None
    blown = lambda d: int(stats.counts(d, by=()).iloc[0]["blowup"]) if not d.empty else 0  # noqa: E731
    return len(every) - len(shown), blown(every) - blown(shown)


def _ablation_section(name: str, df: pd.DataFrame, sweeps: pd.DataFrame, folder: Path,
                      rel: str, plan: int | None = None, every: pd.DataFrame | None = None) -> AblationSection:
    """``df``: the exploratory runs the figures show; ``every``: all of the ablation's runs but the
    budget reruns (for the reruns' count)."""
    # every field of the ablation file's header but its parts, which the verdict tables show
    question = " ".join(f.text for f in ablation_header(name, ROOT / "conf") if f.key != "Parts")
    mine = sweeps[sweeps["ablation"] == name] if not sweeps.empty else sweeps
    n = stats.counts(df, by=()).iloc[0].to_dict() if not df.empty else {}
    ext = int((df.get("extends", pd.Series(dtype=str)).fillna("").astype(str) != "").sum()) if not df.empty else 0
    return AblationSection(name, question, {k: int(v) for k, v in n.items()}, plan, ext, open_seconds(mine), len(mine),
                           _rerun_counts(df, every), rel, tuple(f.name for f in sorted(folder.glob("*.png"))),
                           tuple((t.stem, t.read_text()) for t in sorted(folder.glob("*.md"))))


def _completeness(runs: dict[str, pd.DataFrame], plan: dict[str, int]) -> tuple[tuple[str, int, int], ...]:
    """``(ablation, grid trials finished, trials it composes to)`` of each ablation with fewer
    grid trials finished than it composes to (:func:`analysis.render_prose.completeness` warns)."""
    short = []
    for name, n in plan.items():
        df = runs.get(name, pd.DataFrame())
        grid = df[df.get("extends", pd.Series("", index=df.index)).fillna("").astype(str) == ""] if len(df) else df
        done = int((grid["status"] == "FINISHED").sum()) if len(grid) else 0
        if done < n:
            short.append((name, done, int(n)))
    return tuple(short)


def _measured(bundle: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float]]:
    """The exact checks' float64 measurements: as the bundle stored them at export time
    (:func:`analysis.bundle.read_measurements`), else measured now (a bundle from before)."""
    stored = read_measurements(bundle)
    if stored is not None:
        return stored
    from harness.counterexample import measure_counterexample, measure_gram_identity
    from harness.variant_table import measure_presets

    return pd.DataFrame(measure_presets()), {**measure_counterexample(), **measure_gram_identity()}


def _reregistered(configs: dict[str, DictConfig]) -> dict[tuple[str, str], str]:
    """``{(claim, part name): original design and outcome}`` of the parts re-registered after a
    verdict run (``PartConfig.reregistered``; read with getattr until every config has it)."""
    out = {}
    for conf in configs.values():
        for part in conf.ablation.parts:
            note = str(getattr(part, "reregistered", "") or "")
            if note:
                out[(str(part.claim), str(part.name))] = note
    return out


def _claims(parts: list[protocol.PartResult], evidence: Evidence, rereg: dict[tuple[str, str], str],
            stab: pd.DataFrame) -> tuple[ClaimResult, ...]:
    """Per claim of paper.md §13: its exact checks' status, or its verdict (Holm, combine, then
    unstable: :func:`analysis.verdicts.combine_claim`) over its parts."""
    out = []
    for claim in CLAIMS:
        status, checks = check(claim, evidence)
        mine = [r for r in parts if r.spec["claim"] == claim.id]
        deciding = [r for r in mine if r.spec["role"] == "deciding"]
        if claim.kind in ("E", "E/S"):
            out.append(ClaimResult(claim, tuple(mine), status, tuple(checks)))
            continue
        out.append(ClaimResult(claim, tuple(mine), status, tuple(checks), verdicts_of.combine_claim(mine, stab),
                               tuple(r for r in deciding if r.conditions),
                               tuple(r for r in deciding if (claim.id, r.spec["name"]) in rereg)))
    return tuple(out)


def _stability(frame: pd.DataFrame, folder: Path) -> None:
    """Write ``stability.csv`` beside the report (paper.md §13, :func:`analysis.verdicts.stability_frame`)."""
    stability.write_csv(frame, folder / "stability.csv")


def _results_time(bundle: pd.DataFrame) -> str | None:
    """The end time of the bundle's last run, ISO 8601 to the second (UTC); None if none ended."""
    ends = pd.to_datetime(bundle["end_time"], utc=True, errors="coerce") if "end_time" in bundle else pd.Series([])
    ends = ends.dropna()
    return ends.max().isoformat(timespec="seconds") if len(ends) else None


def _header(cfg: DictConfig, bundle: pd.DataFrame, source: Source, counts: tuple[int, int, int],
            folder: Path, processors: dict[str, tuple[tuple[str, int], ...]]) -> Header:
    """The :class:`Header` of a report from ``bundle``: ``counts`` are (trial runs,
    budget-ablation reruns, ablations); ``folder`` holds the bundle's ``frozen.csv`` and the
    sequential design's replay figures (``sequential.csv``, :func:`analysis.sequential.read_replay`)."""
    plan = planned(bundle)
    head, margins = commit_line()
    total, n_longer, n_ablations = counts
    return Header(source, _results_time(bundle), head, first_registration(), margins, frozen_state(folder), processors,
                  OmegaConf.to_container(cfg.scale, resolve=True), int(cfg.report.extend_lr),
                  cfg.scale.name not in EVIDENCE_SCALES, total, n_ablations, sum(plan.values()) if plan else None,
                  n_longer, int(cfg.report.budget_factor), sequential.read_replay(folder / sequential.REPLAY_CSV))


def build_report(cfg: DictConfig, configs: dict[str, DictConfig], bundle: pd.DataFrame) -> Report:
    """The report as values from a bundle (:mod:`analysis.bundle`) and the suite's ablation
    configs: pure, no store opened, no Ray, no file written (:class:`Report`). The claims are
    combined last: :func:`analysis.verdicts.combine_claim` fills each deciding part's Holm p."""
    from harness.fip import enumerate_terms

    tiny = cfg.scale.name not in EVIDENCE_SCALES
    runs, sweeps = split(bundle)
    runs = {name: stats.add_error(runs[name]) if name in runs else pd.DataFrame(
        columns=["status", "variant", "task", "arm"]) for name in configs}
    longer = {}  # the budget ablation's reruns, kept apart from everything else
    for name, conf in configs.items():
        runs[name], longer[name] = split_budget(runs[name], int(conf.train.max_steps))
    shown = verdicts_of.exploratory_runs(configs, runs)  # figures, tables, health: no rerun among them
    presets, identities = _measured(bundle)
    both: dict = {}  # each part's exploratory and confirmation decisions, made once
    parts = verdicts_of.decide_parts(configs, runs, both)
    stab = verdicts_of.stability_frame(configs, runs, longer, both)
    verdicts_of.annotate(parts, stab)  # each part's conditions (readouts, ×4) travel with its verdict
    units = {str(t): str(n) for df in shown.values() if "error_name" in df
             for t, n in df.groupby("task", dropna=False)["error_name"].first().items()}
    by_part = {(r["claim"], r["part"]): r for r in stab.to_dict("records")} if not stab.empty else {}
    health = task_health(shown, {name: list(conf.ablation.parts) for name, conf in configs.items()})
    ran = {c: int(stab[c].map(lambda v: isinstance(v, str)).sum()) if c in stab else 0  # None: not run
           for c in stability.COLUMNS}
    scale = answer.Scale(cfg.scale.n_train_max, cfg.scale.steps, int(cfg.report.budget_factor), ran["scale"],
                         cfg.report.scale_n_train, cfg.report.scale_steps, ran["length"], int(cfg.report.length_n))
    trust = answer.trust(parts, stab, _reregistered(configs), trail.processors(runs, longer), scale)
    rows = answer.rows(parts, by_part, units)
    rates = None if tiny else calibration.comparisons(configs, runs, parts)
    claims = _claims(parts, Evidence(shown, presets, enumerate_terms(6), identities), _reregistered(configs), stab)
    return Report(runs, longer, shown, sweeps, presets, identities, parts, stab, units, rows, rates, health, trust,
                  claims, _completeness(runs, planned(bundle)), str(cfg.scale.name), _reregistered(configs), tiny)


def write_report(cfg: DictConfig, configs: dict[str, DictConfig], bundle: pd.DataFrame, out: Path,
                 source: Source, bundle_folder: Path | None = None) -> dict[str, str]:
    """Write the report to ``out`` from a bundle (:mod:`analysis.bundle`), its figures and tables
    in the folder of the same name without ``.md``; returns ``{claim id: its shown verdict}``.
    ``bundle_folder``: where the bundle and its ``frozen.csv`` lie (default: the report's folder),
    so a report written elsewhere still names the confirmation block's frozen choices. Every
    sentence and table is the render modules' (:func:`analysis.render_tables.document`)."""
    folder = out.with_suffix("")
    report = build_report(cfg, configs, bundle)
    runs, longer, shown = report.runs, report.longer, report.shown
    compared = compare(configs, shown, longer) if any(not d.empty for d in longer.values()) else []
    sections = _sections(configs, shown, report.sweeps, bundle, folder, cfg.scale.name, runs)
    n_longer = sum(len(d) for d in longer.values())
    header = _header(cfg, bundle, source, (sum(len(df) for df in runs.values()), n_longer if compared else 0,
                                           len(configs)), bundle_folder or folder, trail.processors(runs, longer))
    _stability(report.stability, folder)
    lines = render_tables.document(report, header, compared, sections, protocol.__doc__ or "")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_for_reader("\n".join(lines) + "\n", cfg.scale, out))
    return {c.claim.id: render_tables.shown(c, report.path_check) for c in report.claims}


def _for_reader(text: str, scale: DictConfig, out: Path) -> str:
    """:func:`analysis.render_prose.for_reader` with theory.md linked relative to the report where the
    report is inside the repository (elsewhere it is named, not linked: no machine path)."""
    theory = ROOT / "docs" / "theory.md"
    inside = out.resolve().is_relative_to(ROOT)
    link = os.path.relpath(theory, out.resolve().parent) if inside else None
    return render_prose.for_reader(text, OmegaConf.to_container(scale, resolve=True), theory, link)


def _sections(configs: dict[str, DictConfig], runs: dict[str, pd.DataFrame], sweeps: pd.DataFrame,
              bundle: pd.DataFrame, folder: Path, scale: str,
              every: dict[str, pd.DataFrame] | None = None) -> list[AblationSection]:
    """Every ablation's figures and tables (PNG only: the report shows PNGs, and a PDF for a
    paper is ``python -m analysis``'s job; redrawn only when their inputs changed,
    :mod:`analysis.reuse`) and its section of the report as values."""
    sections = []
    for name, conf in configs.items():
        if not runs[name].empty:
            write_once(runs[name], folder / name, ablation=name, scale=scale,
                      axes=grid_axes(conf.ablation.grid.keys(), runs[name]), figures=list(conf.ablation.figures),
                      formats=("png",))
        sections.append(_ablation_section(name, runs[name], sweeps, folder / name, f"{folder.name}/{name}",
                                          planned(bundle).get(name), (every or {}).get(name)))
    return sections


def _out_path(cfg: DictConfig) -> Path:
    """The report's Markdown file: ``report.out`` (a ``.md`` file, or a folder that gets
    ``report.md``; relative to the working directory), else the scale's default. Figures, tables
    and the bundle go to the folder of the same name without ``.md``.

    Raises:
        ReportInputError: ``report.out`` names neither a folder nor a ``.md`` file, or a file stands
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
            raise ReportInputError(f"report.out={cfg.report.out!r} {problem}")
        return out
    if cfg.scale.name in EVIDENCE_SCALES:
        return ROOT / "docs" / "report.md"
    return Path.cwd() / "outputs" / f"report-{cfg.scale.name}" / "report.md"


def _tag_blowups(uri: str, bundle: pd.DataFrame) -> None:
    """Tag the store's blown-up runs ``blowup=true`` (:func:`analysis.verdicts.tag_blowups`)."""
    import mlflow

    runs, _ = split(bundle)
    n = verdicts_of.tag_blowups(mlflow.MlflowClient(tracking_uri=uri), {k: stats.add_error(v) for k, v in runs.items()})
    if n:
        print(f"tagged {n} blown-up runs (blowup=true)", flush=True)


def generate(cfg: DictConfig, cli: list[str]) -> None:
    """Run, export and write as :mod:`analysis.report` describes; prints each claim's verdict."""
    from analysis.report_paths import check_out, read_runs

    out = _out_path(cfg)
    check_out(out, cfg.report.out)  # before the suite: a path it cannot write ends it in one line
    source_path = Path(cfg.report.runs or ".")
    source_path = source_path if source_path.is_absolute() else Path.cwd() / source_path
    given = read_runs(source_path, cfg.report.runs) if cfg.report.runs else None  # before composing
    bundle_path = out.with_suffix("") / "runs.csv.gz"
    suite_cfg, configs = _compose_suite(cfg.report.suite, cli)
    if given is not None:
        bundle = given
        configs = with_recorded_block(configs, bundle)  # a spent block's bundle reads its own seeds
        source = Source("bundle", source_path.name)
    else:
        from harness.expansion import SweepError, expand_suite
        from harness.store import resolve_store

        store = resolve_store(OmegaConf.to_object(cfg.tracking), Path.cwd())
        try:
            ablations = dict(expand_suite(suite_cfg, [f"+ablation={cfg.report.suite}", *cli], configs))
        except SweepError as err:  # bad input: exit 2 before any trial starts
            raise ReportInputError(str(err)) from err
        check_confirm_seeds(cfg)
        check_columns(cfg)
        if cfg.report.run:  # the grid, tagged as the exploratory block (analysis.rounds)
            run_suite(cfg, {name: rounds.tag(trials, phases.EXPLORATORY) for name, trials in ablations.items()},
                      cli, store)
        if cfg.report.run and cfg.report.extend_lr > 0 and cfg.scale.name in EVIDENCE_SCALES:
            run_extensions(cfg, ablations, configs, cli, store)
        if cfg.report.run:
            run_reruns(cfg, ablations, configs, cli, store, bundle_path.parent / FROZEN)
        write_bundle(collect(store.uri, ablations), bundle_path)
        bundle = read_bundle(bundle_path)
        _tag_blowups(store.uri, bundle)
        source = store_source(store.uri, f"{bundle_path.parent.name}/{bundle_path.name}")
    verdicts = write_report(cfg, configs, bundle, out, source,
                            source_path.parent if given is not None else bundle_path.parent)
    for claim, verdict in verdicts.items():
        print(f"{claim}: {verdict}")
    print(f"report: {out}")

