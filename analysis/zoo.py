"""``python -m analysis.zoo [scale=default|quick|tiny] [cluster=...] [zoo.out=DIR] [zoo.runs=BUNDLE]``

The mixer zoo (issue 50): every mixer registered in ``conf/zoo.yaml`` (``zoo.arms``) scored
against attention's reference arms of ``conf/ablation/scorecard.yaml`` on its separating tasks,
as :mod:`analysis.scorecard` scores one mixer, all in ONE sweep in one store:

1. **Pre-flight**, before any trial and before the store is opened: every arm is built on every
   task of the grid, its output shape checked and its symmetries measured on re-drawn weights
   (:func:`harness.external_check.check`, :func:`harness.external_check.measure_redrawn`) and
   its causality (:func:`harness.external_check.causality_refusal`: a change at position t
   changes no output before t, float64, re-drawn weights) must equal its ``causal``; the
   declared set must *equal* the measured one: a declared symmetry that does not hold (or cannot
   be measured: ``orthogonal_knowledge`` without ``rotate_``) and one that holds undeclared
   ("found, not declared") both refuse the run (exit 2, one line naming the arm).
2. The expected CPU time (:func:`analysis.scorecard.print_expected`, the scorecard's cost table).
3. The reference arms and every zoo arm as one sweep (:func:`analysis.scorecard._sweep`; trials
   already FINISHED in the store's experiment ``scorecard`` are skipped by trial id, so the
   references a scorecard ran are reused, and a second run or a resume runs only what is
   missing), then the scorecard's lr-edge extension (:func:`analysis.scorecard.extend_lr`: past
   each chosen edge until the choice is interior, up to lr 3.0; a row still there reads "needs
   lr > 3.0"), then the ×4 budget reruns of every row still budget-limited, with its reference
   arms (:func:`analysis.scorecard.budget_round`). The references (``zoo.references``): each
   arm's leaderboard rows are against those serving its causality as the pre-flight measured it
   (:func:`references_of`, :func:`concrete_parts`); every registered reference is a row.
4. The results bundle, ``<zoo.out>/zoo/``: ``runs.csv.gz`` (:mod:`analysis.bundle`: every run of
   exactly these trials, the ``arm`` column holding the zoo's names), ``symmetry.csv`` (each
   arm's parameters and init symmetry errors, the pre-flight's measurement) and ``plan.json``
   (the registration the pages read: arms, tasks, δ, parts, scale, command, harness commit).
5. ``<zoo.out>/zoo.md`` (the leaderboard) and ``<zoo.out>/zoo/<arm>.md`` (one page per mixer),
   rendered from the bundle as read back from disk (:mod:`analysis.zoo_page`), so that
   ``zoo.runs=<zoo.out>/zoo/runs.csv.gz`` regenerates identical Markdown offline: no store is
   opened, nothing is run, nothing is written outside ``zoo.out``.

``zoo.examples`` (default: the repository's ``examples/``) is put first on ``sys.path`` and on
``PYTHONPATH`` (a local Ray instance's workers inherit it) so that ``zoo.<module>:<Class>``
targets import, as ``model=external`` imports them (:func:`tasks.user_code.load_class`).

Exit status: 0 written, 1 some trials failed (the pages count the runs), 2 bad input (nothing
run: an arm that does not build or whose symmetries are not as declared, a malformed arm, an
unknown key, a bundle that cannot be read), 130 interrupted.
"""

from __future__ import annotations

if __name__ == "__main__":  # the shell's refusals before this module's imports (pandas, the scorecard)
    from harness.shell import main

    main("analysis.zoo")

import json
import os
import sys
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from analysis import scorecard
from harness.cli import Runtime

ROOT = Path(__file__).resolve().parent.parent
ABLATION = scorecard.ABLATION  # one experiment with the scorecards: their references are the zoo's
FOLDER, BUNDLE, SYMMETRY, PLAN = "zoo", "runs.csv.gz", "symmetry.csv", "plan.json"
ARM_KEYS = ("name", "target", "kwargs", "paper")
COST_TABLE = Path(__file__).with_name("zoo_cost.csv")  # written by python -m analysis.zoo_cost --measure


class ZooInputError(ValueError):
    """Bad input found before any trial: exit 2 with its one line."""


def arms_of(cfg: DictConfig) -> list[dict]:
    """``zoo.arms`` as plain dicts ``{name, target, kwargs, paper}``.

    Raises:
        ZooInputError: no arms, an arm without a name or a ``package.module:Class`` target, an
            unknown key, or two arms of one name.
    """
    arms = OmegaConf.to_container(cfg.zoo.arms, resolve=True) or []
    if not arms:
        raise ZooInputError("zoo.arms is empty: register the mixers in conf/zoo.yaml")
    seen = set()
    for i, arm in enumerate(arms):
        if not isinstance(arm, dict) or set(arm) - set(ARM_KEYS):
            extra = sorted(set(arm) - set(ARM_KEYS)) if isinstance(arm, dict) else arm
            raise ZooInputError(f"zoo.arms[{i}]: unknown keys {extra} (allowed: {', '.join(ARM_KEYS)})")
        if not arm.get("name") or ":" not in str(arm.get("target", "")):
            raise ZooInputError(f"zoo.arms[{i}]: needs name and target: package.module:Class, got {arm}")
        if arm["name"] in seen:
            raise ZooInputError(f"zoo.arms[{i}]: a second arm named {arm['name']!r}")
        seen.add(arm["name"])
        arm.setdefault("kwargs", {})
        arm["kwargs"] = arm["kwargs"] or {}
        arm.setdefault("paper", "")
        # the name is not part of a trial's id (harness.records.drop_neutral): two names for one
        # class and kwargs would be one set of trials shown twice
        same = next((a["name"] for a in arms[:i] if (a["target"], a["kwargs"]) == (arm["target"], arm["kwargs"])), None)
        if same is not None:
            raise ZooInputError(f"zoo.arms[{i}]: {arm['name']!r} is {same!r} again ({arm['target']} with "
                                f"kwargs {arm['kwargs']}); a name is not part of a trial: give each arm its own kwargs")
    return arms


SERVES = ("causal", "bidirectional")
REFERENCE_KEYS = ("arm", "label", "serves")


def references_of(cfg: DictConfig) -> list[dict]:
    """``zoo.references`` as plain dicts ``{arm, label, serves}``: the leaderboard's reference
    arms (model presets), each serving the arms of one measured causality (:data:`SERVES`).

    Raises:
        ZooInputError: none registered, an unknown key, a ``serves`` not in :data:`SERVES`, a
            causality no reference serves, or one arm twice.
    """
    refs = OmegaConf.to_container(cfg.zoo.references, resolve=True) or []
    for i, ref in enumerate(refs):
        if not isinstance(ref, dict) or set(ref) != set(REFERENCE_KEYS) or ref["serves"] not in SERVES:
            raise ZooInputError(f"zoo.references[{i}]: needs exactly {', '.join(REFERENCE_KEYS)} with serves "
                                f"one of {', '.join(SERVES)}, got {ref}")
    arms = [r["arm"] for r in refs]
    if len(set(arms)) != len(arms):
        raise ZooInputError(f"zoo.references: an arm registered twice: {arms}")
    missing = [kind for kind in SERVES if kind not in {r["serves"] for r in refs}]
    if missing:
        raise ZooInputError(f"zoo.references: no reference serves the {' and '.join(missing)} arms "
                            "(register them in conf/zoo.yaml)")
    return refs


def check_references(refs: list[dict], rows: list[dict]) -> None:
    """Refuse a reference whose measured causality (its pre-flight row) is not the one it serves.

    Raises:
        ZooInputError: naming the reference and its measured leak.
    """
    from analysis.zoo_page import measured_causal
    from harness.symmetry import CAUSAL_KEY

    by_arm = {r["arm"]: r for r in rows}
    for ref in refs:
        row = by_arm.get(ref["arm"])
        if row is None:  # no trial of it in this invocation (one task of zoo.causal_only alone)
            continue
        if measured_causal(row) != (ref["serves"] == "causal"):
            raise ZooInputError(f"zoo.references: {ref['arm']!r} serves the {ref['serves']} arms but is measured "
                                f"{'causal' if measured_causal(row) else 'bidirectional'} (largest change before a "
                                f"changed position {row.get(CAUSAL_KEY, float('nan')):.1e})")


def _value(v) -> str:
    """A kwarg as Hydra's override grammar reads it back as the same value."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(v) if isinstance(v, (list, dict)) else f"'{v}'"


def model_overrides(arm: dict) -> list[str]:
    """The ``model=external`` overrides of one arm (its variant is its name, with its kwargs in
    brackets where it has any: :func:`harness.models.external.variant_name`)."""
    return ["model=external", f"model.target={arm['target']}", f"model.variant={arm['name']}",
            *(f"model.kwargs.{k}={_value(v)}" for k, v in sorted(arm["kwargs"].items()))]


def use_examples(folder: str, cwd: Path) -> Path:
    """Put ``folder`` (default: the repository's ``examples/``) first on ``sys.path`` and on
    ``PYTHONPATH`` (the workers of a local Ray instance inherit the driver's environment, not its
    ``sys.path``). Returns the folder."""
    path = Path(folder) if folder else ROOT / "examples"
    path = (path if path.is_absolute() else cwd / path).resolve()
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(path) not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(path), *parts])
    return path


# --------------------------------------------------------------------------- pre-flight
def _measure(model, d: int, n_max: int) -> tuple[dict[str, float], str]:
    from harness.external_check import measure_redrawn

    errors, dtype = measure_redrawn(model, d, n_max)
    return {k: errors.get(k, float("nan")) for k in scorecard.SYMMETRY_KEYS.values()}, str(dtype)[6:]


def _refuse(name: str, target: str, task_name: str, model, claims: frozenset, d: int, n_max: int) -> tuple:
    """Measure ``model``'s symmetries and causality on re-drawn weights; refuse a declaration
    (``claims``, its ``causal``) other than the measured one. Returns ``(errors, dtype, tol, leak)``.

    Raises:
        ZooInputError: naming the arm, the task and what differs.
    """
    import torch

    from harness.external_check import TOLERANCE, causality_refusal

    errors, dtype = _measure(model, d, n_max)
    tol = TOLERANCE[getattr(torch, dtype)]
    holds = {s for s, k in scorecard.SYMMETRY_KEYS.items() if errors[k] <= tol}  # NaN: not measured
    if holds != set(claims):
        said = []
        if set(claims) - holds:
            said.append(f"declared, not measured to hold: {sorted(set(claims) - holds)}")
        if holds - set(claims):
            said.append(f"found, not declared: {sorted(holds - set(claims))}")
        shown = ", ".join(f"{s} {errors[k]:.1e}" for s, k in scorecard.SYMMETRY_KEYS.items())
        raise ZooInputError(f"zoo arm {name!r} ({target}) on {task_name}: {'; '.join(said)} "
                            f"(relative errors on re-drawn {dtype} weights: {shown}; tolerance {tol:g})")
    try:
        why, leak, _ = causality_refusal(model, d, n_max)
    except ValueError as err:  # a causal that is not a bool
        raise ZooInputError(f"zoo arm {name!r} ({target}): {err}") from err
    if why:
        raise ZooInputError(f"zoo arm {name!r} ({target}) on {task_name}: {why}")
    return errors, dtype, tol, leak


def preflight(name: str, trials: list, kind: str, target: str = "") -> dict:
    """Build the arm of ``trials`` once per task, check it and measure its symmetries on
    re-drawn weights; returns the ``symmetry.csv`` row of its first task.

    A mixer in ``model.blocks`` blocks is checked twice: the bare mixer against its own
    declaration (so that a false claim the stack does not keep, e.g. plain orthogonal, is still
    refused) and the stack against the stack's (:mod:`harness.models.stack`); the row is the stack's.

    Raises:
        ZooInputError: (a mixer) it does not build, its output is not ``(B, n, d)``, or its
            declared symmetries or its declared causality (its ``causal`` attribute; a change at
            position t changes no output before t, measured in float64 on re-drawn weights)
            differ from the measured ones on some task, bare or stacked; the line names the arm.
    """
    import dataclasses

    import torch

    from harness.external_check import TOLERANCE, causality_refusal, check, declared_causal
    from harness.symmetry import CAUSAL_KEY
    from harness.models import build_model, count_parameters
    from harness.models.external import declared
    from tasks import build_task

    first, seen = None, set()
    for trial in trials:
        if trial.task in seen:
            continue
        seen.add(trial.task)
        cfg = trial.config
        stacked = bool(getattr(cfg.model, "blocks", 0))
        bare_cfg = dataclasses.replace(cfg.model, blocks=0) if stacked else cfg.model
        try:
            task = build_task(cfg.task)
            g = torch.Generator().manual_seed(0)
            bare = build_model(bare_cfg, task.d, task.n_max, g) if stacked and kind == "mixer" else None
            model = build_model(cfg.model, task.d, task.n_max, torch.Generator().manual_seed(0))
            for one in filter(None, (bare, model)):
                check(bare_cfg, one, task.d, task.n_max)  # shape; a declared symmetry refuted
            claims = declared(model, target) if kind == "mixer" else frozenset()
            bare_claims = declared(bare, target) if bare is not None else frozenset()
        except ValueError as err:
            raise ZooInputError(f"zoo arm {name!r}: {err}") from err
        if kind == "mixer":
            if bare is not None:
                _refuse(name, target, f"{trial.task} (one mixer, outside its blocks)", bare, bare_claims,
                        task.d, task.n_max)
            errors, dtype, tol, leak = _refuse(name, target, trial.task + (" (its blocks)" if stacked else ""),
                                               model, claims, task.d, task.n_max)
        else:
            errors, dtype = _measure(model, task.d, task.n_max)
            tol = TOLERANCE[getattr(torch, dtype)]
            _, leak, _ = causality_refusal(model, task.d, task.n_max)
        if first is None:
            first = {"arm": name, "kind": kind, "task": trial.task, "d": task.d,
                     "params": count_parameters(model), "dtype": dtype, "tolerance": tol,
                     "declared": ",".join(sorted(claims)), **errors,
                     "causal": declared_causal(model), CAUSAL_KEY: leak}
    return first


# --------------------------------------------------------------------------- run
def _dry_run(sc: DictConfig, refs: list, flat: list, arms: list[dict], cli: list[str], store, out: Path,
             seeds: list[int]) -> int:
    """``dry_run=true``: the trials (those already in the store marked ``done``), the expected
    time and what would be written; no pre-flight of the arms' symmetries, nothing run or
    written. Exit status 0, 2 bad input."""
    from harness.command import dry_run

    finished = dry_run([(ABLATION, refs + flat)], OmegaConf.to_object(sc.cluster), store, cli, sc.tracking.lease_s)
    if finished is None:
        return 2
    scorecard.print_expected(refs, flat, set(finished.get(ABLATION, {})), "", scorecard._cores(sc.cluster),
                             command="zoo", what=f"the {len(arms)} mixers", costs=_costs(sc))
    print(f"zoo: dry run: would measure each arm's symmetries, run the trials not done, extend the lr grid "
          f"past its edges, rerun budget-limited rows at ×{sc.report.budget_factor} steps, rerun rows left open on the seeds "
          f"on the confirmation block{_block_words(seeds)} and write {out / FOLDER / BUNDLE}, {out / 'zoo.md'} and {len(arms)} mixer pages; "
          "nothing was run or written")
    return 0


def _block_words(seeds: list[int]) -> str:
    return f" (seeds {seeds[0]}–{seeds[-1]})" if seeds else " (none registered)"


def _costs(sc: DictConfig) -> tuple[str, dict] | None:
    """The zoo's cost table (``python -m analysis.zoo_cost``) where it has rows at the depth of
    these trials, else None (the scorecard's table, measured on bare models)."""
    return costs_at(int(OmegaConf.select(sc, "model.blocks", default=0) or 0))


def costs_at(blocks: int) -> tuple[str, dict[tuple[str, str], float]] | None:
    """``(the table's name, {(arm, task): CPU-ms a step})`` of :data:`COST_TABLE`'s rows at ``blocks``;
    None where it has none (or does not exist)."""
    import pandas as pd

    if not COST_TABLE.exists():
        return None
    table = pd.read_csv(COST_TABLE)
    table = table[table["blocks"] == blocks]
    return (COST_TABLE.name, {(r.model, r.task): float(r.cpu_ms_per_step) for r in table.itertuples()}) if len(table) else None


def _parts(sc: DictConfig, cfg: DictConfig, refs: list[dict]) -> list[dict]:
    """The page's parts: the scorecard's (``a: MIXER``), then per registered task one area part
    against each reference of ``refs`` (:func:`references_of`; the leaderboard's verdicts), tagged
    ``serves`` with the causality of the arms it is for; all observations of claim ``zoo``."""
    from analysis import protocol, zoo_page

    parts = [protocol.spec_dict(p) for p in OmegaConf.to_object(sc.ablation.parts)]
    words = {p["task"]: scorecard._words(p["name"])[0] for p in parts if p["a"] == scorecard.MIXER}
    control = zoo_page.control_pair(parts)
    for task, spec in OmegaConf.to_container(cfg.zoo.tasks, resolve=True).items():
        label = words.get(task) or spec.get("label")
        if not label:
            raise ZooInputError(f"zoo.tasks.{task}: no scorecard part on {task} (tasks: {', '.join(sorted(words))}); "
                                "give it a label: {value: auc, delta: 0.1, label: '...'}")
        for ref in refs:
            name = f"{label} vs {ref['label']}, {spec.get('value', 'auc')} over n_train"
            parts.append(protocol.spec_dict({
                "claim": "zoo", "role": "observation", "name": name, "task": task, "a": scorecard.MIXER,
                "b": ref["arm"], "value": spec.get("value", "auc"), "delta": float(spec["delta"]),
                "control": control, "leaderboard": True, "serves": ref["serves"]}))
    return parts


def _commit() -> str:
    from analysis.reporting import commit_line

    return commit_line()[0]


def out_folder(cfg: DictConfig, cwd: Path) -> Path:
    """``zoo.out`` against the folder the command started in."""
    out = Path(cfg.zoo.out or "docs")
    return out if out.is_absolute() else cwd / out


def check_out(out: Path, given) -> None:
    """Refuse, before any trial, a ``zoo.out`` that cannot be the bundle's and pages' folder: a
    file stands where it or a folder above it goes (the zoo used to run its whole sweep, then
    fail with ``NotADirectoryError``).

    Raises:
        ZooInputError: naming the file.
    """
    files = [p for p in (out / FOLDER, out, *out.parents) if p.exists() and not p.is_dir()]
    if files:
        raise ZooInputError(f"zoo.out={given or 'docs'!r} cannot be written: {files[-1]} is a file where "
                            "a folder goes; name a folder (the leaderboard is zoo.md inside it)")


def run(cfg: DictConfig, runtime: Runtime) -> int:
    """Run (or, with ``zoo.runs``, regenerate) as the module docstring says; the exit status."""
    from analysis import zoo_page

    out = out_folder(cfg, runtime.cwd)
    try:
        check_out(out, cfg.zoo.out)
        if cfg.zoo.runs:
            given = Path(cfg.zoo.runs)
            given = given if given.is_absolute() else runtime.cwd / given
            # the file named is the one read (a folder: its runs.csv.gz), symmetry.csv and plan.json beside it
            folder, runs = (given, None) if given.is_dir() else (given.parent, given)
            paths = zoo_page.render(folder, out, runs)
        else:
            status, paths = _run(cfg, runtime, out)
            if status == 2 or cfg.dry_run:
                return status
    except (ZooInputError, scorecard.BadInput, zoo_page.BundleError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"zoo: {paths[0]} ({len(paths) - 1} mixer pages)")
    return 0 if cfg.zoo.runs else status


def _expand(cfg: DictConfig, runtime: Runtime, arms: list[dict], registered: list[dict]):
    """``(ablation config, reference trials, [(trials, overrides)] of the reference groups,
    [trials of each arm], [each arm's overrides], base overrides)``: the scorecard's grid, the
    registered references it lacks (``model=<preset>`` each, their own groups) and the arms, each
    trial once (a reference's trial is the reference's, an arm's id in it is dropped).

    Raises:
        ZooInputError: ``model=…`` on the command line, or an arm named as a reference arm.
    """
    models = [model_overrides(a) for a in arms]
    if any(o.lstrip("+~").split("=", 1)[0].split(".")[0] == "model" for o in [*runtime.overrides, *runtime.sweeps]):
        raise ZooInputError("the zoo's models are zoo.arms (conf/zoo.yaml), not model=… on the command line")
    rest = [o for o in runtime.overrides if not o.startswith("zoo.")] + regime_overrides(cfg, runtime)
    ref_models = [[f"model={r['arm']}"] for r in registered]
    sc, refs, expanded, base = scorecard.expand_arms(rest, list(runtime.sweeps), [*ref_models, *models])
    cli = [*base, *runtime.sweeps]
    groups, seen = [(refs, cli)], {t.trial_id for t in refs}
    for trials, model in zip(expanded[:len(ref_models)], ref_models):
        extra = [t for t in trials if t.trial_id not in seen]  # softmax: the grid's own trials
        seen.update(t.trial_id for t in extra)
        if extra:
            groups.append((extra, [*base, *model, *runtime.sweeps]))
    refs = [t for trials, _ in groups for t in trials]
    clash = sorted({a["name"] for a in arms} & {t.variant for t in refs})
    if clash:
        raise ZooInputError(f"zoo.arms: {clash} name a reference arm of conf/ablation/scorecard.yaml; rename the arm")
    mine = [[t for t in trials if t.trial_id not in seen] for trials in expanded[len(ref_models):]]
    return sc, refs, groups, mine, models, base


def causal_only(cfg: DictConfig, mine: list[list], rows: list[dict]) -> list[list]:
    """Each arm's trials (``mine``, in the order of the pre-flight's ``rows``) less those on a task
    of ``zoo.causal_only`` where the arm is measured bidirectional."""
    from analysis.zoo_page import measured_causal

    only = set(cfg.zoo.get("causal_only") or ())
    return [trials if measured_causal(row) else [t for t in trials if t.task not in only]
            for trials, row in zip(mine, rows)]


def references_on_causal_tasks(cfg: DictConfig, parts: list[dict], registered: list[dict], refs: list,
                               groups: list[tuple[list, list[str]]]) -> tuple[list, list[tuple[list, list[str]]]]:
    """The reference trials (``refs`` and the same in ``groups``) less those on a task of
    ``zoo.causal_only`` of an arm that is neither a registered reference serving causal arms nor
    one of the control pair (the parts' ``control``): only causal arms run there, so the
    bidirectional references and the scorecard's other reference arms would decide nothing."""
    from analysis import zoo_page

    only = set(cfg.zoo.get("causal_only") or ())
    keep = {r["arm"] for r in registered if r["serves"] == "causal"}
    keep |= set(zoo_page.control_pair(parts))

    def kept(trials: list) -> list:
        return [t for t in trials if t.task not in only or t.variant in keep]
    return kept(refs), [(kept(trials), cli) for trials, cli in groups]


def regime_overrides(cfg: DictConfig, runtime: Runtime) -> list[str]:
    """The zoo's regime as overrides of the scorecard's grid: ``model.blocks`` (``zoo.blocks``,
    every arm and reference alike; none at 0, so the first zoo's trial ids stand) and, unless the
    command line gives ``task=…``, the task axis: the verdict tasks of ``zoo.tasks`` and
    ``zoo.length_task``; unless it gives ``scale=…``, ``scale=<zoo.scale>``.

    Raises:
        ZooInputError: ``zoo.blocks`` below 0.
    """
    blocks = int(cfg.zoo.blocks)
    if blocks < 0:
        raise ZooInputError(f"zoo.blocks={blocks}; allowed: 0 (the bare mixer) or a positive number of blocks")
    out = [f"model.blocks={blocks}"] if blocks else []
    given = {o.lstrip("+~").split("=", 1)[0] for o in [*runtime.overrides, *runtime.sweeps]}
    if cfg.zoo.get("scale") and "scale" not in given:
        out.append(f"scale={cfg.zoo.scale}")
    if "task" not in given:
        tasks = [*OmegaConf.to_container(cfg.zoo.tasks, resolve=True), str(cfg.zoo.length_task)]
        out.append(f"ablation.grid.task='{','.join(dict.fromkeys(tasks))}'")
    return out


def concrete_parts(parts: list[dict], rows: list[dict]) -> list[dict]:
    """The parts each arm of the pre-flight's ``rows`` is decided on, its name as ``a``: a mixer
    (``kind`` mixer) the scorecard's and the leaderboard's against the references of its measured
    causality; a reference arm only the latter, never against itself (:func:`zoo_page.parts_for`)."""
    from analysis.zoo_page import measured_causal, parts_for

    out = []
    for row in rows:
        mine = parts_for(parts, measured_causal(row))
        out += [{**p, "a": row["arm"]} for p in mine if p["a"] == scorecard.MIXER and p["b"] != row["arm"]
                and (row["kind"] == "mixer" or p.get("leaderboard"))]
    return out


def _run(cfg: DictConfig, runtime: Runtime, out: Path) -> tuple[int, list[Path]]:
    from analysis import zoo_page
    from harness.store import resolve_store

    arms, registered = arms_of(cfg), references_of(cfg)
    use_examples(cfg.zoo.examples, runtime.cwd)
    sc, refs, groups, mine, models, base = _expand(cfg, runtime, arms, registered)
    parts = _parts(sc, cfg, registered)  # before any trial: a task the scorecard lacks is bad input
    seeds = confirm_seeds(cfg, sc)
    refs, groups = references_on_causal_tasks(cfg, parts, registered, refs, groups)
    names = {trials[0].variant: arm["name"] for arm, trials in zip(arms, mine) if trials}
    cli = [*base, *runtime.sweeps]
    store = resolve_store(OmegaConf.to_object(sc.tracking), runtime.cwd)
    flat = [t for trials in mine for t in trials]
    if cfg.dry_run:
        return _dry_run(sc, refs, flat, arms, cli, store, out, seeds), []
    rows = [preflight(a["name"], trials, "mixer", a["target"]) for a, trials in zip(arms, mine)]
    for variant in dict.fromkeys(t.variant for t in refs):  # the references' init measurements
        rows.append(preflight(variant, [t for t in refs if t.variant == variant], "reference"))
    check_references(registered, rows)
    mine = causal_only(cfg, mine, rows)
    flat = [t for trials in mine for t in trials]
    for row, arm in zip(rows, arms):
        row.update(target=arm["target"], kwargs=json.dumps(arm["kwargs"], sort_keys=True), paper=arm["paper"])
    status = scorecard._sweep(sc, refs + flat, cli, store, before=lambda finished: scorecard.print_expected(
        refs, flat, finished, "", scorecard._cores(sc.cluster), command="zoo", what=f"the {len(arms)} mixers", costs=_costs(sc)))
    if status == 2:
        return 2, []
    # the arms' rows by their variants (the runs' arm); every row's lrs are extended past a grid
    # edge, the reference rows' too (without this, W_V's and the MLP's rows stayed "inconclusive:
    # lr at grid edge" on the first quick run), then its budget-limited rows rerun at ×4
    variants = {arm["name"]: trials[0].variant for arm, trials in zip(arms, mine) if trials}
    concrete = concrete_parts(parts, [{**r, "arm": variants.get(r["arm"], r["arm"])} for r in rows])
    groups += [(trials, [*base, *model, *runtime.sweeps]) for trials, model in zip(mine, models)]
    added, ext = scorecard.extend_lr(sc, concrete, groups, "", store)
    if ext == 2:
        return 2, []
    # the budget round decides rows as the page will: causal arms against the prefix's trivial
    # predictor (trivial_references), or it reruns rows the page does not read and misses rows it does
    trivial = trivial_references(refs + flat)
    by_variant = pd.DataFrame([{**r, "arm": variants.get(r["arm"], r["arm"])} for r in rows])
    longer, ext4 = scorecard.budget_round(sc, concrete, groups, "", store, added, lambda df: zoo_page.reference_rows(
        df, by_variant, {"trivial_references": trivial}))
    if ext4 == 2:
        return 2, []
    block, ext_c = scorecard.confirmation_round(sc, concrete, groups, "", store, added + longer, seeds,
                                                lambda df: zoo_page.reference_rows(df, by_variant, {"trivial_references": trivial}))
    if ext_c == 2:
        return 2, []
    plan = {"command": " ".join(["python -m analysis.zoo", *runtime.overrides, *runtime.sweeps]),
            "commit": _commit(), "scale": OmegaConf.to_container(sc.scale, resolve=True),
            "arms": arms, "references": list(dict.fromkeys(t.variant for t in refs)), "registered": registered,
            "length_task": str(cfg.zoo.length_task), "budget_factor": int(sc.report.budget_factor),
            "tasks": OmegaConf.to_container(cfg.zoo.tasks, resolve=True), "parts": parts,
            "blocks": int(cfg.zoo.blocks), "trivial_references": trivial,
            "causal_only": list(cfg.zoo.get("causal_only") or ()),
            "confirm_seeds": seeds, "n_trials": len(refs) + len(flat), "n_extension": len(added),
            "n_budget": len(longer), "n_confirmation": len(block)}
    folder = _write(out, store, refs + flat, added + longer + block, names, rows, plan)
    return max(status, ext, ext4, ext_c), zoo_page.render(folder, out)


def confirm_seeds(cfg: DictConfig, sc: DictConfig) -> list[int]:
    """The seeds of ``zoo.confirm_seeds`` (Hydra's sweep grammar; none where it is empty).

    Raises:
        ZooInputError: not Hydra's grammar, a seed of the grid's, or one of a spent block.
    """
    from hydra.errors import OverrideParseException

    from analysis.confirm import check_unspent, seeds_of

    text = str(cfg.zoo.get("confirm_seeds") or "")
    if not text:
        return []
    try:
        seeds = seeds_of(text)
        check_unspent(seeds)
    except (ValueError, OverrideParseException) as err:
        raise ZooInputError(f"zoo.confirm_seeds={text!r}: {err}") from err
    grid = set(seeds_of(str(sc.scale.seeds)))
    if grid & set(seeds):
        raise ZooInputError(f"zoo.confirm_seeds={text!r}: seeds {sorted(grid & set(seeds))} are the grid's "
                            f"(scale.seeds={sc.scale.seeds}); allowed: fresh seeds, e.g. range(6000,6010)")
    return seeds


def trivial_references(trials: list) -> dict[str, dict[str, dict[str, float]]]:
    """``{task: {"causal": {metric: value}, "bidirectional": {…}}}``: each task's trivial
    references on its in-distribution test set (:meth:`tasks.base.TaskBase.trivial_references`,
    under the names of the logged ``test/…`` ones), which the page reads in place of the logged
    ones (:func:`analysis.zoo_page.reference_rows`): for a causal arm, uniform mixing over the
    prefix (the logged one mixes over the whole sequence, which no causal model can: against it the
    causal reference read *not learned* on ``repeated``, error 0.30 against 0.25, where the prefix's
    uniform mixing errs 0.46); ``"bidirectional"`` only where the task adds an order-blind guess
    (``recall``: the most frequent value, right 42% of the time against the logged references' 13%,
    which every arm that binds nothing beat)."""
    from tasks import build_task

    configs = {}
    for t in trials:
        configs.setdefault(t.task, t.config.task)
    out = {}
    for task, cfg in sorted(configs.items()):
        built = build_task(cfg)
        out[task] = {"causal": built.trivial_references(causal=True)}
        bidirectional = built.trivial_references(causal=False)
        if set(bidirectional) - set(built.reference_sums(built.test_sets()[""][0])):  # beyond the logged ones
            out[task]["bidirectional"] = bidirectional
    return out


def _write(out: Path, store, trials: list, added: list, names: dict, rows: list[dict], plan: dict) -> Path:
    """The bundle (``runs.csv.gz`` of exactly ``trials`` and this invocation's rounds ``added``,
    the arms' names in ``arm``), ``symmetry.csv`` and ``plan.json`` in ``out/zoo``; the folder."""
    from analysis.bundle import collect, write_bundle

    bundle = collect(store.uri, {ABLATION: trials})
    if not bundle.empty:  # the runs this invocation composed or extended, never another's extension
        bundle = bundle[bundle["trial_id"].isin({t.trial_id for t in trials + added})]
    if "arm" in bundle:
        bundle["arm"] = bundle["arm"].replace(names)
    folder = out / FOLDER
    write_bundle(bundle, folder / BUNDLE, measured=False)
    pd.DataFrame(rows).to_csv(folder / SYMMETRY, index=False, float_format="%.3e")
    (folder / PLAN).write_text(json.dumps(plan, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return folder
