"""The one shell of the five commands: what happens between the command line and a command's
``run(cfg, runtime) -> int``, written once for ``python -m harness``, ``python -m analysis``,
``python -m analysis.report``, ``python -m analysis.scorecard`` and ``python -m analysis.zoo``,
and for the tests' in-process fixture (``tests/conftest.py``: ``invoke``), which calls
:func:`prepare` and :func:`call` as :func:`main` does and only composes differently (Hydra's
compose API instead of ``@hydra.main``).

In order, before anything heavy is imported (:func:`prepare`):

1. a tracking URI's password moves to the environment (:mod:`harness.secrets`), before Hydra
   writes the command line to ``.hydra/``: exit 2 in one masked line for a token without one;
2. ``--help``, and every misspelled group choice (sweep values too), key, unsupported sweep
   function (``interval``, ``glob``) and value a schema can type-check (:func:`harness.cli.precheck`):
   exit 2 in one line, with "did you mean" where a name is close;
3. the YAML files the command selects parse, without duplicate keys
   (:func:`harness.config_files.check_config_files`): exit 2 naming file and line;
4. the command line's sweeps are taken out (:func:`harness.cli.take_sweeps`), and a dry run
   writes nothing of Hydra's (:data:`QUIET_HYDRA`).

Then the command runs under Hydra (:func:`harness.cli.hydra_shell`) through :func:`call`: a
``dry_run=true`` is the command's own plan (every command reads ``cfg.dry_run``); a store in
a Ray job's working-dir copy is refused, and a damaged store met on the way is one line and
exit 2, whichever command read it.

Exit status of every command: 0 done (or a dry run), 1 some trials failed, 2 bad input (nothing
run, nothing recorded), 130 interrupted.
"""

from __future__ import annotations

import errno
import importlib
import sqlite3
import sys
from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Sequence

from harness import cli

# Hydra writes nothing of its own: no outputs/<name>/<time>/ folder, no .hydra/ copy, no log
# file (a dry run of python -m harness and python -m analysis; the other three always).
UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)  # a folder that turned read-only
QUIET_HYDRA = ("hydra.run.dir=.", "hydra.output_subdir=null", "hydra/job_logging=none")


@dataclass(frozen=True)
class Command:
    """One command of the table (:data:`COMMANDS`).

    Attributes:
        name: ``python -m NAME``.
        config: its primary config, ``conf/<config>.yaml``.
        usage: the first part of its ``--help`` (:func:`harness.cli.help_text` adds the options).
        run: ``"module:function"``, the command as a function ``run(cfg, runtime) -> int``:
            imported only once the shell's checks have passed (an entry point, as
            ``[project.scripts]`` names one: the table is below the commands it names).
        quiet: Hydra writes nothing of its own (:data:`QUIET_HYDRA`) on every run, not only
            on a dry run: the command writes its own folder (the report, the scorecard's page,
            the zoo), which Hydra's ``outputs/<experiment>/<time>/`` would only litter.
        trains: it runs trials; until its sweep starts a signal ends it at once
            (:func:`harness.signals.end_at_once_until_the_sweep`).
        summary: ``"module:function"`` passed to ``run`` as ``runtime.summarise`` (the
            end-of-sweep table of ``python -m harness``, drawn by :mod:`analysis.summary`).
    """

    name: str
    config: str
    usage: str
    run: str
    quiet: bool = False
    trains: bool = True
    summary: str | None = None

    def function(self) -> Callable[[Any, cli.Runtime], int]:
        """The command's ``run`` (imports its module)."""
        module, name = self.run.split(":")
        return getattr(importlib.import_module(module), name)


COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("harness", "config", cli.HARNESS_USAGE, "harness.command:run",
            summary="analysis.summary:summarise"),
    Command("analysis", "config", cli.ANALYSIS_USAGE, "analysis.command:run", trains=False),
    Command("analysis.report", "report", cli.REPORT_USAGE, "analysis.report:run", quiet=True),
    Command("analysis.scorecard", "config", cli.SCORECARD_USAGE, "analysis.scorecard:run", quiet=True),
    Command("analysis.zoo", "zoo", cli.ZOO_USAGE, "analysis.zoo:run", quiet=True),
)}


def _imported_when_called(entry: str) -> Callable[..., Any]:
    """The function ``"module:function"`` names, its module imported at its first call: the
    end-of-sweep summary's (pandas, scipy.stats and the analysis modules) is then not imported by
    a dry run, a run with ``summary=false`` or a sweep that ends before its summary (a dry run of
    the smoke ablation: 4.30 → 3.68 CPU-s, benchmarks/RESULTS.md)."""
    module, name = entry.split(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    return call


def is_dry_run(args: Sequence[str]) -> bool:
    """Whether the command line asks for a dry run (``dry_run=true``, ``+dry_run=1``, ``True``)."""
    return any(a.lstrip("+").lower() in ("dry_run=true", "dry_run=1") for a in args)


def prepare(command: Command, args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Steps 1–4 of the module docstring on the command line ``args`` (without the program):
    ``(the arguments Hydra composes, the sweeps)``; prints and raises on a refusal.

    Raises:
        SystemExit: 0 for ``--help``, 2 for bad input (one ``error:`` line on stderr).
    """
    from harness.secrets import CredentialsError, scrub_argv

    try:
        args = scrub_argv(args)
    except CredentialsError as err:
        _refuse(str(err))
    cli.precheck(command.usage, args)
    from harness.config_files import ConfigFileError, check_config_files

    try:  # a YAML syntax error or a duplicate key: one line with file and line
        check_config_files(args)
    except ConfigFileError as err:
        _refuse(str(err))
    argv, sweeps = cli.take_sweeps(["python", *args])
    argv = argv[1:]
    if command.quiet or is_dry_run(argv):
        argv += QUIET_HYDRA
    return argv, sweeps


def _refuse(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def call(command: Command, cfg, runtime: cli.Runtime) -> int:
    """``command``'s run on the composed ``cfg``: its exit status. Refused first (exit 2, one
    line): a local store inside a Ray job's copy of its working folder, where its runs would be
    lost (:func:`harness.ray_job.store_in_job_copy`). A damaged SQLite store met by any command
    (``database disk image is malformed``) is exit 2 in one line naming the store and what to
    do (:func:`harness.store.check_sqlite`), not a traceback; a file or folder that turned
    read-only under a running sweep (``EACCES``, ``EPERM``, ``EROFS``) is exit 1 in one line
    (the sweep has closed what it had open; the same command resumes)."""
    if command.summary and runtime.summarise is None:
        runtime = cli.Runtime(**{**runtime.__dict__, "summarise": _imported_when_called(command.summary)})
    problem = _store_in_job_copy(cfg, runtime)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        return command.function()(cfg, runtime)
    except OSError as err:
        if err.errno not in UNWRITABLE:
            raise
        # a folder that turned read-only under a running sweep (its artifact folder): the sweep
        # has closed what it had open; one line, and the same command resumes once it is writable
        print(f"error: cannot write {err.filename or 'a file'}: {err.strerror}; the sweep stopped (the trials "
              "it recorded stay; the rest run when the same command is run again once that folder is "
              "writable)", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - only a damaged store is answered, the rest re-raised
        damage = _damaged_store(cfg, runtime, err)
        if damage is None:
            raise
        print(f"error: {damage}", file=sys.stderr)
        return 2


def _store_in_job_copy(cfg, runtime: cli.Runtime) -> str | None:
    """:func:`harness.ray_job.store_in_job_copy` for the configured local store (the SQLite
    file and its artifact folder, as :func:`harness.store.resolve_store` places them); None
    for a tracking server, or where a bundle is read instead of a store (``report.runs``,
    ``zoo.runs``)."""
    from harness.ray_job import store_in_job_copy

    tracking = cfg.get("tracking")
    kind = tracking.get("kind") if tracking is not None else None
    offline = any((cfg.get(group) or {}).get("runs") for group in ("report", "zoo"))
    if getattr(kind, "name", kind) != "local" or offline:
        return None
    db = runtime.cwd / str(tracking.db_path)
    artifacts = runtime.cwd / str(tracking.artifact_root) if tracking.get("artifact_root") else db.parent / "mlartifacts"
    return store_in_job_copy({"tracking store": db, "artifact folder": artifacts}, runtime.cwd)


def _damaged_store(cfg, runtime: cli.Runtime, err: BaseException) -> str | None:
    """The one-line description of the damaged SQLite store behind ``err`` (a database error
    somewhere in its chain, SQLAlchemy's and MLflow's wrappers included), or None when ``err``
    is something else or the store checks out."""
    from harness.store import StoreError, check_sqlite, sqlite_path

    chain, seen = [], err
    while seen is not None and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    if not any(isinstance(e, sqlite3.DatabaseError) or type(e).__name__ in ("DatabaseError", "MlflowException")
               for e in chain):
        return None
    tracking = cfg.get("tracking") if hasattr(cfg, "get") else None
    kind = tracking.get("kind") if tracking is not None else None
    if getattr(kind, "name", kind) != "local":
        return None
    db = sqlite_path(f"sqlite:///{(runtime.cwd / str(tracking.db_path)).resolve()}")
    if db is None or not db.is_file():
        return None
    try:
        check_sqlite(db)
    except StoreError as damaged:
        return str(damaged)
    return None


def main(name: str, argv: Sequence[str] | None = None) -> NoReturn:
    """``python -m NAME``: the whole shell in a process; exits with the command's status."""
    command = COMMANDS[name]
    if command.trains:
        from harness.signals import end_at_once_until_the_sweep

        end_at_once_until_the_sweep()  # nothing is recorded before the sweep starts
    args = list(sys.argv[1:] if argv is None else argv)
    args, sweeps = prepare(command, args)
    sys.argv = [sys.argv[0], *args]  # what Hydra reads and writes to .hydra/: scrubbed
    from harness.config import register_configs

    register_configs()
    sys.exit(cli.hydra_shell(command.config, lambda cfg, runtime: call(command, cfg, runtime), sweeps))
