"""The zoo's Markdown from its results bundle alone (:mod:`analysis.zoo`): the leaderboard
``<out>/zoo.md`` and one page per mixer ``<out>/zoo/<arm>.md`` (the scorecard's page,
:func:`analysis.scorecard.page`, without figures), read from ``<bundle folder>/runs.csv.gz``,
``symmetry.csv`` and ``plan.json``. No store, no config, no clock: the same bundle gives the same
bytes, which is what ``zoo.runs=...`` regenerates and the tests compare.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import lengths, protocol, scorecard, stats
from analysis.render import lead as reason_lead
from analysis.bundle import read_bundle, split
from harness.symmetry import CAUSAL_KEY

BUNDLE, SYMMETRY, PLAN = "runs.csv.gz", "symmetry.csv", "plan.json"
SHORT = {"orthogonal_knowledge": "orthogonal with knowledge", "orthogonal": "orthogonal",
         "permutation": "permutation"}


class BundleError(ValueError):
    """A bundle folder that cannot be read (exit 2, one line)."""


def read(folder: Path, runs: Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """``(runs with arm and the error columns, symmetry rows, plan)`` of a bundle folder; the
    runs from the file ``runs`` where one is named (default ``folder/runs.csv.gz``).

    Raises:
        BundleError: a file of the bundle is missing or does not parse.
    """
    try:
        bundle = read_bundle(runs or folder / BUNDLE)
        sym = pd.read_csv(folder / SYMMETRY, keep_default_na=False, na_values=[""])
        plan = json.loads((folder / PLAN).read_text())
    except (OSError, ValueError, EOFError) as err:
        raise BundleError(f"zoo.runs: cannot read the bundle in {folder}: {err}") from err
    runs, _ = split(bundle)
    df = runs.get(scorecard.ABLATION)
    df = scorecard.floored(stats.add_error(df)) if df is not None and not df.empty else pd.DataFrame(
        columns=["status", "variant", "task", "arm", "task.n_train", "seed", "train.lr"])
    return df, sym, plan


def _ci(values: pd.Series) -> str:
    mean, lo, hi = stats.t_interval(values.to_numpy(float), 0.95)
    return "–" if not np.isfinite(mean) else f"{mean:.3g} [{lo:.3g}, {hi:.3g}]" if np.isfinite(lo) else f"{mean:.3g}"


def _seeds(values: list) -> str:
    s = sorted(int(x) for x in values)
    return "none" if not s else f"{s[0]}–{s[-1]}" if s == list(range(s[0], s[-1] + 1)) and len(s) > 1 else ",".join(map(str, s))


def _row(cells: list[str]) -> str:
    """One Markdown table row; a ``|`` inside a cell (a paper's ``γ^|n−m|``) is escaped, as
    otherwise it splits the cell and shifts the row's columns."""
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _verdict_cell(row) -> str:
    if row is None:
        return "–"
    why = row.reason or row.choice if row.verdict == "inconclusive" else ""
    return f"**{row.verdict}**" + (f": {why.split('; ')[0]}" if why else "")


NOT_LEARNED = "not learned"
# Tasks whose targets a softmax-attention teacher generates (tasks/teacher.py): the reference's
# home ground, where it can fit the target exactly; marked on the page so a mixer's "worse" there
# is read as such.
HOME_GROUND = ("teacher_general", "teacher_length")
MARK = "†"


def not_learned(runs: pd.DataFrame) -> bool:
    """Whether an arm's runs (at its chosen lr and largest n_train) never learned: their mean
    test error at the training lengths is not below the trivial predictor's on the same test set
    (``reference_error``: uniform mixing, or the majority class; :func:`analysis.stats.add_error`).
    False where the runs carry no reference."""
    ref = pd.to_numeric(runs.get("reference_error", pd.Series(dtype=float)), errors="coerce").mean()
    return bool(np.isfinite(ref) and pd.to_numeric(runs["error"], errors="coerce").mean() >= ref)


def _length(df: pd.DataFrame, task: str, arm: str) -> tuple[str, str]:
    """``(test error at the longest tested length [95%], its ratio to the error at the longest
    training length)`` of ``arm`` at its lr chosen on validation and its largest n_train; an arm
    that refused the longest length (``test/n_<n>/supported = 0``) says so."""
    ok, _, missing = protocol.chosen_runs(df, task, arm, "error")
    if missing or ok.empty:
        return "–", "–"
    if not_learned(ok):
        return NOT_LEARNED, "–"  # a ratio of two chance-level errors says nothing about lengths
    trained = lengths.training_lengths(ok)
    long = lengths.per_length(ok, trained)
    if long.empty:
        return "–", "–"
    tested = df.loc[df["task"] == task].dropna(axis=1, how="all").columns.str.extract(r"^test/n_(\d+)/")[0]
    top, base = int(tested.dropna().astype(int).max()), max(trained.get(task, [0]) or [0])  # any arm's longest
    at = long[(long["n"] == top) & long["supported"]].set_index("seed")["error"]
    if at.empty:
        return f"no error at n = {top} (refused or not run)", "–"
    ref = long[(long["n"] == base) & long["supported"]].set_index("seed")["error"]
    ratio = f"×{at.mean() / ref.mean():.3g} of n = {base}" if len(ref) and ref.mean() > 0 else "–"
    return f"{_ci(at)} at n = {top}", ratio


def _reference_rows(parts: list[dict], reference: str) -> list[tuple[str, list[str]]]:
    """``[(label, candidate arms)]`` of the reference arms, in the parts' order: ``softmax (M4a)``
    → ``[softmax]``, ``the best σ with 1/n`` → its ``choose_b`` arms (chosen per task on validation)."""
    first = next(p["task"] for p in parts if p["a"] == scorecard.MIXER)
    rows = [(scorecard._words(p["name"])[1], p["choose_b"] or [p["b"]])
            for p in parts if p["task"] == first and p["a"] == scorecard.MIXER and not p.get("leaderboard")]
    return rows or [(reference, [reference])]


def _sym_cells(rows: pd.DataFrame) -> tuple[str, str]:
    """``(params, the symmetries that hold at init)`` of one or more arms' symmetry rows."""
    params = " / ".join(dict.fromkeys(str(int(p)) for p in rows["params"]))
    held = []
    for _, r in rows.iterrows():
        names = [SHORT[s] for s, k in scorecard.SYMMETRY_KEYS.items() if pd.notna(r[k]) and r[k] <= r["tolerance"]]
        leak = r.get(CAUSAL_KEY)  # absent from a bundle written before causality was measured
        if leak is not None and pd.notna(leak) and float(leak) <= r["tolerance"]:
            names.append("causal")
        held.append(", ".join(names) or "none")
    return params, " / ".join(dict.fromkeys(held))


def _trained(df: pd.DataFrame, arms: list[str]) -> str:
    cells = []
    for key in scorecard.SYMMETRY_KEYS.values():
        values = df.loc[df["arm"].isin(arms), key] if key in df else pd.Series(dtype=float)
        med = pd.to_numeric(values, errors="coerce").median()
        cells.append(f"{med:.0e}" if np.isfinite(med) else "–")
    return " / ".join(cells)


def _page(df: pd.DataFrame, sym: pd.DataFrame, plan: dict, arm: dict, header: str) -> tuple[str, pd.DataFrame]:
    """One mixer's page and its decided rows (:func:`analysis.scorecard.decide`: Holm across them)."""
    import torch

    name = arm["name"]
    mine = df[df["arm"].isin([name, *plan["references"]])]
    table = scorecard.decide(mine, plan["parts"], name)
    concrete = [{**p, "a": name if p["a"] == scorecard.MIXER else p["a"]} for p in plan["parts"]]
    control = scorecard.control_rows(mine, concrete)
    row = sym[sym["arm"] == name].iloc[0]
    errors = {k: float(row[k]) for k in scorecard.SYMMETRY_KEYS.values() if pd.notna(row[k])}
    claims = frozenset(filter(None, str(row["declared"]) .split(","))) if pd.notna(row["declared"]) else frozenset()
    lines = scorecard.redrawn_lines(errors, getattr(torch, row["dtype"]), claims, int(row["d"]))
    lines += scorecard.trained_lines(mine, name)
    paper = f" Paper: {arm['paper']}." if arm.get("paper") else ""
    kwargs = f" with `{json.dumps(arm['kwargs'], sort_keys=True)}`" if arm["kwargs"] else ""
    text = scorecard.page(name, table, control, lines, [], f"`{arm['target']}`{kwargs}.{paper} {header}")
    return text, table


def _values(df: pd.DataFrame, key: str, fallback: object) -> str:
    """The values ``key`` takes in the grid's runs (not the lr-edge reruns), else ``fallback``."""
    grid = df[df["extends"].fillna("").astype(str) == ""] if "extends" in df else df
    values = sorted(pd.to_numeric(grid[key], errors="coerce").dropna().unique()) if key in grid else []
    return ", ".join(f"{v:g}" for v in values) if values else str(fallback)


def _header(df: pd.DataFrame, plan: dict) -> str:
    """What ran (from the runs where they say it, else the scale), the command and the commit."""
    scale = plan["scale"]
    tiny = " (a check of the path, not evidence)" if scale["name"] == "tiny" else ""
    extended = int((df["extends"].fillna("").astype(str) != "").sum()) if "extends" in df else 0
    seeds = sorted(pd.to_numeric(df["seed"], errors="coerce").dropna().astype(int).unique()) if len(df) else []
    return (f"Scale `{scale['name']}`{tiny}: seeds {_seeds(seeds)}, n_train {_values(df, 'task.n_train', scale['n_train'])}, "
            f"learning rates {_values(df, 'train.lr', scale['lrs'])}, {_values(df, 'train.max_steps', scale['steps'])} "
            f"steps per trial; {len(df)} runs of {plan['n_trials']} trials composed ({extended} past an lr grid edge) "
            f"in the store's experiment `{scorecard.ABLATION}`. Command: `{plan['command']}`; harness commit "
            f"`{plan['commit']}`.")


def render(folder: Path, out: Path, runs: Path | None = None) -> list[Path]:
    """Write ``out/zoo.md`` and ``out/zoo/<arm>.md`` from the bundle in ``folder`` (its runs
    from the file ``runs`` where one is named); returns their paths, the leaderboard first.

    Raises:
        BundleError: as :func:`read`.
    """
    df, sym, plan = read(folder, runs)
    header = _header(df, plan)
    parts, ref = plan["parts"], plan["reference"]
    board = [p for p in parts if p.get("leaderboard")]
    tasks = [p["task"] for p in board]
    pages_dir = out / "zoo"
    pages_dir.mkdir(parents=True, exist_ok=True)
    paths, rows, reasons = [out / "zoo.md"], [], {}

    def area(task: str, arms: list[str], value: str) -> str:
        values, _, why = protocol.arm_values(df, task, arms[0], value)
        if why:
            reasons.setdefault(reason_lead(why), None)
            return "–"
        return _ci(values)

    length_task = plan["length_task"]
    for arm in plan["arms"]:
        text, table = _page(df, sym, plan, arm, header)
        page = pages_dir / f"{re.sub(r'[^A-Za-z0-9_.=-]+', '_', arm['name'])}.md"
        page.write_text(text)
        paths.append(page)
        by_name = {r.name: r for r in table.itertuples()}
        params, held = _sym_cells(sym[sym["arm"] == arm["name"]])
        cells = []
        for p in board:
            cells += [area(p["task"], [arm["name"]], p["value"]), _verdict_cell(by_name.get(p["name"]))]
        err, ratio = _length(df, length_task, arm["name"])
        rows.append(_row([f"[`{arm['name']}`](zoo/{page.name})", arm.get("paper") or "–", params, held,
                          _trained(df, [arm["name"]]), *cells, err, ratio]))
    for label, candidates in _reference_rows(parts, ref):
        chosen = {t: (protocol.choose_arm(df, t, candidates)[0] if len(candidates) > 1 else candidates[0])
                  for t in [*tasks, length_task]}
        mine = [{**p, "a": chosen[p["task"]]} for p in board]
        table = scorecard.decide(df, mine, "") if candidates != [ref] else None
        by_name = {r.name: r for r in table.itertuples()} if table is not None else {}
        params, held = _sym_cells(sym[sym["arm"].isin(candidates)])
        cells = []
        for p in board:
            pick = f" (`{chosen[p['task']]}`)" if len(candidates) > 1 else ""
            cells += [area(p["task"], [chosen[p["task"]]], p["value"]) + pick,
                      "the reference" if table is None else _verdict_cell(by_name.get(p["name"]))]
        err, ratio = _length(df, length_task, chosen[length_task])
        rows.append(_row([label, "reference arm", params, held, _trained(df, candidates), *cells, err, ratio]))
    d = sym["d"].iloc[0] if len(sym) else "–"
    deltas = ", ".join(f"{p['task']} {p['delta']:g}" for p in board)
    shown = {t: f"{t}{MARK}" if t in HOME_GROUND else t for t in tasks}
    head = " | ".join(f"{shown[t]}: area [95% CI] | {shown[t]}: vs {ref}" for t in tasks)
    lines = [
        "# The mixer zoo: sequence mixers against softmax attention", "",
        f"Generated by `python -m analysis.zoo` from the results bundle `zoo/{BUNDLE}` (with `zoo/{SYMMETRY}` "
        f"and `zoo/{PLAN}`); regenerate with `zoo.runs=<this folder>/zoo/{BUNDLE}`. {header}", "",
        f"* **params**: trainable scalars at d = {d} (task `{sym['task'].iloc[0] if len(sym) else '–'}`).",
        "* **at init**: the symmetries whose relative error on re-drawn weights (float64 where the model "
        "runs in it) is within tolerance, and *causal* where a change at position t changes no output "
        "before t (the largest relative change over t, same weights and dtype); each mixer's declared "
        "set and its declared causality equal these (the pre-flight refuses otherwise). **trained**: median relative error over the arm's runs on its trained weights "
        "(orthogonal with knowledge / orthogonal / permutation).",
        "* **area**: per seed the mean natural-log test error over log n_train (trapezoid), each size at the "
        "lr chosen on validation; mean over seeds with its Student-t 95% interval; lower is better. Its floor "
        f"is the metric's own resolution: {scorecard.floor_words(df)}.",
        f"* **vs {ref}**: d = area({ref}) − area(arm) per seed under the verdict protocol "
        f"(`analysis/protocol.py`): better, equivalent within δ, worse, or inconclusive and why; Holm across "
        f"each mixer's page (the reference arms: across their own row); δ registered in `conf/zoo.yaml`: {deltas}.",
        f"* **length**: on `{length_task}`, at the lr chosen on validation and the largest n_train, the test "
        "error at the longest tested length (mean [95% CI] over seeds), and its ratio to the error at the "
        f"longest training length; *{NOT_LEARNED}* (no ratio) where the error at the training lengths is not "
        "below the trivial predictor's (uniform mixing) on the same test set.",
        f"* {MARK} the targets of {', '.join(f'`{t}`' for t in HOME_GROUND)} are generated by a softmax-attention "
        "teacher: the reference's home ground, which it can fit exactly.", "",
        f"| arm | paper | params | at init | trained | {head} | length{MARK if length_task in HOME_GROUND else ''}: error "
        f"| length{MARK if length_task in HOME_GROUND else ''}: ratio |",
        "|---|---|---|---|---|" + "---|---|" * len(tasks) + "---|---|",
        *rows, ""]
    if reasons:
        lines += ["A cell `–`: " + "; ".join(reasons) + ".", ""]
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    paths[0].write_text("\n".join(lines))
    return paths
