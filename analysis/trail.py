"""The machine behind the report's runs (issue 28 item 7): which processor model trained each
phase of the suite. A run records its processor as the tag ``processor`` (``harness.trial.processor``:
the CPU's model name, or the GPU's on CUDA); results reproduce bit for bit only per processor
model, so the report names them per phase (:func:`analysis.render_prose.processors`). A bundle
exported before the tag existed has none.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from analysis import phases

# the phases in the order the protocol runs them, whatever order the runs come in
ORDER = (phases.EXPLORATORY, phases.LR_EXTENSION, phases.CONFIRMATION, phases.READOUT, phases.BUDGET, phases.SCALE,
         phases.LENGTH)


def _phase(df: pd.DataFrame) -> pd.Series:
    """Each run's phase (:func:`analysis.phases.phase_column`; ``df`` at the suite's step budget,
    so its smallest ``train.max_steps`` is the ablation's own)."""
    steps = pd.to_numeric(df.get(phases.STEPS, pd.Series(dtype=float)), errors="coerce").min()
    return phases.phase_column(df, int(steps) if pd.notna(steps) else 0)


def processors(runs: Mapping[str, pd.DataFrame],
               longer: Mapping[str, pd.DataFrame]) -> dict[str, tuple[tuple[str, int], ...]]:
    """``{phase: ((model, runs), …)}`` over every ablation's runs (``runs``: at the suite's step
    budget; ``longer``: the budget ablation's reruns), most runs first; ``()`` where no run of
    the phase carries the tag (:func:`analysis.render_prose.processors` words it)."""
    frames = [df.assign(phase=_phase(df)) for df in runs.values() if not df.empty]
    frames += [df.assign(phase=phases.BUDGET) for df in longer.values() if not df.empty]
    if not frames:
        return {}
    every = pd.concat(frames, ignore_index=True)
    tag = every["processor"] if "processor" in every else pd.Series("", index=every.index)
    every = every.assign(processor=tag.fillna("").astype(str).str.strip())
    out = {}
    for phase, grp in sorted(every.groupby("phase", sort=False, dropna=False), key=lambda kv: ORDER.index(kv[0])):
        counts = grp.loc[grp["processor"] != "", "processor"].value_counts()
        out[phase] = tuple((str(name), int(n)) for name, n in counts.items())
    return out
