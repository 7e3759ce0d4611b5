"""A group-sequential design for confirmation blocks: seeds run in stages (looks at 4, 7 and 10
paired seeds by default), a part stops at the first look that decides it, and the chance of a
false decisive label over all looks stays at the fixed design's 5%.

Method: *repeated confidence intervals* (Jennison & Turnbull, *Group Sequential Methods with
Applications to Clinical Trials*, 2000, ch. 9) with boundaries from a Lan–DeMets alpha-spending
function of O'Brien–Fleming type (Lan & DeMets, *Biometrika* 70, 1983):

* the two-sided error α is spent over the information fractions ``t_k = n_k / N`` as
  ``α(t) = 2 − 2Φ(z_{1−α/2} / √t)``, so an early look spends almost nothing (at 4 of 10 seeds,
  0.0022 of 0.05) and the last look's boundary stays near the fixed design's;
* the boundaries ``b_k`` on the scale of each look's t statistic solve ``P(|T_j| ≥ b_j for some
  j ≤ k) = α(t_k)`` under the looks' joint null law, which is free of the mean and spread and is
  simulated once with a fixed seed (:func:`boundaries`);
* at look k each interval of the protocol (the 95% interval of a difference, the 90% and 95%
  intervals of an equivalence, paper.md §13) is replaced by the Student-t interval whose
  critical value is ``b_k`` (:func:`nominal_level`); the decision rules themselves are the
  protocol's (:func:`labels`, held to :func:`analysis.protocol._interval_test` by a test). A
  95% rule spends α = 0.05, a 90% rule α = 0.10 (each side 0.05, as TOST's).

The error rates this gives over the looks are measured by simulation from each part's observed
spread (:func:`false_decision_rate`, ``benchmarks/sequential.py``), beside the fixed design's.

*Futility* (non-binding: it never makes a decisive label, so it cannot raise the error rate): at
an interim look a part stops as *the effect is about δ* where even the last look could not
decide it if the estimate held: a difference whose conditional power under the current trend
is below :data:`FUTILITY_POWER` (Lan, Simon & Halperin's stochastic curtailment, Jennison &
Turnbull §10.2), an equivalence whose estimate lies within the nearer margin δ by less than the
half-width its 95% interval would have at the last look if the spread held (the fixed report's
own *about δ* reading, projected to the block's size).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from scipy import stats as sps

LOOKS = (4, 7, 10)  # paired seeds at each look; the last is the fixed design's block
FUTILITY_POWER = 0.10  # a difference stops for futility below this conditional power
DECIDED = ("supported", "contradicted")


def spent(t: float, alpha: float) -> float:
    """The O'Brien–Fleming-type Lan–DeMets spending function: the two-sided error spent by
    information fraction ``t`` in (0, 1]: ``2 − 2Φ(z_{1−α/2}/√t)`` (= ``alpha`` at t = 1)."""
    return float(2.0 * sps.norm.sf(sps.norm.isf(alpha / 2.0) / np.sqrt(t)))


CALIBRATION_DRAWS = 1_000_000  # simulated null sequences that place the t boundaries
CALIBRATION_SEED = 20221013  # the generator's seed: the boundaries are the same on every machine


@lru_cache(maxsize=16)
def boundaries(looks: tuple[int, ...] = LOOKS, alpha: float = 0.05) -> tuple[float, ...]:
    """Two-sided boundaries ``(b_1, …, b_K)`` on the scale of each look's one-sample t statistic
    (``n_k − 1`` degrees of freedom) for looks at ``looks`` paired seeds (increasing; the last is
    N) and overall two-sided error ``alpha``: ``P(|T_j| ≥ b_j for some j ≤ k) = spent(n_k/N,
    alpha)`` for every k, under the joint null law of the looks' t statistics, which is free of
    the mean and spread of the differences. That law is simulated once
    (:data:`CALIBRATION_DRAWS` normal sequences from a generator seeded with
    :data:`CALIBRATION_SEED`): the significance-level approach of Jennison & Turnbull §11 with the
    t statistics' own joint law, since mapping z boundaries to t quantiles ran 0.3–0.5 points
    above 5% at 4 seeds' 3 degrees of freedom.

    Raises:
        ValueError: ``looks`` not strictly increasing integers ≥ 2, or ``alpha`` not in (0, 1).
    """
    if not looks or any(b <= a for a, b in zip(looks, looks[1:])) or looks[0] < 2:
        raise ValueError(f"looks must be strictly increasing seed counts ≥ 2, got {looks}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    x = np.random.default_rng(CALIBRATION_SEED).standard_normal((CALIBRATION_DRAWS, looks[-1]), dtype=np.float32)
    t = np.abs(np.stack([_t(x[:, :n].astype(np.float64)) for n in looks], axis=1))
    bounds: list[float] = []
    alive = np.ones(len(t), dtype=bool)  # no look so far crossed
    for k, n in enumerate(looks):
        crossing = (spent(n / looks[-1], alpha) - (spent(looks[k - 1] / looks[-1], alpha) if k else 0.0))
        count = int(round(crossing * len(t)))  # sequences that first cross here
        here = np.sort(t[alive, k])[::-1]
        b = float(here[count - 1] if count > 0 else here[0] + 1.0)
        bounds.append(b)
        alive &= t[:, k] < b
    return tuple(bounds)


def _t(d: np.ndarray) -> np.ndarray:
    """The one-sample t statistic of each row of ``d: (reps, n)``."""
    return d.mean(axis=1) / (d.std(axis=1, ddof=1) / np.sqrt(d.shape[1]))


def nominal_level(look: int, looks: tuple[int, ...], level: float) -> float:
    """The confidence level that replaces ``level`` (0.95 or 0.90) at look ``look`` (an index
    into ``looks``): the two-sided Student-t level whose critical value is the look's boundary
    (:func:`boundaries` at α = 1 − level), ``2 F_{n_k − 1}(b_k) − 1``."""
    b = boundaries(tuple(looks), round(1.0 - level, 10))[look]
    return float(2.0 * sps.t.cdf(b, looks[look] - 1) - 1.0)


def _bounds(d: np.ndarray, level: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Student-t interval bounds of the mean of each row of ``d: (reps, n)`` at ``level``
    (``n − 1`` degrees of freedom, :func:`analysis.stats.t_interval` row by row); a row with
    zero spread has the interval ``[mean, mean]``."""
    n = d.shape[1]
    mean = d.mean(axis=1)
    half = sps.t.ppf(0.5 + np.asarray(level) / 2.0, n - 1) * d.std(axis=1, ddof=1) / np.sqrt(n)
    return mean - half, mean + half


def labels(d: np.ndarray, spec: Mapping[str, Any], level95: float = 0.95, level90: float = 0.90) -> np.ndarray:
    """The protocol's interval rules (paper.md §13; :func:`analysis.protocol._interval_test`,
    which a test holds this to) on each row of ``d: (reps, n)``, with the 95% and 90% intervals
    taken at ``level95`` and ``level90``: a difference is supported where its 95% interval lies
    above 0 and contradicted where below; an equivalence supported where its 90% interval lies
    inside ±δ (two-sided) or below δ (one-sided), contradicted where its 95% interval lies
    outside. Returns ``(reps,)`` strings."""
    lo95, hi95 = _bounds(d, level95)
    if spec["test"] == "difference":
        support, contradict = lo95 > 0, hi95 < 0
    else:
        delta = float(spec["delta"])
        lo90, hi90 = _bounds(d, level90)
        if int(spec["sides"]) == 2:
            support, contradict = (-delta < lo90) & (hi90 < delta), (lo95 > delta) | (hi95 < -delta)
        else:
            support, contradict = hi90 < delta, lo95 > delta
    return np.select([support, contradict], list(DECIDED), "inconclusive")


def _futile(d: np.ndarray, spec: Mapping[str, Any], look: int, looks: tuple[int, ...]) -> np.ndarray:
    """Per row of ``d: (reps, n_k)`` at interim look ``look``: stop as *the effect is about δ*
    (module docstring): a difference whose conditional power under the current trend,
    ``Φ((|z_k|/√t_k − c_K)/√(1 − t_k))`` with ``z_k`` the look's t statistic read on the z
    scale, is below :data:`FUTILITY_POWER`; an equivalence whose mean lies within the half-width
    its 95% interval would have at the last look (the current one × √(n_k/n_K) × the ratio of
    the t quantiles) of the nearer margin (the report's *the effect is about δ*)."""
    if look >= len(looks) - 1:
        return np.zeros(d.shape[0], dtype=bool)
    mean = d.mean(axis=1)
    if spec["test"] != "difference":
        delta = float(spec["delta"])
        lo, hi = _bounds(d, 0.95)
        margin = delta if int(spec["sides"]) == 1 else np.where(mean >= 0, delta, -delta)  # the nearer one
        # the half-width the last look would have if the spread held: the interval shrinks as
        # √(n_k / n_K) and its t quantile falls with the degrees of freedom. The current look's own
        # half-width (wide at 4 seeds) stopped nearly every equivalence at the first look, telling
        # the reader that more seeds would not decide what they would
        n_k, n_last = d.shape[1], looks[-1]
        shrink = np.sqrt(n_k / n_last) * sps.t.ppf(0.975, n_last - 1) / sps.t.ppf(0.975, n_k - 1)
        return np.abs(mean - margin) < shrink * (hi - lo) / 2.0
    t = looks[look] / looks[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(_t(d))
    last = sps.norm.isf((1.0 - nominal_level(len(looks) - 1, looks, 0.95)) / 2.0)  # c_K on the z scale
    power = sps.norm.cdf((z / np.sqrt(t) - last) / np.sqrt(1.0 - t))
    return power < FUTILITY_POWER


@dataclass(frozen=True)
class Stop:
    """Where a part's sequential decision stopped: ``label`` (supported / contradicted /
    inconclusive), ``n`` paired seeds used, ``look`` (index into the looks), ``futile`` (stopped
    early as *the effect is about δ*)."""

    label: str
    n: int
    look: int
    futile: bool = False


def decide_many(d: np.ndarray, spec: Mapping[str, Any], looks: tuple[int, ...] = LOOKS,
                ready: np.ndarray | None = None, futility: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sequential decision on each row of ``d: (reps, ≥ N)``, per-seed paired differences in
    seed order: at each look, :func:`labels` on the first ``n_k`` values at the look's nominal
    levels (:func:`nominal_level`); a row stops at the first decisive label where ``ready[row,
    k]`` (the part's preconditions at that look; all True by default), or, with ``futility``, at
    an interim look where it is futile. Returns ``(labels, seeds used, stopped futile)``, each
    ``(reps,)``.

    Raises:
        ValueError: fewer columns than the last look.
    """
    if d.shape[1] < looks[-1]:
        raise ValueError(f"{d.shape[1]} paired seeds, the last look needs {looks[-1]}")
    reps = d.shape[0]
    out = np.full(reps, "inconclusive", dtype=object)
    used = np.full(reps, looks[-1])
    futile = np.zeros(reps, dtype=bool)
    open_ = np.ones(reps, dtype=bool)
    ready = np.ones((reps, len(looks)), dtype=bool) if ready is None else ready
    for k, n in enumerate(looks):
        at = labels(d[:, :n], spec, nominal_level(k, looks, 0.95), nominal_level(k, looks, 0.90))
        stop = open_ & np.isin(at, DECIDED) & ready[:, k]
        out[stop], used[stop] = at[stop], n
        open_ &= ~stop
        if futility:
            quit_ = open_ & ~np.isin(at, DECIDED) & _futile(d[:, :n], spec, k, looks)
            used[quit_], futile[quit_] = n, True
            open_ &= ~quit_
    return out, used, futile


def decide(d: Sequence[float], spec: Mapping[str, Any], looks: tuple[int, ...] = LOOKS,
           ready: Sequence[bool] | None = None, futility: bool = True) -> Stop:
    """:func:`decide_many` for one part's per-seed differences ``d``; ``ready``: one flag per look."""
    row = np.asarray(d, dtype=float)[None, :]
    flags = None if ready is None else np.asarray(ready, dtype=bool)[None, :]
    label, used, futile = decide_many(row, spec, looks, flags, futility)
    return Stop(str(label[0]), int(used[0]), looks.index(int(used[0])), bool(futile[0]))


def fixed(d: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    """The fixed design's label on each row of ``d: (reps, n)`` (all its seeds)."""
    return labels(d, spec)


def null_means(spec: Mapping[str, Any]) -> tuple[float, ...]:
    """The true mean differences at which a decisive label is false: 0 for a difference (either
    label), ±δ for a two-sided equivalence (*supported*), +δ for a one-sided one."""
    if spec["test"] == "difference":
        return (0.0,)
    delta = float(spec["delta"])
    return (delta,) if int(spec["sides"]) == 1 else (-delta, delta)


def _false(label: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    return np.isin(label, DECIDED) if spec["test"] == "difference" else label == "supported"


def false_decision_rate(spec: Mapping[str, Any], sd: float, reps: int = 10_000, looks: tuple[int, ...] = LOOKS,
                        seed: int = 0) -> dict[str, float]:
    """The false-decision rate of the sequential design and of the fixed design (all ``looks[-1]``
    seeds) on ``reps`` replays per null mean (:func:`null_means`): per-seed differences drawn
    i.i.d. normal with the part's observed spread ``sd`` (a ``numpy`` generator seeded with
    ``seed``; both designs see the same draws). Returns the rates (the sequential design with its
    futility stop, without it, which is the design's own error since a futile stop only lowers
    it, and the fixed design), the sequential rates' exact binomial 95% upper bounds
    (Clopper–Pearson, ``scipy.stats.binomtest``), the replays and the mean seeds the sequential
    design used under the null.

    Raises:
        ValueError: ``sd`` not > 0 or ``reps`` < 1.
    """
    if not sd > 0 or reps < 1:
        raise ValueError(f"need sd > 0 and reps ≥ 1, got sd={sd}, reps={reps}")
    rng = np.random.default_rng(seed)
    draws = np.concatenate([rng.normal(mu, sd, size=(reps, looks[-1])) for mu in null_means(spec)])
    label, used, _ = decide_many(draws, spec, looks)
    plain, _, _ = decide_many(draws, spec, looks, futility=False)
    seq, fix = int(_false(label, spec).sum()), int(_false(fixed(draws, spec), spec).sum())
    bare = int(_false(plain, spec).sum())
    upper = lambda k: float(sps.binomtest(k, len(draws)).proportion_ci(0.95, method="exact").high)  # noqa: E731
    return {"sequential": seq / len(draws), "sequential_upper95": upper(seq),
            "no_futility": bare / len(draws), "no_futility_upper95": upper(bare), "fixed": fix / len(draws),
            "replays": float(len(draws)), "mean_seeds": float(used.mean())}


DESIGN_TAG = "design"  # the run tag naming the design a block was run in (harness.records.Trial.design)
_DESIGN_WORD = "sequential"


def design_tag(looks: Sequence[int] | None) -> str:
    """The ``design`` tag of a block run in stages at ``looks`` (``sequential 4,7,10``); ``""``
    for the fixed design (None or empty: every seed at once), so an untagged run reads as fixed."""
    return f"{_DESIGN_WORD} {','.join(str(int(n)) for n in looks)}" if looks else ""


def looks_of(tag: Any) -> tuple[int, ...] | None:
    """The looks of a ``design`` tag (:func:`design_tag`); None for the fixed design (no tag,
    ``""`` or NaN).

    Raises:
        ValueError: a tag that is not :func:`design_tag`'s, or whose looks are not strictly
            increasing seed counts ≥ 2.
    """
    text = "" if tag is None or (isinstance(tag, float) and np.isnan(tag)) else str(tag).strip()
    if not text:
        return None
    word, _, counts = text.partition(" ")
    try:
        looks = tuple(int(n) for n in counts.split(","))
    except ValueError:
        looks = ()
    if word != _DESIGN_WORD or not looks or looks[0] < 2 or any(b <= a for a, b in zip(looks, looks[1:])):
        raise ValueError(f"design tag {text!r}; allowed: '' (fixed) or 'sequential N1,N2,…' (increasing seeds ≥ 2)")
    return looks


def check_looks(looks: Sequence[int], seeds: int) -> tuple[int, ...]:
    """``looks`` as a tuple, checked against a block of ``seeds`` seeds: strictly increasing
    counts ≥ 2 whose last is the block's size.

    Raises:
        ValueError: one line naming what is allowed.
    """
    out = tuple(int(n) for n in looks)
    if not out or out[0] < 2 or any(b <= a for a, b in zip(out, out[1:])) or out[-1] != int(seeds):
        raise ValueError(f"looks {list(out)}; allowed: strictly increasing seed counts ≥ 2 ending at the block's "
                         f"{seeds} seeds (e.g. [4, 7, {seeds}]), or [] for the fixed design")
    return out


def look_step(d: Sequence[float], spec: Mapping[str, Any], look: int, looks: tuple[int, ...],
              ready: bool = True, futility: bool = True) -> tuple[str, str]:
    """One part at one look (:func:`decide_many`'s rule for one row, on the look's ``n_k``
    differences ``d``): ``(label at the look's levels, stop)`` with ``stop`` ``"decided"`` (a
    decisive label where ``ready``: the preconditions hold), ``"futile"`` (an interim look where
    it is futile and undecided) or ``""`` (go on to the next look)."""
    row = np.asarray(d, dtype=float)[None, :]
    label = str(labels(row, spec, nominal_level(look, looks, 0.95), nominal_level(look, looks, 0.90))[0])
    if label in DECIDED and ready:
        return label, "decided"
    if futility and label not in DECIDED and row.shape[1] >= 2 and bool(_futile(row, spec, look, looks)[0]):
        return label, "futile"
    return label, ""


REPLAY_CSV = "sequential.csv"  # the replay's figures beside the bundle (docs/report/), read by the report


def write_replay(replay: Any, path: Path) -> Path:
    """Write :class:`analysis.report_values.Replay` as a two-column CSV (``key, value``)."""
    import dataclasses

    import pandas as pd

    values = {k: (",".join(map(str, v)) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(replay).items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"key": list(values), "value": list(values.values())}).to_csv(path, index=False)
    return path


def read_replay(path: Path) -> Any:
    """:func:`write_replay`'s file back as a :class:`analysis.report_values.Replay`; None where
    there is none (a report without the replay says nothing of it).

    Raises:
        ValueError: a file whose keys are not the value's fields.
    """
    import dataclasses

    import pandas as pd

    from analysis.report_values import Replay

    if not Path(path).exists():
        return None
    got = dict(pd.read_csv(path, dtype=str, keep_default_na=False).itertuples(index=False, name=None))
    fields = {f.name: f.type for f in dataclasses.fields(Replay)}
    if set(got) != set(fields):
        raise ValueError(f"{path}: keys {sorted(got)}; expected {sorted(fields)}")
    cast = {"looks": lambda v: tuple(int(x) for x in v.split(",")), "block": str}
    return Replay(**{k: cast.get(k, float if fields[k] == "float" else int)(v) for k, v in got.items()})
