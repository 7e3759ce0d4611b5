"""The machine behind the report's runs (issue 28 item 7): which processor model trained each
phase of the suite. A run records its processor as the tag ``processor`` (``harness.trial.processor``:
the CPU's model name, or the GPU's on CUDA); results reproduce bit for bit only per processor
model, so the report names them per phase. A bundle exported before the tag existed says
"not recorded".
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from analysis import phases
NOT_RECORDED = "not recorded"
REPRODUCE = ("Results reproduce bit for bit only per processor model: the same trial on another "
             "model gives other last digits, and a part near a threshold can change its verdict.")


WORDS = {phases.EXPLORATORY: "the suite's grid", phases.LR_EXTENSION: "reruns past an lr grid edge",
         phases.CONFIRMATION: "the confirmation block", phases.READOUT: "readout reruns",
         phases.BUDGET: "the budget ablation", phases.SCALE: "the scale column"}


def _phase(df: pd.DataFrame) -> pd.Series:
    """Each run's phase in words (:func:`analysis.phases.phase_column`; ``df`` at the suite's
    step budget, so its smallest ``train.max_steps`` is the ablation's own)."""
    steps = pd.to_numeric(df.get(phases.STEPS, pd.Series(dtype=float)), errors="coerce").min()
    return phases.phase_column(df, int(steps) if pd.notna(steps) else 0).map(WORDS)


def processors(runs: Mapping[str, pd.DataFrame], longer: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    """``{phase: "model (N runs); model (M runs)"}`` over every ablation's runs (``runs``: at
    the suite's step budget; ``longer``: the budget ablation's reruns), "not recorded" where no
    run of the phase carries the tag."""
    frames = [df.assign(phase=_phase(df)) for df in runs.values() if not df.empty]
    frames += [df.assign(phase="the budget ablation") for df in longer.values() if not df.empty]
    if not frames:
        return {}
    every = pd.concat(frames, ignore_index=True)
    tag = every["processor"] if "processor" in every else pd.Series("", index=every.index)
    every = every.assign(processor=tag.fillna("").astype(str).str.strip())
    out = {}
    order = [*WORDS.values()]  # the order the protocol runs them in, whatever order the runs come in
    for phase, grp in sorted(every.groupby("phase", sort=False, dropna=False), key=lambda kv: order.index(kv[0])):
        counts = grp.loc[grp["processor"] != "", "processor"].value_counts()
        out[phase] = ", ".join(f"{name} ({n} runs)" for name, n in counts.items()) or NOT_RECORDED
    return out


def processor_line(runs: Mapping[str, pd.DataFrame], longer: Mapping[str, pd.DataFrame]) -> str:
    """One paragraph: the processors per phase and what that means for reproducing them."""
    per_phase = processors(runs, longer)
    listed = "; ".join(f"{phase}: {names}" for phase, names in per_phase.items()) or NOT_RECORDED
    return f"**Processors** per phase: {listed}. {REPRODUCE}"
