"""Where the test suite's CPU goes, test by test: a pytest plugin and its summary.

The suite runs under three xdist workers on a 2-core machine, which it keeps busy, so its wall
time follows its CPU time. Per-test durations say little there: a test's duration mostly measures
the other tests beside it. This plugin records what each test itself used, and the summary ranks
tests and files by it::

    PYTHONPATH=. CPU_PER_TEST_DIR=/tmp/cpu .venv/bin/python -m pytest -p benchmarks.suite_cpu
    .venv/bin/python -m benchmarks.suite_cpu /tmp/cpu

A test's CPU is its worker's own CPU time (``RUSAGE_SELF``) plus that of the processes it started
and waited for (``RUSAGE_CHILDREN``: its CLI subprocesses with their Ray instances, its servers),
summed over setup, call and teardown. These are CPU-seconds, the sum of user and system time.
Module- and session-scoped fixtures count against the first test of each worker that uses them.
What no test process waits for is not counted: a ``ray start`` cluster's daemons, a PostgreSQL
server started by ``pg_ctl``, Slurm's daemons. Compare the total with ``/usr/bin/time``'s figure
for the whole run, or with the machine's ``/proc/stat``, to see how much that leaves out.

Each worker appends JSON lines to ``$CPU_PER_TEST_DIR/<pid>.jsonl``, with the keys ``id``,
``self``, ``children`` (CPU-seconds), ``wall`` and ``start`` (seconds, epoch). Without
``CPU_PER_TEST_DIR`` the plugin records nothing.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import time
from pathlib import Path

import pytest


def _cpu() -> tuple[float, float]:
    """CPU-seconds (user + system) of this process and of its waited-for descendants."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Record the CPU one test's setup, call and teardown used (module docstring)."""
    folder = os.environ.get("CPU_PER_TEST_DIR")
    before, start = _cpu(), time.time()
    yield
    if not folder:
        return
    after = _cpu()
    row = {"id": item.nodeid, "self": after[0] - before[0], "children": after[1] - before[1],
           "wall": time.time() - start, "start": start}
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as out:
        out.write(json.dumps(row) + "\n")


def summarise(folder: Path, top: int = 15) -> str:
    """Rank the tests and the test files of ``folder``'s records by CPU-seconds; the workers'
    spans and totals. Raises ``FileNotFoundError`` when ``folder`` holds no records."""
    files = sorted(Path(folder).glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no <pid>.jsonl records in {folder}")
    workers = {path.stem: [json.loads(line) for line in path.read_text().splitlines()] for path in files}
    rows = [row for mine in workers.values() for row in mine]
    t0 = min(r["start"] for r in rows)
    cpu = {r["id"]: r["self"] + r["children"] for r in rows}
    total = sum(cpu.values())
    lines = [f"{len(rows)} tests, {total:.0f} CPU-s counted, "
             f"{sum(r['wall'] for r in rows) / 60:.1f} min of test wall time in all"]
    for pid, mine in workers.items():
        end = max(r["start"] + r["wall"] for r in mine)
        lines.append(f"worker {pid}: {len(mine)} tests, ends at {(end - t0) / 60:.1f} min, "
                     f"{sum(r['self'] + r['children'] for r in mine):.0f} CPU-s")
    lines.append(f"\ntop {top} tests by CPU-s (CPU-s, wall s, share of the total):")
    walls = {r["id"]: r["wall"] for r in rows}
    for test, seconds in sorted(cpu.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{seconds:7.1f} {walls[test]:7.1f} {seconds / total:6.1%}  {test}")
    by_file: collections.Counter = collections.Counter()
    for test, seconds in cpu.items():
        by_file[test.split("::")[0]] += seconds
    lines.append(f"\ntop {top} files by CPU-s:")
    lines += [f"{seconds:7.1f} {seconds / total:6.1%}  {name}" for name, seconds in by_file.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the CPU_PER_TEST_DIR of a run")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    print(summarise(args.folder, args.top))


if __name__ == "__main__":
    main()
