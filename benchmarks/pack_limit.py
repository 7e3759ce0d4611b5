"""``python -m benchmarks.pack_limit [--rounds R] [--steps N] [--baseline PATH] [--arms a,b]``:
the harness's packed training against the bare limit (issue 46), as CPU milliseconds per trial
of a typical report trial (``softmax`` on ``teacher``, n_train 1024, batch 64, validation
every 20 steps on 512 examples, test on 2048, one torch thread), arms interleaved round by
round in this one process; the ratios of one run are what to read (the machine is shared).

Arms (``P`` = pack size):

* ``harness P``: :func:`harness.pack.run_pack` (validation per trial, the CPU default);
  ``harness P vmap-eval``: validated vmapped; ``harness P compiled``: ``train.compile=on``
  (its compile time, the first pack's extra CPU, is reported apart);
* ``base P``: today's main (``--baseline``: a worktree with its own ``.venv``) running the same
  ``run_pack`` call in a child process that measures its own CPU around the call only;
* ``bare P``: the bare limit: ``stack_module_state`` + ``functional_call`` + ``vmap`` and
  ``torch.optim.Adam`` on the stacked parameters, the same steps, no evaluation;
* ``bare P eval``: the bare pack plus the harness's evaluation schedule, trial by trial:
  validation every 20 steps (loss, rel_mse), the best parameters kept by copy, the test set
  evaluated with them at the end (no symmetry measurement: the harness's adds ~1-3%), each
  trial on its own seed's validation and test sets, built by the harness's ``prepare`` as the
  harness builds them (outside the timed call: the bare arms time training and evaluation);
* ``bare P eval+setup``: ``bare P eval`` with that building inside the timed call (a harness
  trial's time includes building its data and model);
* ``bare P compiled`` / ``bare P compiled eval``: the bare pack's loss under ``torch.compile``
  (inductor), after a warm-up call that pays the compile time (reported apart).

Prints a Markdown table (median CPU ms/trial and median per-round ratio to ``harness 16``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch.func import functional_call, stack_module_state, vmap

ROOT = Path(__file__).resolve().parent.parent
TYPICAL = ["model=softmax", "task=teacher", "task.n_train=1024", "train.batch_size=64",
           "train.eval_every=20"]
LRS = (0.003, 0.01, 0.03)

# the base arm's child: run_pack of P typical trials, its CPU around the call only
CHILD = """
import json, os, resource, sys, torch
torch.set_num_threads(1)
from hydra import initialize_config_dir
from harness.config import register_configs
from harness.expansion import compose_trial
from harness.pack import run_pack
P, steps = int(sys.argv[1]), int(sys.argv[2])
register_configs()
with initialize_config_dir(config_dir=os.path.abspath('conf'), version_base='1.3'):
    cfgs = [compose_trial(json.loads(sys.argv[3]) + [f'train.max_steps={steps}'],
                          [f'seed={i}', f'train.lr={(0.003, 0.01, 0.03)[i % 3]}']).config for i in range(P)]
run_pack(cfgs[:2])
u = resource.getrusage(resource.RUSAGE_SELF); c = u.ru_utime + u.ru_stime
run_pack(cfgs)
u = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps(1000 * (u.ru_utime + u.ru_stime - c) / P))
"""


def cpu() -> float:
    """CPU seconds of this process (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def configs(P: int, steps: int, extra: list[str] = ()) -> list:
    from harness.expansion import compose_trial

    return [compose_trial([*TYPICAL, f"train.max_steps={steps}", *extra],
                          [f"seed={i}", f"train.lr={LRS[i % 3]}"]).config for i in range(P)]


class Bare:
    """The bare vmapped pack of ``P`` typical trials (module docstring), built once per arm
    run from the harness's own setups (same models, data and sets)."""

    def __init__(self, cfgs: list, compiled: bool) -> None:
        from harness.pack import prepare_setups

        setups, _ = prepare_setups(cfgs, torch.device("cpu"))  # each seed's own sets, as the harness builds them
        self.P, self.steps = len(cfgs), cfgs[0].train.max_steps
        self.base = setups[0].model
        self.params, _ = stack_module_state([s.model for s in setups])
        self.x = torch.cat([s.train[0].x for s in setups])
        self.y = torch.cat([s.train[0].y for s in setups])
        self.n_train = len(setups[0].train[0])
        # each trial's own sets (trials of different seeds validate on their own data)
        self.val, self.test = [s.val[0] for s in setups], [s.tests[""][0] for s in setups]
        self.opt = torch.optim.Adam(list(self.params.values()), lr=cfgs[0].train.lr)
        self.g = torch.Generator().manual_seed(0)

        def loss(p, xb, yb):
            return ((functional_call(self.base, p, (xb,)) - yb) ** 2).mean()

        def total(params, xb, yb):
            return vmap(loss)(params, xb, yb).sum()

        self.total = torch.compile(total) if compiled else total

    def _metrics(self, i: int, params: dict, batch) -> tuple[float, float]:
        out = functional_call(self.base, {k: v[i] for k, v in params.items()}, (batch.x,))
        err = ((out - batch.y) ** 2)
        return float(err.sum() / (batch.y ** 2).sum()), float(err.mean())

    def run(self, evaluate: bool) -> None:
        P, B = self.P, 64
        offset = (torch.arange(P) * self.n_train).view(P, 1)
        best = {k: v.detach().clone() for k, v in self.params.items()}
        keys = [(float("inf"), float("inf"))] * P
        for step in range(1, self.steps + 1):
            rows = (torch.randint(self.n_train, (P, B), generator=self.g) + offset).reshape(-1)
            xb = self.x.index_select(0, rows).view(P, B, *self.x.shape[1:])
            yb = self.y.index_select(0, rows).view(P, B, *self.y.shape[1:])
            total = self.total(self.params, xb, yb)
            self.opt.zero_grad(set_to_none=True)
            total.backward()
            self.opt.step()
            if evaluate and (step % 20 == 0 or step == self.steps):
                with torch.no_grad():
                    for i in range(P):
                        key = self._metrics(i, self.params, self.val[i])
                        if key < keys[i]:
                            keys[i] = key
                            for k, v in best.items():
                                v[i].copy_(self.params[k][i])
        if evaluate:
            with torch.no_grad():
                for i in range(P):
                    self._metrics(i, best, self.test[i])


def base_arm(baseline: Path, P: int, steps: int) -> float:
    """CPU ms/trial of ``run_pack`` in the baseline worktree (a child process)."""
    out = subprocess.run([str(baseline / ".venv" / "bin" / "python"), "-c", CHILD, str(P), str(steps),
                          json.dumps(TYPICAL)], cwd=baseline, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def harness_arm(P: int, steps: int, vmap_eval: bool | None = None, extra: list[str] = ()) -> float:
    from harness.pack import run_pack

    cfgs = configs(P, steps, list(extra))
    start = cpu()
    run_pack(cfgs, vmap_eval=vmap_eval)
    return 1000 * (cpu() - start) / P


def compiled_harness_arm(P: int, steps: int, cache: dict) -> float:
    """``harness P compiled``, after a warm-up pack that pays the compile time (reported apart)."""
    if ("compile_s", P, "harness") not in cache:
        start = cpu()
        harness_arm(P, 2, extra=["train.compile=on"])
        cache[("compile_s", P, "harness")] = cpu() - start
    return harness_arm(P, steps, extra=["train.compile=on"])


def bare_arm(P: int, steps: int, evaluate: bool, compiled: bool, cache: dict) -> float:
    key = (P, compiled)
    if key not in cache:  # built (and compiled) once: the warm-up call pays the compile time
        bare = Bare(configs(P, steps), compiled)
        start = cpu()
        bare.steps, full = 2, bare.steps
        bare.run(False)
        bare.steps = full
        cache[key] = bare
        cache[("compile_s", P, compiled)] = cpu() - start
    start = cpu()
    cache[key].run(evaluate)
    return 1000 * (cpu() - start) / P


def bare_setup_arm(P: int, steps: int) -> float:
    """``bare P eval+setup``: ``bare P eval`` that also builds its trials (data, models, sets:
    the harness's ``prepare``) inside the timed region, as a harness trial does."""
    cfgs = configs(P, steps)
    start = cpu()
    Bare(cfgs, False).run(True)
    return 1000 * (cpu() - start) / P


def arms(names: list[str], steps: int, baseline: Path | None) -> dict:
    """``{name: () -> CPU ms/trial}`` of the arms named (all when empty)."""
    cache: dict = {}
    table = {}
    for P in (16, 64):
        table[f"harness {P}"] = lambda P=P: harness_arm(P, steps)
        table[f"harness {P} vmap-eval"] = lambda P=P: harness_arm(P, steps, vmap_eval=True)
        if baseline is not None:
            table[f"base {P}"] = lambda P=P: base_arm(baseline, P, steps)
        table[f"bare {P}"] = lambda P=P: bare_arm(P, steps, False, False, cache)
        table[f"bare {P} eval"] = lambda P=P: bare_arm(P, steps, True, False, cache)
        table[f"bare {P} eval+setup"] = lambda P=P: bare_setup_arm(P, steps)
    table["bare 64 compiled"] = lambda: bare_arm(64, steps, False, True, cache)
    table["bare 64 compiled eval"] = lambda: bare_arm(64, steps, True, True, cache)
    table["harness 64 compiled"] = lambda: compiled_harness_arm(64, steps, cache)
    return {k: v for k, v in table.items() if not names or k in names}, cache


def steps_only(P: int, rounds: int, n_steps: int = 100) -> list[tuple[float, float]]:
    """``(harness, bare)`` CPU ms per step of one pack of ``P``, ``rounds`` times interleaved:
    the harness's :func:`harness.pack._step` (no evaluation) against the bare step."""
    import harness.pack as hp

    cfgs = configs(P, n_steps)
    pack = hp._build(cfgs, torch.device("cpu"), False, False)
    bare = Bare(cfgs, False)
    g = torch.Generator().manual_seed(0)

    def harness_steps() -> None:
        for _ in range(n_steps):
            hp._step(pack, (torch.randint(1024, (P, 64), generator=g) + pack.offset.view(P, 1)).reshape(-1))
        pack.pending.clear()

    out = []
    for _ in range(rounds):
        pair = []
        for fn in (harness_steps, lambda: bare.run(False)):
            start = cpu()
            fn()
            pair.append(1000 * (cpu() - start) / n_steps)
        out.append(tuple(pair))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pack_limit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--baseline", default="", help="a worktree of the code to compare with (its .venv)")
    parser.add_argument("--arms", default="", help="comma-separated arm names (default: all)")
    parser.add_argument("--json", default="", help="also write the raw figures here")
    parser.add_argument("--steps-only", action="store_true",
                        help="only the harness's step against the bare step (no evaluation), packs of 16 and 64")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from hydra import initialize_config_dir

    from harness.config import register_configs

    register_configs()
    names = [a.strip() for a in args.arms.split(",") if a.strip()]
    if args.steps_only:
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            for P in (16, 64):
                pairs = steps_only(P, args.rounds)
                ratios = [h / b for h, b in pairs]
                print(f"pack {P}: harness ÷ bare step = {statistics.median(ratios):.2f} (rounds: "
                      + ", ".join(f"{h:.2f}/{b:.2f} ms" for h, b in pairs) + ")", flush=True)
        return
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        table, cache = arms(names, args.steps, Path(args.baseline) if args.baseline else None)
        figures: dict[str, list[float]] = {k: [] for k in table}
        started = time.time()
        for r in range(args.rounds):
            for name, arm in table.items():
                try:
                    figures[name].append(arm())
                except Exception as err:  # noqa: BLE001 - one arm failing leaves the others' figures
                    print(f"round {r + 1} {name}: failed: {err!r}", flush=True)
                    figures[name].append(float("nan"))
                    continue
                print(f"round {r + 1} {name}: {figures[name][-1]:.1f} ms/trial", flush=True)
    ref = "harness 16" if "harness 16" in figures else next(iter(figures))
    print(f"\n{args.rounds} rounds, {args.steps} steps, {time.time() - started:.0f} s; "
          f"load average {os.getloadavg()[0]:.1f} at the end\n")
    print(f"| arm | CPU ms / trial (median) | ÷ {ref} (median of rounds) |\n|---|---|---|")
    for name, values in figures.items():
        ratio = statistics.median(v / w for v, w in zip(values, figures[ref]))
        print(f"| {name} | {statistics.median(values):.0f} | {ratio:.2f} |")
    compile_s = {str(k): v for k, v in cache.items() if isinstance(k, tuple) and k[0] == "compile_s"}
    print("\ncompile (warm-up) CPU s of this process:", compile_s)
    if args.json:
        Path(args.json).write_text(json.dumps({"figures": figures, "compile_s": compile_s}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
