"""The confirmation block and the frozen choices (paper.md §13 "Confirmation block").

After the exploratory seeds (``scale.seeds``, with their lr extensions) have chosen each arm's
lr (and C10's σ, a part's ``choose_b``), :func:`freeze` writes those choices, per deciding part
and its positive control, to ``frozen.csv`` next to the bundle; every rerun round reads its lrs
from that file (:func:`read_frozen`), so a rerun uses the committed choices, not re-selected
ones, and :func:`frozen_state` finds the commit that last changed it. The rounds
(:func:`rerun_trials`), each tagged ``extends`` with the exploratory trial it repeats:

* the confirmation block (:func:`confirmation_trials`): every arm of every deciding part and of
  its positive control, once per seed of ``scale.confirm_seeds`` (4000–4009 in the default
  scale; never 0–4 or a spent block's seeds, :data:`SPENT_BLOCKS`), at the frozen lr and decided size,
  with fresh evaluation sets (``task.eval_seed`` = the seed, :mod:`tasks.base`);
* the readout rows (:func:`readout_trials`): the same arms under each of the part's
  ``stability_readouts``, on the exploratory seeds;
* the budget reruns (:func:`analysis.budget.budget_trials`): ×``report.budget_factor`` steps.

Which phase each run belongs to is read back from its params (:mod:`analysis.phases`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis import protocol, stats
from analysis.phases import CONFIRM_FIRST, CONFIRMATION, TAG
from analysis.sequential import DESIGN_TAG
from analysis.report_values import Frozen

SEED, EVAL_SEED = "seed", "task.eval_seed"
# Seeds earlier blocks have used, whose outcomes have been seen: a verdict must replicate on
# seeds nobody has used (paper.md §13), so a confirmation block at an evidence scale may not
# reuse them (:func:`check_unspent`). Add a block here when its verdicts are committed, and move
# ``scale.confirm_seeds`` to ``scale.next_confirm_seeds`` (registered before it runs): 3000-3009
# (docs/report.md of 2026-12-06, with its scale and length columns) joined when its bundle was
# committed, and 4000-4009 replaced it. A bundle of a spent block still reads offline
# (:func:`with_recorded_block`).
SPENT_BLOCKS: dict[str, range] = {
    "the first confirmation block (docs/report.md of 2026-12-02)": range(1000, 1010),
    "the audit's fresh seeds (2026-11-30)": range(10, 15),
    "the pilots (task, target and control tuning)": range(100, 200),
    "the second confirmation block (docs/report.md of 2026-12-04)": range(2000, 2010),
    "the third confirmation block (docs/report.md of 2026-12-06)": range(3000, 3010),
}
FROZEN = "frozen.csv"
FROZEN_COLUMNS = ["ablation", "claim", "part", "role", "task", "arm", "n_train", "lr", "b", "chosen_b", "readout"]


def seeds_of(text: str) -> list[int]:
    """The seeds of ``scale.confirm_seeds`` in Hydra's sweep grammar (``range(1000,1010)``,
    ``1000,1001``), through Hydra's own parser."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    override = OverridesParser.create().parse_overrides([f"seed={text}"])[0]
    values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
    return [int(v) for v in values]


def check_unspent(seeds: Sequence[int]) -> None:
    """Refuse confirmation seeds an earlier block has used (:data:`SPENT_BLOCKS`).

    Raises:
        ValueError: naming the spent seeds, their block, and what is allowed.
    """
    for block, spent in SPENT_BLOCKS.items():
        used = sorted(set(seeds) & set(spent))
        if used:
            raise ValueError(f"confirmation seeds {used} belong to {block}, whose outcomes have been seen; "
                             f"allowed: seeds no block has used (range(4000,4010) by default; spent: "
                             f"{', '.join(f'{r.start}-{r.stop - 1}' for r in SPENT_BLOCKS.values())})")


def recorded_block(bundle: pd.DataFrame) -> list[int]:
    """The seeds of a bundle's block runs, as the rounds recorded them: runs tagged
    ``phase=confirmation`` (:mod:`analysis.phases`) or with a ``design`` tag (every block run of
    the sequential design, the scale and length columns' blocks too). A bundle recorded before
    either tag (the fixed-design block of 2000–2009) is read as the phases read untagged runs:
    its seeds from :data:`analysis.phases.CONFIRM_FIRST` on."""
    seed = pd.to_numeric(bundle[SEED], errors="coerce") if SEED in bundle else pd.Series(dtype=float)
    block = pd.Series(False, index=bundle.index)
    if TAG in bundle:
        block |= bundle[TAG].astype(str).eq(CONFIRMATION)
    if DESIGN_TAG in bundle:
        block |= bundle[DESIGN_TAG].fillna("").astype(str).str.strip().ne("")
    if not block.any() and not {TAG, DESIGN_TAG} & set(bundle.columns):
        block = seed >= CONFIRM_FIRST
    return sorted(int(s) for s in seed[block].dropna().unique())


def with_recorded_block(configs: Mapping[str, Any], bundle: pd.DataFrame) -> dict[str, Any]:
    """``configs`` (each ablation's composed config) reading a bundle's own block.

    A bundle is read offline after its block has been spent and ``scale.confirm_seeds`` has moved
    on to the next block's seeds (:data:`SPENT_BLOCKS`); the bundle's runs hold none of those, and
    read with them its block runs would be taken for the columns' lr-choice runs. So where the
    bundle holds none of the configured seeds among its block runs (:func:`recorded_block`), each
    config reads the recorded seeds instead; otherwise (the block just run, a store holding two
    blocks) the configured block is the one read. Returns new configs; ``configs`` is unchanged.
    """
    from omegaconf import OmegaConf

    recorded = recorded_block(bundle)
    out = dict(configs)
    for name, conf in configs.items():
        scale = conf.get("scale")
        text = scale.get("confirm_seeds") if scale is not None else None
        if not recorded or not text or set(seeds_of(str(text))) & set(recorded):
            continue
        out[name] = OmegaConf.merge(conf, {"scale": {"confirm_seeds": ",".join(map(str, recorded))}})
    return out


def _arms(df: pd.DataFrame, part: Any) -> list[protocol.PartResult]:
    """The part decided on the exploratory runs, and its positive control's pair (if any)."""
    result = protocol.decide_part(df, part)
    out = [result]
    if len(result.spec["control"]) == 2:
        ca, cb = result.spec["control"]
        out.append(protocol.decide_part(df, {**result.spec, "a": ca, "b": cb, "control": [], "choose_b": [],
                                             "role": "control"}))
    return [r for r in out if r.sizes]


def _chosen(df: pd.DataFrame, result: protocol.PartResult) -> pd.DataFrame:
    """The rows of the part's two arms at their chosen lr and the decided sizes."""
    spec = result.spec
    sizes = [float(n) for n in result.sizes]
    rows = df[(df["task"] == spec["task"]) & df["arm"].isin([spec["a"], spec["b"]])]
    if spec.get("readout") and "task.readout" in rows:  # the registered readout, as the part decides
        rows = rows[rows["task.readout"].astype(str) == spec["readout"]]
    chosen = stats.select_lr(rows, group=("task", "arm", "task.n_train")).dropna(subset=["lr_chosen"])
    return chosen[chosen["task.n_train"].astype(float).isin(sizes)]


def freeze(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The exploratory choices (:data:`FROZEN_COLUMNS`): one row per arm and decided size of
    every deciding part and of its positive control (``role`` control), with the arm's lr
    chosen on validation, the part's ``b`` (``chosen_b``: chosen among ``choose_b``) and its
    registered readout. ``runs``: each ablation's exploratory runs (:mod:`analysis.phases`)."""
    rows = []
    for name, conf in configs.items():
        df = runs.get(name)
        if df is None or df.empty:
            continue
        for part in conf.ablation.parts:
            if protocol.spec_dict(part)["role"] != "deciding":
                continue
            for result in _arms(df, part):
                s = result.spec
                lrs = _chosen(df, result).groupby(["arm", "task.n_train"], dropna=False)["lr_chosen"].first()
                for (arm, n), lr in lrs.items():
                    rows.append({"ablation": name, "claim": s["claim"], "part": s["name"], "role": s["role"],
                                 "task": s["task"], "arm": arm, "n_train": int(n), "lr": float(f"{lr:.3g}"),
                                 "b": s["b"], "chosen_b": bool(s["choose_b"]), "readout": s.get("readout") or ""})
    return pd.DataFrame(rows, columns=FROZEN_COLUMNS)


def write_frozen(frame: pd.DataFrame, path: Path) -> Path:
    """Write :func:`freeze`'s frame as CSV (sorted, so an unchanged choice is an unchanged file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.sort_values(["ablation", "part", "role", "arm", "n_train"], kind="stable").to_csv(path, index=False)
    return path


def read_frozen(path: Path) -> pd.DataFrame:
    """:func:`write_frozen`'s file back (``readout`` '' where a part registers none).

    Raises:
        FileNotFoundError: there is no frozen file at ``path``.
    """
    frame = pd.read_csv(path, dtype={"readout": str, "b": str, "arm": str}, keep_default_na=False)
    return frame.astype({"n_train": int, "lr": float, "chosen_b": bool})


def frozen_state(folder: Path) -> Frozen:
    """The :class:`Frozen` state of ``folder/frozen.csv``."""
    path = Path(folder) / FROZEN

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=path.parent, capture_output=True, text=True)
    if not path.exists():
        return Frozen(FROZEN, False)
    try:
        tracked = git("ls-files", "--error-unmatch", path.name).returncode == 0
        changed = git("status", "--porcelain", "--", path.name).stdout.strip() if tracked else ""
        commit = git("log", "-1", "--format=%h", "--", path.name).stdout.strip() if tracked else ""
    except OSError:  # no git: say so rather than guess
        return Frozen(FROZEN, True, git=False)
    return Frozen(FROZEN, True, commit=commit, changed=bool(changed))


def _bases(df: pd.DataFrame, row: pd.Series, known: Mapping[str, Any]) -> list:
    """One exploratory trial per seed of the frozen row's arm at its size, preferring the run at
    the frozen lr (an lr extension's grid trial where the lr lies past the grid)."""
    rows = df[(df["task"] == row["task"]) & (df["arm"] == row["arm"])
              & (pd.to_numeric(df["task.n_train"], errors="coerce") == float(row["n_train"]))]
    if row["readout"] and "task.readout" in rows:
        rows = rows[rows["task.readout"].astype(str) == row["readout"]]
    rows = rows.assign(_off=~np.isclose(pd.to_numeric(rows["train.lr"], errors="coerce"), row["lr"]))
    out = []
    for _, r in rows.sort_values(["_off", SEED], kind="stable").drop_duplicates(SEED).iterrows():
        base = known.get(str(r.get("extends") or "")) or known.get(str(r["trial_id"]))
        if base is not None:
            out.append(base)
    return out


def distinct_extensions(cli: Sequence[str], points: Iterable[tuple[Any, Mapping[str, str]]],
                        skip: Iterable[str] = ()) -> list:
    """One trial per distinct id of the extensions ``(base trial, changes)`` of ``points``
    (:meth:`harness.expansion.Composer.extension`, tagged ``extends``), composed with ``cli``
    (``+ablation=NAME`` and the command's overrides); ids in ``skip`` left out."""
    from harness.expansion import Composer

    composer, out, seen = Composer(list(cli)), [], set(skip)
    for base, changes in points:
        trial = composer.extension(base, dict(changes))
        if trial.trial_id not in seen:
            seen.add(trial.trial_id)
            out.append(trial)
    return out


def rerun_trials(frozen: pd.DataFrame, runs: Mapping[str, pd.DataFrame], ablations: Mapping[str, Sequence[Any]],
                 cli: Sequence[str], changes: Callable[[pd.Series, Any], list[dict[str, str]]],
                 every_seed: bool = True) -> dict[str, list]:
    """``{ablation: [Trial]}``: for each frozen row (:func:`freeze`), at its frozen lr, one trial
    per ``changes(row, base)`` entry (overrides), for each exploratory seed's trial
    (``every_seed``) or for the first only; tagged ``extends``; one per distinct trial."""
    out: dict[str, list] = {}
    for name, group in frozen.groupby("ablation", sort=False, dropna=False):
        df = runs.get(name)
        if df is None or df.empty:
            continue
        known = {t.trial_id: t for t in ablations[name]}
        points = ((base, {"train.lr": f"{row['lr']:.3g}", **change})
                  for _, row in group.iterrows()
                  for base in (_bases(df, row, known) if every_seed else _bases(df, row, known)[:1])
                  for change in changes(row, base))
        todo = distinct_extensions([f"+ablation={name}", *cli], points)
        if todo:
            out[name] = todo
    return out


def _frozen_of(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame], frozen: pd.DataFrame | None):
    return freeze(configs, runs) if frozen is None else frozen


def confirmation_trials(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame],
                        ablations: Mapping[str, Sequence[Any]], cli: Sequence[str],
                        seeds: Sequence[int], frozen: pd.DataFrame | None = None,
                        column: Callable[[pd.Series], dict[str, str]] | None = None,
                        fresh_eval: bool = True) -> dict[str, list]:
    """``{ablation: [Trial]}``: one trial per seed of ``seeds`` for each arm of each deciding
    part and of its positive control, at the frozen lr (``frozen``; default: :func:`freeze` of
    ``runs``, the exploratory block) and the part's decided size, with ``task.eval_seed`` = the
    seed (fresh validation and test sets; ``fresh_eval`` False: the exploratory trial's, as the
    zoo's block keeps the grid's one shared set, :func:`analysis.scorecard.confirmation_round`).
    A column's block (issue 64): ``runs`` are the
    column's reruns on the exploratory seeds, ``frozen`` the lrs chosen on them and
    ``column(frozen row)`` the overrides that make a grid trial the column's (its n_train and
    steps, :func:`analysis.scale.changes`; its ``task.n``, :func:`analysis.length.changes`).

    Raises:
        ValueError: a seed of ``seeds`` is one the exploratory block already ran.
    """
    for name, df in runs.items():
        used = set(pd.to_numeric(df[SEED], errors="coerce").dropna().astype(int)) if SEED in df else set()
        if used & set(seeds):
            raise ValueError(f"confirmation seeds {sorted(used & set(seeds))} were already run in {name}; "
                             "allowed: seeds no block has used (4000–4009 in the default scale)")
    return rerun_trials(_frozen_of(configs, runs, frozen), runs, ablations, cli,
                        lambda row, base: [{**(column(row) if column else {}), SEED: str(s),
                                            **({EVAL_SEED: str(s)} if fresh_eval else {})}
                                           for s in seeds], every_seed=False)


def readout_trials(configs: Mapping[str, Any], runs: Mapping[str, pd.DataFrame],
                   ablations: Mapping[str, Sequence[Any]], cli: Sequence[str],
                   frozen: pd.DataFrame | None = None) -> dict[str, list]:
    """``{ablation: [Trial]}``: the readout stability rows (paper.md §13 "Readout"): each arm of
    each deciding part with ``stability_readouts`` (and of its positive control) rerun under
    each of them, on every exploratory seed at the frozen lr and decided size."""
    readouts = {(name, protocol.spec_dict(p)["name"]): protocol.spec_dict(p)["stability_readouts"]
                for name, conf in configs.items() for p in conf.ablation.parts}
    return rerun_trials(_frozen_of(configs, runs, frozen), runs, ablations, cli,
                        lambda row, base: [{"task.readout": r} for r in readouts.get((row["ablation"], row["part"]), [])])
