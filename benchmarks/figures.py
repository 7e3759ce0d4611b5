"""``python -m benchmarks.figures [--repeat N]``: CPU to write a figure's files (PNG and PDF).

Draws the sample-efficiency figure of each ablation in the committed results bundle
(``docs/report/runs.csv.gz``), the figures ``docs/report.md`` shows, once with
:func:`analysis.plots._save` (the tight box measured once and given to both files) and once with
the previous way, ``bbox_inches="tight"`` per file (a layout pass for each file, and one more
for the width check), alternating, ``--repeat`` times. Prints the CPU seconds of the saves per
figure and their ratio, measured in one run (the machine is shared: read the ratio).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt

from analysis import bundle, plots

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "docs" / "report" / "runs.csv.gz"


def tight_per_file(fig, *paths: Path) -> None:
    """The way ``_save`` wrote files before: a width check, then ``bbox_inches="tight"`` for each
    file (each measures the box again)."""
    width = fig.get_tightbbox(fig.canvas.get_renderer()).width + 2 * plt.rcParams["savefig.pad_inches"]
    dpi = min(plots.DPI, plots.MAX_WIDTH_PX / width) if width > 0 else plots.DPI
    for path in paths:
        metadata = {"CreationDate": None} if Path(path).suffix == ".pdf" else None
        fig.savefig(path, dpi=dpi, bbox_inches="tight", metadata=metadata)


def _timed_saves(save, runs, out: Path) -> float:
    """CPU seconds spent in ``save`` while drawing the sample-efficiency figure of ``runs``."""
    spent = [0.0]

    def timed(fig, *paths):
        start = time.process_time()
        save(fig, *paths)
        spent[0] += time.process_time() - start

    original, plots._save = plots._save, timed
    try:
        plots.sample_efficiency(runs, out)
    finally:
        plots._save = original
    return spent[0]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.figures", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    by_ablation, _ = bundle.split(bundle.read_bundle(BUNDLE))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, runs in by_ablation.items():
            once, per_file = [], []
            for _ in range(args.repeat):
                once.append(_timed_saves(plots._save, runs, Path(tmp) / f"{name}-once"))
                per_file.append(_timed_saves(tight_per_file, runs, Path(tmp) / f"{name}-tight"))
            rows.append((name, statistics.median(per_file), statistics.median(once)))
    print("| ablation | tight per file, CPU s | box once, CPU s | ratio |\n|---|---|---|---|")
    for name, before, after in rows:
        print(f"| {name} | {before:.2f} | {after:.2f} | {before / after:.2f}× |")
    before, after = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"| all {len(rows)} | {before:.2f} | {after:.2f} | **{before / after:.2f}×** |")


if __name__ == "__main__":
    main()
