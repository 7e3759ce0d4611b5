"""``python -m benchmarks.gpu [--steps N] [--budget-s S] [--packs 16,64,256] [--out benchmarks/RESULTS.md]``: packed
training on a CUDA GPU (issue 46, item 4), one command of at most ~5 minutes that a GPU
machine runs as is. For a typical report trial (``softmax`` on ``teacher``, n_train 1024, batch
64, validation every 20 steps) it measures the wall seconds per trial of a lone trial and of
packs of 16, 64 and 256, eager and compiled (``train.compile=on``: inductor with CUDA graphs,
compile time reported apart), and the GPU's busy share of a pack's steps (the profiler's
summed kernel time ÷ the wall time of the same steps); then, per pack size, the milliseconds per
trial end to end as a driver runs a pack (composition, claim, training, wrap-up and record into a
SQLite store of its own: :func:`end_to_end`). TF32 is off throughout (so the symmetry
measurements and the float32 results are IEEE float32). Writes its table into the ``gpu``
section of ``benchmarks/RESULTS.md``; arms that would run past ``--budget-s`` are skipped and
listed. On a machine without CUDA it says so and writes nothing. ``--device cpu`` runs the same
command on a CPU, eager arms only and no busy share (a check that it runs, e.g. with ``--packs 2
--steps 2``: ``tests/test_benchmarks.py``; its figures are not the GPU's).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.results import write_section

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
START, END = "<!-- gpu:start -->", "<!-- gpu:end -->"
TYPICAL = ["model=softmax", "task=teacher", "task.n_train=1024", "train.batch_size=64",
           "train.eval_every=20"]
def configs(P: int, steps: int, compiled: bool, device: str = "cuda") -> list:
    from harness.expansion import compose_trial

    extra = [f"cluster.device={device}", f"train.max_steps={steps}", f"train.compile={'on' if compiled else 'off'}"]
    return [compose_trial([*TYPICAL, *extra], [f"seed={i}", f"train.lr={(0.003, 0.01, 0.03)[i % 3]}"]).config
            for i in range(P)]


def timed(device: str, fn, *args, **kwargs) -> float:
    """Wall seconds of ``fn(*args, **kwargs)``, the GPU's queue drained before and after (on
    ``device`` ``cuda``)."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    fn(*args, **kwargs)
    sync()
    return time.perf_counter() - start


def busy_share(P: int, steps: int, compiled: bool) -> float:
    """Summed CUDA kernel time ÷ wall time of one pack's whole run (profiled; setup, validation
    and conclusion included)."""
    from torch.profiler import ProfilerActivity, profile

    from harness.pack import run_pack

    cfgs = configs(P, steps, compiled)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        wall = timed("cuda", run_pack, cfgs, "cuda")
    kernel_us = sum(e.self_device_time_total for e in prof.key_averages()
                    if e.device_type == torch.autograd.DeviceType.CUDA)
    return kernel_us / 1e6 / wall


def measure(steps: int, budget_s: float, packs: tuple[int, ...] = (16, 64, 256),
            device: str = "cuda") -> tuple[list[dict], list[str], list[str]]:
    """One row per arm (``arm``, ``P``, ``compiled``, ``s`` per trial, ``first`` s of the first
    pack (compiling), where a pack's time went per trial, ``busy`` share) and the arms skipped
    past the budget.
    Configs are composed outside the timed regions (Hydra's composition costs about 140 ms per
    trial: the first GPU run timed it inside and read 150 ms per trial at pack 256 where the
    pack itself took about 11), and every arm is timed before any is profiled, so that no
    profiler session can be left to slow a timed one. Also returns the arms not run on this
    device (compiled arms off CUDA: CUDA graphs)."""
    from harness.pack import run_pack
    from harness.trial import run_trial

    started, rows, skipped, not_run = time.perf_counter(), [], [], []
    run_trial(configs(1, 2, False, device)[0], device)  # CUDA context, kernels loaded
    one = configs(1, steps, False, device)[0]  # composed outside the timed region (Hydra: ms per trial)
    lone = timed(device, run_trial, one, device)
    rows.append({"arm": "lone", "P": 1, "compiled": False, "s": lone, "first": float("nan"), "split": {}})
    for compiled in (False, True):
        for P in packs:
            if compiled and device != "cuda":
                not_run.append(f"pack {P} compiled")
                continue
            if time.perf_counter() - started > budget_s:
                skipped.append(f"pack {P} {'compiled' if compiled else 'eager'}")
                continue
            warm, cfgs, split = configs(P, 2, compiled, device), configs(P, steps, compiled, device), {}
            first = timed(device, run_pack, warm, device)  # warm-up (compiles)
            wall = timed(device, run_pack, cfgs, device, timings=split)
            rows.append({"arm": "pack", "P": P, "compiled": compiled, "s": wall / P, "first": first,
                         "split": {k: v / P for k, v in split.items()}})
            print(f"  pack {P} compiled={compiled}: {1000 * wall / P:.2f} ms/trial "
                  f"({', '.join(f'{k} {1000 * v / P:.2f}' for k, v in split.items())})", flush=True)
    for row in rows:  # after every timing (see above); the profiled run is 100 steps at most
        if device != "cuda" or time.perf_counter() - started > 1.5 * budget_s:
            row["busy"] = float("nan")
            continue
        row["busy"] = busy_share(row["P"], min(steps, 100), row["compiled"])
        print(f"  busy {row['arm']} {row['P']} compiled={row['compiled']}: {row['busy']:.0%}", flush=True)
    return rows, skipped, not_run


def end_to_end(P: int, steps: int, device: str, folder: Path) -> dict[str, float]:
    """Seconds per trial of a pack of ``P`` trials end to end as a driver runs it, in this
    process: ``compose`` (Hydra, each trial), ``claim`` (one bakery round into a SQLite store
    of its own in ``folder``), ``train`` (:func:`harness.pack.run_pack`: setup, steps,
    validation), ``wrapup`` (its ``conclude``: test sets, symmetry measurements, the span
    residuals in one batch) and ``record`` (every trial in one batched transaction, its
    ``model_state.pt`` written), and ``total``."""
    from harness.config import TrackingConfig
    from harness.expansion import compose_trial
    from harness.pack import run_pack
    from harness.records import Outcome
    from harness.store import resolve_store
    from harness.tracking import Tracker

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    clock, mark = {}, time.perf_counter()
    extra = [f"cluster.device={device}", f"train.max_steps={steps}", "train.compile=off"]
    trials = [compose_trial([*TYPICAL, *extra], [f"seed={i}", f"train.lr={(0.003, 0.01, 0.03)[i % 3]}"])
              for i in range(P)]
    clock["compose"], mark = time.perf_counter() - mark, time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    tracker = Tracker(resolve_store(TrackingConfig(), folder))
    experiment = tracker.experiment("gpu-end-to-end")
    parent = tracker.start_parent(experiment, "gpu-end-to-end", P, 0, [])
    mark = time.perf_counter()
    runs = tracker.claim_batch(experiment, parent, "gpu-end-to-end", trials)
    clock["claim"], mark = time.perf_counter() - mark, time.perf_counter()
    split: dict[str, float] = {}
    sync()
    results = run_pack([t.config for t in trials], device, timings=split)
    sync()
    clock["train"] = time.perf_counter() - mark - split["conclude"]
    clock["wrapup"], mark = split["conclude"], time.perf_counter()
    answers = tracker.finish_trials([(r, Outcome(t, res, None, "bench"), []) for r, t, res in zip(runs, trials, results)])
    clock["record"] = time.perf_counter() - mark
    tracker.end_run(parent)
    if not all(answers):
        raise RuntimeError(f"end to end, pack {P}: {answers.count(False)} records not written")
    clock["total"] = sum(clock.values())
    return {k: v / P for k, v in clock.items()}


def _packs(text: str) -> tuple[int, ...]:
    """``--packs``: positive integers, comma-separated (argparse reports the error)."""
    try:
        sizes = tuple(int(p) for p in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give pack sizes as positive integers, e.g. 16,64,256")
    return sizes


def write(text: str, out: Path) -> None:
    write_section(out, START, END, "### GPU packing (`python -m benchmarks.gpu`)", text)


def main(argv: list[str] | None = None) -> int:
    """Measure and write the table (module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps of each trial")
    parser.add_argument("--budget-s", type=float, default=240.0, help="start no arm after this many seconds")
    parser.add_argument("--packs", type=_packs, default=(16, 64, 256), help="pack sizes, comma-separated (default 16,64,256)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: only to check that the command runs (eager arms, no busy share)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: the GPU benchmark did not run (nothing written)")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # IEEE float32 matmuls: symmetry checks included
    torch.backends.cudnn.allow_tf32 = False
    from hydra import initialize_config_dir

    from harness.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        rows, skipped, not_run = measure(args.steps, args.budget_s, args.packs, args.device)
        ends = []
        with tempfile.TemporaryDirectory(prefix="gpu-e2e-") as tmp:
            for P in args.packs:  # after every timed and profiled arm: its stores are its own
                ends.append((P, end_to_end(P, args.steps, args.device, Path(tmp) / str(P))))
                print(f"  end to end pack {P}: {1000 * ends[-1][1]['total']:.1f} ms/trial", flush=True)
    lone = rows[0]["s"]
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU (a check that the command runs, not GPU figures)"
    lines = [(f"{name}, torch {torch.__version__}, {torch.get_num_threads()} torch "
             f"threads, {args.steps} steps, TF32 off; ms per trial, and where a pack's time went per "
             "trial (setup: data and models; steps; eval: validation and checkpoints; conclude: test "
             "and symmetry measurements); GPU busy: profiled kernel time ÷ wall time of a run of "
             f"{min(args.steps, 100)} steps, measured after every arm was timed."), "",
             ("| arm | pack | compiled (CUDA graphs) | ms / trial | × lone | setup | steps | eval | conclude "
              "| first pack s (compiling) | GPU busy |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        split = [f"{1000 * r['split'][k]:.1f}" if k in r["split"] else "" for k in ("setup", "steps", "eval", "conclude")]
        busy = "" if r["busy"] != r["busy"] else f"{r['busy']:.0%}"
        first = "" if r["first"] != r["first"] else f"{r['first']:.1f}"
        lines.append(f"| {r['arm']} | {r['P']} | {'yes' if r['compiled'] else 'no'} | {1000 * r['s']:.1f} | "
                     f"{lone / r['s']:.1f} | {' | '.join(split)} | {first} | {busy} |")
    lines += ["", ("End to end per trial (ms), eager, as a driver runs a pack: composition (Hydra), the "
                   "claim (one bakery round, SQLite store), training (setup, steps, validation), the "
                   "wrap-up (test sets, symmetry measurements) and the record (one batched transaction "
                   "and the model files):"), "",
              "| pack | compose | claim | train | wrap-up | record | total |", "|---|---|---|---|---|---|---|"]
    for P, e in ends:
        lines.append(f"| {P} | " + " | ".join(f"{1000 * e[k]:.1f}" for k in
                                              ("compose", "claim", "train", "wrapup", "record", "total")) + " |")
    if skipped:
        lines += ["", f"Skipped (past the {args.budget_s:.0f} s budget): {', '.join(skipped)}."]
    if not_run:
        lines += ["", f"Not run on a CPU (CUDA graphs need CUDA): {', '.join(not_run)}."]
    text = "\n".join(lines)
    print(text)
    write(text, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
