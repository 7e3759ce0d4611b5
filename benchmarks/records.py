"""``python -m benchmarks.records [--old REF] [--arms load,knowledge_forms,rest] [--pairs 2]
[--overrides K=V ...] [--out benchmarks/RESULTS.md]``: what a driver costs around its trials,
this checkout against a baseline commit (issue 61), the two alternated in one window.

Each arm runs ``python -m harness +ablation=ARM`` through a small wrapper in a process of its
own, once per tree per pair (old, new; then new, old), each run in a fresh folder with its own
store:

* ``load`` (200 two-step trials): the trial phase (first claim to last record committed) as the
  driver measures it (the parent's ``sweep/trial_phase_s``), trials per second;
* ``knowledge_forms``: the driver's CPU over its trial phase per trial (``getrusage`` of the
  driver process from the first claim to the end of the phase: Ray's threads in the driver and
  the live curves included, the summary excluded), the driver's CPU over the whole run, the
  wall time end to end, and whether the test metrics of every trial are bit-identical between
  the two trees;
* ``rest``: ``load`` through an ``mlflow server`` (``tracking=server``), and the server's CPU
  per trial (its process tree, read from /proc: the bound of that store kind).

The baseline tree is ``git archive REF`` unpacked into a temporary folder (the repository is
only read); both run on this interpreter. ``--overrides`` are appended to every run (for a
check at tiny sizes: ``--overrides ablation.grid.seed='range(8)' cluster=serial``). Prints one
table per arm; with ``--out`` writes them into the ``records`` section of that file.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

from benchmarks.results import write_section

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- records:start -->", "<!-- records:end -->"
ARMS = ("load", "knowledge_forms", "rest")

# Runs ``python -m harness ARGS`` in this process with the tree ``argv[1]`` first on the path,
# and writes the driver's CPU (getrusage of this process: every thread) at the first claim, at
# the end of each ablation's trial phase (where its summary begins: Queue.end calls on_done, the
# table and plot, last), after its summary and at exit into the JSON file ``argv[2]``.
WRAPPER = r"""
import atexit, json, resource, runpy, sys, time
tree, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, tree)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
marks = {"start_cpu": cpu(), "phases": []}
import harness.loop as loop
prepare, end = loop.Queue.prepare, loop.Queue.end
def first_claim(self, trials):
    marks.setdefault("claim_cpu", cpu())
    return prepare(self, trials)
def phase_end(self, sweep):
    at, on_done = [], self.on_done
    def summary(name, s):  # the phase ends where its summary (table, plot) begins
        at.append(cpu())
        return on_done(name, s) if on_done is not None else None
    self.on_done = summary
    try:
        answer = end(self, sweep)
    finally:
        self.on_done = on_done
    s = sweep.summary
    marks["phases"].append({"ablation": s.ablation, "cpu": at[0] if at else cpu(), "end_cpu": cpu(),
                            "trial_phase_s": s.trial_phase_s, "finished": s.finished, "failed": len(s.failed)})
    return answer
loop.Queue.prepare, loop.Queue.end = first_claim, phase_end
def write():
    marks["exit_cpu"] = cpu()
    with open(out, "w") as f:
        json.dump(marks, f)
atexit.register(write)
sys.argv = ["harness", *sys.argv[3:]]
runpy.run_module("harness", run_name="__main__", alter_sys=True)
"""


def baseline(ref: str, into: Path) -> Path:
    """The tree of commit ``ref``, unpacked into ``into`` (``git archive``: reads the repository)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref], check=True,
                             capture_output=True).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run(tree: Path, args: list[str], folder: Path) -> dict:
    """One driver run of ``python -m harness ARGS`` on ``tree`` in ``folder``: its marks, wall
    seconds, exit status and the store's test metrics by trial id.

    Raises:
        RuntimeError: the run failed (exit status other than 0), with its stderr's tail.
    """
    folder.mkdir(parents=True)
    marks = folder / "marks.json"
    env = {**os.environ, "PYTHONPATH": str(tree), "TQDM_DISABLE": "1"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, str(tree), str(marks), *args], cwd=folder,
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{tree.name}: python -m harness {' '.join(args)} exited {proc.returncode}: "
                           f"{proc.stderr[-2000:]}")
    found = json.loads(marks.read_text())
    found.update(wall_s=wall, tests=test_metrics(folder / "mlflow.db"))
    return found


def test_metrics(db: Path) -> dict[str, dict[str, float]]:
    """Trial id → its ``test/*`` metrics, from the FINISHED runs of a SQLite store (empty if none)."""
    if not db.exists():
        return {}
    found: dict[str, dict[str, float]] = {}
    with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as con:
        for trial, key, value in con.execute(
                "SELECT t.value, m.key, m.value FROM latest_metrics m JOIN tags t ON t.run_uuid = m.run_uuid "
                "AND t.key = 'trial_id' JOIN runs r ON r.run_uuid = m.run_uuid WHERE r.status = 'FINISHED' "
                "AND m.key LIKE 'test/%'"):
            found.setdefault(trial, {})[key] = value
    return found


def figures(marks: dict) -> dict:
    """A run's figures: trial phase s, trials/s, driver CPU per trial over the phase (ms), the
    driver's CPU over the whole run (s), wall s."""
    phase = marks["phases"][-1]
    n = max(1, phase["finished"] + phase["failed"])
    return {"phase_s": phase["trial_phase_s"], "per_s": phase["finished"] / max(phase["trial_phase_s"], 1e-9),
            "cpu_ms_per_trial": 1000 * (phase["cpu"] - marks["claim_cpu"]) / n,
            "driver_cpu_s": marks["exit_cpu"], "wall_s": marks["wall_s"]}


def _server(folder: Path):
    from benchmarks.__main__ import _mlflow_server, _tree_cpu

    proc, uri = _mlflow_server(folder)
    if proc is None:
        raise RuntimeError("the MLflow server did not start within 3 minutes")
    return proc, uri, _tree_cpu


def arm(name: str, trees: dict[str, Path], pairs: int, overrides: list[str], work: Path) -> list[dict]:
    """Every run of one arm, old and new alternated (``old, new`` then ``new, old``, ...)."""
    ablation = "load" if name == "rest" else name
    rows = []
    for pair in range(pairs):
        for label in (("old", "new") if pair % 2 == 0 else ("new", "old")):
            folder = work / f"{name}-{pair}-{label}"
            args = [f"+ablation={ablation}", *overrides]
            server = None
            if name == "rest":
                folder.mkdir(parents=True)
                server, uri, tree_cpu = _server(folder)
                args += ["tracking=server", f"tracking.uri={uri}"]
                before = tree_cpu(server.pid)
            try:
                marks = run(trees[label], args, folder / "run")
                row = {"arm": name, "tree": label, "pair": pair, **figures(marks), "tests": marks["tests"]}
                if server is not None:
                    row["tests"] = test_metrics(folder / "server.db")  # the server's own store
                    n = max(1, marks["phases"][-1]["finished"])
                    row["server_cpu_ms_per_trial"] = 1000 * (tree_cpu(server.pid) - before) / n
            finally:
                if server is not None:
                    server.terminate()
                    server.wait(timeout=60)
            print(f"  {name} {label} (pair {pair}): " + ", ".join(
                f"{k} {v:.3g}" for k, v in row.items() if isinstance(v, float)), flush=True)
            rows.append(row)
    return rows


def table(name: str, rows: list[dict]) -> str:
    """One arm's Markdown table: each run, then new ÷ old of the medians."""
    keys = ["phase_s", "per_s", "cpu_ms_per_trial", "driver_cpu_s", "wall_s"]
    if name == "rest":
        keys.append("server_cpu_ms_per_trial")
    lines = [f"**{name}**", "", "| tree | pair | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for r in rows:
        lines.append(f"| {r['tree']} | {r['pair']} | " + " | ".join(f"{r[k]:.3g}" for k in keys) + " |")
    med = {t: {k: statistics.median(r[k] for r in rows if r["tree"] == t) for k in keys} for t in ("old", "new")}
    lines.append("")
    lines.append("old ÷ new of the medians (above 1: the new code is faster or cheaper): " + ", ".join(
        f"{k} {med['old'][k] / med['new'][k]:.2f}" for k in keys if k != "per_s" and med["new"][k] > 0))
    tests = [r["tests"] for r in rows]
    lines.append(f"test metrics bit-identical across every run of the arm: {all(t == tests[0] for t in tests)} "
                 f"({len(tests[0])} trials)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the arms (module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.records", description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="main", help="the baseline commit (default main)")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--pairs", type=int, default=2, help="old/new pairs per arm, alternated")
    parser.add_argument("--overrides", nargs="*", default=[], help="appended to every run (tiny checks)")
    parser.add_argument("--out", default=None, help="write the tables into this file's records section")
    args = parser.parse_args(argv)
    arms = args.arms.split(",")
    if set(arms) - set(ARMS) or args.pairs < 1:
        parser.error(f"--arms: of {', '.join(ARMS)}; --pairs: at least 1")
    with tempfile.TemporaryDirectory(prefix="bench-records-") as tmp:
        work = Path(tmp)
        trees = {"old": baseline(args.old, work / "old-tree"), "new": ROOT}
        old_sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.old],
                                 capture_output=True, text=True).stdout.strip()
        new_sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True).stdout.strip()
        texts = [f"old: {args.old} ({old_sha}); new: this checkout ({new_sha}); {os.cpu_count()} CPUs, "
                 f"load average {os.getloadavg()[0]:.1f} at the start; overrides: {' '.join(args.overrides) or 'none'}"]
        for name in arms:
            print(f"{name}:", flush=True)
            texts.append(table(name, arm(name, trees, args.pairs, args.overrides, work)))
    text = "\n\n".join(texts)
    print(text)
    if args.out:
        write_section(Path(args.out), START, END, "### Records at the speed of the store (`python -m benchmarks.records`)",
                      text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
