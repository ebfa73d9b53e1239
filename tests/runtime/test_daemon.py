"""The one loop of the scheduler, the DAG processor and the worker (``runtime.daemon.Daemon``):
passes and the wait between them, stop signals, wake-ups, failed passes, its hooks.

The signals are sent by the test process to itself from inside the loop (a pass or a wait),
where the daemon's handlers are sure to be installed."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import DatabaseError

from runtime import daemon as daemon_module
from runtime.daemon import Daemon

# The loop refreshes the database connection before each pass and drops it on the way out, as
# a daemon must; inside the test's transaction both leave the connection alone. Without a
# database, a connection an earlier test in the same process left marked broken would be
# checked with a query, which pytest-django refuses.
pytestmark = pytest.mark.django_db


class Recorder:
    """A pass that records when it ran, and runs ``then`` (given the pass's number)."""

    def __init__(self, then: Callable[[int], Any] = lambda n: None) -> None:
        self.times: list[float] = []
        self.finished = 0
        self.then = then

    def __call__(self) -> bool:
        self.times.append(time.monotonic())
        more = self.then(len(self.times))
        self.finished += 1
        return more is not False


class FakeListener:
    """Stands in for ``assets_app.notify.Listener``: records its calls; ``wait`` answers from
    ``notified`` (a notification at once) or sleeps."""

    instances: list[FakeListener] = []

    def __init__(self, *channels: str) -> None:
        self.channels = channels
        self.enabled = False
        self.calls: list[str] = []
        self.notified = True
        FakeListener.instances.append(self)

    def listen(self) -> bool:
        self.calls.append("listen")
        self.enabled = True
        return True

    def wait(self, timeout: float) -> bool:
        self.calls.append("wait")
        if self.notified:
            return True
        time.sleep(timeout)
        return False

    def close(self) -> None:
        self.calls.append("close")


@pytest.fixture(autouse=True)
def python_ctrl_c():
    """Ctrl-C as a fresh Python has it (``KeyboardInterrupt``, SIGINT not blocked), whatever an
    earlier test in the same process left: these tests send SIGINT to themselves, and one left
    ignored or blocked would leave a daemon waiting until the test's timeout."""
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, handler)


@pytest.fixture
def fake_listener(monkeypatch):
    FakeListener.instances = []
    monkeypatch.setattr(daemon_module, "Listener", FakeListener)
    return FakeListener.instances


def test_max_passes_are_run_with_the_interval_between_them():
    # given a daemon of three passes, 0.2 s apart
    record = Recorder()
    daemon = Daemon(name="test", run_pass=record, interval=0.2, max_passes=3, check_every=0.05)

    # when it runs
    passes = daemon.run()

    # then it ran three passes, each at least the interval after the one before
    assert passes == daemon.passes == 3
    assert len(record.times) == 3
    assert all(b - a >= 0.2 for a, b in zip(record.times, record.times[1:], strict=False))


def test_a_pass_with_nothing_more_to_do_ends_the_loop_without_waiting():
    record = Recorder(then=lambda n: False)  # the worker's --max-tasks reached
    daemon = Daemon(name="test", run_pass=record, interval=60)

    started = time.monotonic()
    assert daemon.run() == 1
    assert time.monotonic() - started < 30  # a wait of 60 s would not fit


def test_a_stop_signal_during_a_pass_lets_the_pass_finish_then_stops():
    # given a pass that receives SIGTERM half-way
    finish, close = [], []
    record = Recorder(then=lambda n: os.kill(os.getpid(), signal.SIGTERM))
    daemon = Daemon(
        name="test",
        run_pass=record,
        interval=60,
        stop_signals=(signal.SIGTERM,),
        finish=lambda: finish.append(True),
        close=lambda: close.append(True),
    )
    before = signal.getsignal(signal.SIGTERM)

    # when it runs
    passes = daemon.run()

    # then the pass finished, no second one started, and the previous handler is back
    assert (passes, record.finished, daemon.stop_requests) == (1, 1, 1)
    assert finish == close == [True]
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_stop_signal_ends_the_wait_at_once():
    # given a daemon waiting 60 s after its first pass, signalled while it waits
    signalled: list[bool] = []

    def woken() -> bool:
        if not signalled:
            signalled.append(True)
            os.kill(os.getpid(), signal.SIGINT)
        return False

    daemon = Daemon(name="test", run_pass=Recorder(), interval=60, woken=woken)

    # when it runs, then it stops long before the interval is over, after one pass
    started = time.monotonic()
    assert daemon.run() == 1
    assert time.monotonic() - started < 30
    assert daemon.stopping


def test_ctrl_c_when_not_a_stop_signal_interrupts_the_pass_at_once():
    # given a daemon whose stop signal is SIGTERM only, and a pass that gets Ctrl-C
    finish, close = [], []

    def interrupted(n: int) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # never reached: the KeyboardInterrupt comes first

    record = Recorder(then=interrupted)
    daemon = Daemon(
        name="test",
        run_pass=record,
        interval=60,
        stop_signals=(signal.SIGTERM,),
        finish=lambda: finish.append(True),
        close=lambda: close.append(True),
    )

    # when it runs, then the pass ends where it was, uncounted; close runs, finish does not
    assert daemon.run() == 0
    assert record.finished == 0
    assert (finish, close) == ([], [True])


def test_stop_requests_are_counted():
    # the worker reads a second one as "no grace period"
    daemon = Daemon(name="test", run_pass=Recorder(), interval=1)
    assert not daemon.stopping

    daemon.request_stop()
    daemon.request_stop()

    assert daemon.stopping
    assert daemon.stop_requests == 2
    assert daemon.run() == 0  # stopped before the first pass


def test_the_hooks_run_in_order_with_the_signals_handled():
    events: list[str] = []
    before = signal.getsignal(signal.SIGTERM)

    def started() -> None:
        events.append("started")
        assert signal.getsignal(signal.SIGTERM) != before

    daemon = Daemon(
        name="test",
        run_pass=lambda: events.append("pass") is None,
        interval=0,
        max_passes=2,
        started=started,
        finish=lambda: events.append("finish"),
        close=lambda: events.append("close"),
    )

    daemon.run()

    assert events == ["started", "pass", "pass", "finish", "close"]


def test_a_recoverable_error_is_reported_and_the_next_pass_runs():
    # given a pass that fails with a database error the first time
    def then(n: int) -> None:
        if n == 1:
            raise DatabaseError("the database restarted")

    record = Recorder(then=then)
    reported: list[str] = []
    daemon = Daemon(
        name="scheduler",
        run_pass=record,
        interval=0,
        max_passes=2,
        recoverable=(DatabaseError,),
        report_error=reported.append,
    )

    # when it runs, then the failure is reported and the second pass runs (both counted)
    assert daemon.run() == 2
    assert record.finished == 1
    assert reported == ["scheduler pass failed: the database restarted"]


def test_any_other_error_ends_the_daemon_after_closing():
    close: list[bool] = []

    def fail() -> bool:
        raise RuntimeError("a bug")

    daemon = Daemon(name="test", run_pass=fail, interval=0, close=lambda: close.append(True))

    with pytest.raises(RuntimeError, match="a bug"):
        daemon.run()
    assert close == [True]


def test_its_own_wake_up_ends_the_wait():
    # given a daemon whose woken() says yes (the worker: a task's process exited)
    record = Recorder()
    daemon = Daemon(name="test", run_pass=record, interval=60, max_passes=2, woken=lambda: True)

    # when it runs, then the second pass starts without waiting out the interval
    started = time.monotonic()
    assert daemon.run() == 2
    assert time.monotonic() - started < 30


def test_a_notification_on_its_channel_ends_the_wait(fake_listener):
    # given a daemon listening on a channel, notified at once
    daemon = Daemon(name="test", run_pass=Recorder(), interval=60, max_passes=2, channel="c")

    # when it runs, then the second pass starts without waiting out the interval
    started = time.monotonic()
    assert daemon.run() == 2
    assert time.monotonic() - started < 30
    (listener,) = fake_listener
    assert listener.channels == ("c",)
    assert listener.calls == ["listen", "wait", "close"]  # listening before the first pass


def test_a_single_pass_does_not_listen(fake_listener):
    daemon = Daemon(name="test", run_pass=Recorder(), interval=60, max_passes=1, channel="c")

    assert daemon.run() == 1
    (listener,) = fake_listener
    assert listener.calls == ["close"]


def test_without_a_channel_it_polls(fake_listener):
    record = Recorder()
    daemon = Daemon(name="test", run_pass=record, interval=0.1, max_passes=2, check_every=0.02)

    assert daemon.run() == 2
    assert fake_listener == []
    assert record.times[1] - record.times[0] >= 0.1
