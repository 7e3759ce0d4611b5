"""The group-sequential confirmation design (:mod:`analysis.sequential`) replayed on a results
bundle and calibrated by simulation (issue 64 item 3).

``python -m benchmarks.sequential [--runs docs/report/runs.csv.gz] [--reps 10000] [--write]``

1. **Replay**: each deciding part's confirmation block, read look by look (its first 4, 7 and 10
   seeds in seed order), decided by the sequential design with the part's preconditions
   checked at each look (a look whose decision a precondition voids does not stop), with and
   without the futility stop; against the fixed design's verdict on all 10 seeds; the
   confirmation runs each needs (2 arms × seeds used).
2. **Calibration**: per part, :func:`analysis.sequential.false_decision_rate` on ``--reps``
   replays per null mean (0 for a difference, ±δ for an equivalence) with the part's observed
   per-seed spread, the sequential rate with its exact 95% upper bound beside the fixed design's
   on the same draws.

Prints one Markdown table each; ``--write`` puts them in ``benchmarks/RESULTS.md``'s
``sequential`` section and the report's figures (runs saved, worst rates, the replayed block's
seeds) in ``docs/report/sequential.csv`` beside the committed bundle, which the report's method
section reads. Analysis only (no training): seconds, not a quiet-machine benchmark.

The replay needs a block run whole: a part of a block run in the design's stages has only the
seeds of the look it stopped at (a part with fewer than the last look's seeds is listed with a
note and left out of the figures). The committed figures replay the last fixed-design block,
seeds 2000–2009, read from git::

    git show 6460290:docs/report/runs.csv.gz > /tmp/b2000.csv.gz
    python -m benchmarks.sequential --runs /tmp/b2000.csv.gz --write
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def _parts(bundle_path: Path):
    """``(ablation, part spec, exploratory decision, block frame)`` of each deciding part with a
    confirmation block in the bundle."""
    from hydra import compose, initialize_config_dir

    from analysis import protocol, stats, verdicts
    from analysis.bundle import read_bundle, split
    from analysis.confirm import with_recorded_block
    from harness.config import register_configs

    register_configs()
    bundle = read_bundle(bundle_path)
    runs, _ = split(bundle)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        for name in sorted(runs):  # a spent block's bundle is read on its own seeds, as the report reads it
            conf = with_recorded_block({name: compose(config_name="config", overrides=[f"+ablation={name}"])},
                                       bundle)[name]
            df = stats.add_error(runs[name])
            df = df[pd.to_numeric(df["train.max_steps"]) <= int(conf.train.max_steps)]
            for part in conf.ablation.parts:
                spec = protocol.spec_dict(part)
                if spec["role"] != "deciding":
                    continue
                block = verdicts._blocks(conf, df, part).get("confirmation", pd.DataFrame())
                if block.empty:
                    continue
                first, fixed = verdicts.decide_both(conf, df, part)
                yield name, {**first.spec, "choose_b": []}, first, block, fixed


def _ready(block: pd.DataFrame, spec: dict, first, looks: tuple[int, ...]) -> list[bool]:
    """Per look, whether the part's preconditions hold on the block's first ``n_k`` seeds (the
    protocol's decision on them is not voided by one)."""
    from analysis import protocol

    seeds = sorted(block["seed"].unique())
    out = []
    for n in looks:
        sub = block[block["seed"].isin(seeds[:n])]
        r = protocol.decide_part(sub, spec, n, check_edge=False, explored=first)
        out.append(not r.test_alone)
    return out


def replay(bundle_path: Path, looks: tuple[int, ...]) -> pd.DataFrame:
    """One row per deciding part: the fixed verdict, the sequential one with and without the
    futility stop, the seeds each used and the part's per-seed spread."""
    from analysis import sequential

    rows = []
    for name, spec, first, block, fixed in _parts(bundle_path):
        d = np.asarray(fixed.d, dtype=float)
        if d.size < looks[-1]:
            rows.append({"ablation": name, "part": f"{spec['claim']} {spec['task']}", "fixed": fixed.verdict,
                         "note": f"{d.size} paired seeds"})
            continue
        ready = _ready(block, spec, first, looks)
        stop = sequential.decide(d, spec, looks, ready)
        plain = sequential.decide(d, spec, looks, ready, futility=False)
        rows.append({"ablation": name, "part": f"{spec['claim']} {spec['task']}: `{spec['b']}` vs `{spec['a']}`",
                     "test": spec["test"] + ("" if spec["test"] == "difference" else f" ({spec['sides']}-sided)"),
                     "delta": float(spec["delta"]), "sd": float(d.std(ddof=1)), "fixed": fixed.verdict,
                     "sequential": stop.label + (" (futile)" if stop.futile else ""), "seeds": stop.n,
                     "no futility": plain.label, "seeds (no futility)": plain.n, "note": ""})
    return pd.DataFrame(rows)


def calibrate(table: pd.DataFrame, reps: int, looks: tuple[int, ...]) -> pd.DataFrame:
    """Per part of ``table``: the simulated false-decision rates (:mod:`analysis.sequential`)."""
    from analysis import sequential

    rows = []
    for i, r in table[table["note"] == ""].iterrows():
        spec = {"test": r["test"].split(" ")[0], "delta": r["delta"],
                "sides": 1 if "1-sided" in r["test"] else 2}
        rate = sequential.false_decision_rate(spec, max(r["sd"], 1e-12), reps, looks, seed=int(i))
        rows.append({"part": r["part"], "null": "d = 0" if spec["test"] == "difference" else
                     ("d = +δ" if spec["sides"] == 1 else "d = ±δ"), "replays": int(rate["replays"]),
                     "sequential": rate["sequential"], "upper 95%": rate["sequential_upper95"],
                     "no futility": rate["no_futility"], "upper 95% (no futility)": rate["no_futility_upper95"],
                     "fixed": rate["fixed"], "mean seeds": rate["mean_seeds"]})
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame, looks: tuple[int, ...]) -> str:
    """The runs each design needs and what the sequential one saves, as a sentence."""
    ok = table[table["note"] == ""]
    fixed = 2 * looks[-1] * len(ok)
    seq, plain = 2 * int(ok["seeds"].sum()), 2 * int(ok["seeds (no futility)"].sum())
    same = int((ok["fixed"] == ok["no futility"]).sum())
    same_futile = int((ok["fixed"] == ok["sequential"].str.replace(" (futile)", "", regex=False)).sum())
    return (f"{len(ok)} deciding parts with a confirmation block of {looks[-1]} seeds: the fixed design runs "
            f"{fixed} confirmation runs; the sequential design (looks at {', '.join(map(str, looks))} seeds) "
            f"{plain} without the futility stop ({100 * (1 - plain / fixed):.0f}% fewer) and {seq} with it "
            f"({100 * (1 - seq / fixed):.0f}% fewer). Without the futility stop it reaches the fixed design's "
            f"verdict on {same} of {len(ok)} parts, with it on {same_futile} (a futile stop reads *inconclusive: the "
            "effect is about δ*).")


def figures(table: pd.DataFrame, rates: pd.DataFrame, looks: tuple[int, ...], reps: int, block: str):
    """The report's figures (:class:`analysis.report_values.Replay`) from the replay ``table``
    and the simulated ``rates``: runs each design needs, verdicts reached, worst rates; ``block``
    the replayed block's seeds."""
    from analysis.report_values import Replay

    ok = table[table["note"] == ""]
    return Replay(tuple(looks), len(ok), 2 * looks[-1] * len(ok), 2 * int(ok["seeds (no futility)"].sum()),
                  2 * int(ok["seeds"].sum()), int((ok["fixed"] == ok["no futility"]).sum()),
                  int((ok["fixed"] == ok["sequential"].str.replace(" (futile)", "", regex=False)).sum()), int(reps),
                  float(rates["no futility"].max()), float(rates["upper 95% (no futility)"].max()),
                  float(rates["sequential"].max()), float(rates["upper 95%"].max()), float(rates["fixed"].max()), block)


def main(argv: list[str] | None = None) -> int:
    from analysis import sequential

    parser = argparse.ArgumentParser(prog="python -m benchmarks.sequential", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "docs" / "report" / "runs.csv.gz")
    parser.add_argument("--reps", type=int, default=10_000)
    parser.add_argument("--write", action="store_true", help="write the tables into benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    looks = sequential.LOOKS
    table = replay(args.runs, looks)
    rates = calibrate(table, args.reps, looks)
    text = "\n\n".join([summary(table, looks),
                        table.drop(columns=["ablation"]).to_markdown(index=False, floatfmt=".3g"),
                        f"False decisions over the looks, {args.reps:,} replays per null mean, per-seed "
                        "differences normal with each part's observed spread (the same draws for both designs):",
                        rates.to_markdown(index=False, floatfmt=".4f"),
                        f"Worst sequential rate {rates['sequential'].max():.4f} (upper 95% bound "
                        f"{rates['upper 95%'].max():.4f}); without the futility stop {rates['no futility'].max():.4f} "
                        f"(upper {rates['upper 95% (no futility)'].max():.4f}); worst fixed-design rate "
                        f"{rates['fixed'].max():.4f}."])
    print(text)
    if args.write:  # the report's method section reads the figures from this file (analysis.sequential.read_replay)
        from benchmarks.results import write_section

        from analysis.bundle import read_bundle
        from analysis.confirm import recorded_block
        from analysis.render import seed_span

        block = seed_span(recorded_block(read_bundle(args.runs)))  # the replayed block's seeds
        # the figures go beside the committed bundle, whichever bundle was replayed
        sequential.write_replay(figures(table, rates, looks, args.reps, block),
                                ROOT / "docs" / "report" / sequential.REPLAY_CSV)

        write_section(ROOT / "benchmarks" / "RESULTS.md", "<!-- sequential:start -->", "<!-- sequential:end -->",
                      f"## A sequential confirmation design, replayed on the fixed-design block of seeds {block} "
                      "(issue 64 item 3) — "
                      "`python -m benchmarks.sequential`", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
