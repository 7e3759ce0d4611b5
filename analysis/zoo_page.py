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
from typing import NamedTuple

import numpy as np
import pandas as pd

from analysis import lengths, protocol, render_tables, scorecard, stats
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
    return reference_rows(df, sym, plan), sym, plan


REFERENCE_NAMES = {"majority_acc": "majority class", "uniform_acc": "uniform mixing",
                   "order_blind_acc": "the most frequent value, binding no key"}


def trivial_reference(metrics: dict[str, float], causal: bool) -> tuple[float, str]:
    """``(error, name)`` of the best trivial reference in ``metrics`` (a task's
    :meth:`tasks.base.TaskBase.trivial_references`), as :func:`analysis.stats.add_error` reads
    the logged ones: relative MSE's uniform mixing, else the lowest ``1 − acc``."""
    prefix = " over the prefix" if causal else ""
    if "uniform_rel_mse" in metrics:
        return float(metrics["uniform_rel_mse"]), f"uniform mixing{prefix}"
    errors = {k: 1.0 - float(v) for k, v in metrics.items() if k in REFERENCE_NAMES}
    best = min(errors, key=errors.get)
    return errors[best], REFERENCE_NAMES[best] + (prefix if best == "uniform_acc" else "")


def reference_rows(df: pd.DataFrame, sym: pd.DataFrame, plan: dict) -> pd.DataFrame:
    """``df`` with each row's trivial reference (``reference_error``, ``reference_name``: what
    every *not learned* rule of the page reads) replaced by its task's from
    ``plan["trivial_references"]`` (:func:`analysis.zoo.trivial_references`) where the logged one
    is not the bar: for an arm measured causal (``sym``) the one it can express, uniform mixing over
    the prefix; on a task with an order-blind guess (``recall``) for every arm, its expected accuracy
    (there the logged ones, majority class and uniform mixing, are far below a guess among the
    values, so an arm that binds nothing read as learned). A bundle without them reads as it is."""
    refs = plan.get("trivial_references") or {}
    if df.empty or not refs:
        return df
    causal = [str(r["arm"]) for _, r in sym.iterrows() if measured_causal(r)]
    out = df.copy()
    for task, kinds in refs.items():
        for kind, metrics in kinds.items():
            rows = (out["task"] == task) & (out["arm"].isin(causal) if kind == "causal" else ~out["arm"].isin(causal))
            out.loc[rows, "reference_error"], out.loc[rows, "reference_name"] = trivial_reference(metrics, kind == "causal")
    return out


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
    why = row.reason or row.choice if row.verdict == "inconclusive" else (  # decided on the ×4 reruns
        row.reason if getattr(row, "longer", False) or getattr(row, "confirmed", False) else "")  # or the block: says so
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
    (``reference_error``: uniform mixing, or the majority class; :func:`analysis.stats.add_error`;
    for an arm measured causal over the prefix, on recall the order-blind guess: :func:`reference_rows`).
    False where the runs carry no reference. The reference is the verdicts' (:func:`analysis.protocol.reference`:
    for relative MSE also the zero predictor and ``ŷ = x``), so that a causal arm, whose prefix mean errs
    more than predicting 0 on a teacher task, is held to the zero predictor as its rows are."""
    if "reference_error" not in runs or not runs["reference_error"].notna().any():
        return False
    ref, _ = protocol.reference(runs)
    return bool(np.isfinite(ref) and pd.to_numeric(runs["error"], errors="coerce").mean() >= ref)


def measured_causal(row) -> bool:
    """Whether a ``symmetry.csv`` row (or the pre-flight's dict) measured its arm causal: its
    largest change before a changed position (:data:`harness.symmetry.CAUSAL_KEY`) within its
    tolerance. False where it was not measured (a bundle written before causality was)."""
    leak = row.get(CAUSAL_KEY) if hasattr(row, "get") else None
    return leak is not None and bool(pd.notna(leak)) and float(leak) <= float(row["tolerance"])


def parts_for(parts: list[dict], causal: bool) -> list[dict]:
    """``parts`` less the leaderboard's parts against references serving the other causality
    (``serves``; a part without one, as a bundle written before ``zoo.references``, serves all)."""
    kind = "causal" if causal else "bidirectional"
    return [p for p in parts if not p.get("leaderboard") or p.get("serves") in (None, kind)]


NOT_RUN = "not run"


def control_pair(parts: list[dict]) -> list[str]:
    """The positive control's two arms (``[mlp, softmax]``), from the first part that names them;
    [] where none does."""
    return next((p["control"] for p in parts if p.get("control")), [])


def designed_out(plan: dict, causal_of: dict[str, bool], arm: str, task: str) -> bool:
    """Whether the design does not run ``arm`` on ``task``: a task of ``zoo.causal_only`` (the
    plan's ``causal_only``; absent from a bundle written before it) and an arm neither measured
    causal (``causal_of``) nor one of the control pair (:func:`analysis.zoo.causal_only` and
    :func:`analysis.zoo.references_on_causal_tasks`, the runs' side of the same rule). Such a
    cell reads *not run*: a choice of the design, not runs missing that more runs would add."""
    if task not in plan.get("causal_only", ()):
        return False
    return not causal_of.get(arm, False) and arm not in control_pair(plan["parts"])


def _part_out(plan: dict, causal_of: dict[str, bool], part: dict, arm: str) -> bool:
    """Whether a part (its ``a``, ``MIXER`` standing for ``arm``, against ``b`` or every one of its
    ``choose_b``) has a side the design does not run on its task (:func:`designed_out`)."""
    a = arm if part["a"] == scorecard.MIXER else part["a"]
    return designed_out(plan, causal_of, a, part["task"]) or all(
        designed_out(plan, causal_of, b, part["task"]) for b in (part.get("choose_b") or [part["b"]]))


def causal_of(sym: pd.DataFrame) -> dict[str, bool]:
    """``{arm: measured causal}`` of every row of ``symmetry.csv`` (:func:`measured_causal`)."""
    return {r["arm"]: measured_causal(r) for _, r in sym.iterrows()}


def registered(plan: dict) -> list[dict]:
    """The plan's references ``{arm, label, serves}`` (a bundle written before ``zoo.references``:
    its one ``reference``, serving every arm)."""
    return plan.get("registered") or [{"arm": plan["reference"], "label": plan["reference"], "serves": None}]


class Rounds(NamedTuple):
    """A bundle's runs by round (:func:`analysis.scorecard.split_rounds` at the plan's steps):
    the grid and its lr-edge runs, the ×``factor`` budget reruns and the confirmation block
    (its runs at ×1 and at ×factor)."""

    main: pd.DataFrame
    longer: pd.DataFrame
    factor: int
    block: tuple[pd.DataFrame, pd.DataFrame]

    def arms(self, names: list[str]) -> "Rounds":
        """The same rounds with only the runs of the arms ``names``."""
        mine = lambda df: df[df["arm"].isin(names)] if "arm" in df else df  # noqa: E731
        return Rounds(mine(self.main), mine(self.longer), self.factor, (mine(self.block[0]), mine(self.block[1])))


def _split(df: pd.DataFrame, plan: dict) -> Rounds:
    """The bundle's runs by round (:class:`Rounds`)."""
    main, longer, block = scorecard.split_rounds(df, int(plan["scale"]["steps"]))
    return Rounds(main, longer, int(plan.get("budget_factor", 0)), block)


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


def _page(runs: Rounds, sym: pd.DataFrame, plan: dict, arm: dict,
          header: str, causal_by: dict[str, bool]) -> tuple[str, pd.DataFrame]:
    """One mixer's page and its decided rows (:func:`analysis.scorecard.decide`: Holm across
    them), its leaderboard rows against the references of its measured causality."""
    import torch

    df = runs.main
    name = arm["name"]
    row = sym[sym["arm"] == name].iloc[0]
    causal = causal_by[name]
    parts = [p for p in parts_for(plan["parts"], causal) if not _part_out(plan, causal_by, p, name)]
    arms = [name, *plan["references"]]
    mine_runs = runs.arms(arms)
    table = scorecard.decide(mine_runs.main, parts, name, mine_runs.longer, runs.factor, mine_runs.block)
    concrete = [{**p, "a": name if p["a"] == scorecard.MIXER else p["a"]} for p in parts]
    mine = df[df["arm"].isin(arms)]
    control = scorecard.control_rows(mine, concrete)
    errors = {k: float(row[k]) for k in scorecard.SYMMETRY_KEYS.values() if pd.notna(row[k])}
    claims = frozenset(filter(None, str(row["declared"]) .split(","))) if pd.notna(row["declared"]) else frozenset()
    lines = scorecard.redrawn_lines(errors, getattr(torch, row["dtype"]), claims, int(row["d"]))
    lines += scorecard.trained_lines(mine, name)
    paper = f" Paper: {arm['paper']}." if arm.get("paper") else ""
    kwargs = f" with `{json.dumps(arm['kwargs'], sort_keys=True)}`" if arm["kwargs"] else ""
    refs = _uses(plan, causal)
    skipped = [t for t in plan.get("causal_only", ()) if designed_out(plan, causal_by, name, t)]
    said = (f" Its leaderboard rows (`auc over n_train`) are against {refs}: `{name}` is measured "
            f"{'causal' if causal else 'bidirectional'}." + (
                f" It is not run on {', '.join(f'`{t}`' for t in skipped)}: the zoo runs those tasks "
                "(`zoo.causal_only`) for the arms measured causal and the control pair only." if skipped else ""))
    text = scorecard.page(name, table, control, lines, [], f"`{arm['target']}`{kwargs}.{paper} {header}{said}")
    open_rows = [(name, _read_as(r), r.reference, r.open) for r in table.itertuples() if r.open is not None]
    more = render_tables.inconclusive_lines(open_rows)
    return (text + "\n" + "\n".join(more) if more else text), table


def _read_as(row) -> str:
    """A decided row's task, with "(area)" where it reads the area over n_train (a leaderboard
    row), told apart from the scorecard's row at the largest n_train against the same arm."""
    return f"{row.task} (area)" if row.value == "auc" else row.task


def _uses(plan: dict, causal: bool, labels: bool = True) -> str:
    """The references an arm of this causality is compared with, in words (``labels``: each
    with its label; else the arms alone, the leaderboard's cell)."""
    kind = "causal" if causal else "bidirectional"
    return (" and " if labels else ", ").join(f"`{r['arm']}`" + (f" ({r['label']})" if labels else "")
                                              for r in registered(plan) if r["serves"] in (None, kind))


def _values(df: pd.DataFrame, key: str, fallback: object) -> str:
    """The values ``key`` takes in the grid's runs (not the lr-edge reruns), else ``fallback``."""
    grid = df[df["extends"].fillna("").astype(str) == ""] if "extends" in df else df
    values = sorted(pd.to_numeric(grid[key], errors="coerce").dropna().unique()) if key in grid else []
    return ", ".join(f"{v:g}" for v in values) if values else str(fallback)


def _header(df: pd.DataFrame, plan: dict, n_budget: int = 0, n_block: int = 0) -> str:
    """What ran (from the runs where they say it, else the scale), the command and the commit."""
    scale = plan["scale"]
    tiny = " (a check of the path, not evidence)" if scale["name"] == "tiny" else ""
    extended = int((df["extends"].fillna("").astype(str) != "").sum()) if "extends" in df else 0
    seeds = sorted(pd.to_numeric(df["seed"], errors="coerce").dropna().astype(int).unique()) if len(df) else []
    return (f"Scale `{scale['name']}`{tiny}: seeds {_seeds(seeds)}, n_train {_values(df, 'task.n_train', scale['n_train'])}, "
            f"learning rates {_values(df, 'train.lr', scale['lrs'])}, {_values(df, 'train.max_steps', scale['steps'])} "
            f"steps per trial; {len(df)} runs of {plan['n_trials']} trials composed ({extended} past an lr grid edge) "
            f"and {n_budget} budget reruns at ×{plan.get('budget_factor', 0)} steps{_block_header(plan, n_block)} "
            f"in the store's experiment `{scorecard.ABLATION}`. Command: `{plan['command']}`; harness commit "
            f"`{plan['commit']}`.")


def _block_header(plan: dict, n_block: int) -> str:
    """The header's words on the confirmation block (none in a bundle registered without one)."""
    seeds = plan.get("confirm_seeds") or []
    return f" and {n_block} runs of the confirmation block (seeds {_seeds(seeds)})" if seeds else ""


def _board_cells(table: pd.DataFrame | None, board: list[dict], tasks: list[str], own: str,
                 out=lambda part: False) -> list[str]:
    """Per task the verdict cell of a row's leaderboard parts (``board``, those of its causality),
    one per reference, each named where there are several; ``own``: the row's arm, whose part
    against itself reads "the reference"; a part the design does not run (``out``) reads *not run*."""
    by_name = {r.name: r for r in table.itertuples()} if table is not None else {}
    cells = []
    for task in tasks:
        mine = [p for p in board if p["task"] == task]
        said = [NOT_RUN if out(p) else "the reference" if p["b"] == own else _verdict_cell(by_name.get(p["name"]))
                for p in mine]
        if said and all(c == NOT_RUN for c in said):
            said = [NOT_RUN]
        cells.append(said[0] if len(said) == 1 else "; ".join(f"vs `{p['b']}`: {c}" for p, c in zip(mine, said)))
    return cells


def _reference_entries(plan: dict) -> list[tuple[str, list[str]]]:
    """``[(label, candidate arms)]``: the registered references, then the scorecard's other
    reference arms (:func:`_reference_rows`)."""
    refs = registered(plan)
    entries = [(r["label"], [r["arm"]]) for r in refs]
    ref = refs[0]["arm"]
    return entries + [(label, c) for label, c in _reference_rows(plan["parts"], ref)
                      if c not in [[r["arm"]] for r in refs]]


def _reference_row(runs, sym, plan, label, candidates, tasks, length_task, area, causal_by) -> tuple[str, list]:
    """One reference arm's leaderboard row and its inconclusive rows (``(arm, task, reference, open)``)."""
    df = runs.main
    board = [p for p in plan["parts"] if p.get("leaderboard")]
    chosen = {t: (protocol.choose_arm(df, t, candidates)[0] if len(candidates) > 1 else candidates[0])
              for t in [*tasks, length_task]}
    rows = sym[sym["arm"].isin(candidates)]
    causal = bool(len(rows)) and measured_causal(rows.iloc[0])
    mine = parts_for(board, causal)
    out = lambda p: _part_out(plan, causal_by, p, chosen[p["task"]])  # noqa: E731
    concrete = [{**p, "a": chosen[p["task"]]} for p in mine if p["b"] != chosen[p["task"]] and not out(p)]
    table = scorecard.decide(df, concrete, "", runs.longer, runs.factor, runs.block) if concrete else None
    params, held = _sym_cells(rows)
    cells = []
    verdicts = dict(zip(tasks, _board_cells(table, mine, tasks, candidates[0] if len(candidates) == 1 else "", out)))
    for task in tasks:
        if all(designed_out(plan, causal_by, c, task) for c in candidates):
            cells += [NOT_RUN, verdicts[task]]
            continue
        pick = f" (`{chosen[task]}`)" if len(candidates) > 1 else ""
        cells += [area(task, [chosen[task]], "auc") + pick, verdicts[task]]
    err, ratio = _length(df, length_task, chosen[length_task])
    open_rows = [] if table is None else [(chosen[r.task], _read_as(r), r.reference, r.open)
                                          for r in table.itertuples() if r.open is not None]
    return _row([label, "reference arm", params, held, _uses(plan, causal, False), _trained(df, candidates),
                 *cells, err, ratio]), open_rows


def render(folder: Path, out: Path, runs: Path | None = None) -> list[Path]:
    """Write ``out/zoo.md`` and ``out/zoo/<arm>.md`` from the bundle in ``folder`` (its runs
    from the file ``runs`` where one is named); returns their paths, the leaderboard first.

    Raises:
        BundleError: as :func:`read`.
    """
    full, sym, plan = read(folder, runs)
    split = _split(full, plan)
    df = split.main
    header = _header(df, plan, len(split.longer), len(split.block[0]) + len(split.block[1]))
    board = [p for p in plan["parts"] if p.get("leaderboard")]
    tasks = list(dict.fromkeys(p["task"] for p in board))
    pages_dir = out / "zoo"
    pages_dir.mkdir(parents=True, exist_ok=True)
    paths, rows, reasons, open_rows, verdicts_of = [out / "zoo.md"], [], {}, [], {}

    def area(task: str, arms: list[str], value: str) -> str:
        values, _, why = protocol.arm_values(df, task, arms[0], value)
        if why:
            reasons.setdefault(reason_lead(why), None)
            return "–"
        return _ci(values)

    length_task = plan["length_task"]
    causal_by = causal_of(sym)
    for arm in plan["arms"]:
        text, table = _page(split, sym, plan, arm, header, causal_by)
        page = pages_dir / f"{re.sub(r'[^A-Za-z0-9_.=-]+', '_', arm['name'])}.md"
        page.write_text(text)
        paths.append(page)
        causal = causal_by[arm["name"]]
        mine = parts_for(board, causal)
        out = lambda p: _part_out(plan, causal_by, p, arm["name"])  # noqa: E731
        verdicts = dict(zip(tasks, _board_cells(table, mine, tasks, arm["name"], out)))
        params, held = _sym_cells(sym[sym["arm"] == arm["name"]])
        cells = [c for task in tasks for c in (NOT_RUN if designed_out(plan, causal_by, arm["name"], task)
                                               else area(task, [arm["name"]], "auc"), verdicts[task])]
        err, ratio = _length(df, length_task, arm["name"])
        rows.append(_row([f"[`{arm['name']}`](zoo/{page.name})", arm.get("paper") or "–", params, held,
                          _uses(plan, causal, False), _trained(df, [arm["name"]]), *cells, err, ratio]))
        names = {p["name"] for p in mine}
        verdicts_of[arm["name"]] = [(r.task, r.verdict) for r in table.itertuples() if r.name in names]
        open_rows += [(arm["name"], _read_as(r), r.reference, r.open) for r in table.itertuples()
                      if r.open is not None and r.name in names]
    for label, candidates in _reference_entries(plan):
        line, more = _reference_row(split, sym, plan, label, candidates, tasks, length_task, area, causal_by)
        rows.append(line)
        open_rows += more
    lines = _board_lines(df, sym, plan, board, tasks, header, rows, open_rows)
    lead = [*_lead(verdicts_of, tasks), *_unlearned_lead(df, causal_by, plan, tasks, split.longer), *_expectations(df, sym, plan, tasks)]
    lines[2:2] = lead  # after the title: what matches attention where, then the published expectations
    if reasons:
        lines += ["A cell `–`: " + "; ".join(reasons) + ".", ""]
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    paths[0].write_text("\n".join(lines))
    return paths


# The kinds of task the lead sentence groups the verdicts by (a task not named here is a selection task)
KINDS = (("recall", "associative recall (`recall`, MQAR)"), ("teacher", "generation by a teacher†"),
         ("selection", "selection (`nearest`, `repeated`)"))
MATCH = ("better", "equivalent within δ")


def kind_of(task: str) -> str:
    """``recall`` (the suite's recall and MQAR), ``teacher`` (targets of a teacher) or ``selection``."""
    if task == "recall" or task.startswith("mqar"):
        return "recall"
    return "teacher" if task.startswith("teacher") else "selection"


def matches(verdicts_of: dict[str, list[tuple[str, str]]], tasks: list[str]) -> dict[str, list[str]]:
    """``{kind: the arms that match attention on every task of that kind}``: each leaderboard
    verdict against each reference of the arm's causality is better or equivalent within δ."""
    out, decided = {}, {t for said in verdicts_of.values() for t, _ in said}
    for kind, _ in KINDS:
        mine = [t for t in tasks if kind_of(t) == kind and t in decided]  # a task with no runs says nothing
        if mine:
            out[kind] = [arm for arm, said in verdicts_of.items()
                         if all(any(t == task for t, _ in said) and all(v in MATCH for t, v in said if t == task)
                                for task in mine)]
    return out


def _lead(verdicts_of: dict[str, list[tuple[str, str]]], tasks: list[str]) -> list[str]:
    """The page's lead: per kind of task, which mixers match attention there."""
    words = dict(KINDS)
    said = [f"on {words[k]}: {', '.join(f'`{a}`' for a in arms) if arms else 'none'}"
            for k, arms in matches(verdicts_of, tasks).items()]
    return ["**Which mixers match attention** (better than or equivalent within δ to every reference of their "
            "causality on every task of the kind): " + "; ".join(said) + ".", ""] if said else []


def unlearned(df: pd.DataFrame, plan: dict, tasks: list[str], longer: pd.DataFrame | None = None,
              causal: dict[str, bool] | None = None) -> dict[str, list[str]]:
    """``{task: the arms that learned it}`` for each task on which no registered reference
    (``plan["registered"]``) learned; where only the references serving one causality did not
    (``serves``), ``{"task (the <serves> references)": the arms of that causality that learned it}``
    (``causal``: arm → measured causal; without it every arm is listed). Learned as the verdicts' *not learned* rule reads it
    (:func:`analysis.protocol.decide_part`), at the lr chosen on validation per size: for a task
    read as an area (``auc``, two sizes or more) the seeds' mean area, the mean natural-log test
    error over n_train, at least the task's δ below the mean over the sizes of the log of the row's
    trivial reference (:func:`analysis.protocol.reference`); otherwise the seeds' mean log test
    error at the largest n_train δ below the log of its reference. An arm learned where it did so on
    the grid's runs or on its ×factor budget reruns (``longer``, as the rows decided there read it).
    There "matches attention" says nothing (every verdict against a reference is open), and an arm
    that learned is the finding."""
    def learned(task: str, arm: str) -> bool | None:
        said = [learned_on(df, task, arm)]
        if longer is not None and not longer.empty:  # reruns of an area's arms hold its every size
            said.append(learned_on(longer, task, arm, whole=True))
        return True if True in said else (False if False in said else None)

    def learned_on(df: pd.DataFrame, task: str, arm: str, whole: bool = False) -> bool | None:
        value = str(plan["tasks"].get(task, {}).get("value", "error"))
        ok, at, missing = protocol.chosen_runs(df, task, arm, value)
        if missing or ok.empty or "reference_error" not in ok or not ok["reference_error"].notna().any():
            return None
        if whole and value == "auc" and len(at) < 2:
            return None  # reruns of a one-size part only: not the area
        delta = float(plan["tasks"].get(task, {}).get("delta", 0.0))
        if value == "auc" and len(at) > 1:  # the area, as the leaderboard's verdicts read it
            mean_log = float(protocol.arm_values(df, task, arm, "auc")[0].mean())
            ref = protocol.learned_bar(ok, at, value)[0]
        else:
            last = ok[ok["task.n_train"] == at[-1]]
            mean_log = float(np.log(pd.to_numeric(last["error"], errors="coerce")).mean())
            ref = float(np.log(protocol.reference(last)[0]))
        return mean_log <= ref - delta

    arms = [a["name"] for a in plan["arms"]]
    groups: dict[str | None, list[str]] = {}
    for r in plan.get("registered", []):
        groups.setdefault(r.get("serves"), []).append(r["arm"])
    out = {}
    for task in tasks:
        failed = []
        for serves, refs in groups.items():
            judged = [x for x in (learned(task, ref) for ref in refs) if x is not None]
            if judged and not any(judged):
                failed.append(serves)
        if not failed:
            continue
        if len(failed) == len(groups):
            out[task] = [a for a in arms if learned(task, a)]
            continue
        for serves in failed:
            mine = [a for a in arms if causal is None or causal.get(a) == (serves == "causal")]
            out[f"{task} (the {serves} references)"] = [a for a in mine if learned(task, a)]
    return out


def _unlearned_lead(df: pd.DataFrame, causal: dict[str, bool], plan: dict, tasks: list[str],
                    longer: pd.DataFrame) -> list[str]:
    """The lead's second sentence: the tasks attention did not learn at this scale, and who did
    (``causal``: arm → measured causal, :func:`causal_of`)."""
    def named(label: str) -> str:  # "task" or "task (the bidirectional references)"
        task, _, rest = label.partition(" (")
        return f"`{task}`" + (f" ({rest}" if rest else "")

    said = [f"{named(label)}: " + (", ".join(f"`{a}`" for a in arms) if arms else "none")
            for label, arms in unlearned(df, plan, tasks, longer, causal).items()]
    return ["**Where the softmax references did not learn at this scale** (no registered reference, or none of "
            "those serving one causality where named, beat its trivial predictor by δ on the area, the mean log "
            "test error over n_train, on the grid or at ×4 steps: the rule the verdicts read. No mixer can match "
            "them there, and a mixer *better* there beat a reference that did not learn. The arms that learned): "
            + "; ".join(said) + ".", ""] if said else []


def _expectations(df: pd.DataFrame, sym: pd.DataFrame, plan: dict, tasks: list[str]) -> list[str]:
    """The published expectations against this zoo's rows (:mod:`analysis.zoo_expectations`)."""
    from analysis import zoo_expectations as ex

    measured = {}
    for arm in [a["name"] for a in plan["arms"]] + list(plan["references"]):
        rows = sym[sym["arm"] == arm]
        if len(rows):
            r = rows.iloc[0]
            perm = r.get("symmetry/permutation_err")
            measured[arm] = (measured_causal(r), bool(pd.notna(perm) and float(perm) <= float(r["tolerance"])))
    found = ex.decide(ex.cells(df, measured, tasks))
    scale = plan["scale"]
    sizes = (f"n_train {scale['n_train']}, {scale['steps']} steps, {plan.get('blocks', 0) or 1} "
             f"{'pre-norm residual blocks' if plan.get('blocks') else 'layer (the bare mixer)'}")
    return ex.words(found, sizes)


def _depth_words(plan: dict) -> str:
    """The legend's line on the depth (``plan['blocks']``, absent in a bundle from before it)."""
    blocks = int(plan.get("blocks", 0))
    if not blocks:
        return "* **depth**: one layer, the bare mixer (no residual, norm or MLP)."
    return (f"* **depth**: every arm and every reference is {blocks} pre-norm residual blocks, each "
            "x ← x + mixer(norm(x)), then x ← x + MLP(norm(x)) with a 2× MLP (d → 2d → d, GELU); norm is RMSNorm "
            "without a gain (it keeps orthogonal equivariance); each block has its own mixer. The symmetries and "
            "causality above are the stack's, declared and measured on it.")


def _block_words(plan: dict) -> list[str]:
    """The legend's line on the confirmation block (``plan['confirm_seeds']``), if one is registered."""
    seeds = plan.get("confirm_seeds") or []
    if not seeds:
        return []
    return [f"* **confirmation block**: a row the exploratory seeds leave open on the seeds (the interval decides "
            "neither way, only Holm's correction holds it back, or the positive control is not contradicted yet) "
            f"is rerun on {len(seeds)} fresh seeds ({_seeds(seeds)}, registered in `conf/zoo.yaml` before they "
            "ran): its two arms and its positive control's, at the lrs the exploratory seeds chose, every size "
            "it reads and the budget it was decided at, on the same test set (a block row still falling at the end "
            "of ×1 is rerun at ×4 steps on the same seeds, as a grid row is); it is decided on those seeds "
            "alone, Holm across each page's block rows, and its cell says so. Holm holds each family (the "
            "exploratory rows, the block's rows) at 5%, so a page's chance of any false decisive label is at most "
            "10%. A row still open there is one this design cannot decide; the area column stays the exploratory "
            "seeds'."]


def _not_run_words(plan: dict) -> list[str]:
    """The legend's line on the tasks only the causal arms run (``plan['causal_only']``), if any."""
    only = plan.get("causal_only") or []
    if not only:
        return []
    control = control_pair(plan["parts"])
    pair = f" and the control pair ({', '.join(f'`{a}`' for a in control)})" if control else ""
    return [f"* **{NOT_RUN}**: {', '.join(f'`{t}`' for t in only)} (Zoology's MQAR, a benchmark of causal "
            f"language models) are run by the arms measured causal{pair} only, to keep the zoo within its "
            "budget (`zoo.causal_only`): a cell *not run* is the design's choice, not runs missing, and it is "
            "not among the inconclusive rows."]


def _board_lines(df, sym, plan, board, tasks, header, rows, open_rows) -> list[str]:
    """The leaderboard's Markdown lines: title, legend, the table and its inconclusive rows."""
    length_task = plan["length_task"]
    d = sym["d"].iloc[0] if len(sym) else "–"
    deltas = ", ".join(dict.fromkeys(f"{p['task']} {p['delta']:g}" for p in board))
    refs = registered(plan)
    shown = {t: f"{t}{MARK}" if t in HOME_GROUND else t for t in tasks}
    head = " | ".join(f"{shown[t]}: area [95% CI] | {shown[t]}: verdict" for t in tasks)
    rule = "; ".join(f"`{r['arm']}` ({r['label']}) serves the {r['serves'] or 'every'} arms" for r in refs)
    mark = MARK if length_task in HOME_GROUND else ""
    factor = int(plan.get("budget_factor", 0))
    return [
        "# The mixer zoo: sequence mixers against softmax attention", "",
        f"Generated by `python -m analysis.zoo` from the results bundle `zoo/{BUNDLE}` (with `zoo/{SYMMETRY}` "
        f"and `zoo/{PLAN}`); regenerate with `zoo.runs=<this folder>/zoo/{BUNDLE}`. {header}", "",
        f"* **params**: trainable scalars at d = {d} (task `{sym['task'].iloc[0] if len(sym) else '–'}`).",
        "* **at init**: the symmetries whose relative error on re-drawn weights (float64 where the model "
        "runs in it) is within tolerance, and *causal* where a change at position t changes no output "
        "before t (the largest relative change over t, same weights and dtype); each mixer's declared "
        "set and its declared causality equal these (the pre-flight refuses otherwise). **trained**: median relative error over the arm's runs on its trained weights "
        "(orthogonal with knowledge / orthogonal / permutation).",
        f"* **references**: the arms a row's verdicts are against, by its *measured* causality (at init), "
        f"registered in `conf/zoo.yaml`: {rule}. Every reference is a row of this table.",
        "* **area**: per seed the mean natural-log test error over log n_train (trapezoid), each size at the "
        "lr chosen on validation; mean over seeds with its Student-t 95% interval; lower is better. Its floor "
        f"is the metric's own resolution: {scorecard.floor_words(df)}.",
        "* **verdict**: d = area(reference) − area(arm) per seed under the verdict protocol "
        "(`analysis/protocol.py`): better, equivalent within δ, worse, or inconclusive and why; one per "
        "reference, named where there are several; Holm across each mixer's page (the reference arms: across "
        f"their own row); δ registered in `conf/zoo.yaml`: {deltas}. A row still budget-limited after the "
        "lr-edge rounds (also one whose arm did not learn while an arm was still falling) is decided on reruns "
        f"of its arms at ×{factor} the steps (the same seeds, sizes and chosen lrs); still falling there it reads *{render_tables.budget_limited(factor)}*. *Not learned* "
        "(a row left open, the length column's ratio left out) is judged against the trivial predictor on the "
        "same test set: for an arm measured causal the one it can express, uniform mixing over the prefix "
        "(positions ≤ t), not over the whole sequence; on `recall` and MQAR, for every arm, the best guess that "
        "binds no key to its value (`recall`: the most frequent of the sequence's values; MQAR: 1/KV), since "
        "majority class and uniform mixing fall far below it.",
        f"* **length**: on `{length_task}`, at the lr chosen on validation and the largest n_train, the test "
        "error at the longest tested length (mean [95% CI] over seeds), and its ratio to the error at the "
        f"longest training length; *{NOT_LEARNED}* (no ratio) where the error at the training lengths is not "
        "below the trivial predictor's (uniform mixing; over the prefix for a causal arm) on the same test set.",
        *_block_words(plan), _depth_words(plan), *_not_run_words(plan),
        f"* {MARK} the targets of {', '.join(f'`{t}`' for t in HOME_GROUND)} are generated by a softmax-attention "
        "teacher: the reference's home ground, which it can fit exactly.", "",
        f"| arm | paper | params | at init | references | trained | {head} | length{mark}: error "
        f"| length{mark}: ratio |",
        "|---|---|---|---|---|---|" + "---|---|" * len(tasks) + "---|---|",
        *rows, "", *render_tables.inconclusive_lines(open_rows)]
