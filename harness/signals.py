"""SIGINT and SIGTERM for the driver: both interrupt the sweep (exit 130, running trials closed
as KILLED; README "Faults").

The sweep's handlers (:func:`install`) raise nothing on a first signal: they set :data:`STOP`,
and the driver stops at its next :func:`check` (each learning-curve point, each trial's start and
outcome, each second of a wait for Ray, after Ray starts). An exception raised by a handler lands
between two arbitrary bytecodes of the main thread, and there it did harm: inside MLflow's
SQLAlchemy session it left a SQLite transaction open on a pooled connection, whose lock stalled
every other driver on the store ("database is locked") while the interrupted driver closed its
runs; inside the import machinery it left the import lock held, and the driver's MLflow writer
thread then waited for it for ever. A second signal raises ``KeyboardInterrupt`` at once, for a
driver stuck in a call that does not return, with those risks.

While ``ray.init`` runs, Ray installs its own SIGTERM handlers (they exit or tear the new instance
down); :func:`noting_ray_handlers` wraps each of them so that it also sets :data:`STOP`. What they
raise can land where Python swallows exceptions (an at-fork callback prints "Exception ignored
in" with a Traceback and goes on); while the sweep's handlers are installed,
``sys.unraisablehook`` drops a swallowed ``SystemExit`` or ``KeyboardInterrupt`` once
:data:`STOP` is set (it is not lost: the driver checks STOP once Ray is up and prints its own
one-line message), and reports every other exception as before.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Iterator

STOP = threading.Event()  # set by any SIGINT/SIGTERM this process received


def _interrupt(signum, frame) -> None:
    if STOP.is_set():  # a second signal: at once (the driver may be stuck in a call)
        raise KeyboardInterrupt(f"signal {signum}, again")
    STOP.set()  # the driver stops at its next check()


def _quiet_about_interrupts(hook):
    """``sys.unraisablehook`` that drops a ``KeyboardInterrupt`` or ``SystemExit`` (what Ray's
    SIGTERM handler raises during ``ray.init``, there swallowed in an at-fork callback of
    ``logging``) once :data:`STOP` is set, and passes everything else to ``hook``."""
    def quiet(unraisable) -> None:
        exc = unraisable.exc_value
        if not (isinstance(exc, (KeyboardInterrupt, SystemExit)) and STOP.is_set()):
            hook(unraisable)

    quiet.quiet_about_interrupts = True
    return quiet


def install() -> dict:
    """Make SIGINT and SIGTERM interrupt the sweep (again after ``ray.init``, which replaces the
    SIGTERM handler) and quiet ``sys.unraisablehook`` about interrupts swallowed in callbacks
    (module docstring); returns what was replaced, for :func:`restore`. Main thread only."""
    previous: dict = {sig: signal.signal(sig, _interrupt)
                      for sig in (signal.SIGTERM, signal.SIGINT)}
    if not getattr(sys.unraisablehook, "quiet_about_interrupts", False):  # not wrapped twice
        previous["unraisablehook"] = sys.unraisablehook
        sys.unraisablehook = _quiet_about_interrupts(sys.unraisablehook)
    return previous


def restore(previous: dict) -> None:
    """Put back the handlers that :func:`install` replaced (``previous``, its answer) once the
    sweep is over: a signal in the interpreter's teardown then ends the process as it would have
    without the sweep, instead of a ``KeyboardInterrupt`` that an exit callback reports with a
    Traceback. Main thread only."""
    for key, handler in previous.items():
        if key == "unraisablehook":
            sys.unraisablehook = handler
        else:
            signal.signal(key, handler)


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a signal arrived (:data:`STOP` is set): the driver's safe
    points, where an interrupt leaves no store call or lock half done (module docstring)."""
    if STOP.is_set():
        raise KeyboardInterrupt("interrupt requested")


@contextlib.contextmanager
def noting_ray_handlers() -> Iterator[None]:
    """While in this block, every SIGTERM handler Ray installs also sets :data:`STOP` first
    (Ray installs them through ``ray._private.utils.set_sigterm_handler``)."""
    import ray._private.utils as ray_utils

    original = ray_utils.set_sigterm_handler

    def setting(handler) -> None:
        def noting(signum, frame) -> None:
            STOP.set()
            handler(signum, frame)

        original(noting)

    ray_utils.set_sigterm_handler = setting
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler = original
