"""The task process runs in its own session and process group; whatever it started dies with it.

Each task starts a ``sleep 1000`` grandchild that inherits the task's stdout and stderr (so the
supervisor's log readers would wait for it), then the supervisor kills the task (the heartbeat
says stop, ``terminate()``, the exit timeout) or the task ends by itself. Afterwards nothing of
the task's process group is alive, and the supervisor did not wait for the grandchild.
"""

import os
import re
import threading
import time
from pathlib import Path

import pytest
from sdk_helpers import TI_ID, FakeExecutionAPI, make_client, task_ref

from task_sdk.supervisor import Supervisor

GRANDCHILD = re.compile(r"grandchild (\d+)")


def live_members(pgid: int) -> list[int]:
    """Processes of the group that are alive (not zombies: PID 1 may never reap them here)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, pgrp = stat.rpartition(")")[2].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            members.append(int(entry.name))
    return members


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def stop_by_heartbeat(supervisor, api):
    api.heartbeat_status = 409


def stop_by_terminate(supervisor, api):
    supervisor.terminate()


@pytest.mark.parametrize(
    ("function", "stop", "options", "state"),
    [
        pytest.param("grandchild_then_sleeps", stop_by_heartbeat, {}, None, id="heartbeat-stop"),
        pytest.param("grandchild_then_sleeps", stop_by_terminate, {}, "failed", id="terminate"),
        pytest.param(
            "grandchild_ignoring_sigterm_then_sleeps",
            stop_by_terminate,
            {"kill_grace": 0.5},
            "failed",
            id="terminate-ignoring-sigterm",
        ),
        pytest.param(
            "grandchild_then_lingers", None, {"exit_timeout": 0.5}, "success", id="exit-timeout"
        ),
        pytest.param("grandchild_then_returns", None, {}, "success", id="task-returns"),
    ],
)
def test_nothing_of_the_task_outlives_it(function, stop, options, state):
    api = FakeExecutionAPI()
    outcome = {}
    with make_client(api) as client:
        supervisor = Supervisor(
            client, TI_ID, task_ref(function), heartbeat_interval=0.1, **options
        )
        runner = threading.Thread(target=lambda: outcome.setdefault("result", supervisor.run()))
        runner.start()
        grandchild = None
        try:
            assert wait_until(lambda: any(map(GRANDCHILD.match, supervisor.log_lines)), 30)
            [grandchild] = [int(m[1]) for m in map(GRANDCHILD.match, supervisor.log_lines) if m]
            group = os.getpgid(grandchild)
            assert group != os.getpgrp()  # the task has a group of its own ...
            assert os.getsid(grandchild) == group  # ... and a session
            started = time.monotonic()
            if stop is not None:
                stop(supervisor, api)
            runner.join(timeout=60)
            elapsed = time.monotonic() - started
            assert not runner.is_alive()
        finally:
            if grandchild is not None and alive(grandchild):  # do not leak it if the test fails
                os.kill(grandchild, 9)
            runner.join(timeout=60)

    result = outcome["result"]
    assert result.state == state, result
    assert wait_until(lambda: not alive(grandchild), 5), "the grandchild survived"
    assert wait_until(lambda: not live_members(group), 5), live_members(group)
    # the supervisor did not wait on the grandchild's open stdout (it would wait 10 s and more)
    assert elapsed < 8, elapsed
