"""The shared types of a sweep, at the bottom of ``harness/``: what a trial is (:class:`Trial`)
what came back from it (:class:`Outcome`) and what one invocation did with an ablation
(:class:`SweepSummary`). Recording (:mod:`harness.tracking`,
:mod:`harness.writer`, :mod:`harness.leases`) and scheduling (:mod:`harness.scheduler`) both
import them from here, so recording never imports scheduling for a dataclass.

Imports only :mod:`harness.config` (no torch, Ray, Hydra or MLflow): :class:`Outcome`'s result
is a :class:`harness.trial.TrialResult`, named for typing only.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from harness.config import Config, to_plain

if TYPE_CHECKING:  # trial.py imports torch and the models; a record only carries its result
    from harness.trial import TrialResult

# Top-level keys that say where or how a trial runs or is recorded, not what it is.
NOT_IDENTITY = ("cluster", "tracking", "ablation", "scale", "report", "zoo", "dry_run", "force", "summary")

# Identity-neutral defaults: (group, key) → the value at which a key added after trials were
# recorded is left out of the identity, so every trial recorded before the key existed keeps its
# id (and its finished result is reused); any other value enters the identity and changes the id.
# task.eval_seed: 0 is the shared evaluation sets every trial used before the default became None
# (the trial's own seed, tasks/base.py); an explicit 0 keeps those trials' ids.
# train.augment: the augmentation control (harness/augment.py); every earlier trial trained without.
# task.label_noise: the teachers' training-target noise (tasks/teacher.py); 0 before it existed.
# model.causal_mask, model.learned_positions: attention's causal and positional references for the
# zoo (harness/models/attention.py); every earlier attention trial had neither.
# model.blocks: pre-norm residual blocks (harness/models/stack.py); every earlier trial was the bare model.
NEUTRAL_DEFAULTS: dict[tuple[str, str], Any] = {("task", "eval_seed"): 0, ("train", "augment"): "none",
                                                ("task", "label_noise"): 0.0, ("model", "causal_mask"): False,
                                                ("model", "learned_positions"): False, ("model", "blocks"): 0}


# Keys inside a group that say how a trial runs, never what it is: left out of every identity.
# train.compile: torch.compile changes a packed trial's results by rounding only, as its pack does.
HOW_IT_RUNS: tuple[tuple[str, str], ...] = (("train", "compile"),)


# A model from outside the package (model=external, or an installed plug-in, which is the same
# config with its entry-point name as model.variant): model.variant is the name pages and MLflow
# show, not what is trained. It is left out of the identity so that one class with one set of
# kwargs is one trial under any name (a plug-in name reuses the runs an import path finished).
# Built-in families have no model.variant key: their ids are unchanged.
EXTERNAL_MODEL, DISPLAY_ONLY = "external", "variant"


def drop_neutral(identity: dict[str, Any]) -> dict[str, Any]:
    """``identity`` without the :data:`NEUTRAL_DEFAULTS` keys that sit at their neutral value,
    without the :data:`HOW_IT_RUNS` keys and, for an external model, without its display name
    ``model.variant`` (a shallow copy of each group it changes; ``identity`` itself is left as
    it is)."""
    out = dict(identity)
    model = out.get("model")
    if isinstance(model, dict) and model.get("name") == EXTERNAL_MODEL and DISPLAY_ONLY in model:
        out["model"] = {k: v for k, v in model.items() if k != DISPLAY_ONLY}
    for group, key in HOW_IT_RUNS:
        if isinstance(out.get(group), dict) and key in out[group]:
            out[group] = {k: v for k, v in out[group].items() if k != key}
    for (group, key), neutral in NEUTRAL_DEFAULTS.items():
        if isinstance(out.get(group), dict) and key in out[group] and out[group][key] == neutral:
            out[group] = {k: v for k, v in out[group].items() if k != key}
    return out


@dataclass(frozen=True)
class Trial:
    """One point of an ablation.

    Attributes:
        trial_id: 16 hex digits hashing the trial's identity (:func:`harness.expansion.trial_id`).
        variant: the model preset, plus any ``model.*`` override of this trial, e.g.
            ``softmax`` or ``softmax[d1=4]``; what MLflow and the plots show.
        overrides: this trial's grid point, as Hydra override strings.
        config: the resolved config (plain dataclasses; pickles to Ray).
        task: the task preset (``conf/task/<name>.yaml``), e.g. ``teacher`` or ``arithmetic``.
        extends: for a trial added past a learning-rate grid edge (paper.md §13), the id of the
            grid trial it extends (same arm, task, n_train and seed; another lr); else ``""``.
        phase: which round of the report's run path started this trial (``exploratory``,
            ``lr_extension``, ``budget``, ``confirmation``, ``readout``, ``scale``: paper.md §13),
            written as the run's ``phase`` tag; ``""`` for a plain sweep. Not part of the
            trial's identity (nor of equality): the same trial started by another round is the
            same trial, and its finished run is reused.
        design: the design its round ran a confirmation block in (``sequential 4,7,10``, issue 64;
            ``""``: the fixed design), written as the run's ``design`` tag; not part of the
            trial's identity either.
        identity: :func:`harness.expansion.identity_dict` of the config, computed once when composed
            (the id's payload and the run's params); empty for a trial built by hand.
    """

    trial_id: str
    variant: str
    overrides: tuple[str, ...]
    config: Config
    task: str = ""
    extends: str = ""
    phase: str = field(default="", compare=False)
    design: str = field(default="", compare=False)
    identity: dict = field(default_factory=dict, compare=False, repr=False)  # identity_dict, once


def config_identity(cfg: Config) -> dict[str, Any]:
    """A resolved config object as plain data without where it runs or is recorded
    (:data:`NOT_IDENTITY`): :func:`harness.expansion.identity_dict` for a :class:`Config`."""
    return drop_neutral({key: value for key, value in to_plain(cfg).items() if key not in NOT_IDENTITY})


@dataclass
class Outcome:
    """A finished trial: its result, or the error text if it failed; the node it ran on."""

    trial: Trial
    result: Optional["TrialResult"]
    error: Optional[str]
    node: str


class TrackingError(RuntimeError):
    """Writes to the tracking store failed, or this driver lost its lease: the sweep ran, but
    some of it is not recorded (exit status 1; the same command resumes it)."""


class StoreWriteError(TrackingError):
    """A batched write (:mod:`harness.bulk`) to the tracking store failed and committed nothing.

    Attributes:
        cause: why, one of :data:`STORE_WRITE_CAUSES`: ``full`` (the disk or the database is
            full), ``locked`` (another writer held the store past the busy timeout),
            ``unreachable`` (the database server does not answer), ``schema`` (the store's
            schema is not this MLflow's), ``conflict`` (a row the batch writes exists already)
            or ``other``.
        store: the store's URI, its password masked.
        detail: what the database said, on one line ("" if only the message says it).
    """

    def __init__(self, message: str, cause: str = "other", store: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.cause, self.store, self.detail = cause, store, detail


STORE_WRITE_CAUSES = ("full", "locked", "unreachable", "schema", "conflict", "other")

# What each cause is, in the one line a sweep stopped by it ends with (:func:`store_fault_line`),
# and when the same command, run again, resumes it.
_CAUSE_TEXT = {"full": ("disk full", "once the disk has space again"),
               "locked": ("write-locked by another process for longer than tracking.lease_s",
                          "once the process holding its write lock has let go of it and tracking.lease_s has passed "
                          "(this driver then stopped writing; the next invocation closes its runs left RUNNING as "
                          "stale)"),
               "unreachable": ("not answering",
                               "once the server answers again and tracking.lease_s has passed (this driver "
                               "then stopped writing; the next invocation closes its runs left RUNNING as stale)"),
               "schema": ("not this MLflow's schema", "on a store of this MLflow version"),
               "conflict": ("a row it wrote exists already", ""),
               "other": ("a write failed", "once the store accepts writes again")}


def store_fault(err: BaseException) -> Optional[tuple[str, str]]:
    """``(cause, detail)`` of a store fault found in ``err`` or its chain of causes, None when
    there is none: a :class:`StoreWriteError`'s own cause and detail; an ``OSError`` ENOSPC or
    EDQUOT (an artifact, or the database file, could not grow), or a database error saying the
    database or disk is full: ``full``; a database error saying it is locked: ``locked``; an
    MLflow REST call whose retries are spent (``Max retries exceeded``, a refused connection):
    ``unreachable`` (the words: :data:`FAULT_WORDS`). ``detail``: what the error itself says, on one line."""
    chain: list[BaseException] = []
    while err is not None and len(chain) < 10 and all(err is not e for e in chain):
        chain.append(err)
        err = err.__cause__ or err.__context__
    for e in chain:
        if isinstance(e, StoreWriteError):
            return e.cause, e.detail or str(e)
    for e in chain:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return "full", f"{e.strerror}: {e.filename}" if e.filename else str(e.strerror)
        cause = fault_cause(f"{getattr(e, 'orig', '') or ''} {e}")
        if cause is not None:
            return cause, _one_line(e)
    return None


# What a database driver (sqlite3, psycopg), the operating system or MLflow's REST client says of
# each fault of a store, lower case: the one table that both the batched writer's errors
# (harness.bulk.classify) and any error a sweep ends with (store_fault) are read by. Phrases, not
# single words: store_fault reads every error in a chain, and "full" or "connection" alone is in
# messages that are no store's fault ("successfully", a Ray connection).
FAULT_WORDS: dict[str, tuple[str, ...]] = {
    "full": ("database or disk is full", "no space left on device", "disk quota exceeded", "disk full"),
    # SQLite's busy and locked tables; PostgreSQL's lock_timeout and NOWAIT (55P03), a deadlock's victim (40P01)
    "locked": ("database is locked", "database table is locked", "lock timeout", "could not obtain lock",
               "lock not available", "deadlock detected"),
    # MLflow's REST client out of retries; psycopg's refused or dropped connection, a server shut down
    "unreachable": ("max retries exceeded", "connection refused", "failed to establish a new connection",
                    "failed with timeout exception", "could not connect", "connection failed",
                    "server closed the connection", "terminating connection", "the connection is closed",
                    "connection timed out", "timeout expired")}


def fault_cause(text: str) -> Optional[str]:
    """The cause of :data:`FAULT_WORDS` whose words ``text`` (an error's message) contains,
    checked in the table's order; None when none does."""
    text = text.lower()
    return next((cause for cause, words in FAULT_WORDS.items() if any(w in text for w in words)), None)


def _one_line(err: BaseException) -> str:
    """What an error says, its first line (SQLAlchemy's adds the statement and a link on lines
    of their own; the driver's own words are ``orig``), at most 300 characters."""
    lines = [line for line in str(getattr(err, "orig", None) or err).splitlines() if line.strip()]
    return " ".join((lines or [type(err).__name__])[0].split())[:300]


def store_fault_line(store: str, cause: str, detail: str = "") -> str:
    """The one line a sweep that a fault of its tracking store left partly unrecorded ends with
    (exit status 1), the same for every cause of :data:`STORE_WRITE_CAUSES`: the store
    (``store``: its URI or file, a password already masked), what is wrong with it
    (``detail``: the database's or the system's own words, kept to one line), what stays, and
    when the same command resumes."""
    what, when = _CAUSE_TEXT.get(cause, _CAUSE_TEXT["other"])
    detail = " ".join(detail.split())[:300]
    return (f"tracking store {store}: {what}" + (f" ({detail})" if detail else "")
            + "; some of the sweep is not recorded: what was recorded stays (no trial is marked finished "
            f"without its record), and the same command run again{' ' + when if when else ''} runs every trial "
            "not recorded")


class SchemaMismatch(StoreWriteError):
    """The store's MLflow schema revision is not the one the pinned MLflow writes (found before
    any write)."""


@dataclass
class SweepSummary:
    """What one invocation did."""

    experiment_id: str
    parent_id: str
    n_trials: int  # trials of the ablation
    n_skipped: int  # already FINISHED before this invocation
    n_stale_closed: int  # RUNNING runs of a dead driver (lease expired) closed as KILLED
    n_elsewhere: int = 0  # claimed or finished by another invocation meanwhile (skipped)
    n_elsewhere_unfinished: int = 0  # of those, not finished there (its driver stopped or died)
    n_lost: int = 0  # ran here, but the run was closed as stale meanwhile (result not recorded)
    n_unrecorded: int = 0  # ran here, but writing its record failed (its run closed FAILED if it could be)
    trial_phase_s: float = 0.0  # this driver's wall clock from its first claim to its last record written
    finished: int = 0
    failed: list[str] = field(default_factory=list)  # one line per failed trial
    diverged: list[str] = field(default_factory=list)
    ablation: str = ""  # its name: a suite's summaries come in completion order
