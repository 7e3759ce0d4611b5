"""Every part of the suite decided, as the report's verdicts use it (paper.md §13).

The report's writer (:func:`analysis.reporting.write_report`) asks this module for the decided
parts and the stability table and only formats them; which runs decide a part (the exploratory
seeds, the confirmation block, the ×budget reruns, another readout) is decided here.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd
from omegaconf import DictConfig

from analysis import protocol


def decide_parts(configs: Mapping[str, DictConfig], runs: Mapping[str, pd.DataFrame]) -> list[protocol.PartResult]:
    """Every part of every ablation of ``configs`` decided on ``runs`` (ablation → its runs at the
    suite's step budget, with ``error``), in the order of the ablation files."""
    return [protocol.decide_part(runs[name], p, runs[name]["seed"].nunique() if "seed" in runs[name] else None)
            for name, conf in configs.items() for p in conf.ablation.parts]


def stability_frame(configs: Mapping[str, DictConfig], runs: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The stability table (:mod:`analysis.stability`): one row per deciding part; empty until
    the bundle holds a confirmation block."""
    return pd.DataFrame()
