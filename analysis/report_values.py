"""The report's typed values (issue 60 item 2): where its runs came from, an ablation's section,
a claim's result, the title block, where the frozen choices stand in git and the whole :class:`Report`.
:func:`analysis.reporting.build_report` builds them; the render modules
(:mod:`analysis.render_prose`, :mod:`analysis.render_tables`) read their fields and word them.
Only values live here, so the render modules read them without importing the module that runs
trials (``analysis.reporting``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only (postponed): the modules below this one that define the field types
    import pandas as pd

    from analysis import protocol
    from analysis.claims import Claim, Part
    from analysis.decision import ClaimVerdict, Row, Trust


@dataclasses.dataclass(frozen=True)
class Frozen:
    """Where ``folder/frozen.csv`` stands in git (:func:`frozen_state`;
    :func:`analysis.render_prose.frozen` words it): whether it exists, whether git could be asked,
    the commit that last changed it (``git log -1 --format=%h``; '' where untracked or never
    committed) and whether it differs from that commit."""

    file: str
    exists: bool
    git: bool = True
    commit: str = ""
    changed: bool = False


@dataclasses.dataclass(frozen=True)
class Source:
    """Where the report's runs came from, by kind and name, never by a machine path: a results
    bundle (``kind="bundle"``, its file name), or a store (``"sqlite"``: the SQLite file's name;
    ``"server"``: the MLflow server's ``host:port``) exported to ``exported`` (the bundle's path
    relative to the report's folder's parent). :func:`analysis.render_prose.source` words it."""

    kind: str
    name: str
    exported: str = ""


@dataclasses.dataclass(frozen=True)
class AblationSection:
    """An ablation's section of the report as values (:func:`analysis.render_tables.ablation_section`
    words it): its question (the ablation file's header but its parts, which the verdict tables
    show), its exploratory runs' counts by status (``total``, ``finished``, ``failed``,
    ``killed``, ``diverged``, ``blowup``), the trials it composes to (None: not known), the runs
    past an lr grid edge, its sweeps' open time in seconds over ``invocations``, its reruns'
    ``(runs, blown up)`` (None: none), and its figures' and tables' files in ``folder`` (the
    report's relative path to the ablation's folder)."""

    name: str
    question: str
    counts: dict[str, int]
    composed: int | None
    extended: int
    open_s: float
    invocations: int
    reruns: tuple[int, int] | None
    folder: str
    figures: tuple[str, ...]
    tables: tuple[tuple[str, str], ...]  # (file stem, its Markdown)


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """A claim of paper.md §13 as the report states it (:func:`analysis.render_tables.claims`
    words it): its parts (every role), and either its exact checks with their combined status
    (:func:`analysis.claims.check`: ``passed``, ``failed``, ``incomplete``) or its statistical
    verdict (:func:`analysis.verdicts.combine_claim`) with the deciding parts whose conditions
    travel with their verdict and those re-registered after a verdict run."""

    claim: Claim
    parts: tuple[protocol.PartResult, ...]
    status: str = ""  # exact claims: the checks' status
    checks: tuple[Part, ...] = ()
    verdict: ClaimVerdict | None = None  # statistical claims
    moved: tuple[protocol.PartResult, ...] = ()
    reregistered: tuple[protocol.PartResult, ...] = ()

    @property
    def exact(self) -> bool:
        """An exact claim (E; C5b's E/S too: its S half, Adam deviates, is a measured check)."""
        return self.claim.kind in ("E", "E/S")

    @property
    def deciding(self) -> int:
        return sum(r.spec["role"] == "deciding" for r in self.parts)


@dataclasses.dataclass(frozen=True)
class Replay:
    """The sequential design (:mod:`analysis.sequential`, issue 64) replayed on a committed
    bundle and calibrated by simulation (``python -m benchmarks.sequential --write`` writes them
    to ``docs/report/sequential.csv``; the report reads them, never simulates): its ``looks``;
    the ``parts`` replayed and the confirmation runs the fixed design (``fixed_runs``) and the
    sequential one need without (``plain_runs``) and with the futility stop (``runs``); the parts
    whose fixed verdict each reaches (``plain_same``, ``same``); the simulated replays per part and
    the worst false-decision rates over the parts with their exact (Clopper–Pearson) 95% upper
    bounds, without (``plain_rate``, ``plain_upper``) and with the futility stop (``rate``,
    ``upper``), and the fixed design's on the same replays (``fixed_rate``); ``block``: the seeds
    of the fixed-design block it was replayed on (``2000–2009``), which need not be the bundle's
    own: a block run in stages has not every seed of every part, so the replay keeps the last
    block run whole."""

    looks: tuple[int, ...]
    parts: int
    fixed_runs: int
    plain_runs: int
    runs: int
    plain_same: int
    same: int
    replays: int
    plain_rate: float
    plain_upper: float
    rate: float
    upper: float
    fixed_rate: float
    block: str

    def saved(self, futility: bool = True) -> float:
        """The fraction of the fixed design's confirmation runs the sequential one saves."""
        return 1.0 - (self.runs if futility else self.plain_runs) / self.fixed_runs


@dataclasses.dataclass(frozen=True)
class Header:
    """The report's title block as values (:func:`analysis.render_prose.header` words it):
    provenance (the source, the time of the bundle's last finished run in ISO 8601 so that a
    regeneration from the bundle is byte-identical, None where none ended; the commits: HEAD,
    the first registration, the last change of a part; where the frozen choices stand in git;
    the processor models per phase), the scale (``scale``: the scale config's values as given, grids as
    text), the lr extension rounds, whether it is a path check, and the counts: trial runs,
    ablations, trials composed (None: the bundle has no plan), budget-ablation reruns and their
    step factor."""

    source: Source
    results_time: str | None
    head: str
    first_registration: str
    margins: str
    frozen: Frozen
    processors: dict[str, tuple[tuple[str, int], ...]]  # phase → (processor model, runs)
    scale: dict[str, Any]
    extend_lr: int
    path_check: bool
    runs: int
    ablations: int
    composed: int | None
    longer: int
    factor: int
    replay: Replay | None = None  # the sequential design's replay figures (docs/report/sequential.csv)


@dataclasses.dataclass
class Report:
    """What the report says, as values (issue 60 item 2): the runs by block, every part's decision
    (:class:`analysis.protocol.PartResult`), the stability table, the first screen's rows
    (:class:`analysis.decision.Row`), the calibration table, the task health and the exact checks'
    measurements, the trust paragraph's facts. :func:`write_report` renders it with the render
    modules (:mod:`analysis.render`, :mod:`analysis.render_prose`, :mod:`analysis.render_tables`);
    every claim's verdict (:class:`ClaimResult`) and the ablations that fall short of their plan;
    the stability table's sentence columns (``conditions``, ``scale_effect``, ``loo_flip``,
    ``unstable``) are their words for its typed columns (``moves``, ``scale_block``, ``loo``,
    ``unstable_of``), kept for its CSV."""

    runs: dict[str, pd.DataFrame]  # per ablation: every run but the budget reruns, with ``error``
    longer: dict[str, pd.DataFrame]  # per ablation: the budget reruns
    shown: dict[str, pd.DataFrame]  # per ablation: the exploratory runs (figures, tables, health)
    sweeps: pd.DataFrame
    presets: pd.DataFrame
    identities: dict[str, float]
    parts: list[protocol.PartResult]
    stability: pd.DataFrame
    units: dict[str, str]  # task → its error's name
    rows: list[Row]  # the first screen
    calibration: pd.DataFrame | None  # None at a path-check scale
    health: Any
    trust: Trust  # *How far to trust this*
    claims: tuple[ClaimResult, ...]  # every claim of paper.md §13: its verdict or its exact checks' status
    shortfall: tuple[tuple[str, int, int], ...]  # (ablation, grid trials finished, composed) where short
    scale: str  # the scale's name
    reregistered: dict[tuple[str, str], str]  # (claim, part name) → its first design and outcome
    path_check: bool  # a scale that checks the path, not evidence: no verdict is shown
