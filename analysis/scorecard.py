"""``python -m analysis.scorecard model=external model.target=PACKAGE.MODULE:CLASS [scale=...]``

One page for a mixer against attention's reference arms (``conf/ablation/scorecard.yaml``:
softmax M4a, W_V M5, the best elementwise σ with 1/n, the MLP B1) on the tasks that separate
the paper's terms (selection, generation outside span(X), repeated tokens, length
generalisation). It runs the ablation ``scorecard`` with the grid's model axis and with the
command line's model (``model=…``, ``model.*``) as one more arm, in this process as ``python -m
harness`` runs a sweep: trials already in the store (the reference arms of an earlier scorecard,
by trial id) are skipped, so a second mixer runs only its own trials. Then it writes
``outputs/scorecard-<variant>/scorecard.md`` in the current directory (with ``scorecard.csv``
and the figures beside it):

* the measured symmetry table: the mixer's symmetries on re-drawn float64 weights
  (:func:`harness.external_check.measure_redrawn`, as the pre-flight measures them), and every
  arm's median ``symmetry/*`` error on its trained weights;
* per part of the ablation file (``a: MIXER`` is the mixer's arm) the mixer's test error against
  the reference's with the paired interval under the verdict protocol (:mod:`analysis.protocol`):
  *better* (the difference part supported), *worse* (contradicted), *equivalent within δ* (the
  two-sided TOST part supported), else *inconclusive* with the reason; a better / worse /
  equivalent verdict also needs its Holm-adjusted p below 0.05 across the page's comparisons;
* the sample-efficiency and length-generalisation figures (:mod:`analysis.plots`).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import hydra
import numpy as np
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict
from scipy import stats as sps

from analysis import plots, protocol, stats
from analysis.load import load_runs
from analysis.trials import restrict

ABLATION, MIXER, ALPHA = "scorecard", "MIXER", 0.05
SYMMETRY_KEYS = {"rot+Z": "symmetry/rotation_knowledge_err", "rot": "symmetry/rotation_err",
                 "perm": "symmetry/permutation_err"}


def _pairs(result: protocol.PartResult) -> int:
    match = re.search(r"\((\d+) of", result.seeds)
    return int(match.group(1)) if match else 0


def _p_values(diff: protocol.PartResult, delta: float) -> tuple[float, float]:
    """(difference p, TOST p) of the paired per-seed differences, from the 95% Student-t
    interval the protocol printed (mean ``effect``, bounds ``lo, hi``, ``n`` pairs)."""
    n = _pairs(diff)
    if n < 2 or not np.isfinite(diff.lo):
        return np.nan, np.nan
    se = (diff.hi - diff.lo) / (2 * sps.t.ppf(0.975, n - 1))
    if se == 0:
        return (0.0 if diff.effect else 1.0), (0.0 if abs(diff.effect) < delta else 1.0)
    p_diff = 2 * sps.t.sf(abs(diff.effect) / se, n - 1)
    p_tost = max(sps.t.sf((diff.effect + delta) / se, n - 1), sps.t.sf((delta - diff.effect) / se, n - 1))
    return float(p_diff), float(p_tost)


def decide(df: pd.DataFrame, parts: list[dict], mixer: str) -> pd.DataFrame:
    """One row per part: the mixer (``a``) against its reference (``b``), the verdict and why."""
    rows = []
    for spec in parts:
        spec = {**spec, "a": mixer if spec["a"] == MIXER else spec["a"]}
        diff = protocol.decide_part(df, {**spec, "test": "difference"})
        equiv = protocol.decide_part(df, {**spec, "b": diff.spec["b"], "choose_b": [],  # the same b
                                          "test": "equivalence", "sides": 2})
        p_diff, p_tost = _p_values(diff, float(spec["delta"]))
        shown = diff.spec["b"] if not spec.get("choose_b") else f"{spec['b']}: {diff.spec['b']}"
        rows.append({"task": spec["task"], "reference": shown, "delta": float(spec["delta"]),
                     "n_train": diff.n_train, "seeds": diff.seeds, "mixer": diff.mean_a,
                     "reference_error": diff.mean_b, "effect": diff.effect, "lo": diff.lo, "hi": diff.hi,
                     "p_diff": p_diff, "p_tost": p_tost, "diff": diff.verdict, "equiv": equiv.verdict,
                     "why": "; ".join(diff.reasons or equiv.reasons), "choice": diff.choice})
    table = pd.DataFrame(rows)
    # one family of comparisons: each part's difference and equivalence test
    adjusted = protocol.holm(np.concatenate([table["p_diff"], table["p_tost"]]))
    table["p_diff_holm"], table["p_tost_holm"] = adjusted[:len(table)], adjusted[len(table):]
    table["verdict"], table["reason"] = zip(*(_verdict(r) for r in table.itertuples()))
    return table


def _verdict(r) -> tuple[str, str]:
    if r.diff == protocol.SUPPORTED and r.p_diff_holm < ALPHA:
        return "better", ""
    if r.diff == protocol.CONTRADICTED and r.p_diff_holm < ALPHA:
        return "worse", ""
    if r.equiv == protocol.SUPPORTED and r.p_tost_holm < ALPHA:
        return "equivalent within δ", ""
    if r.diff in (protocol.SUPPORTED, protocol.CONTRADICTED) or r.equiv == protocol.SUPPORTED:
        return "inconclusive", f"not significant after Holm (p = {min(r.p_diff_holm, r.p_tost_holm):.2g})"
    return "inconclusive", r.why or "the 95% interval includes 0 and the 90% interval is not inside ±δ"


def symmetry_rows(df: pd.DataFrame, trial_cfg) -> list[str]:
    """The measured symmetry table (Markdown lines)."""
    from harness.models import build_model
    from harness.external_check import TOLERANCE, measure_redrawn, symmetry_table
    from harness.models.external import NAME, declared
    from tasks import build_task

    lines = []
    if trial_cfg.model.name == NAME:
        task = build_task(trial_cfg.task)
        model = build_model(trial_cfg.model, task.d, task.n_max, __import__("torch").Generator().manual_seed(0))
        errors, dtype = measure_redrawn(model, task.d, task.n_max)
        table = symmetry_table(errors, dtype, declared(model, trial_cfg.model.target))
        lines += [f"On re-drawn {str(dtype)[6:]} weights (tolerance {TOLERANCE[dtype]:g}, the pre-flight's "
                  f"measurement at d={task.d}):", "", "| symmetry | error | |", "|---|---|---|"]
        for name, key in (("orthogonal_knowledge", SYMMETRY_KEYS["rot+Z"]), ("orthogonal", SYMMETRY_KEYS["rot"]),
                          ("permutation", SYMMETRY_KEYS["perm"])):
            shown = f"{errors[key]:.0e}" if key in errors else "–"
            lines.append(f"| {name} | {shown} | {table[name]} |")
        lines.append("")
    present = [k for k in SYMMETRY_KEYS.values() if k in df]
    med = df.groupby("arm")[present].median() if present else pd.DataFrame()
    lines += ["Median over each arm's trials, on its trained weights (float32; `symmetry/*` of each run):", "",
              "| arm | " + " | ".join(SYMMETRY_KEYS) + " |", "|---|" + "---|" * len(SYMMETRY_KEYS)]
    for arm, row in med.iterrows():
        cells = [f"{row[k]:.0e}" if k in row and np.isfinite(row[k]) else "–" for k in SYMMETRY_KEYS.values()]
        lines.append(f"| `{arm}` | " + " | ".join(cells) + " |")
    return lines


def _fmt(v: float) -> str:
    return "–" if not np.isfinite(v) else f"{v:.3g}"


def page(mixer: str, table: pd.DataFrame, sym: list[str], figures: list[str], scale: str, n: int) -> str:
    """The scorecard's Markdown."""
    lines = [f"# Scorecard: `{mixer}`", "",
             f"Scale `{scale}`{' (a check of the path, not evidence)' if scale not in ('default', 'full') else ''}; "
             f"{n} trials in the store's experiment `{ABLATION}` (`conf/ablation/scorecard.yaml`).", "",
             "## Measured symmetries", "", *sym, "",
             "## Against the reference arms", "",
             "Test error at the largest training-set size, each arm at its lr chosen on validation; "
             "d = reference − mixer per seed, its paired 95% Student-t interval; δ per task from "
             f"the ablation file; Holm across the page's {2 * len(table)} tests (difference and TOST per row).", "",
             "| task | reference | n_train | seeds | mixer | reference | d [95% CI] | δ | verdict | why |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        ci = f"{_fmt(r.effect)} [{_fmt(r.lo)}, {_fmt(r.hi)}]"
        why = "; ".join(x for x in (r.reason, r.choice) if x)
        lines.append(f"| {r.task} | `{r.reference}` | {r.n_train} | {r.seeds} | {_fmt(r.mixer)} | "
                     f"{_fmt(r.reference_error)} | {ci} | {r.delta:g} | **{r.verdict}** | {why} |")
    lines += ["", "## Figures", "", *[f"![{Path(f).stem}]({Path(f).name})" for f in figures], ""]
    return "\n".join(lines)


def mixer_overrides(overrides: list[str]) -> tuple[list[str], list[str]]:
    """``(model overrides, the rest)`` of the command line."""
    model = [o for o in overrides if o.lstrip("+~").split("=", 1)[0].split(".")[0] == "model"]
    return model, [o for o in overrides if o not in model]


def run(cfg: DictConfig, overrides: list[str]) -> Path:
    """Run the scorecard's trials, decide, write the page; returns its path."""
    from analysis.reporting import run_suite
    from harness.store import resolve_store
    from harness.expansion import expand

    model, rest = mixer_overrides(overrides)
    if not model:
        print("error: name the mixer: model=external model.target=PACKAGE.MODULE:CLASS (or model=PRESET)",
              file=sys.stderr)
        sys.exit(2)
    base = ["+ablation=scorecard", *rest]
    sc = hydra.compose(config_name="config", overrides=base)
    try:
        refs = expand(sc, base)
        mine = expand(sc, [*base, *model])
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    trials = refs + [t for t in mine if t.trial_id not in {r.trial_id for r in refs}]
    store = resolve_store(OmegaConf.to_object(sc.tracking), Path.cwd())
    with open_dict(sc):
        sc.report.suite = ABLATION
    run_suite(sc, {ABLATION: trials}, base, store)
    df = restrict(stats.add_error(load_runs(ABLATION, store.uri)), trials, ABLATION)
    mixer = mine[0].variant
    out = Path.cwd() / "outputs" / f"scorecard-{re.sub(r'[^A-Za-z0-9_.=-]+', '_', mixer)}"
    out.mkdir(parents=True, exist_ok=True)
    parts = [protocol.spec_dict(p) for p in OmegaConf.to_object(sc.ablation.parts)]
    table = decide(df, parts, mixer)
    figures = _figures(df, out, sc.scale.name)
    text = page(mixer, table, symmetry_rows(df, mine[0].config), figures, sc.scale.name, len(trials))
    (out / "scorecard.md").write_text(text)
    table.to_csv(out / "scorecard.csv", index=False)
    print(f"scorecard: {out / 'scorecard.md'}")
    return out / "scorecard.md"


def _figures(df: pd.DataFrame, out: Path, scale: str) -> list[str]:
    paths = [*plots.sample_efficiency(df, out / "sample_efficiency", ablation=ABLATION, scale=scale,
                                      formats=("png",))]
    lengths = df[df["task"] == "teacher_length"]
    try:
        paths += plots.length_generalisation(lengths, out / "length_generalisation", ablation=ABLATION,
                                             scale=scale, formats=("png",))
    except ValueError as err:  # no per-length metric (no finished run on the length task)
        print(f"scorecard: no length figure: {err}", file=sys.stderr)
    return [str(p) for p in paths]


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Entry point; see the module docstring."""
    run(cfg, list(HydraConfig.get().overrides.task))


if __name__ == "__main__":
    from harness.config import register_configs

    register_configs()
    main()
