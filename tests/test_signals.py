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


def test_a_first_signal_is_noted_and_a_second_raises_at_once(clean_signals):
    """The sweep's handler raises nothing on a first signal (an exception raised between two
    arbitrary bytecodes can leave a store lock or the import lock held): it sets STOP, which
    check() raises at the driver's safe points; a second signal raises at once."""
    signals.install()
    signals.check()  # nothing received yet
    os.kill(os.getpid(), signal.SIGTERM)
    assert signals.STOP.is_set()  # noted, not raised
    with pytest.raises(KeyboardInterrupt):
        signals.check()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        signals.STOP.wait(1.0)  # (not reached: the second signal's handler raises first)


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
    _RaisesWhenCollected(SystemExit(15))  # Ray's SIGTERM handler, run in an at-fork callback
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
    from harness.sweep import run_suite
    from harness.store import resolve_store

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    store = resolve_store(TrackingConfig(), tmp_path)
    assert run_suite([], ClusterConfig(scheduler=SchedulerKind.serial), store, [], 60.0) is False
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL


_LEAK_PROBE = r'''
import json, os, random, signal, sqlite3, sys, threading
from harness import signals
from harness.store import Store
from harness.tracking import open_client

db = sys.argv[1]
client = open_client(Store(f"sqlite:///{db}", None))
experiment = client.create_experiment("probe")
run = client.create_run(experiment).info.run_id
signals.install()
rng, interrupts, leaked = random.Random(0), 0, []
for attempt in range(int(sys.argv[2])):
    signals.STOP.clear()  # each attempt's signal is a first one
    threading.Timer(rng.uniform(0, 0.02), os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
        while True:  # a write (read, then write) and a read, as a driver makes them
            client.set_tag(run, "k", str(attempt))
            client.search_runs([experiment])
            signals.check()  # the driver's safe point
    except KeyboardInterrupt:
        interrupts += 1
    other = sqlite3.connect(db, timeout=0.5)  # another driver writes
    try:
        other.execute("CREATE TABLE IF NOT EXISTS probe (attempt INTEGER)")
        other.execute("INSERT INTO probe VALUES (?)", (attempt,))
        other.commit()
    except sqlite3.OperationalError as err:
        leaked.append(f"{attempt}: {err}")
        break  # the interrupted client holds the lock: every later call waits 20 s
    finally:
        other.close()
print(json.dumps({"interrupts": interrupts, "leaked": leaked}))
'''


@pytest.mark.slow
@pytest.mark.e2e  # a driver-like process interrupted 60 times (the other tests signal this one)
def test_an_interrupt_during_store_calls_leaves_no_sqlite_lock(tmp_path):
    """A SIGINT at a random moment of a driver's store calls (60 times) never leaves the SQLite
    file locked for other drivers. When the handler raised at once, the interrupt landed inside
    MLflow's SQLAlchemy session and left a transaction open on a pooled connection (at the
    probe's first interrupt), and the interrupted driver then stalled every other driver on the
    store while it closed its runs (a CI stress test: 'database is locked')."""
    import json
    import subprocess

    probe = tmp_path / "probe.py"
    probe.write_text(_LEAK_PROBE)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, str(probe), str(tmp_path / "mlflow.db"), "60"],
                          capture_output=True, text=True, cwd=repo, timeout=600,
                          env={**os.environ, "PYTHONPATH": repo})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["leaked"] == [] and found["interrupts"] == 60, found


def test_a_signal_sets_the_flag_of_the_sweep_that_installed_the_handlers(clean_signals, tmp_path):
    """The stop flag belongs to a sweep, not the process: a signal while one sweep's handlers
    are installed sets that sweep's flag only (another sweep, and the module default, stay
    clear), and the sweep's should_stop() is what the scheduler and the queue read."""
    from harness.config import ClusterConfig, SchedulerKind, TrackingConfig
    from harness.sweep import Sweep
    from harness.store import resolve_store

    store = resolve_store(TrackingConfig(), tmp_path)
    first, second = (Sweep([], ClusterConfig(scheduler=SchedulerKind.serial), store, [], 60.0)
                     for _ in range(2))
    previous = signals.install(first.stop)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert first.should_stop() and not second.should_stop() and not signals.STOP.is_set()
    finally:
        signals.restore(previous)
