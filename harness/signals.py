"""SIGINT and SIGTERM for the driver: both interrupt the sweep (exit 130, running trials closed
as KILLED; README "Faults").

Python runs a signal handler between bytecodes of the main thread, so the ``KeyboardInterrupt``
it raises can land where Python swallows exceptions (a garbage-collection or at-fork callback
prints "Exception ignored in" with a Traceback and goes on). Every handler therefore also sets
:data:`STOP`, which the driver checks at each learning-curve point and outcome
(:func:`harness.driver.run_sweep`) and after Ray starts; while the handlers are installed,
``sys.unraisablehook`` stays quiet about such a swallowed interrupt (it is not lost, and the
driver prints its own one-line message), and reports every other exception as before. While
``ray.init`` runs, Ray installs its own SIGTERM handlers (they exit or tear the new instance
down); :func:`noting_ray_handlers` wraps each of them so that it also sets :data:`STOP`, and
the ``SystemExit`` one raises where Python swallows it is dropped like a swallowed interrupt.

An interrupt must never land inside a call to the tracking store: raised between two bytecodes
of MLflow's or SQLAlchemy's Python code it can leave a SQLite transaction open on a pooled
connection, whose lock then blocks every other driver on the store ("database is locked") for
as long as the interrupted process lives (it still closes its runs and stops Ray). Store calls
therefore run inside :func:`deferred` (:func:`deferring` wraps a client): a first signal there
sets :data:`STOP` and is raised when the call returns; a second one is raised at once.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Any, Iterator

STOP = threading.Event()  # set by any SIGINT/SIGTERM this process received
_depth = 0  # how many deferred() blocks the main thread is in
_pending: int | None = None  # a signal held back by deferred(), raised when the block ends


def _interrupt(signum, frame) -> None:
    global _pending
    STOP.set()
    if _depth and _pending is None:  # inside a store call: raised when it returns
        _pending = signum
        return
    _pending = None
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold back an interrupt of the sweep's handlers (:func:`install`) until the block ends:
    a first SIGINT or SIGTERM in it sets :data:`STOP` and is raised as ``KeyboardInterrupt``
    when the block is left (replacing any exception the block raised); a second one is raised
    at once. For calls into the tracking store (module docstring). Blocks nest; in a thread
    other than the main thread (where no signal handler runs) it does nothing."""
    global _depth, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth and _pending is not None:
            signum, _pending = _pending, None
            raise KeyboardInterrupt(f"signal {signum}")


def deferring(target: Any) -> Any:
    """``target`` (an ``MlflowClient``) behind a proxy whose every method call runs in
    :func:`deferred`, so that an interrupt never lands inside it; other attributes pass
    through."""
    return _Deferring(target)


class _Deferring:
    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with deferred():
                return attr(*args, **kwargs)

        return call


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
    """Raise ``KeyboardInterrupt`` if a signal arrived, even one whose exception was swallowed."""
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
