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
   lr > 3.0").
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


def preflight(name: str, trials: list, kind: str, target: str = "") -> dict:
    """Build the arm of ``trials`` once per task, check it and measure its symmetries on
    re-drawn weights; returns the ``symmetry.csv`` row of its first task.

    Raises:
        ZooInputError: (a mixer) it does not build, its output is not ``(B, n, d)``, or its
            declared symmetries or its declared causality (its ``causal`` attribute; a change at
            position t changes no output before t, measured in float64 on re-drawn weights)
            differ from the measured ones on some task; the line names the arm.
    """
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
        try:
            task = build_task(cfg.task)
            model = build_model(cfg.model, task.d, task.n_max, torch.Generator().manual_seed(0))
            check(cfg.model, model, task.d, task.n_max)  # shape; a declared symmetry refuted
            claims = declared(model, target) if kind == "mixer" else frozenset()
        except ValueError as err:
            raise ZooInputError(f"zoo arm {name!r}: {err}") from err
        errors, dtype = _measure(model, task.d, task.n_max)
        tol = TOLERANCE[getattr(torch, dtype)]
        holds = {s for s, k in scorecard.SYMMETRY_KEYS.items() if errors[k] <= tol}  # NaN: not measured
        if kind == "mixer" and holds != set(claims):
            said = []
            if set(claims) - holds:
                said.append(f"declared, not measured to hold: {sorted(set(claims) - holds)}")
            if holds - set(claims):
                said.append(f"found, not declared: {sorted(holds - set(claims))}")
            shown = ", ".join(f"{s} {errors[k]:.1e}" for s, k in scorecard.SYMMETRY_KEYS.items())
            raise ZooInputError(f"zoo arm {name!r} ({target}) on {trial.task}: {'; '.join(said)} "
                                f"(relative errors on re-drawn {dtype} weights: {shown}; tolerance {tol:g})")
        try:
            why, leak, _ = causality_refusal(model, task.d, task.n_max)
        except ValueError as err:  # a causal that is not a bool
            raise ZooInputError(f"zoo arm {name!r} ({target}): {err}") from err
        if why and kind == "mixer":
            raise ZooInputError(f"zoo arm {name!r} ({target}) on {trial.task}: {why}")
        if first is None:
            first = {"arm": name, "kind": kind, "task": trial.task, "d": task.d,
                     "params": count_parameters(model), "dtype": dtype, "tolerance": tol,
                     "declared": ",".join(sorted(claims)), **errors,
                     "causal": declared_causal(model), CAUSAL_KEY: leak}
    return first


# --------------------------------------------------------------------------- run
def _dry_run(sc: DictConfig, refs: list, flat: list, arms: list[dict], cli: list[str], store, out: Path) -> int:
    """``dry_run=true``: the trials (those already in the store marked ``done``), the expected
    time and what would be written; no pre-flight of the arms' symmetries, nothing run or
    written. Exit status 0, 2 bad input."""
    from harness.command import dry_run

    finished = dry_run([(ABLATION, refs + flat)], OmegaConf.to_object(sc.cluster), store, cli, sc.tracking.lease_s)
    if finished is None:
        return 2
    scorecard.print_expected(refs, flat, set(finished.get(ABLATION, {})), "", scorecard._cores(sc.cluster),
                             command="zoo", what=f"the {len(arms)} mixers")
    print(f"zoo: dry run: would measure each arm's symmetries, run the trials not done, extend the lr grid "
          f"past its edges and write {out / FOLDER / BUNDLE}, {out / 'zoo.md'} and {len(arms)} mixer pages; "
          "nothing was run or written")
    return 0


def _parts(sc: DictConfig, cfg: DictConfig) -> list[dict]:
    """The page's parts: the scorecard's (``a: MIXER``), then per registered task one area part
    against ``zoo.reference`` (the leaderboard's verdict), all observations of claim ``zoo``."""
    from analysis import protocol

    parts = [protocol.spec_dict(p) for p in OmegaConf.to_object(sc.ablation.parts)]
    ref = str(cfg.zoo.reference)
    labels = {p["task"]: p["name"] for p in parts if p["b"] == ref}
    control = next((p["control"] for p in parts if p["control"]), [])
    for task, spec in OmegaConf.to_container(cfg.zoo.tasks, resolve=True).items():
        if task not in labels:
            raise ZooInputError(f"zoo.tasks.{task}: no scorecard part against {ref!r} on {task} "
                                f"(tasks: {', '.join(sorted(labels))})")
        name = f"{labels[task]}, {spec.get('value', 'auc')} over n_train"
        parts.append(protocol.spec_dict({"claim": "zoo", "role": "observation", "name": name, "task": task,
                                         "a": scorecard.MIXER, "b": ref, "value": spec.get("value", "auc"),
                                         "delta": float(spec["delta"]), "control": control, "leaderboard": True}))
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


def _run(cfg: DictConfig, runtime: Runtime, out: Path) -> tuple[int, list[Path]]:
    from analysis import zoo_page
    from analysis.bundle import collect, write_bundle
    from harness.store import resolve_store

    arms = arms_of(cfg)
    use_examples(cfg.zoo.examples, runtime.cwd)
    models = [model_overrides(a) for a in arms]
    if any(o.lstrip("+~").split("=", 1)[0].split(".")[0] == "model" for o in [*runtime.overrides, *runtime.sweeps]):
        raise ZooInputError("the zoo's models are zoo.arms (conf/zoo.yaml), not model=… on the command line")
    rest = [o for o in runtime.overrides if not o.startswith("zoo.")]
    sc, refs, mine, base = scorecard.expand_arms(rest, list(runtime.sweeps), models)
    parts = _parts(sc, cfg)  # before any trial: a task the scorecard lacks is bad input
    clash = sorted({a["name"] for a in arms} & {t.variant for t in refs})
    if clash:
        raise ZooInputError(f"zoo.arms: {clash} name a reference arm of conf/ablation/scorecard.yaml; rename the arm")
    ref_ids = {t.trial_id for t in refs}
    mine = [[t for t in trials if t.trial_id not in ref_ids] for trials in mine]
    names = {trials[0].variant: arm["name"] for arm, trials in zip(arms, mine) if trials}
    if cfg.dry_run:
        return _dry_run(sc, refs, [t for trials in mine for t in trials], arms, [*base, *runtime.sweeps],
                        resolve_store(OmegaConf.to_object(sc.tracking), runtime.cwd), out), []
    rows = [preflight(a["name"], trials, "mixer", a["target"]) for a, trials in zip(arms, mine)]
    for variant in dict.fromkeys(t.variant for t in refs):  # the references' init measurements
        rows.append(preflight(variant, [t for t in refs if t.variant == variant], "reference"))
    for row, arm in zip(rows, arms):
        row.update(target=arm["target"], kwargs=json.dumps(arm["kwargs"], sort_keys=True), paper=arm["paper"])
    flat = [t for trials in mine for t in trials]
    store = resolve_store(OmegaConf.to_object(sc.tracking), runtime.cwd)
    cli = [*base, *runtime.sweeps]
    status = scorecard._sweep(sc, refs + flat, cli, store, before=lambda finished: scorecard.print_expected(
        refs, flat, finished, "", scorecard._cores(sc.cluster), command="zoo", what=f"the {len(arms)} mixers"))
    if status == 2:
        return 2, []
    concrete = [{**p, "a": arm} for arm in names for p in parts if p["a"] == scorecard.MIXER]
    # the reference rows' own area verdicts against zoo.reference choose their lrs too: extend
    # them past a grid edge as the mixers' (without this, W_V's and the MLP's rows stayed
    # "inconclusive: lr at grid edge" on the first quick run)
    others = [v for v in dict.fromkeys(t.variant for t in refs) if v != str(cfg.zoo.reference)]
    concrete += [{**p, "a": arm} for arm in others for p in parts if p.get("leaderboard")]
    groups = [(refs, cli), *((trials, [*base, *model, *runtime.sweeps]) for trials, model in zip(mine, models))]
    added, ext = scorecard.extend_lr(sc, concrete, groups, "", store)
    if ext == 2:
        return 2, []
    bundle = collect(store.uri, {ABLATION: refs + flat})
    if not bundle.empty:  # the runs this invocation composed or extended, never another's extension
        bundle = bundle[bundle["trial_id"].isin({t.trial_id for t in refs + flat + added})]
    if "arm" in bundle:
        bundle["arm"] = bundle["arm"].replace(names)
    folder = out / FOLDER
    write_bundle(bundle, folder / BUNDLE, measured=False)
    pd.DataFrame(rows).to_csv(folder / SYMMETRY, index=False, float_format="%.3e")
    plan = {"command": " ".join(["python -m analysis.zoo", *runtime.overrides, *runtime.sweeps]),
            "commit": _commit(), "scale": OmegaConf.to_container(sc.scale, resolve=True),
            "arms": arms, "references": list(dict.fromkeys(t.variant for t in refs)),
            "reference": str(cfg.zoo.reference), "length_task": str(cfg.zoo.length_task),
            "tasks": OmegaConf.to_container(cfg.zoo.tasks, resolve=True), "parts": parts,
            "n_trials": len(refs) + len(flat), "n_extension": len(added)}
    (folder / PLAN).write_text(json.dumps(plan, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return max(status, ext), zoo_page.render(folder, out)
