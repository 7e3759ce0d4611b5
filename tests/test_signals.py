"""harness.signals: an interrupt whose exception Python swallowed is not lost, and a SIGTERM
that reaches one of Ray's own handlers during ``ray.init`` is noted too."""
import gc
import os
import signal
import sys

import pytest

from harness import signals


@pytest.fixture()
def clean_signals():
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    hook = sys.unraisablehook
    signals.STOP.clear()
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)
    sys.unraisablehook = hook
    signals.STOP.clear()


def test_a_swallowed_interrupt_is_raised_again_by_check(clean_signals):
    signals.install()
    signals.check()  # nothing received yet
    try:  # where Python ignores exceptions (a GC or at-fork callback), the interrupt is lost ...
        os.kill(os.getpid(), signal.SIGTERM)
    except KeyboardInterrupt:
        pass
    with pytest.raises(KeyboardInterrupt):  # ... but not the request
        signals.check()


class _RaisesWhenCollected:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __del__(self) -> None:
        raise self.error


def test_a_swallowed_interrupt_prints_no_traceback_while_the_sweep_runs(clean_signals):
    """An interrupt swallowed in a callback (``__del__`` here, a weakref callback in the wild)
    does not reach the unraisable hook (Python's prints "Exception ignored ... Traceback") once
    noted; other swallowed errors still do, and restore() puts the hook back."""
    seen = []
    sys.unraisablehook = before = lambda unraisable: seen.append(unraisable.exc_value)
    previous = signals.install()
    signals.install()  # again, as after ray.init: the hook is not wrapped twice
    signals.STOP.set()
    _RaisesWhenCollected(KeyboardInterrupt("signal 15"))
    gc.collect()
    assert seen == []
    _RaisesWhenCollected(ValueError("a real error"))
    gc.collect()
    assert [type(e) for e in seen] == [ValueError]
    signals.restore(previous)
    assert sys.unraisablehook is before


def test_rays_sigterm_handlers_note_the_signal(clean_signals):
    import ray._private.utils as ray_utils

    seen = []
    with signals.noting_ray_handlers():
        ray_utils.set_sigterm_handler(lambda signum, frame: seen.append(signum))
    os.kill(os.getpid(), signal.SIGTERM)
    assert seen == [signal.SIGTERM] and signals.STOP.is_set()
    original = ray_utils.set_sigterm_handler
    assert original.__module__ == ray_utils.__name__  # restored after the block


def test_the_sweeps_handlers_end_with_the_suite(clean_signals, tmp_path):
    """run_suite puts back the handlers it found once the suite is over: a SIGTERM in the
    interpreter's teardown then ends the process as before, instead of a KeyboardInterrupt that
    an exit callback reports with a Traceback (a driver SIGTERMed just after its sweep printed one)."""
    from harness.config import ClusterConfig, SchedulerKind, TrackingConfig
    from harness.driver import run_suite
    from harness.store import resolve_store

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    store = resolve_store(TrackingConfig(), tmp_path)
    assert run_suite([], ClusterConfig(scheduler=SchedulerKind.serial), store, [], 60.0) is False
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL
