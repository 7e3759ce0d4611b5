"""harness.signals: an interrupt whose exception Python swallowed is not lost, and a SIGTERM
that reaches one of Ray's own handlers during ``ray.init`` is noted too."""
import os
import signal

import pytest

from harness import signals


@pytest.fixture()
def clean_signals():
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signals.STOP.clear()
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)
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


def test_rays_sigterm_handlers_note_the_signal(clean_signals):
    import ray._private.utils as ray_utils

    seen = []
    with signals.noting_ray_handlers():
        ray_utils.set_sigterm_handler(lambda signum, frame: seen.append(signum))
    os.kill(os.getpid(), signal.SIGTERM)
    assert seen == [signal.SIGTERM] and signals.STOP.is_set()
    original = ray_utils.set_sigterm_handler
    assert original.__module__ == ray_utils.__name__  # restored after the block
