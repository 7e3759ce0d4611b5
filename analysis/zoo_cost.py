"""``python -m analysis.zoo_cost [--measure] [--steps S] [--arms a,b] [--tasks t,u] [--scale default]``

The zoo's cost (issue 65): per arm and task the CPU-ms of one training step (with its share of
validation) at the zoo's depth, measured by a short timed run, and the whole zoo's expected wall
time and core-hours on a quiet machine from those.

* ``--measure``: run each (arm, task) once for ``--steps`` steps (``task.n_train`` the scale's
  smallest, validation every 20 steps as the scales do, one torch thread, float32) and write
  ``analysis/zoo_cost.csv`` (``model, task, blocks, cpu_ms_per_step``; ``model`` is the arm's name
  or the reference's preset). Rows of (arm, task) pairs not measured this time are kept. Run it
  alone on a quiet machine: every other process on the cores inflates the figure.
* Always: the estimate, from the table, of every trial the zoo composes at ``--scale``
  (:func:`estimate`): the grid's trials (arms × tasks × n_train × lrs × seeds), plus the reruns
  past an lr grid edge and the ×4 budget reruns at the fractions the first zoo's run measured
  (:data:`RERUNS`), in CPU-hours and in wall hours on ``--cores`` cores (one trial a core).

A step's cost hardly depends on ``n_train`` (a minibatch is 64 sequences at every size); it grows
with the sequence length and the depth, so the table holds the zoo's depth (``zoo.blocks``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from analysis.zoo import COST_TABLE as TABLE

ROOT = Path(__file__).resolve().parent.parent
# the first zoo's run (docs/zoo.md, 4800 grid trials): 1410 reruns past an lr grid edge (0.29 of the
# grid) at the grid's steps; the ×4 budget round reran about one row in ten at 4× the steps
RERUNS = {"lr_edge": 1410 / 4800, "budget_rows": 0.1, "budget_factor": 4}
REFERENCES = ("softmax", "value", "relu_attention", "quad_sigma", "mlp")  # conf/ablation/scorecard.yaml's grid


def _zoo_cfg(scale: str):
    """conf/zoo.yaml composed at ``scale`` (default: its ``zoo.scale``, as the zoo runs)."""
    from hydra import compose

    scale = scale or str(compose(config_name="zoo").zoo.scale or "default")
    return compose(config_name="zoo", overrides=[f"scale={scale}"])


def arms_and_overrides(cfg) -> dict[str, list[str]]:
    """``{row name: model overrides}`` of every arm the zoo trains: its mixers (``zoo.arms``) and
    the references (the scorecard's grid and ``zoo.references``), each at ``zoo.blocks``."""
    from analysis.zoo import arms_of, model_overrides, references_of

    out = {ref: [f"model={ref}"] for ref in dict.fromkeys([*REFERENCES, *(r["arm"] for r in references_of(cfg))])}
    out.update({a["name"]: model_overrides(a) for a in arms_of(cfg)})
    blocks = int(cfg.zoo.blocks)
    return {k: [*v, f"model.blocks={blocks}"] if blocks else v for k, v in out.items()}


def skipped(cfg) -> set[tuple[str, str]]:
    """The (arm, task) pairs the zoo does not run on a task of ``zoo.causal_only``: a mixer not
    declared causal (its kwargs; the pre-flight checks the declaration against the measurement)
    and a reference that neither serves causal arms nor is the control pair
    (:func:`analysis.zoo.references_on_causal_tasks`)."""
    from analysis.zoo import arms_of

    from omegaconf import OmegaConf

    from analysis.zoo import references_of

    only = list(cfg.zoo.get("causal_only") or ())
    parts = OmegaConf.load(ROOT / "conf" / "ablation" / "scorecard.yaml").ablation.parts
    keep = {r["arm"] for r in references_of(cfg) if r["serves"] == "causal"} | set(parts[0].control)
    refs = {*REFERENCES, *(r["arm"] for r in references_of(cfg))} - keep
    return ({(a["name"], t) for a in arms_of(cfg) if a["kwargs"].get("causal") is not True for t in only}
            | {(r, t) for r in refs for t in only})


def tasks_of(cfg) -> list[str]:
    """The zoo's verdict tasks and its length task, in order."""
    return list(dict.fromkeys([*cfg.zoo.tasks, str(cfg.zoo.length_task)]))


def _timed(model: list[str], task: str, steps: int, n_train: int) -> float:
    """Process CPU-seconds of one ``steps``-step trial (one torch thread, validation every 20 steps)."""
    import torch

    from harness.expansion import compose_trial
    from harness.trial import run_trial

    torch.set_num_threads(1)
    trial = compose_trial([f"task={task}", *model, f"task.n_train={n_train}", f"train.max_steps={steps}",
                           "train.eval_every=20"], [])
    start = time.process_time()
    run_trial(trial.config)
    return time.process_time() - start


def measure_one(model: list[str], task: str, steps: int, n_train: int) -> tuple[float, float]:
    """``(CPU-ms a step, CPU-s a trial besides its steps)`` of ``model`` on ``task``: two timed
    trials of ``steps`` and ``3 steps`` steps; the step's cost is their difference over ``2 steps``
    (validation every 20 steps included), the rest the fixed part (building, data, the test sets)."""
    short, long = _timed(model, task, steps, n_train), _timed(model, task, 3 * steps, n_train)
    per_step = max(long - short, 0.0) / (2 * steps)
    return per_step * 1000, max(short - per_step * steps, 0.0)


def measure(arms: dict[str, list[str]], tasks: list[str], steps: int, n_train: int, blocks: int) -> None:
    """Measure every (arm, task) and merge the rows into :data:`TABLE` (printing each)."""
    import pandas as pd

    cols = ["model", "task", "blocks", "cpu_ms_per_step", "cpu_s_per_trial"]
    old = pd.read_csv(TABLE) if TABLE.exists() else pd.DataFrame(columns=cols)
    _timed(next(iter(arms.values())), tasks[0], 2, n_train)  # the first trial's imports are no arm's cost
    key, rows = ["model", "task", "blocks"], []
    for name, model in arms.items():
        for task in tasks:
            ms, fixed = measure_one(model, task, steps, n_train)
            print(f"zoo_cost: {name} on {task}: {ms:.2f} CPU-ms a step, {fixed:.2f} CPU-s a trial besides", flush=True)
            rows.append({"model": name, "task": task, "blocks": blocks, "cpu_ms_per_step": round(ms, 2),
                         "cpu_s_per_trial": round(fixed, 2)})
            new = pd.DataFrame(rows, columns=cols)  # written after each pair: an interrupted run keeps what it measured
            keep = old[~old.set_index(key).index.isin(new.set_index(key).index)]
            pd.concat([keep, new]).sort_values(["blocks", "task", "model"]).to_csv(TABLE, index=False)


def count(value) -> int:
    """The number of values of a scale entry: ``"128,256"`` → 2, ``range(5)`` → 5."""
    text = str(value)
    if text.startswith("range("):
        return len(range(*map(int, text[6:-1].split(","))))
    return len(text.split(","))


def estimate(costs: dict[tuple[str, str], tuple[float, float]], arms: list[str], tasks: list[str], scale,
             cores: int, skip: set[tuple[str, str]] = frozenset()) -> dict:
    """The zoo's expected cost at ``scale`` (n_train, lrs, seeds, steps) from ``costs``
    (``{(arm, task): (CPU-ms a step, CPU-s a trial besides)}``; an arm not in it is costed as the
    dearest arm measured on that task): ``{grid_trials, cpu_h, wall_h, missing}``, the reruns of
    :data:`RERUNS` included (the budget reruns at 4× the steps), one trial a core; the pairs of
    ``skip`` are not run (:func:`skipped`).

    Raises:
        KeyError: a task with no measured arm at all.
    """
    per_point, steps = count(scale.n_train) * count(scale.lrs) * count(scale.seeds), int(scale.steps)
    cpu_s, missing = 0.0, []
    for task in tasks:
        known = [v for (a, t), v in costs.items() if t == task]
        if not known:
            raise KeyError(f"no measured cost on task {task!r}: run python -m analysis.zoo_cost --measure --tasks {task}")
        dearest = max(known, key=lambda v: v[0] * steps + v[1])
        for arm in [a for a in arms if (a, task) not in skip]:
            if (arm, task) not in costs:
                missing.append((arm, task))
            ms, fixed = costs.get((arm, task), dearest)
            grid = ms / 1000 * steps + fixed
            rerun = RERUNS["lr_edge"] * grid + RERUNS["budget_rows"] * (ms / 1000 * steps * RERUNS["budget_factor"] + fixed)
            cpu_s += per_point * (grid + rerun)
    n = sum((a, t) not in skip for a in arms for t in tasks)
    return {"grid_trials": per_point * n, "cpu_h": cpu_s / 3600,
            "wall_h": cpu_s / 3600 / max(cores, 1), "missing": missing}


def main(argv: list[str] | None = None) -> int:
    from hydra import initialize_config_dir

    from harness.config import register_configs

    ap = argparse.ArgumentParser(prog="python -m analysis.zoo_cost", description=__doc__.split("\n\n")[1])
    ap.add_argument("--measure", action="store_true", help="time the (arm, task) pairs and update the table")
    ap.add_argument("--steps", type=int, default=40, help="steps of each timed run (default 40)")
    ap.add_argument("--arms", default="", help="comma-separated arm names (default: all)")
    ap.add_argument("--tasks", default="", help="comma-separated tasks (default: the zoo's)")
    ap.add_argument("--scale", default="", help="the scale the estimate is for (default: conf/zoo.yaml's zoo.scale)")
    ap.add_argument("--cores", type=int, default=2, help="free cores for the wall time (default 2)")
    args = ap.parse_args(argv)
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = _zoo_cfg(args.scale)
        arms, tasks = arms_and_overrides(cfg), tasks_of(cfg)
        chosen = [a for a in args.arms.split(",") if a] or list(arms)
        unknown = sorted(set(chosen) - set(arms)) + sorted(set(t for t in args.tasks.split(",") if t) - set(tasks))
        if unknown:
            print(f"error: not an arm or task of conf/zoo.yaml: {unknown}", file=sys.stderr)
            return 2
        if args.measure:
            sys.path.insert(0, str(ROOT / "examples"))
            os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "examples"), os.environ.get("PYTHONPATH", "")])
            smallest = min(int(v) for v in str(cfg.scale.n_train).split(","))
            measure({a: arms[a] for a in chosen}, [t for t in args.tasks.split(",") if t] or tasks,
                    args.steps, smallest, int(cfg.zoo.blocks))
        return _print_estimate(cfg, list(arms), tasks, args.cores)


def _print_estimate(cfg, arms: list[str], tasks: list[str], cores: int) -> int:
    import pandas as pd

    if not TABLE.exists():
        print(f"zoo_cost: no {TABLE.name} yet: run with --measure", file=sys.stderr)
        return 2
    table = pd.read_csv(TABLE)
    table = table[table["blocks"] == int(cfg.zoo.blocks)]
    costs = {(r.model, r.task): (float(r.cpu_ms_per_step), float(r.cpu_s_per_trial)) for r in table.itertuples()}
    try:
        e = estimate(costs, arms, tasks, cfg.scale, cores, skipped(cfg))
    except KeyError as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    print(f"zoo_cost: scale {cfg.scale.name}, {int(cfg.zoo.blocks)} blocks: {e['grid_trials']} grid trials of "
          f"{len(arms)} arms on {len(tasks)} tasks; estimate {e['cpu_h']:.1f} CPU-hours, {e['wall_h']:.1f} h wall "
          f"on {cores} free cores, one trial a core (an estimate; reruns included: past an lr edge {RERUNS['lr_edge']:.0%} of "
          f"the grid, ×{RERUNS['budget_factor']} steps for {RERUNS['budget_rows']:.0%} of it)"
          + (f"; {len(e['missing'])} (arm, task) pairs not measured, costed as their task's dearest" if e["missing"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
