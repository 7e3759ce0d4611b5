"""How much CPU a refusal costs, against the bare interpreter, in one run (issue 62, item 2).

``python -m benchmarks.refusal_cpu [--repo PATH] [--repeat N]`` times, in fresh processes and
interleaved (round r runs every case once, so a load that changes during the run touches every
case alike), the CPU seconds (user + sys of the child, ``getrusage``) of:

* the baselines ``python -c pass`` and ``python -c 'import torch'``;
* each refusal the shell answers from the command line alone (a misspelled key, preset, value
  in a sweep, sweep function, ablation sweep, value of the wrong type, a key twice in an
  ablation file), on each of the five commands: budget ≤ 1.0 CPU-s over ``python -c pass``;
* a mixer's misspelled module, class and constructor keyword (``model=external``) and a user
  task's misspelled class (``task=external``), on ``python -m harness`` and ``python -m
  analysis.scorecard``: budget ≤ 1.5 CPU-s over ``python -c 'import torch'`` (the user's own
  module imports torch).

Each refusal must exit 2 with one ``error:`` line (asserted for this checkout's code). Prints a
Markdown table: how each case ended (exit status, lines on stderr), median CPU-s, the median
excess over its baseline, the budget, and whether it holds; and the load average before and
after. CPU time, not wall time, is what holds on a loaded machine (a refusal
that waits for a core is slow, not expensive). ``--repo`` times another checkout's code with
this interpreter (``PYTHONPATH``), e.g. the commit before the change.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("harness", "analysis", "analysis.report", "analysis.scorecard", "analysis.zoo")
REFUSALS = {  # name → the command line's arguments (the file twice.yaml is written by main)
    "key": ["train.max_step=5"],
    "preset": ["model=sofmax"],
    "value in a sweep": ["model=softmax,sofmax"],
    "interval()": ["seed=interval(0,1)"],
    "ablation sweep": ["+ablation=smoke,load"],
    "type": ["train.max_steps=abc"],
    "key twice in a file": ["+ablation=twice"],
}
MIXER = {  # refusals only the mixer's code can answer: its module is imported (torch with it)
    "mixer module": ["model=external", "model.target=zoo.linear_atention:LinearAttention"],
    "mixer class": ["model=external", "model.target=zoo.linear_attention:LinearAtention"],
    "mixer keyword": ["model=external", "model.target=zoo.linear_attention:LinearAttention", "model.kwargs.causl=true"],
    "task class": ["task=external", "task.target=my_tasks:RuningMean"],
}
BUDGET_S = {"pass": 1.0, "torch": 1.5}


def cpu_s(argv: list[str], cwd: Path, env: dict) -> tuple[float, int, str]:
    """``(CPU-s of the child, exit status, stderr)`` of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.returncode, proc.stderr


def cases(conf: Path) -> dict[str, tuple[list[str], str]]:
    """name → (argv, the baseline it is held against)."""
    search = f"hydra.searchpath=[file://{conf}]"
    out = {"python -c pass": ([sys.executable, "-c", "pass"], ""),
           "python -c 'import torch'": ([sys.executable, "-c", "import torch"], "")}
    for command in COMMANDS:
        for name, args in REFUSALS.items():
            out[f"{command}: {name}"] = ([sys.executable, "-m", command, *args, search], "pass")
    for command in ("harness", "analysis.scorecard"):
        for name, args in MIXER.items():
            out[f"{command}: {name}"] = ([sys.executable, "-m", command, *args], "torch")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout whose code to time")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    repo = args.repo.resolve()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "examples")])}
    with tempfile.TemporaryDirectory() as tmp:
        conf, cwd = Path(tmp) / "conf", Path(tmp) / "work"
        (conf / "ablation").mkdir(parents=True)
        cwd.mkdir()
        (conf / "ablation" / "twice.yaml").write_text("name: twice\ngrid:\n  seed: range(2)\n  seed: range(3)\n")
        table = cases(conf)
        times: dict[str, list[float]] = {name: [] for name in table}
        answers: dict[str, str] = {}  # name → how it ended: "2, 1 line" for a refusal as it should be
        load = os.getloadavg()
        for _ in range(args.repeat):
            for name, (argv, _) in table.items():
                seconds, code, err = cpu_s(argv, cwd, env)
                lines = err.strip().splitlines()
                answers[name] = f"{code}, {len(lines)} line{'s' * (len(lines) != 1)}"
                if repo == ROOT:  # another checkout (--repo) may answer otherwise: shown, not asserted
                    if name.startswith("python"):
                        assert code == 0, err[-2000:]
                    else:
                        assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), (name, code, err[-2000:])
                times[name].append(seconds)
        assert repo != ROOT or not any(cwd.iterdir()), "a refusal wrote into its working folder"
    base = {"pass": statistics.median(times["python -c pass"]),
            "torch": statistics.median(times["python -c 'import torch'"])}
    print(f"code: {repo}; {args.repeat} rounds; load average before {load}, after {os.getloadavg()}; "
          f"{os.cpu_count()} cores")
    print("| case | exit, stderr | CPU-s (median) | over baseline | budget | holds |\n|---|---|---|---|---|---|")
    for name, (_, against) in table.items():
        median = statistics.median(times[name])
        if not against:
            print(f"| `{name}` | {answers[name]} | {median:.2f} | | | |")
            continue
        excess = median - base[against]
        print(f"| `{name}` | {answers[name]} | {median:.2f} | {excess:+.2f} (vs {against}) | {BUDGET_S[against]:.1f} | "
              f"{'yes' if excess <= BUDGET_S[against] else 'NO'} |")


if __name__ == "__main__":
    main()
