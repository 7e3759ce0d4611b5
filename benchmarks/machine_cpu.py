"""Where a machine's CPU goes while something runs (e.g. ``.ci/run``), by kind of process and by
the test that started it. Complements :mod:`benchmarks.suite_cpu`, which sees only what a
test's worker waited for: this also sees daemons nobody waits for (Ray's, MLflow's servers and
their helpers, PostgreSQL).

``python -m benchmarks.machine_cpu record OUT [--period S]`` samples ``/proc`` every ``S``
seconds (2) until SIGTERM or Ctrl-C and writes one JSON line per process to ``OUT``: its
command line as first seen, the CPU-seconds it used while sampled (a process older than the
recording counts from the first sample), and ``PYTEST_CURRENT_TEST`` from its environment (a
process inherits it from the test that started it). ``python -m benchmarks.machine_cpu summary
OUT [--top N]`` prints the CPU-seconds by kind and by test.

What it cannot see: a process that lives less than one period, and the CPU of one that exits
between two samples (up to one period's worth). Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")
KINDS = (  # (kind, any of these in the command line), first match wins
    ("driver: python -m harness", ("-m harness",)),
    ("analysis: python -m analysis*", ("-m analysis",)),
    ("MLflow job runner (huey)", ("huey", "_job_runner")),
    ("MLflow server / ui", ("mlflow", "uvicorn")),
    ("Ray worker", ("default_worker.py", "ray::")),
    ("Ray daemons", ("raylet", "gcs_server", "dashboard", "runtime_env", "monitor.py", "log_monitor",
                     "ray_process_reaper", "ray.util.client.server")),
    ("pytest worker (tests in-process)", ("exec(eval(", "pytest")),
    ("PostgreSQL", ("postgres",)),
    ("Slurm / munge", ("slurm", "munge")),
    ("Chromium", ("chrom",)),
    ("pip", ("pip",)),
)


def kind(command: str) -> str:
    return next((name for name, marks in KINDS if any(m in command for m in marks)), "other")


def _read(pid: str) -> tuple[int, float] | None:
    """``(start time in ticks, CPU-seconds)`` of a process, or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[19]), (int(fields[11]) + int(fields[12])) / HZ


def _describe(pid: str) -> tuple[str, str | None]:
    try:
        command = " ".join(c.decode(errors="replace") for c in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if c)
        test = None
        for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            if item.startswith(b"PYTEST_CURRENT_TEST="):
                test = item.split(b"=", 1)[1].decode(errors="replace").rsplit(" (", 1)[0]
    except OSError:
        return "", None
    return command, test


def record(out: Path, period: float) -> None:
    seen: dict[tuple[int, int], dict] = {}
    first, stop = True, []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    me = os.getpid()

    def dump() -> None:
        out.with_suffix(".tmp").write_text("".join(json.dumps(e) + "\n" for e in seen.values()))
        out.with_suffix(".tmp").replace(out)

    last_dump = time.time()
    try:
        while not stop:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                read = _read(pid)
                if read is None or int(pid) == me:
                    continue
                key = (int(pid), read[0])
                if key not in seen:
                    command, test = _describe(pid)
                    seen[key] = {"pid": int(pid), "command": command[:300], "test": test,
                                 "cpu_at_first_sample": read[1] if first else 0.0}
                seen[key]["cpu"] = read[1] - seen[key]["cpu_at_first_sample"]
            first = False
            if time.time() - last_dump > 60:
                dump()
                last_dump = time.time()
            time.sleep(period)
    except KeyboardInterrupt:
        pass
    dump()


def summary(path: Path, top: int) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    total = sum(r["cpu"] for r in rows)
    by_kind, count = Counter(), Counter()
    by_test = Counter()
    for r in rows:
        by_kind[kind(r["command"])] += r["cpu"]
        count[kind(r["command"])] += 1
        by_test[r["test"] or "(no test)"] += r["cpu"]
    print(f"{len(rows)} processes, {total:.0f} CPU-s\n\nby kind (CPU-s, share, processes):")
    for name, cpu in by_kind.most_common():
        print(f"  {cpu:8.1f} {cpu / total:6.1%} {count[name]:5d}  {name}")
    print(f"\ntop {top} tests (CPU-s of the processes they started, share):")
    for test, cpu in by_test.most_common(top):
        print(f"  {cpu:8.1f} {cpu / total:6.1%}  {test}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.machine_cpu", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="sample /proc until SIGTERM or Ctrl-C")
    rec.add_argument("out", type=Path)
    rec.add_argument("--period", type=float, default=2.0)
    summ = sub.add_parser("summary", help="CPU-seconds by kind and by test")
    summ.add_argument("path", type=Path)
    summ.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    if args.command == "record":
        record(args.out, args.period)
    else:
        summary(args.path, args.top)


if __name__ == "__main__":
    main()
