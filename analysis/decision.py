"""A part's decision as typed values (issue 60 item 1): the rules of paper.md §13 as members of
one enumeration with their step numbers, the reasons and precondition checks a decision holds as
frozen values (:class:`analysis.protocol.PartResult` holds them), and the first screen's labels
(:class:`Label`; :class:`Line` is a part's outcome as the screen reads it: arms
with and without the component, the amount with its interval, the label, the registered verdict,
the margins to a label change and to a precondition firing, in δ).

Nothing here is a sentence: :mod:`analysis.render` words every value, and no module reads a
decision back from its words. A new statistical rule is one :class:`Rule` member, the function
of :mod:`analysis.protocol` that fires it (building a :class:`Reason`), and one wording in
:data:`analysis.render.RULE_WORDS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum


class Step(Enum):
    """The group a rule belongs to: the data a part needs (step 2), the test (step 3), each
    precondition of step 4 by its printed name's key, the blown-up runs (4b) and the resolution
    (4c). A precondition's :class:`Check` is keyed by its step."""

    DATA = "2"
    TEST = "3"
    NOT_LEARNED = "4 not learned"
    BUDGET = "4 budget-limited"
    DIVERGED = "4 diverged"
    LR_EDGE = "4 lr at grid edge"
    NO_POWER = "4 no power"
    BLOWUP = "4b"
    RESOLUTION = "4c"


PRECONDITIONS = (Step.NOT_LEARNED, Step.BUDGET, Step.DIVERGED, Step.LR_EDGE)  # every part's
# (NO_POWER: equivalences only, step 4; RESOLUTION: set by step 4c where judged)


class Rule(Enum):
    """Every rule of paper.md §13 that can leave a part undecided, with its step (``.step``,
    :class:`Step`) and its number in the protocol's text (``.number``)."""

    # step 2: the data
    NO_RUNS = (Step.DATA, "2", "an arm has no runs on the task (under the registered readout)")
    NO_COLUMN = (Step.DATA, "2", "the runs lack the value's column")
    POOLED = (Step.DATA, "2", "an arm has several runs per size and seed")
    NO_SIZE = (Step.DATA, "1", "no training-set size where both arms have an eligible lr")
    AUC_SIZES = (Step.DATA, "2", "the area under the curve needs two sizes")
    FEW_PAIRS = (Step.DATA, "3", "fewer than two paired seeds: no interval")
    NO_RERUNS = (Step.DATA, "2", "the budget ablation holds no reruns of the part")
    EMPTY_BLOCK = (Step.DATA, "2", "a block of the stability table holds no runs")
    # step 3: the test itself decides neither way
    INCLUDES_ZERO = (Step.TEST, "3", "the 95% interval includes 0")
    STRADDLES_DELTA = (Step.TEST, "3", "the 90% interval is not inside ±δ, nor the 95% outside")
    ONE_SIDED_OPEN = (Step.TEST, "3", "the one-sided bound is not below δ, nor the 95% lower bound above it")
    ABOUT_DELTA = (Step.TEST, "3", "a staged block stopped early for futility: the effect is about δ")
    # step 4: preconditions
    NOT_LEARNED = (Step.NOT_LEARNED, "4", "an arm does not beat the best reference predictor by δ")
    NOT_REACHED = (Step.NOT_LEARNED, "4", "an arm does not reach the target on every seed")
    BUDGET_UNLOGGED = (Step.BUDGET, "4", "no best-so-far validation summary logged")
    BUDGET_UNJUDGED = (Step.BUDGET, "4", "too few evaluations in the last 20% of the budget")
    BUDGET_FALLING = (Step.BUDGET, "4", "the best-so-far still falls by more than δ/2")
    DIVERGED = (Step.DIVERGED, "4", "every lr of an arm has a diverged seed")
    GRID_SMALL = (Step.LR_EDGE, "4", "the lr grid has fewer than 3 values")
    LR_LARGEST = (Step.LR_EDGE, "4", "the chosen lr is the largest of the grid")
    LR_SMALLEST = (Step.LR_EDGE, "4", "the chosen lr is the smallest of the grid")
    AT_ZERO = (Step.NO_POWER, "4", "both arms within δ of 0")
    AT_BUDGET = (Step.NO_POWER, "4", "both arms within δ of the step budget")
    FLOOR_MISSING = (Step.NO_POWER, "4", "the floor arm has no runs")
    AT_FLOOR = (Step.NO_POWER, "4", "both arms within δ of the floor arm")
    NO_CONTROL = (Step.NO_POWER, "4", "no positive control registered")
    CONTROL_OPEN = (Step.NO_POWER, "4", "the positive control is not contradicted")
    # 4b, 4c: rules that only ever make a part inconclusive
    BLOWUP = (Step.BLOWUP, "4b", "the test without the blown-up runs' seeds, or Hodges–Lehmann, disagrees")
    BLOWUP_LR = (Step.BLOWUP, "4b", "the lr choice without the blown-up runs' lrs disagrees")
    RESOLUTION = (Step.RESOLUTION, "4c", "the measurement cannot show δ")

    def __init__(self, step: Step, number: str, meaning: str) -> None:
        self.step, self.number, self.meaning = step, number, meaning

    @property
    def precondition(self) -> bool:
        """Whether the rule is one of step 4's preconditions (not the data, test, 4b or 4c)."""
        return self.step.value.startswith("4 ")


@dataclass(frozen=True)
class BlownUp:
    """One blown-up run among a part's pairs (:func:`analysis.stats.blowup`)."""

    arm: str
    seed: int
    trial_id: str


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval, in the part's units (NaN where there is none)."""

    estimate: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    n: int = 0  # pairs


@dataclass(frozen=True)
class Robust:
    """Step 4b's checks of a part with blown-up runs: the test without their seeds and the
    Hodges–Lehmann estimate with its exact signed-rank interval, each with its label."""

    runs: tuple[BlownUp, ...]
    without: Interval
    without_verdict: str
    hodges_lehmann: Interval
    hl_verdict: str

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(sorted({r.seed for r in self.runs}))


@dataclass(frozen=True)
class Control:
    """An equivalence's positive control decided by the same test (step 4, *no power*)."""

    a: str
    b: str
    mean_a: float
    mean_b: float
    interval: Interval  # d with its 95% interval
    verdict: str  # what its interval said (before preconditions)
    reasons: tuple["Reason", ...] = ()  # why it has no interval, where it has none
    margin: float = math.nan  # its contradiction slack in the part's δ (negative: not contradicted)


@dataclass(frozen=True)
class Reason:
    """A rule that fired, with its facts: the arm and size it fired for, the numbers it compared
    (``values``, in the order :data:`analysis.render.RULE_WORDS` names them), the names it cites
    (a grid, a reference predictor, a column, a readout) and, for 4b and *no power*, the checks'
    values."""

    rule: Rule
    arm: str = ""
    n_train: int | None = None
    values: tuple[float, ...] = ()
    names: tuple[str, ...] = ()
    robust: Robust | None = None
    control: Control | None = None
    verdict: str = ""  # BLOWUP_LR: what the lr choice without the exclusion says


@dataclass(frozen=True)
class Check:
    """A precondition's status on a part: judged or not (``n/a`` where no size was decided) and
    its failures."""

    failures: tuple[Reason, ...] = ()
    judged: bool = True
    margin: float = math.nan  # the distance to firing in δ, where the rule has one (resolution)

    @property
    def fails(self) -> bool:
        return bool(self.failures)

    @property
    def ok(self) -> bool:
        return self.judged and not self.failures


@dataclass(frozen=True)
class Flip:
    """What leaving one seed out changes (:func:`analysis.stability.loo_flip`): the first seed,
    in order, whose removal changes the part's verdict (``before`` → ``after``) or, the verdict
    holding, a precondition's status (``steps``)."""

    seed: int
    before: str
    after: str
    steps: tuple[Step, ...] = ()

    @property
    def verdict_changed(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class Unstable:
    """Why a claim is unstable (:func:`analysis.stability.claim_unstable`): its deciding parts
    with opposite decisive labels on the exploratory and the confirmation block, or else the part
    whose leave-one-seed-out flip changes the claim's verdict, with that flip."""

    opposite: tuple[str, ...] = ()
    part: str = ""
    flip: Flip | None = None


@dataclass(frozen=True)
class Block:
    """A block's decision as the stability table's cells state it (:mod:`analysis.stability`):
    its verdict, whether that is decisive, d with its 95% interval and its reasons."""

    verdict: str
    decisive: bool
    interval: Interval
    reasons: tuple[Reason, ...] = ()


@dataclass(frozen=True)
class Look:
    """Where a block run in stages (:mod:`analysis.sequential`, issue 64) was decided: the look
    (index into ``looks``), its paired seeds ``n``, the design's ``looks``, and how it ended:
    ``stopped`` (decisive, or ``futile``: *the effect is about δ*) or ran to the last look it
    reached without a decision."""

    look: int
    n: int
    looks: tuple[int, ...]
    stopped: bool = False
    futile: bool = False


class Move(Enum):
    """How a condition block's decision differs from the part's verdict (paper.md §13
    "Conditions travel with the verdict")."""

    REVERSED = "opposite decisive labels"
    NOT_SHOWN = "a decisive verdict inconclusive there"
    DECISIVE = "an inconclusive verdict decisive there"
    ESTIMATE = "inconclusive both, the estimate moves by δ/2 or more"


@dataclass(frozen=True)
class Moved:
    """One condition block that moves the verdict: how, the block (``x4``, ``readout=<name>``),
    its decision, and the main estimate where its 95% interval excludes it (NaN: it does not)."""

    move: Move
    block: str
    result: Block
    excludes: float = math.nan


@dataclass(frozen=True)
class Conditions:
    """The conditions that travel with a deciding part's verdict (:func:`analysis.stability.conditions`):
    the verdict, its registered readout, the blocks where it holds and those that move it."""

    verdict: str
    registered: str | None
    same: tuple[str, ...]
    moved: tuple[Moved, ...]


class Remedy(Enum):
    """Why a part is undecided and what would decide it (:func:`analysis.answer.what_would_decide`),
    the rules of that function in order."""

    NO_INTERVAL = "no interval: the missing runs"
    FLOOR_RULE = "a floor rule fired (resolution, no-power floor): a harder task"
    FLOOR_RESOLUTION = "the resolution is below δ: a harder task"
    FLOOR_ZERO = "both arms within δ of 0 error: a harder task"
    BLOWUP = "decided by blown-up runs: an lr at which no seed blows up"
    VOIDED = "a precondition voids a decisive interval: what lifts it"
    AT_MARGIN = "the estimate within one half-width of the threshold: not more seeds"
    SEEDS = "the interval decides neither way: more paired seeds"


@dataclass(frozen=True)
class Decide:
    """An undecided part's :class:`Remedy` with its facts: the reasons it cites, the failed
    preconditions and the verdict they void (VOIDED), the numbers it compares (FLOOR_RESOLUTION:
    resolution, δ; FLOOR_ZERO: the arms' means; AT_MARGIN: estimate, half-width, threshold), the
    threshold of an equivalence (0 for a difference), and the paired seeds needed (None: more
    than ``most``), the seeds now and the observed sd (SEEDS)."""

    remedy: Remedy
    reasons: tuple[Reason, ...] = ()
    steps: tuple[Step, ...] = ()
    verdict: str = ""
    values: tuple[float, ...] = ()
    threshold: float = 0.0
    seeds: int | None = None
    now: int = 0
    sd: float = 0.0
    most: int = 0


class Label(Enum):
    """A component's answer on the first screen (issue 60 item 3)."""

    MATTERS = "matters"
    NO_MATTER = "does not matter"
    HURTS = "hurts"
    UNDECIDED = "undecided"
    NO_VERDICT = "no verdict"


@dataclass(frozen=True)
class Combined:
    """A claim's verdict from its deciding parts (:func:`analysis.protocol.combine`, paper.md §13
    step 5) with the counts it rests on: each verdict label with its number of deciding parts
    (contradicted, supported, inconclusive; labels with none left out), the deciding parts, and
    the contradicted parts that Holm's correction made inconclusive. :func:`analysis.render.combined`
    words it."""

    verdict: str
    counts: tuple[tuple[str, int], ...] = ()
    deciding: int = 0
    holm_removed: int = 0


@dataclass(frozen=True)
class ClaimVerdict:
    """A statistical claim's verdict (:func:`analysis.verdicts.combine_claim`): ``unstable``
    where the stability table says so (``unstable`` then holds why), else its parts' combined
    verdict; ``combined`` is that verdict on the parts alone either way."""

    verdict: str
    combined: Combined
    unstable: Unstable | None = None


class Method(Enum):
    """The interval a part's test reads (paper.md §13 step 3): a difference's paired Student-t
    95% interval, a two-sided equivalence's TOST (paired t, 90% interval), a one-sided
    equivalence's upper 90% bound against δ."""

    T95 = "difference"
    TOST90 = "tost"
    ONE_SIDED90 = "one-sided"


@dataclass(frozen=True)
class Seeds:
    """A block's paired seeds and how many each arm was meant to have (``expected`` None: no
    size was decided, so nothing was paired)."""

    paired: tuple[int, ...] = ()
    expected: int | None = None


@dataclass(frozen=True)
class LrChoice:
    """An arm's lr chosen on validation at one size (step 1): the chosen lr, the grid it was
    chosen from (sorted) and the other lrs that reached the same validation error (validation
    loss broke the tie)."""

    chosen: float
    grid: tuple[float, ...]
    ties: tuple[float, ...] = ()


@dataclass(frozen=True)
class Choice:
    """How ``b`` was chosen among a part's ``choose_b`` arms on validation: the candidates,
    the one chosen, the size compared at and each candidate's seed-mean validation error there
    (in ``among``'s order); ``n_train`` None: no size where every candidate has an eligible lr,
    so the first was taken."""

    among: tuple[str, ...]
    best: str
    n_train: int | None = None
    means: tuple[float, ...] = ()


class CalibrationRule(Enum):
    """A verdict rule the calibration applies to same-vs-same comparisons
    (:mod:`analysis.calibration`): the difference rule on the pairs as they are, the two-sided
    equivalence with one half shifted by ±δ, the one-sided equivalence shifted by +δ. Worded by
    :data:`analysis.render_tables.CALIBRATION_RULE_WORDS`."""

    DIFFERENCE = "difference"
    EQUIVALENCE_TWO_SIDED = "equivalence-two-sided"
    EQUIVALENCE_ONE_SIDED = "equivalence-one-sided"


class UnitKind(Enum):
    """The unit a part's value is in: the mean log test error (``auc``), a fraction of the step
    budget (``steps_to_<t>``), or the task's own test error (its name in :class:`Units`)."""

    LOG_ERROR = "auc"
    BUDGET_FRACTION = "steps"
    TASK_ERROR = "task"


@dataclass(frozen=True)
class Units:
    """A part's value's unit; ``task_error`` is the task's error metric's name (from its
    config), worded where ``kind`` is :attr:`UnitKind.TASK_ERROR` (``""``: the task named none)."""

    kind: UnitKind
    task_error: str = ""


class Open(Enum):
    """Why a scorecard or zoo row stays inconclusive (:func:`analysis.scorecard.open_reason`),
    and whether more runs of the same design can remove it (``.removable``): more paired seeds
    (a confirmation block), the missing runs, further lr-edge rounds below the cap or the ×4
    budget reruns can; an lr grid at its cap, a budget still limiting at ×4, an arm that does not
    learn, divergence at every lr, blown-up runs, a floor or resolution that hides δ and a row
    its confirmation block leaves open too cannot (another design: a larger lr cap, budget or
    block, a harder task). :data:`analysis.render_tables.OPEN_WORDS` words them."""

    SEEDS = ("seeds", True)  # the interval decides neither way, or only Holm's correction holds it back
    POWER = ("power", True)  # the positive control is not contradicted yet
    RUNS = ("runs", True)  # runs or pairs missing
    LR_EDGE = ("lr edge", True)  # an lr at the grid's edge below the cap: another round
    BUDGET = ("budget", True)  # budget-limited at ×1: the ×4 reruns decide it
    LR_CAP = ("lr cap", False)  # the largest lr at the cap (needs lr > 3.0)
    BUDGET_X4 = ("budget x4", False)  # still budget-limited at ×4
    SIZES = ("sizes", False)  # an area over n_train on a grid of one size
    NOT_LEARNED = ("not learned", False)
    DIVERGED = ("diverged", False)  # every lr has a diverged seed
    BLOWUP = ("blow-up", False)  # decided by blown-up runs
    FLOOR = ("floor", False)  # both arms at the floor, zero or the budget; the resolution hides δ
    CONFIRMED = ("confirmed", False)  # open on the seeds, then on its confirmation block of fresh seeds too

    def __init__(self, key: str, removable: bool) -> None:
        self.key, self.removable = key, removable


class Holds(Enum):
    """Whether a part's answer holds in a column run beyond the measured regime (issue 64: the
    larger scale, the longer sequence), against the verdict the part is decided on."""

    HOLDS = "the same label"
    MOVES = "another label"
    FEWER_SEEDS = "inconclusive where the verdict is decisive, which the wider interval of fewer seeds explains"
    NOT_RUN = "not run"


class NotRun(Enum):
    """Why a column has no decision for a part."""

    NO_RUNS = "registered, but the runs hold none of its arms' reruns in this column"
    FIXED_LENGTH = "the task's sequence length is fixed (its lengths are set by its terms or lengths)"
    UNDEFINED_AT_N = "the task has no definition at the column's length (tasks.registry.undefined_at)"
    OFF = "the column is off at this scale"


@dataclass(frozen=True)
class Beyond:
    """A deciding part in one column beyond the measured regime (``column``: ``scale`` or
    ``length``; :func:`analysis.stability.beyond`): whether its answer holds there, the column's
    decision where it ran (``block``), why not where it did not (``why``), and the column's size
    (n_train for ``scale``, the sequence length n for ``length``; 0 where not run)."""

    column: str
    status: Holds
    block: Block | None = None
    why: NotRun | None = None
    size: int = 0


@dataclass(frozen=True)
class Augmentation:
    """C9's augmentation control: how much of the gap between the flattened MLP and the
    equivariant arm training the MLP on position-permuted inputs closes (observation parts)."""

    plain: str  # the MLP without augmentation
    augmented: str  # the MLP with it
    target: str  # the equivariant arm
    closes: Interval  # value(plain) − value(augmented), 95% interval
    gap: float  # value(plain) − value(target)
    units: Units


@dataclass(frozen=True)
class Line:
    """One part on a component's row (issue 60 item 3) as typed values; :mod:`analysis.render`
    words it. ``gain`` = value(lacks) − value(has): positive where the arm with the component
    has the lower value."""

    labels: tuple[str, ...]
    task_code: str
    role: str
    verdict: str
    has: str
    lacks: str
    value: str
    units: Units
    delta: float
    gain: Interval
    label: Label
    expected: Label | None  # what the registered hypothesis expects (deciding parts)
    margin: float  # the interval's distance to a label change, in δ (NaN: undecided or no interval)
    preconditions: tuple[tuple[Step, float], ...]  # preconditions under analysis.answer.FRAGILE δ from voiding the verdict
    blocks: tuple[tuple[str, str], ...]  # (block, its label) where it differs from the verdict
    loo: Flip | None  # a leave-one-seed-out flip (the stability table's ``loo``)
    blown_up: tuple[BlownUp, ...]
    choice: tuple[str, ...] = ()  # the arms the one without the component was chosen among, on validation
    decide: Decide | None = None  # why undecided and what would decide it (:func:`analysis.answer.what_would_decide`)
    beyond: tuple[Beyond, ...] = ()  # the scale and length columns: holds, moves, not shown, not run (issue 64)


@dataclass(frozen=True)
class Row:
    """A component's row: its parts' lines, or none (not measured), and C9's augmentation control."""

    component: str
    lines: tuple[Line, ...]
    augmentation: Augmentation | None = None


@dataclass(frozen=True)
class Scale:
    """The scale the report measured at: the largest n_train, the steps per trial, the budget
    reruns' factor, and the parts rerun at the larger scale (how many, at which n_train and steps)."""

    n_train_max: int
    steps: int
    factor: int
    at_scale: int = 0
    scale_n_train: int = 0
    scale_steps: int = 0
    at_length: int = 0  # the parts rerun at a longer sequence (the length column), at n = length_n
    length_n: int = 0


@dataclass(frozen=True)
class MovedBeyond:
    """A deciding part whose verdict moves in a column beyond the measured regime: its claim, the
    part as the stability table names it (``name``, arms ``a`` and ``b``, ``task``: what
    :func:`analysis.render.short_label` needs to tell two parts of one claim apart, e.g. C8(a)'s
    Z g2 and W_V pairs), and per column that moves ``(column, verdict, the column's verdict)``."""

    claim: str
    spec: Mapping[str, str]
    changes: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class Held:
    """The deciding parts against the columns beyond the measured regime (:func:`analysis.answer.held`): how
    many were run in at least one column, how many of those hold in every column run, those
    whose verdict moves there (one :class:`MovedBeyond` per part), how many are not shown there
    (fewer seeds) and how many ran in neither column."""

    ran: int
    holds: int
    moved: tuple[MovedBeyond, ...]
    fewer_seeds: int
    not_run: int


@dataclass(frozen=True)
class Trust:
    """*How far to trust this* as values (:func:`analysis.answer.trust`; :func:`analysis.render.trust` words it):
    the deciding parts decided on a confirmation block (how many of how many, the seed spans,
    how many keep their exploratory label; None without a stability table), the re-registered
    deciding parts, the processor models, the scale, the parts against the columns beyond it
    (:class:`Held`), and the deciding parts against the distinct comparisons."""

    confirmed: tuple[int, int, tuple[tuple[int, ...], ...], int] | None  # (parts, of, each part's paired seeds, same)
    marked: int
    deciding: int
    models: tuple[str, ...]
    scale: Scale | None
    held: Held | None  # the parts against the scale and length columns (issue 64); None without a stability table
    distinct: int
