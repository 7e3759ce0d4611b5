"""Dataclass schemas of every config group, registered in Hydra's ConfigStore.

Each YAML file in ``conf/`` extends one of these schemas, so a mistyped key or a value of the
wrong type fails when Hydra composes the config, before any trial starts, with an error that
names the key. ``task`` and ``model`` are typed by their family's schema (one per registry
entry): ``conf/model/softmax.yaml`` starts with ``defaults: [attention_schema]``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from harness.models import MODELS
from harness.models.external import ExternalConfig
from harness.paths import SINGLE, folder_name, one_off_experiment
from harness.plugins import plugins
from tasks import TASKS
from tasks.external import ExternalTaskConfig


class Optimizer(Enum):
    """Optimisers a trial can use."""

    adam = "adam"
    sgd = "sgd"


class DType(Enum):
    """Floating dtype of data and parameters."""

    float32 = "float32"
    float64 = "float64"


class Compile(Enum):
    """``train.compile``: run a pack's step (and its vmapped validation) under ``torch.compile``
    (harness/pack.py): ``off``, ``on``, or ``auto`` (on only where the committed measurements
    say the steps saved exceed the compile time: harness/pack_table.py). Not part of a trial's
    identity: like the pack, it changes results only by rounding."""

    off = "off"
    on = "on"
    auto = "auto"


class Augment(Enum):
    """``train.augment``: transform each training minibatch, inputs and targets alike, by a random
    element of a group the task's target map is exactly symmetric under (issue 51, the
    augmentation control beside C9): ``none``, or ``permutation`` (each example's positions by
    its own uniformly drawn permutation; only for tasks that declare it, ``TaskBase.symmetries``)."""

    none = "none"
    permutation = "permutation"


@dataclass
class TrainConfig:
    """How a trial trains (harness/trial.py)."""

    optimizer: Optimizer = Optimizer.adam
    lr: float = 3e-3
    batch_size: int = 64
    max_steps: int = 500  # fixed step budget
    eval_every: int = 50  # validation (and checkpoint selection) interval, in steps
    dtype: DType = DType.float32
    compile: Compile = Compile.off  # how a pack runs, not what a trial is (left out of its id)
    augment: Augment = Augment.none  # data augmentation by the task's symmetry group (harness/augment.py)


class SchedulerKind(Enum):
    """``local``: start and stop an embedded Ray instance; ``ray``: join a running cluster;
    ``serial``: run trials one by one in the driver process (tests, debugging)."""

    local = "local"
    ray = "ray"
    serial = "serial"


@dataclass
class ClusterConfig:
    """Where trials run. Not part of a trial's identity (its id ignores this group)."""

    scheduler: SchedulerKind = SchedulerKind.local
    address: Optional[str] = None  # for scheduler=ray: "auto" or "ray://host:10001"
    num_cpus: Optional[int] = None  # size of the embedded instance; None = all cores
    # niceness of the embedded instance's worker processes (0-19; cluster=local only). Ray's own
    # default, 15, leaves the workers only the CPU time that the driver, Ray's agents and any
    # other process at the default priority leave over: on a busy 2-core machine a sweep's
    # trials ran 37x slower than alone, 19x slower than at 0 (benchmarks/RESULTS.md)
    worker_niceness: int = 0
    cpus_per_trial: float = 1.0  # also the trial's torch thread count (rounded, at least 1)
    gpus_per_trial: float = 0.0  # fractions allowed
    max_retries: int = 2  # Ray retries of a trial whose worker process died
    device: str = "cpu"  # cpu | cuda | auto
    pack_size: str = "auto"  # trials per pack (harness/pack.py): a positive integer, or auto (per device)


class TrackingKind(Enum):
    """``local``: an MLflow SQLite file; ``server``: an MLflow tracking server; ``postgres``: a
    PostgreSQL database in MLflow's schema, written directly (no server between)."""

    local = "local"
    server = "server"
    postgres = "postgres"


@dataclass
class TrackingConfig:
    """Where runs are recorded. Not part of a trial's identity."""

    kind: TrackingKind = TrackingKind.local
    db_path: str = "mlflow.db"  # local: relative to the directory the command starts from
    artifact_root: Optional[str] = None  # local: default is mlartifacts/ beside db_path; postgres: ./mlartifacts
    # server: e.g. http://127.0.0.1:5000; postgres: postgresql+psycopg://USER:PASSWORD@HOST:5432/DB
    # (the user and password are moved to the environment, never written: harness/secrets.py)
    uri: Optional[str] = None
    # seconds a driver's RUNNING runs stay claimed after its last heartbeat (renewed every
    # lease_s / 4); after that another invocation may close them as KILLED and rerun the trials
    lease_s: float = 120.0
    # local: an experiment whose artifacts live elsewhere (a copied or moved store) gets this
    # store's artifact folder for its new runs, instead of exit 2 (harness/store.py check_artifacts)
    relocate_artifacts: bool = False


class Test(Enum):
    """How a statistical part is decided (paper.md §13): a paired difference (Student-t 95%
    interval) or an equivalence (TOST, paired 90% interval inside ±delta)."""

    difference = "difference"
    equivalence = "equivalence"


class Role(Enum):
    """A *deciding* part decides its claim; a *sanity* part is shown and never decides; an
    *observation* is reported with its interval and no verdict at all."""

    deciding = "deciding"
    sanity = "sanity"
    observation = "observation"


@dataclass
class PartConfig:
    """One pre-registered statistical part of a claim (paper.md §13, S rows), stated in the
    ablation file before its runs exist.

    The paired per-seed difference is ``value(b) − value(a)`` at the largest ``task.n_train``
    both arms have (``value = auc``: over every size), after each arm's learning rate is chosen
    on validation. ``difference``: the hypothesis is that ``a`` has the lower value (``d > 0``).
    ``equivalence`` with ``sides = 2``: ``|d| < delta``; with ``sides = 1``: ``a`` does not beat
    ``b`` by ``delta`` or more (``d < delta``).
    """

    claim: str = MISSING  # C1 … C12
    name: str = MISSING  # what the part says, e.g. "adding Zg2 does not lower error on selection"
    task: str = MISSING  # task preset the arms are compared on
    a: str = MISSING  # arm label (variant, plus other swept axes)
    b: str = MISSING
    test: Test = Test.difference
    delta: float = MISSING  # absolute margin in the value's units (error; mean log error for auc)
    sides: int = 2  # equivalence only: 1 (one-sided, see above) or 2
    role: Role = Role.deciding
    value: str = "error"  # error | absent_error | auc | error_n<L> (token task's test error at length L)
    # | steps_to_<t> (first validation step with error ≤ t, a fraction of the budget; t one of
    # harness.trial.STEPS_TO_TARGETS; analysis.protocol)
    lr_bound: Optional[float] = None  # an lr stated as a bound: an edge there is accepted
    # arm b chosen among these on validation (lowest seed-mean validation error at the decided
    # n_train, each at its chosen lr; paper.md §13 "a choice among arms"); b then names the choice
    choose_b: List[str] = field(default_factory=list)
    # the leaf keys of the trial config (model, task, train; train.lr exempt) the arms differ in,
    # exact keys, or [family] for a capacity-matched comparison between families (harness.pairs)
    differ: List[str] = field(default_factory=list)
    # equivalences (paper.md §13 "Power"): the positive control [a', b'], a known-different pair on
    # the same task, n_train, budget, readout and seeds, which the same test must contradict;
    # and optionally a floor arm (a family that cannot represent the target)
    control: List[str] = field(default_factory=list)
    floor: Optional[str] = None
    # token tasks: the registered readout (task.readout) the part is decided under; runs under
    # another readout (its stability rows) never enter the verdict. None: every run counts
    readout: Optional[str] = None
    stability_readouts: List[str] = field(default_factory=list)  # reruns at the chosen lr under these (tied, learned)
    # the registration trail (paper.md §13): for a part redesigned after a verdict run, its
    # original design and outcome in one line (the report's verdict table prints it); "" for a
    # part decided as first registered. Not part of any trial's identity (ablation is not)
    reregistered: str = ""
    # the scale column of the stability table (analysis/scale.py): rerun the part's arms (and its
    # control's) at report.scale_n_train and report.scale_steps, lrs chosen again; a flag, never
    # the verdict
    scale_check: bool = False


@dataclass
class AblationConfig:
    """An ablation: its name (= MLflow experiment) and a grid of Hydra overrides.

    Each grid entry is ``key: values`` in Hydra's override grammar (``a,b,c``, ``range(5)``);
    the cross product of the entries is the set of trials, plus, for each entry of
    ``extra_grids``, the cross product of ``grid`` with that entry's axes replaced (a smaller
    design where only some arms need more sizes, without a full cross product). A *suite* (e.g. ``paper``) has no grid
    but a list of ablation names, which the command expands and runs as one queue of trials (each
    ablation still its own experiment and parent run).
    """

    name: str = "single"
    grid: Dict[str, str] = field(default_factory=dict)
    # more points: each entry replaces some axes of ``grid`` (keys must be grid axes); the trials
    # are the union of the cross products of ``grid`` and of each ``grid`` ⊕ entry
    extra_grids: List[Dict[str, str]] = field(default_factory=list)
    suite: List[str] = field(default_factory=list)  # a suite: run these ablations (one queue)
    parts: List[PartConfig] = field(default_factory=list)  # pre-registered S parts (paper.md §13)
    figures: List[str] = field(default_factory=list)  # extra figures: permutation_error, rotation_transfer, absent_answers


@dataclass
class ScaleConfig:
    """Sizes of the paper suite's ablations (``scale=default|full|tiny``), interpolated into their
    grids and step budgets. Not part of a trial's identity: what it sets is already in the trial's
    own config, so adding seeds or sizes later keeps the finished trials' ids."""

    name: str = "default"
    seeds: str = "range(5)"  # Hydra grammar: the seed axis of every ablation
    n_train: str = "128,256,512,1024"  # the sample-efficiency axis (C9: an area needs ≥ 4 sizes, paper.md §13; full has 8)
    n_train_max: str = "1024"  # the largest size alone: parts decided at one size (not auc)
    lrs: str = "0.003,0.01,0.03"  # learning-rate grid (≥ 3 values, paper.md §13); chosen on validation
    lrs_high: str = "0.1,0.3,1.0"  # more lrs for variants that want large steps (e.g. coordwise)
    steps: int = 600  # step budget of every trial (train.max_steps)
    eval_every: int = 20  # validation interval: ≥ 5 evaluations in the last 20% of the budget
    long_steps: int = 4000  # budget of the slow-to-learn tasks (T1(i) mod 10)
    long_eval_every: int = 100
    # the confirmation block's seeds (paper.md §13; analysis/confirm.py): fresh, never the
    # exploratory seeds or a spent block's (analysis.confirm.SPENT_BLOCKS: the blocks 1000-1009,
    # 2000-2009 and 3000-3009, the audit's 10-14, the pilots' 100-199); run where report.confirm says
    confirm_seeds: str = "range(4000,4010)"
    # the next confirmation block, registered before it runs, not run yet: it replaces
    # confirm_seeds once this block's verdicts are committed (then 4000-4009 joins SPENT_BLOCKS)
    next_confirm_seeds: str = "range(5000,5010)"
    # the sequential design's looks (analysis/sequential.py, issue 64): the confirmation block and
    # the columns' blocks run their seeds in these stages, a part stopping at the first look that
    # decides it; the last is the block's size. "": the fixed design (every seed at once)
    looks: str = "4,7,10"


@dataclass
class ReportConfig:
    """``python -m analysis.report``: which suite, whether to run it first (finished trials are
    skipped), and where the Markdown report goes (figures and tables beside it, in a folder of
    the same name without ``.md``)."""

    suite: str = "paper"
    run: bool = True
    out: str = ""  # a .md file or a folder (gets report.md); default: docs/report.md (scales default, full), else outputs/report-<scale>/report.md
    runs: str = ""  # a results bundle (runs.csv.gz) to regenerate from, offline; default: the store
    extend_lr: int = 2  # lr-edge extensions per part (paper.md §13), each one grid step past the edge
    budget_factor: int = 4  # the budget ablation: deciding parts' arms rerun at ×this many steps (0: off)
    # the confirmation block and the readout reruns (analysis/confirm.py) after the exploratory
    # block; null: at the evidence scales (default, full) only, true/false: always/never
    confirm: Optional[bool] = None
    # the scale column of the stability table (analysis/scale.py): each part registered with
    # scale_check rerun on the exploratory seeds at this n_train and step budget, validating
    # every scale_eval_every steps, its lrs chosen again on the grid with edge extension; where
    # the scale's own n_train_max reaches scale_n_train (full) or scale_n_train is 0, not run
    scale_n_train: int = 8192
    scale_steps: int = 5000
    scale_eval_every: int = 100
    # which deciding parts the scale and length columns rerun (issue 64, registered before they
    # run): deciding (every one; a part decided at a smaller n_train, T3a′ 64, T3a″ 32, T4b′ 256,
    # at scale_n_train / scale.n_train_max = 8× its own) or scale_check (the first column's three)
    scale_parts: str = "deciding"
    # the length column (analysis/length.py): each such part whose task is defined for any n
    # rerun at task.n = length_n (4× today's 8) at the grid's data scale and steps, its lrs
    # chosen again with edge extension; 0: not run
    length_n: int = 32


@dataclass
class ZooConfig:
    """``python -m analysis.zoo`` (conf/zoo.yaml): the mixers scored against attention's
    reference arms of ``conf/ablation/scorecard.yaml``, registered before the run.

    ``arms``: one mapping per mixer, ``{name, target: "package.module:Class", kwargs: {...},
    paper: "..."}`` (``name`` is the row's label and the runs' arm); ``tasks``: per separating
    task the verdict's value and margin ``{value: auc, delta: 0.02}``; ``length_task``: the task
    whose per-length test error is the length-generalisation column; ``references``: the
    leaderboard's reference arms (model presets) with the causality each serves
    (``analysis.zoo.references_of``)."""

    arms: List[Any] = field(default_factory=list)
    tasks: Dict[str, Any] = field(default_factory=dict)
    length_task: str = "teacher_length"
    # the leaderboard's references, each {arm, label, serves}: an arm measured causal is compared
    # with those serving "causal", a bidirectional one with those serving "bidirectional"
    references: List[Any] = field(default_factory=list)
    blocks: int = 0  # every arm and reference as this many pre-norm residual blocks (model.blocks); 0: bare
    scale: str = ""  # the scale preset the zoo runs at unless the command line gives scale=…; "": the config's
    causal_only: List[str] = field(default_factory=list)  # tasks only the arms measured causal (and the references) run
    # the confirmation block's seeds (Hydra's grammar, "range(6000,6010)"): every row the exploratory
    # seeds leave open on the seeds is rerun on them and decided on them alone; "": no block
    confirm_seeds: str = ""
    examples: str = ""  # a folder put first on sys.path so `target` imports; default: the repository's examples/
    out: str = "docs"  # the leaderboard goes to <out>/zoo.md, the pages and the bundle to <out>/zoo/
    runs: str = ""  # a bundle (<out>/zoo/runs.csv.gz) to regenerate from, offline; default: run and export


@dataclass
class Config:
    """The whole config of one invocation, and (after sweep expansion) of one trial."""

    task: Any = MISSING
    model: Any = MISSING
    train: TrainConfig = MISSING
    cluster: ClusterConfig = MISSING
    tracking: TrackingConfig = MISSING
    ablation: AblationConfig = field(default_factory=AblationConfig)
    scale: ScaleConfig = MISSING
    report: ReportConfig = field(default_factory=ReportConfig)
    zoo: ZooConfig = field(default_factory=ZooConfig)
    seed: int = 0  # derives the data, batch-order and initialisation streams separately
    dry_run: bool = False  # list the trials (id, variant, overrides) and exit
    force: bool = False  # rerun trials that already have a FINISHED run (the old run is deleted)
    summary: bool = True  # per ablation, the end-of-sweep table and plot (analysis.report draws its own)


def ablation_from(overrides: Sequence[str]) -> str:
    """The ablation's name as the command line gives it (``ablation.name=X``, else
    ``+ablation=X``; ``single`` without either): the output folder's name where the composed
    ``ablation`` is out of reach (``--cfg hydra --resolve`` prints Hydra's config alone)."""
    given = dict(o.lstrip("+~").split("=", 1) for o in overrides if "=" in o)
    return str(given.get("ablation.name") or given.get("ablation") or "single")


def experiment_of(ablation: str, task: str, model: str) -> str:
    """``hydra.run.dir``'s experiment: ``ablation``, or for a one-off run (``single``) the
    experiment of its task and model presets (:func:`harness.paths.one_off_experiment`; the
    composed presets, so a command-line sweep over presets keeps the first one's folder)."""

    return one_off_experiment([task], [model]) if ablation == SINGLE else ablation


def register_configs() -> None:
    """Register the schemas: ``base_config``, ``train/cluster/tracking`` bases, and one
    ``<name>_schema`` per model family and task family."""
    # ${pid:} keeps the output folders of invocations started in the same second apart
    OmegaConf.register_new_resolver("pid", lambda: str(os.getpid()), replace=True)
    OmegaConf.register_new_resolver("ablation_from", ablation_from, replace=True)
    OmegaConf.register_new_resolver("folder_name", folder_name, replace=True)
    OmegaConf.register_new_resolver("experiment", experiment_of, replace=True)
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    cs.store(group="train", name="train_schema", node=TrainConfig)
    cs.store(group="cluster", name="cluster_schema", node=ClusterConfig)
    cs.store(group="tracking", name="tracking_schema", node=TrackingConfig)
    cs.store(group="scale", name="scale_schema", node=ScaleConfig)
    for name, entry in MODELS.items():
        cs.store(group="model", name=f"{name}_schema", node=entry.schema)
    for name, entry in TASKS.items():
        cs.store(group="task", name=f"{name}_schema", node=entry.schema)
    # code from outside the package, named by import path (harness/models/external.py)
    external = OmegaConf.structured(ExternalConfig)
    OmegaConf.set_struct(external.kwargs, False)  # model.kwargs.k=8 without '+': any constructor argument
    cs.store(group="model", name="external_schema", node=external)
    for name, target in plugins().items():  # installed packages' mixers (harness/plugins.py)
        plugin = OmegaConf.structured(ExternalConfig(target=target, variant=name))
        OmegaConf.set_struct(plugin.kwargs, False)
        cs.store(group="model", name=name, node=plugin)
    external_task = OmegaConf.structured(ExternalTaskConfig)
    OmegaConf.set_struct(external_task.kwargs, False)
    cs.store(group="task", name="external_schema", node=external_task)


def to_plain(value: Any) -> Any:
    """A config object (dataclasses of :class:`Config`) as plain dicts, lists and scalars, enums
    by name: what ``OmegaConf.to_container(OmegaConf.structured(value), enum_to_str=True)`` gives
    for a resolved config, without building OmegaConf nodes (a trial's
    ``config.yaml`` costs 3.8 ms of CPU this way, 30 ms through OmegaConf; benchmarks/RESULTS.md)."""
    if hasattr(value, "__dataclass_fields__"):
        return {name: to_plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value
