"""SIGINT and SIGTERM for the driver: both interrupt the sweep (exit 130, running trials closed
as KILLED; README "Faults"). The handlers live here; the policy (where the sweep stops, the exit
status) is the sweep's own (:class:`harness.sweep.Sweep`), and so is the stop flag: each sweep
passes its own ``threading.Event`` (:data:`STOP` is only the default, for callers without one).

Before the sweep starts (imports, composition, checks) :func:`end_at_once_until_the_sweep` makes
a signal end the process at once: nothing has been run or recorded yet.

The sweep's handlers (:func:`install`) raise nothing on a first signal: they set the sweep's
flag, and the driver stops at its next safe point (each learning-curve point, each trial's start
and outcome, each second of a wait for Ray, after Ray starts). An exception raised by a
handler lands between two arbitrary bytecodes of the main thread, and there it did harm: inside MLflow's
SQLAlchemy session it left a SQLite transaction open on a pooled connection, whose lock stalled
every other driver on the store ("database is locked") while the interrupted driver closed its
runs; inside the import machinery it left the import lock held, and the driver's MLflow writer
thread then waited for it for ever. A second signal raises ``KeyboardInterrupt`` at once, for a
driver stuck in a call that does not return, with those risks.

While ``ray.init`` runs, Ray installs its own SIGTERM handlers (they exit or tear the new instance
down); :func:`noting_ray_handlers` wraps each of them so that it also sets the sweep's flag. What they
raise can land where Python swallows exceptions (an at-fork callback prints "Exception ignored
in" with a Traceback and goes on); while the sweep's handlers are installed,
``sys.unraisablehook`` drops a swallowed ``SystemExit`` or ``KeyboardInterrupt`` once
the flag is set (it is not lost: the driver checks the flag once Ray is up and prints its own
one-line message), and reports every other exception as before.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Iterator

STOP = threading.Event()  # the flag of callers that give none (a sweep gives its own)


def _interrupted_early(signum, frame) -> None:
    """SIGINT/SIGTERM before the sweep starts: nothing has been run or recorded, so the process
    ends at once (``os._exit``, exit status 130). An exception raised here would land in whatever
    import or config composition is under way and come out as another error (a RuntimeError from
    a class body, an OmegaConf error reported as bad input with exit status 2)."""
    os.write(2, b"interrupted before any trial started: nothing was run or recorded\n")
    os._exit(130)


def end_at_once_until_the_sweep() -> None:
    """Make SIGINT and SIGTERM end the process at once (:func:`_interrupted_early`) until the
    sweep installs its own handlers; ``python -m harness`` calls it before its heavy imports.
    When the sweep puts back the handlers it found (:func:`restore`), these become the defaults:
    a signal in the interpreter's teardown then just ends the process (the sweep is recorded,
    and "nothing was recorded" would be false)."""
    signal.signal(signal.SIGTERM, _interrupted_early)
    signal.signal(signal.SIGINT, _interrupted_early)


class _Closing:
    """Whether the sweep is closing its runs after an interrupt (:func:`closing`), how many
    signals came meanwhile, and whether a signal cut the closing short."""

    def __init__(self) -> None:
        self.active, self.signals, self.cut = False, 0, False


CLOSING = _Closing()


@contextlib.contextmanager
def closing() -> Iterator[None]:
    """While in this block (the sweep closing its runs after an interrupt), a second signal does
    not raise: it says on one line that the runs are being closed, and only a third raises at
    once (then :attr:`CLOSING.cut`: some runs may stay RUNNING until their lease expires).
    Before, a second Ctrl-C 0.3 s after the first ended the driver while its writer thread
    was still closing the runs: they stayed RUNNING although the line said closed."""
    CLOSING.active, CLOSING.signals, CLOSING.cut = True, 0, False
    try:
        yield
    except KeyboardInterrupt:
        CLOSING.cut = True
        raise
    finally:
        CLOSING.active = False


def _interrupt(stop: threading.Event):
    def interrupt(signum, frame) -> None:
        if stop.is_set() and CLOSING.active and CLOSING.signals == 0:
            CLOSING.signals += 1  # the runs are being closed: let it finish (a third signal cuts it)
            os.write(2, b"closing this sweep's runs as KILLED first; one more signal leaves them "
                        b"RUNNING until their lease expires\n")
            return
        if stop.is_set():  # a second signal: at once (the driver may be stuck in a call)
            raise KeyboardInterrupt(f"signal {signum}, again")
        stop.set()  # the driver stops at its next safe point

    return interrupt


def _quiet_about_interrupts(hook, stop: threading.Event):
    """``sys.unraisablehook`` that drops a ``KeyboardInterrupt`` or ``SystemExit`` (what Ray's
    SIGTERM handler raises during ``ray.init``, there swallowed in an at-fork callback of
    ``logging``) once ``stop`` is set, and passes everything else to ``hook``."""
    def quiet(unraisable) -> None:
        exc = unraisable.exc_value
        if not (isinstance(exc, (KeyboardInterrupt, SystemExit)) and stop.is_set()):
            hook(unraisable)

    quiet.quiet_about_interrupts = True
    return quiet


def install(stop: threading.Event = STOP) -> dict:
    """Make SIGINT and SIGTERM set ``stop`` (a second one raises ``KeyboardInterrupt`` at once;
    install again after ``ray.init``, which replaces the SIGTERM handler) and quiet
    ``sys.unraisablehook`` about interrupts swallowed in callbacks (module docstring); returns
    what was replaced, for :func:`restore`. Main thread only."""
    handler = _interrupt(stop)
    previous: dict = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    if not getattr(sys.unraisablehook, "quiet_about_interrupts", False):  # not wrapped twice
        previous["unraisablehook"] = sys.unraisablehook
        sys.unraisablehook = _quiet_about_interrupts(sys.unraisablehook, stop)
    return previous


def restore(previous: dict) -> None:
    """Put back the handlers that :func:`install` replaced (``previous``, its answer) once the
    sweep is over: a signal in the interpreter's teardown then ends the process as it would have
    without the sweep, instead of a ``KeyboardInterrupt`` that an exit callback reports with a
    Traceback; the early handler (:func:`end_at_once_until_the_sweep`) becomes the default.
    Main thread only."""
    for key, handler in previous.items():
        if key == "unraisablehook":
            sys.unraisablehook = handler
        else:
            signal.signal(key, signal.SIG_DFL if handler is _interrupted_early else handler)


def check(stop: threading.Event = STOP) -> None:
    """Raise ``KeyboardInterrupt`` if a signal arrived (``stop`` is set): a safe point, where an
    interrupt leaves no store call or lock half done (module docstring)."""
    if stop.is_set():
        raise KeyboardInterrupt("interrupt requested")


@contextlib.contextmanager
def noting_ray_handlers(stop: threading.Event = STOP) -> Iterator[None]:
    """While in this block, every SIGTERM handler Ray installs also sets ``stop`` first (Ray
    installs them through ``ray._private.utils.set_sigterm_handler``)."""
    import ray._private.utils as ray_utils

    original = ray_utils.set_sigterm_handler

    def setting(handler) -> None:
        def noting(signum, frame) -> None:
            stop.set()
            handler(signum, frame)

        original(noting)

    ray_utils.set_sigterm_handler = setting
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler = original
