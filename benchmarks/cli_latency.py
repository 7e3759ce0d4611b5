"""How long the command line takes to answer before any trial runs (issue 13, item 4).

``python benchmarks/cli_latency.py [--repo PATH] [--repeat N]`` times, in fresh processes:

* ``python -m harness --help``
* ``python -m harness model=sofmax`` (a misspelled preset: the error and exit 2)
* ``python -m harness +ablation=smoke dry_run=true`` with a store present (3 of its 18 trials
  finished, made once by this script, so the listing marks them ``done``)
* ``python -m harness +ablation=load`` once all its 200 trials have finished (run once by this
  script first): a no-op resume, which must write no run (issue 26: ≤ 5 s)

``--repo`` runs another checkout's code with this interpreter (``PYTHONPATH``), e.g. the commit
before the change, for a before/after table. Prints median wall seconds and median CPU seconds
(user + sys of the child), with the load average: on a busy machine the CPU time is the better
estimate of the wall time on an idle one.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "--help": ["harness", "--help"],
    "typo model=sofmax": ["harness", "model=sofmax"],
    "dry run, smoke, store present": ["harness", "+ablation=smoke", "dry_run=true"],
    "no-op resume, load": ["harness", "+ablation=load"],
}
WRITES_OUTPUTS = {"no-op resume, load"}  # its table goes to Hydra's run folder; never a run


def _runs(db: Path) -> int:
    with closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def _run(args: list[str], cwd: Path, env: dict) -> tuple[float, float, int, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode, proc.stdout + proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout whose code to time")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.repo.resolve())}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        made = _run(["harness", "+ablation=smoke", "task.n_train=64", "seed=0", "cluster=serial"],
                    cwd, env)
        assert made[2] == 0, made[3][-2000:]
        made = _run(["harness", "+ablation=load"], cwd, env)
        assert made[2] == 0, made[3][-2000:]
        shutil.rmtree(cwd / "outputs")  # the store stays; a dry run must not bring this back
        runs = _runs(cwd / "mlflow.db")
        print(f"code: {args.repo.resolve()}; load average before: {os.getloadavg()}")
        print("| command | exit | wall s (median) | CPU s (median) | runs written |\n|---|---|---|---|---|")
        for name, case in CASES.items():
            results = [_run(case, cwd, env) for _ in range(args.repeat)]
            written, runs = _runs(cwd / "mlflow.db") - runs, _runs(cwd / "mlflow.db")
            assert written == 0 or args.repo.resolve() != ROOT, f"{name} wrote {written} runs"
            if args.repo.resolve() == ROOT and name not in WRITES_OUTPUTS:
                assert not (cwd / "outputs").exists(), f"{name} wrote outputs/"
                assert "done" in results[0][3] or "dry" not in name, "finished trials not marked"
            shutil.rmtree(cwd / "outputs", ignore_errors=True)
            print(f"| `python -m {' '.join(case)}` | {results[0][2]} | "
                  f"{statistics.median(r[0] for r in results):.2f} | "
                  f"{statistics.median(r[1] for r in results):.2f} | {written} |")
        print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
