"""``python -m benchmarks [--quick] [--steps N] [--families a,b] [--no-server]``: speed of packed
trials and of the driver, as ratios measured side by side in one run (the machine is shared, so
absolute times drift; the ratios are what to read). Prints the tables and writes them into the
``packing`` section of ``benchmarks/RESULTS.md`` with the machine described.

1. packed vs single-trial throughput by pack size (1, 4, 16, 64) per model family, and where a
   pack's time goes (vectorised steps, per-trial validation, per-trial test evaluation);
2. sweep wall time vs the ideal (Σ unit time / slots) on Ray, lone trials vs packs;
3. driver CPU per trial (``getrusage``) with a no-op tracker, and the tracking cost per trial
   for SQLite and for an MLflow server;
4. composition time per trial;
5. the short-row softmax: ``torch.softmax`` vs :func:`harness.models.common.row_softmax`;
6. on a CUDA machine, packed throughput on the GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import types
import urllib.request
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from benchmarks.results import write_section

os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in the benchmark's output

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
START, END = "<!-- packing:start -->", "<!-- packing:end -->"
FAMILIES = {  # family → overrides of a typical paper-suite trial
    "attention (softmax, M4a)": ["model=softmax"],
    "attention (relu, M4)": ["model=relu_attention"],
    "mlp (B1)": ["model=mlp"],
    "transformer (M10)": ["model=transformer"],
    "deepsets (B4)": ["model=deepsets"],
    "tokenwise (B3)": ["model=tokenwise"],
    "xg (M1)": ["model=xg"],
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _configs(extra: list[str], count: int) -> list:
    from harness.expansion import compose_trial

    lrs, sizes = (0.003, 0.01, 0.03), (64, 256, 1024)
    return [compose_trial(extra, [f"seed={i}", f"train.lr={lrs[i % 3]}",
                                  f"task.n_train={sizes[(i // 3) % 3]}"]).config for i in range(count)]


def packing(steps: int, sizes: list[int], families: dict[str, list[str]], device: str = "cpu"):
    """Rows ``(family, P, lone s/trial, packed s/trial, ratio, step/eval/conclude shares)``."""
    from harness.pack import run_pack
    from harness.trial import run_trial

    base = [f"train.max_steps={steps}", "train.eval_every=20", "cluster.device=" + device]
    rows = []
    run_pack(_configs([*base, "train.max_steps=2"], 2), device)  # warm-up (imports, first calls)
    for family, extra in families.items():
        cfgs = _configs([*base, *extra], max(sizes))
        lone = []
        run_trial(cfgs[-1], device)  # warm-up of this family
        for cfg in cfgs[:2]:  # lone, before the packs ...
            t = time.perf_counter()
            run_trial(cfg, device)
            lone.append(time.perf_counter() - t)
        packed = {}
        for size in sizes:
            timings: dict[str, float] = {}
            t = time.perf_counter()
            run_pack(cfgs[:size], device, timings)
            packed[size] = ((time.perf_counter() - t) / size, timings)
        for cfg in cfgs[2:4]:  # ... and after them (the machine's load drifts)
            t = time.perf_counter()
            run_trial(cfg, device)
            lone.append(time.perf_counter() - t)
        single = statistics.mean(lone)
        for size, (per_trial, timings) in packed.items():
            total = sum(timings.values())
            rows.append((family, size, single, per_trial, single / per_trial,
                         *(timings[k] / total for k in ("setup", "steps", "eval", "conclude"))))
        print(f"  {family}: lone {single:.2f} s/trial; " +
              ", ".join(f"P={s}: x{single / packed[s][0]:.2f}" for s in sizes), flush=True)
    return rows


class NoOpTracker:
    """The tracker interface doing nothing (the driver's own cost)."""

    store = None

    def experiment(self, name): return "0"  # noqa: E704
    def close_stale(self, experiment_id): return 0  # noqa: E704
    def finished_trials(self, experiment_id, trial_ids=None): return {}  # noqa: E704
    def start_parent(self, *args): return "parent"  # noqa: E704
    lease_s = 120.0
    leases = types.SimpleNamespace(lost=None)

    def drop(self, run_id, why): return None  # noqa: E704

    def start_trial(self, *args): return "run"  # noqa: E704
    def claim_batch(self, experiment_id, parent_id, ablation, trials, *args): return ["run"] * len(trials)  # noqa: E704
    def heartbeat(self, *args): return contextlib.nullcontext()  # noqa: E704
    def log_points(self, *args): return None  # noqa: E704
    def log_metrics(self, *args): return None  # noqa: E704
    def finish_trial(self, *args): return True  # noqa: E704
    def end_run(self, *args): return None  # noqa: E704


class Replay:
    """A scheduler that hands back a ready outcome per trial at once (no training)."""

    def __init__(self, result) -> None:
        self.result = result

    def run(self, trials, on_start=None, on_progress=None, prepare=None):
        """Units of 16 claimed ahead on the claim thread, as :class:`harness.scheduler.RayScheduler`
        claims packs (:class:`harness.scheduler.Ahead`), each outcome handed back at once."""
        from harness.scheduler import Ahead, Outcome

        units = [list(trials[i:i + 16]) for i in range(0, len(trials), 16)]
        with Ahead(units, prepare or (lambda batch: None), lookahead=2) as ahead:
            for i, unit in enumerate(units):
                ahead.wait(i)
                for trial in unit:
                    if on_start and on_start(trial) is False:
                        continue
                    yield Outcome(trial, self.result, None, "bench")


class Timed:
    """A tracker proxy that adds up the wall time of its calls (on whichever thread)."""

    def __init__(self, tracker) -> None:
        self.tracker, self.seconds = tracker, 0.0

    def __getattr__(self, name):
        call = getattr(self.tracker, name)
        if not callable(call):  # the tracker's leases (the queue reads leases.lost): not a call
            return call

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t
        return timed


def _mlflow_server(folder: Path, proxied: bool = True):
    """A tracking server on a free port with its own SQLite file in ``folder``: ``proxied``, the
    README's cluster recipe (artifacts uploaded through the server, ``--artifacts-destination``),
    else ``--no-serve-artifacts`` with a default artifact root the driver writes to itself (a
    shared disk or an object store on a cluster). Returns ``(process, URI)``; the process is
    None if it did not answer within 3 min."""
    from harness.naming import UI_ENV

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    name = "server" if proxied else "server-direct"
    artifacts = (["--artifacts-destination", (folder / f"{name}-artifacts").as_uri()] if proxied else
                 ["--no-serve-artifacts", "--default-artifact-root", (folder / f"{name}-artifacts").as_uri()])
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{folder / f'{name}.db'}", *artifacts, "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, **UI_ENV})  # as the README's recipe: no MLflow job runner
    uri = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2):
                return proc, uri
        except OSError:
            time.sleep(1)
    proc.terminate()
    return None, uri


def _tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its descendants, read from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}  # pid → (parent pid, CPU seconds)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    tree, total = {pid}, 0.0
    for _ in range(8):  # a few levels: the server, its workers, their children
        tree |= {p for p, (parent, _) in stats.items() if parent in tree}
    return sum(stats[p][1] for p in tree if p in stats)


def _store_cpu(proc) -> float:
    """CPU seconds of this process and, for a tracking server, of its process tree: every
    process that writes to the store (issue 26: "MLflow CPU per trial, counting every process")."""
    return _cpu() + (_tree_cpu(proc.pid) if proc is not None else 0.0)


def driver(n_noop: int, n_store: int, server: bool, rounds: int = 8):
    """Driver CPU per trial with a no-op tracker; per store, the tracking cost per trial of a sweep
    (claims in batches of 16 on the claim thread, records on the writer thread, as on Ray) and the
    floor, one bare record, on the same store in the same run: ``rounds`` rounds, each a floor
    block then a sweep of fresh trials (``n_store`` trials in all, each figure the sum over the
    rounds), so that the machine's drift between the two (this machine's floor moved by a fifth
    between runs) falls on both. Rows ``(what, CPU ms/trial, wall ms/trial, CPU / the floor's
    CPU, the rounds' ratios: their mean, its 95% t-interval and their range)``: one round's ratio
    moves by a third on a shared 2-core machine, so the interval, not the mean alone, says whether
    a target is met."""
    from harness.loop import run_sweep
    from harness.expansion import Composer
    from harness.tracking import Store, Tracker
    from harness.trial import run_trial

    composer = Composer(["train.max_steps=2", "train.eval_every=1", "task.n_val=8", "task.n_test=8"])
    per = max(1, n_store // rounds)
    trials = [composer.trial([f"seed={i}"]) for i in range(max(n_noop, per * rounds + 16))]
    result = run_trial(trials[0].config)
    rows = []
    cpu, wall = _cpu(), time.perf_counter()
    run_sweep(trials[:n_noop], Replay(result), NoOpTracker(), "bench", [])
    rows.append(("driver, no-op tracker", (_cpu() - cpu) / n_noop * 1000,
                 (time.perf_counter() - wall) / n_noop * 1000, float("nan"), ""))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        stores = [("SQLite", Store(f"sqlite:///{tmp / 'mlflow.db'}", (tmp / "mlartifacts").as_uri()), None)]
        if server:  # the README's recipe (uploads through the server), then artifacts written directly
            for label, proxied in (("MLflow server", True), ("MLflow server, artifacts direct", False)):
                proc, uri = _mlflow_server(tmp, proxied)
                if proc is not None:
                    stores.append((label, Store(uri, None), proc))
        try:
            for name, store, proc in stores:
                tracker = Tracker(store)
                run_sweep(trials[-16:], Replay(result), tracker, "warm-up", [])
                floor, tracked, ratios = [0.0, 0.0], [0.0, 0.0], []
                for r in range(rounds):
                    f = _floor(tracker, per, proc)
                    cpu, wall = _store_cpu(proc), time.perf_counter()
                    run_sweep(trials[r * per:(r + 1) * per], Replay(result), tracker, "bench", [])
                    t = ((_store_cpu(proc) - cpu) / per * 1000, (time.perf_counter() - wall) / per * 1000)
                    floor = [a + b / rounds for a, b in zip(floor, f)]
                    tracked = [a + b / rounds for a, b in zip(tracked, t)]
                    ratios.append(t[0] / f[0])
                spread = _interval(ratios)
                rows.append((f"floor: bare record, {name}", *floor, 1.0, ""))
                rows.append((f"sweep tracking (claim + record), {name}", *tracked, tracked[0] / floor[0], spread))
        finally:
            for *_, proc in stores:
                if proc is not None:
                    proc.terminate()
                    proc.wait(timeout=60)
    return rows


def _interval(ratios: list[float]) -> str:
    """``mean [95% t-interval] (range)`` of the rounds' ratios (scipy's t distribution)."""
    from scipy import stats

    mean = statistics.fmean(ratios)
    low, high = stats.t.interval(0.95, len(ratios) - 1, loc=mean, scale=stats.sem(ratios))
    return f"{mean:.2f} [{low:.2f}, {high:.2f}] ({min(ratios):.2f}–{max(ratios):.2f}, {len(ratios)} rounds)"


def _floor(tracker, n: int, proc=None) -> tuple:
    """One bare record per trial on the tracker's store (``create_run``, one ``log_batch`` of 40
    params and 50 metrics, ``set_terminated``: :func:`benchmarks.store_scale.bare_record`): the
    least MLflow's client can spend on a trial's record, which the tracking row is held against.
    Returns ``(CPU ms, wall ms)`` per record, CPU of every process writing to the store."""
    from benchmarks.store_scale import _payload, bare_record

    experiment = tracker.experiment("floor")
    params, metrics = _payload()
    bare_record(tracker.client, experiment, params, metrics)  # warm-up
    cpu, wall = _store_cpu(proc), time.perf_counter()
    for _ in range(n):
        bare_record(tracker.client, experiment, params, metrics)
    return (_store_cpu(proc) - cpu) / n * 1000, (time.perf_counter() - wall) / n * 1000


def sweep_efficiency(n_trials: int, steps: int):
    """Ray (2 CPUs): wall vs ideal, driver CPU and tracking shares, lone trials vs packs, and how
    busy the machine was over the sweep (all its processes, from ``/proc/stat``): a sweep that
    keeps every core busy is bound by the CPU it spends, the driver's tracking included, and
    its ideal/wall rises only with less work, not with better scheduling."""
    from harness.config import ClusterConfig, SchedulerKind
    from harness.loop import run_sweep
    from harness.scheduler import RayScheduler
    from harness.expansion import compose_trial
    from harness.tracking import Store, Tracker

    trials = [compose_trial([f"train.max_steps={steps}", "train.eval_every=20"],
                            [f"seed={i}", f"train.lr={(0.003, 0.01, 0.03)[i % 3]}"])
              for i in range(n_trials)]
    slots = 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for pack in ("1", "auto"):
            cfg = ClusterConfig(scheduler=SchedulerKind.local, num_cpus=slots, pack_size=pack)
            store = Store(f"sqlite:///{Path(tmp) / f'p{pack}.db'}", (Path(tmp) / f"a{pack}").as_uri())
            tracker = Timed(Tracker(store))
            with RayScheduler(cfg) as scheduler:
                outcomes = []
                original = scheduler.run

                def run(todo, on_start=None, on_progress=None, prepare=None):
                    for outcome in original(todo, on_start, on_progress, prepare):
                        outcomes.append(outcome)
                        yield outcome
                scheduler.run = run
                boot = time.perf_counter()
                import ray
                ray.get(scheduler._warming)  # the workers' one-time start (torch, the models), timed apart
                boot = time.perf_counter() - boot
                cpu, wall, busy = _cpu(), time.perf_counter(), _machine_ticks()
                run_sweep(trials, scheduler, tracker, f"eff{pack}", [])
                wall, cpu, busy = time.perf_counter() - wall, _cpu() - cpu, _busy_since(busy)
            units = {(o.result.start_ms, o.result.info.get("device")): o.result.end_ms - o.result.start_ms
                     for o in outcomes if o.result is not None}  # a pack's trials share a start
            ideal = sum(units.values()) / 1000 / slots
            rows.append((f"pack_size={pack}", boot, wall, ideal, ideal / (boot + wall), ideal / wall, cpu / wall,
                         tracker.seconds / wall, busy, wall / n_trials))
            print(f"  pack_size={pack}: wall {wall:.1f} s, ideal {ideal:.1f} s", flush=True)
    return rows


def _machine_ticks() -> tuple[int, int]:
    """``(busy, total)`` clock ticks of every CPU since boot (``/proc/stat``); ``(0, 0)``
    where there is no ``/proc/stat``."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _busy_since(start: tuple[int, int]) -> float:
    """The machine's busy share since ``start`` (:func:`_machine_ticks`); NaN without ``/proc``."""
    busy, total = _machine_ticks()
    return (busy - start[0]) / (total - start[1]) if total > start[1] else float("nan")


def composition():
    """Seconds per trial to compose the paper suite (fast path) and one ablation (both paths)."""
    from harness import expansion

    rows = []
    for cli, fast in ((["+ablation=paper", "scale=full"], True), (["+ablation=sigma_vs_softmax"], True),
                      (["+ablation=sigma_vs_softmax"], False)):
        original = expansion.Composer.__init__

        def init(self, cli_overrides, fast_=fast, _orig=original):
            _orig(self, cli_overrides, fast=fast_)
        expansion.Composer.__init__ = init
        try:
            cfg = compose(config_name="config", overrides=cli)
            t = time.perf_counter()
            n = sum(len(ts) for _, ts in expansion.expand_suite(cfg, cli))
            rows.append((" ".join(cli) + ("" if fast else " (full path)"), n, (time.perf_counter() - t) / n * 1000))
        finally:
            expansion.Composer.__init__ = original
    return rows


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return (f"{os.cpu_count()} CPUs ({cpu}), load average {load:.1f} at the start (shared machine), "
            f"GPU: {gpu}; Python {platform.python_version()}, torch {torch.__version__}, "
            f"torch threads per trial 1; {time.strftime('%Y-%m-%d %H:%M')}")


def softmax_rows(lengths=(4, 8, 12, 16, 32), rows: int = 1024 * 8) -> list[tuple]:
    """Rows ``(n, torch.softmax µs, row_softmax µs, ratio)``: forward + backward on scores
    ``(rows // n, n, n)`` float32 (about ``rows·n`` elements), medians of
    ``torch.utils.benchmark`` timings."""
    from torch.utils.benchmark import Timer

    from harness.models.common import row_softmax

    out = []
    for n in lengths:
        a = torch.randn(rows // n, n, n, requires_grad=True)
        g = torch.randn_like(a)
        times = []
        for fn in (lambda x: torch.softmax(x, dim=-1), row_softmax):
            timer = Timer("torch.autograd.grad(fn(a), a, g)", globals={"torch": torch, "fn": fn, "a": a, "g": g})
            times.append(timer.blocked_autorange(min_run_time=0.5).median * 1e6)
        out.append((n, times[0], times[1], times[0] / times[1]))
    return out


def table(header: list[str], rows: list[tuple], fmt: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("—" if isinstance(v, float) and math.isnan(v) else f.format(v)  # no figure
                                for f, v in zip(fmt, row)) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a check that it runs)")
    parser.add_argument("--steps", type=int, default=200, help="training steps of each benchmark trial")
    parser.add_argument("--families", default="", help="comma-separated subset of the family names")
    parser.add_argument("--sizes", default="1,4,16,64", help="pack sizes")
    parser.add_argument("--no-server", action="store_true", help="skip the MLflow server measurement")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: "
                        "packing,sweep,driver,composition,softmax,gpu")
    parser.add_argument("--out", default=str(RESULTS), help="Markdown file whose packing section is written")
    args = parser.parse_args()
    torch.set_num_threads(1)
    skip = set(filter(None, args.skip.split(",")))
    sizes = [int(s) for s in args.sizes.split(",")]
    families = {k: v for k, v in FAMILIES.items()
                if not args.families or any(f.strip() in k for f in args.families.split(","))}
    steps = 20 if args.quick else args.steps
    if args.quick:
        sizes, families = [1, 4], dict(list(families.items())[:1])
    from harness.config import register_configs

    register_configs()
    parts = [f"Machine: {machine()}.", ""]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        if "packing" not in skip:
            print("packed vs single-trial throughput", flush=True)
            rows = packing(steps, sizes, families)
            parts += [f"**Packed vs single trials** (teacher T3a, d=16, n=8, {steps} steps, validation every "
                      "20 steps on 512 examples, test on 2048; the lone trials run before and after the packs; "
                      "ratio = trials per hour packed / single; shares = where a pack's time goes):", "",
                      table(["family", "pack", "single s/trial", "packed s/trial", "ratio", "setup", "steps",
                             "validation", "test+symmetry"], rows,
                            ["{}", "{}", "{:.3f}", "{:.3f}", "**{:.2f}×**", "{:.0%}", "{:.0%}", "{:.0%}", "{:.0%}"]), ""]
        if "sweep" not in skip:
            print("sweep efficiency on Ray", flush=True)
            n = 8 if args.quick else 64  # 4 packs of 16 on 2 slots: the ideal is reachable (48 made 3: ≤ 0.75)
            rows = sweep_efficiency(n, steps)
            parts += [f"**Sweep on Ray, 2 slots** ({n} softmax trials of {steps} steps, SQLite store; ideal = Σ "
                      "unit (trial or pack) time / slots; the workers' start (Ray's workers import torch and the "
                      "models, once per invocation) is timed before the sweep; ideal/wall with and without it; "
                      "driver CPU and tracking time as shares of the sweep's wall time; machine busy = the "
                      "share of every core's time spent by any process over the sweep):", "",
                      table(["run", "workers' start s", "sweep wall s", "ideal s", "ideal/(start + wall)",
                             "ideal/wall", "driver CPU share", "tracking share", "machine busy",
                             "wall s per trial"], rows,
                            ["{}", "{:.1f}", "{:.1f}", "{:.1f}", "{:.2f}", "**{:.2f}**", "{:.1%}", "{:.1%}",
                             "{:.0%}", "{:.3f}"]), ""]
        if "driver" not in skip:
            print("driver and tracking cost per trial", flush=True)
            rows = driver(200 if args.quick else 2000, 24 if args.quick else 320, not args.no_server)
            parts += ["**Driver and tracking per trial** (load-shaped trials, 31 params and 40 metrics each, "
                      "outcomes replayed at once, no training; claims in batches of 16 on the claim thread and "
                      "records on the writer thread, as a sweep on Ray does; CPU of every process that writes "
                      "to the store: the driver, and the server's process tree; the server twice: as the README's "
                      "recipe starts it, `config.yaml` and `model_state.pt` uploaded through it (two requests a "
                      "trial that the floor does not make), and with `--no-serve-artifacts`, the driver writing "
                      "them into the artifact root itself; the floor is one bare record "
                      "(`create_run`, one `log_batch` of 40 params + 50 metrics, `set_terminated`) on the same "
                      "store in the same run, in 8 rounds of a floor block then a sweep of 40 fresh trials; the "
                      "figures are the rounds' means and the ratio theirs; per round: the mean of the rounds' "
                      "ratios, its 95% t-interval and their range):", "",
                      table(["what", "CPU ms/trial", "wall ms/trial", "CPU / floor", "per round"], rows,
                            ["{}", "{:.2f}", "{:.2f}", "**{:.2f}×**", "{}"]), ""]
        if "composition" not in skip and not args.quick:
            print("composition", flush=True)
            rows = composition()
            parts += ["**Composition** (`expand_suite`, Hydra compositions included):", "",
                      table(["command", "trials", "ms/trial"], rows, ["`{}`", "{}", "{:.2f}"]), ""]
        if "softmax" not in skip:
            print("short-row softmax", flush=True)
            rows = softmax_rows()
            parts += ["**Short-row softmax** (forward + backward on float32 scores `(8192 / n, n, n)`, CPU; "
                      "`row_softmax` pads rows shorter than 16 with -inf, longer ones are `torch.softmax` "
                      "itself):", "",
                      table(["n", "torch.softmax µs", "row_softmax µs", "ratio"], rows,
                            ["{}", "{:.0f}", "{:.0f}", "**{:.2f}×**"]), ""]
        if "gpu" not in skip:
            if torch.cuda.is_available():
                print("GPU", flush=True)
                rows = packing(steps, [1, 16, 64, 256], dict(list(families.items())[:2]), "cuda")
                parts += ["**GPU** (same trials on `cuda`):", "",
                          table(["family", "pack", "single s/trial", "packed s/trial", "ratio", "setup", "steps",
                                 "validation", "test+symmetry"], rows,
                                ["{}", "{}", "{:.3f}", "{:.3f}", "**{:.2f}×**", "{:.0%}", "{:.0%}", "{:.0%}",
                                 "{:.0%}"]), ""]
            else:
                parts += ["GPU: no CUDA device on this machine; the GPU section did not run.", ""]
    text = "\n".join(parts)
    print(text)
    out = Path(args.out)
    write_section(out, START, END, "## Packed trials and the lean driver (`python -m benchmarks`)", text)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
