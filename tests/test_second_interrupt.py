"""A second Ctrl-C still closes what the first promised (issue 47, item 2): the sweep closing
its runs after an interrupt is not cut short by a second signal; a third cuts it, and the line
then says what may stay RUNNING."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from mlflow.tracking import MlflowClient

from harness import signals
from harness.config import ClusterConfig, SchedulerKind, TrackingConfig
from harness.expansion import compose_trial
from harness.loop import run_sweeps
from harness.scheduler import SerialScheduler
from harness.store import resolve_store
from harness.tracking import Tracker

FAST = ["train.max_steps=4", "train.eval_every=2", "task.n_val=16", "task.n_test=16", "task.n_train=32"]
LONE = ClusterConfig(scheduler=SchedulerKind.serial, pack_size="1")


def _wait_for(condition, timeout_s: float) -> bool:
    """Poll ``condition`` every 10 ms for up to ``timeout_s`` seconds; whether it came true."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("during_close", [1, 2], ids=["second", "third"])
def test_a_second_ctrl_c_while_the_runs_close_still_closes_them(hydra_conf, tmp_path, monkeypatch, capfd,
                                                                 during_close):
    """Ctrl-C during the first trial, and again while the writer thread closes its run: before,
    the second KeyboardInterrupt left the main thread's wait for the writer, the driver exited
    130 saying "closed as KILLED", and the trial's run and the parent stayed RUNNING until the
    lease expired. The store is read the moment run_sweeps raises, what ``os._exit`` leaves.
    A third Ctrl-C cuts the closing short (``CLOSING.cut``: the sweep's last line then says
    that runs may stay RUNNING until their lease expires)."""
    store = resolve_store(TrackingConfig(), tmp_path)
    trials = [compose_trial(FAST, [f"seed={s}"]) for s in range(2)]
    real_trial = __import__("harness.trial").trial.run_trial
    left = threading.Event()

    def interrupted_trial(cfg, device="cpu", progress=None):
        os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C: noted, the sweep stops at its next safe point
        return real_trial(cfg, device, progress)

    real_end = Tracker.end_run
    second, handled = [], []

    def to_main() -> None:
        """SIGINT, sent to the main thread (it runs the handlers): from this writer thread, a
        signal to the process could wake no thread that is waiting in a lock."""
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    def end_run(self, run_id, status="FINISHED", patience_s=60.0):
        if status == "KILLED" and not second:  # the second Ctrl-C, as the runs are being closed
            second.append(run_id)
            to_main()
            if during_close == 2:  # a third, once the second is handled: pending signals do not queue,
                # so a third sent before the main thread ran the handler of the second would be the
                # same one signal. The wait is long: on CI's busy machine 5 s were once not enough
                handled.append(_wait_for(lambda: signals.CLOSING.signals, 120.0))
                to_main()
            left.wait(2.0 if during_close == 1 else 30.0)  # the main thread leaving the close here (before, or
            # cut by a third signal) is seen now; set once the store is read
        return real_end(self, run_id, status, patience_s)

    monkeypatch.setattr("harness.scheduler.run_trial", interrupted_trial)
    monkeypatch.setattr(Tracker, "end_run", end_run)
    stop = threading.Event()
    previous = signals.install(stop)
    try:
        tracker = Tracker(store)
        with SerialScheduler(LONE) as scheduler, pytest.raises(KeyboardInterrupt):
            try:
                run_sweeps([("unit", trials)], scheduler, tracker, [], should_stop=stop.is_set,
                           closing=signals.closing)
            finally:
                runs = MlflowClient(store.uri).search_runs([tracker.experiment("unit")])
                left.set()
    finally:
        signals.restore(previous)
    assert second, "the closing never began"
    assert during_close == 1 or handled == [True], "the main thread never handled the second signal"
    assert "closing this sweep's runs as KILLED first" in capfd.readouterr().err
    if during_close == 2:  # cut short: the main thread left while the writer was still closing
        assert signals.CLOSING.cut and not signals.CLOSING.active
        assert runs and "RUNNING" in {r.info.status for r in runs}
        return
    assert runs and {r.info.status for r in runs} == {"KILLED"}, [(r.data.tags.get("role"), r.info.status) for r in runs]
    assert not signals.CLOSING.cut
