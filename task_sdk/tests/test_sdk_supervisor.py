"""Supervisor + task process with a fake client: outcomes, retries, crashes, heartbeats, logs."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from sdk_helpers import ASSETS, TI_ID, task_ref
from sdk_http_server import serve_fake_api

from task_sdk.client import ServerResponseError
from task_sdk.supervisor import Supervisor, describe_exit


def _error(status, reason="boom", **extra):
    request = httpx.Request("PATCH", "http://x/execution/task-instances/x/state")
    detail = {"reason": reason, "message": "injected", **extra}
    return ServerResponseError(httpx.Response(status, json={"detail": detail}, request=request))


class FakeClient:
    """Records the supervisor's calls; ``fail`` maps a method name to errors to raise first."""

    def __init__(self, *, max_tries=0, should_retry=None, fail=None):
        self.calls = []
        self.context = {"dag_run": {"dag_id": "d", "run_id": "r"}, "max_tries": max_tries}
        if should_retry is not None:
            self.context["should_retry"] = should_retry
        self.fail = fail or {}

    def _maybe_fail(self, name):
        if self.fail.get(name):
            raise self.fail[name].pop(0)

    def start(self, ti_id, *, pid):
        self.calls.append(("start", pid))
        self._maybe_fail("start")
        return self.context

    def heartbeat(self, ti_id, *, pid):
        self.calls.append(("heartbeat", pid))
        self._maybe_fail("heartbeat")

    def succeed(self, ti_id, when, task_outlets, outlet_events):
        self.calls.append(("succeed", task_outlets, outlet_events))
        self._maybe_fail("succeed")

    def finish(self, ti_id, state, when, retry_reason=None):
        self.calls.append(("finish", state))
        self.retry_reason = retry_reason
        self._maybe_fail("finish")

    def asset_by_name(self, name):
        self.calls.append(("asset_by_name", name))
        for asset in ASSETS.values():
            if asset["name"] == name:
                return asset
        raise _error(404, "not_found")

    def asset_by_uri(self, uri):
        self.calls.append(("asset_by_uri", uri))
        for asset in ASSETS.values():
            if asset["uri"] == uri:
                return asset
        raise _error(404, "not_found")

    def xcom_set(self, dag_id, run_id, task_id, key, value, map_index=-1):
        self.calls.append(("xcom_set", dag_id, run_id, task_id, key, value))

    def set_rtif(self, ti_id, fields):
        self.calls.append(("set_rtif", fields))

    def names(self):
        return [call[0] for call in self.calls if call[0] != "heartbeat"]


def supervise(function, client=None, **kwargs):
    client = client or FakeClient()
    kwargs.setdefault("heartbeat_interval", 30)
    result = Supervisor(client, TI_ID, task_ref(function), **kwargs).run()
    return result, client


def test_success_sends_outlets_and_events():
    result, client = supervise("wire_mixed")
    assert result.succeeded
    assert result.exit_code == 0
    assert client.names() == ["start", "succeed"]
    _, outlets, events = client.calls[-1]
    assert [o["type"] for o in outlets] == ["Asset", "AssetAlias"]
    assert len(events) == 2


def test_refs_are_resolved_through_the_supervisor():
    result, client = supervise("wire_name_ref")
    assert result.succeeded
    assert ("asset_by_name", "by_name_asset") in client.calls
    assert ("asset_by_uri", "s3://bucket/by-uri") in client.calls


def test_unresolvable_ref_fails_the_task():
    result, client = supervise("resolves_missing_ref")
    assert result.state == "failed"
    assert client.names() == ["start", "asset_by_name", "finish"]
    assert any("cannot resolve" in line for line in result.log)


def test_exception_reports_failed_without_events():
    result, client = supervise("raises")
    assert result.state == "failed"
    assert client.names() == ["start", "finish"]
    assert "RuntimeError: nothing is sent for a failed task" in result.reason


@pytest.mark.parametrize(
    ("context", "try_number", "expected"),
    [
        pytest.param({"should_retry": True}, None, "up_for_retry", id="server-says-retry"),
        pytest.param({"should_retry": False, "max_tries": 3}, 1, "failed", id="server-says-no"),
        pytest.param({"max_tries": 2}, 2, "up_for_retry", id="try-2-of-3"),
        pytest.param({"max_tries": 2}, 3, "failed", id="last-try"),
        pytest.param({"max_tries": 0}, None, "failed", id="no-retries"),
    ],
)
def test_failure_becomes_up_for_retry_while_tries_remain(context, try_number, expected):
    client = FakeClient()
    client.context.update(context)
    result, _ = supervise("raises", client, try_number=try_number)
    assert ("finish", expected) in client.calls
    assert result.state == expected
    assert not result.succeeded
    # a retry says why on the wire (TIRetryStatePayload.retry_reason); a failure cannot
    expected_reason = "RuntimeError: nothing is sent for a failed task"
    assert client.retry_reason == (expected_reason if expected == "up_for_retry" else None)


@pytest.mark.parametrize(
    ("function", "how"),
    [
        pytest.param("kills_itself", "killed by SIGKILL", id="sigkill"),
        pytest.param("exits_hard", "exit code 3", id="os-exit"),
        pytest.param("segfaults", "killed by SIGSEGV", id="segfault"),
    ],
)
def test_child_dying_without_a_message_is_reported_failed(function, how):
    result, client = supervise(function)
    assert client.names() == ["start", "finish"]
    assert client.calls[-1] == ("finish", "failed")
    assert result.state == "failed"
    assert how in result.reason
    assert "without reporting a state" in result.reason


def test_child_dying_with_tries_left_is_up_for_retry():
    result, client = supervise("kills_itself", FakeClient(should_retry=True))
    assert client.calls[-1] == ("finish", "up_for_retry")
    assert result.state == "up_for_retry"


def test_stdout_and_stderr_are_the_log_not_messages():
    result, client = supervise("prints_fake_messages_then_fails")
    assert client.names() == ["start", "finish"]  # the printed SucceedTask was not obeyed
    assert result.state == "failed"
    assert sum('"type":"SucceedTask"' in line for line in result.log) == 2


def test_log_lines_reach_the_supervisor_logger(caplog):
    caplog.set_level("INFO", logger="task_sdk.task")
    result, _ = supervise("chatty")
    assert result.succeeded
    assert "line on stdout" in result.log
    assert "line on stderr" in result.log
    messages = [r.getMessage() for r in caplog.records if r.name == "task_sdk.task"]
    assert "[stdout] line on stdout" in messages
    assert "[stderr] line on stderr" in messages


def test_context_entries_are_passed_by_name():
    result, _ = supervise("asks_for_everything")
    assert result.succeeded
    names = ast.literal_eval(result.log[-1])  # the task printed sorted(kwargs)
    assert {
        "context",
        "outlet_events",
        "inlet_events",
        "triggering_asset_events",
        "dag_run",
        "ti_id",
        "task_id",
        "outlets",
        "inlets",
    } <= set(names)


def test_the_runs_conf_is_the_dag_runs_conf():
    client = FakeClient()
    client.context["dag_run"]["conf"] = {"region": "eu", "limit": 3}

    result, client = supervise("returns_conf", client)

    assert result.succeeded
    assert ("xcom_set", "d", "r", "returns_conf", "return_value", {"region": "eu", "limit": 3}) in (
        client.calls
    )


def test_return_value_is_pushed_as_xcom():
    result, client = supervise("returns_value")
    assert result.succeeded
    assert ("xcom_set", "d", "r", "returns_value", "return_value", {"answer": 42}) in client.calls


def test_heartbeats_are_sent_while_running():
    result, client = supervise("chatty", heartbeat_interval=0.01)
    assert result.succeeded
    assert ("heartbeat", client.calls[0][1]) in client.calls  # with the task process's pid


@pytest.mark.parametrize("status", [404, 409, 410])
def test_heartbeat_conflict_kills_the_task_and_reports_nothing(status):
    client = FakeClient(fail={"heartbeat": [_error(status, "not_running")]})
    result, _ = supervise("sleeps", client, heartbeat_interval=0.2)
    assert client.names() == ["start"]
    assert result.state is None
    assert "server stopped the task" in result.reason
    assert result.exit_code is not None
    assert result.exit_code < 0


def test_heartbeat_server_error_is_tolerated():
    client = FakeClient(fail={"heartbeat": [_error(503), _error(503)]})
    result, _ = supervise("chatty", client, heartbeat_interval=0.01)
    assert result.succeeded
    assert client.fail["heartbeat"] == []  # both failing heartbeats happened ...
    assert sum(call[0] == "heartbeat" for call in client.calls) > 2  # ... and later ones too


def test_failed_success_call_is_resent_once_after_exit():
    client = FakeClient(fail={"succeed": [_error(503)]})
    result, _ = supervise("wire_asset", client)
    assert result.succeeded
    succeeds = [c for c in client.calls if c[0] == "succeed"]
    assert len(succeeds) == 2
    assert succeeds[0] == succeeds[1]  # the identical payload


def test_success_call_failing_twice_is_a_failure_with_reason():
    client = FakeClient(fail={"succeed": [_error(503), _error(503)]})
    result, _ = supervise("wire_asset", client)
    assert not result.succeeded
    assert "could not report" in result.reason


def test_run_refused_as_already_running():
    client = FakeClient(fail={"start": [_error(409, "invalid_state", previous_state="running")]})
    result, _ = supervise("chatty", client)
    assert result.state is None
    assert result.reason == f"task instance {TI_ID} is already running"
    assert client.names() == ["start"]


def test_run_refused_for_another_reason():
    client = FakeClient(fail={"start": [_error(404, "not_found")]})
    result, _ = supervise("chatty", client)
    assert "could not start" in result.reason
    assert "not_found" in result.reason


def test_bad_task_reference_fails_the_task():
    client = FakeClient()
    result = Supervisor(client, TI_ID, "/nonexistent/file.py:f", heartbeat_interval=30).run()
    assert result.state == "failed"
    assert "task file not found" in result.reason


def test_describe_exit():
    assert describe_exit(0) == "exit code 0"
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(None) == "still running"


def test_cli_against_a_local_http_server(tmp_path):
    """``python -m task_sdk run`` end to end against a tiny real HTTP execution API."""
    with serve_fake_api() as (url, received):
        env = {
            **os.environ,
            "TASK_SDK_SERVER": url,
            "TASK_SDK_TI_ID": TI_ID,
            "TASK_SDK_TOKEN": "tok",
            "PYTHONPATH": str(Path(__import__("task_sdk").__file__).parent.parent),
        }
        ok = subprocess.run(
            [sys.executable, "-m", "task_sdk", "run", task_ref("wire_asset")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        bad = subprocess.run(
            [sys.executable, "-m", "task_sdk", "run", "--ti-id", TI_ID, task_ref("raises")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert ok.returncode == 0, ok.stderr
    assert "succeeded" in ok.stdout
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].startswith("error: task failed: RuntimeError")
    states = [json.loads(body)["state"] for path, body in received if path.endswith("/state")]
    assert states == ["success", "failed"]


def test_cli_usage_errors():
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASK_SDK_")}
    env["PYTHONPATH"] = str(Path(__import__("task_sdk").__file__).parent.parent)
    done = subprocess.run(
        [sys.executable, "-m", "task_sdk", "run", "x.py:f"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "--server, --ti-id, --token" in done.stderr


def test_cli_sigterm_stops_the_task_process():
    import signal
    import time

    with serve_fake_api() as (url, received):
        env = {
            **os.environ,
            "PYTHONPATH": str(Path(__import__("task_sdk").__file__).parent.parent),
        }
        cli = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "task_sdk",
                "run",
                "--server",
                url,
                "--ti-id",
                TI_ID,
                "--token",
                "t",
                task_ref("sleeps"),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not any(path.endswith("/run") for path, _ in received):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child_pid = json.loads(next(b for p, b in received if p.endswith("/run")))["pid"]
        time.sleep(0.3)  # let the task process start sleeping
        cli.send_signal(signal.SIGTERM)
        _, stderr = cli.communicate(timeout=30)
    assert cli.returncode == 128 + signal.SIGTERM
    assert "terminated" in stderr
    assert "ended failed" in stderr
    with pytest.raises(ProcessLookupError):
        os.kill(child_pid, 0)
    # the task instance is not left running: the supervisor reported it failed
    states = [json.loads(b)["state"] for p, b in received if p.endswith("/state")]
    assert states == ["failed"]


def _wait_dead(pid, timeout=10):
    """Wait until ``pid`` is a zombie, without reaping it (the supervisor's Popen does)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rpartition(")")[2].split()[0] == "Z":
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} still alive")


class KillsChildOnStart(FakeClient):
    """The task process dies before it gets its StartupDetails (broken interpreter, OOM)."""

    def start(self, ti_id, *, pid):
        os.kill(pid, 9)
        _wait_dead(pid)
        return super().start(ti_id, pid=pid)


class KillsChildDuringRequest(FakeClient):
    """The task process dies while the supervisor answers one of its requests."""

    def asset_by_name(self, name):
        os.kill(self.calls[0][1], 9)
        _wait_dead(self.calls[0][1])
        return super().asset_by_name(name)


@pytest.mark.parametrize(
    "client_class",
    [
        pytest.param(KillsChildOnStart, id="before-startup-details"),
        pytest.param(KillsChildDuringRequest, id="during-a-request"),
    ],
)
def test_child_gone_before_a_message_reaches_it_is_reported_failed(client_class):
    # writing to the dead child's channel must not crash the supervisor (BrokenPipeError),
    # which would leave the task instance running on the server
    result, client = supervise("wire_name_ref", client_class())
    assert client.calls[-1] == ("finish", "failed")
    assert result.state == "failed"
    assert "killed by SIGKILL" in result.reason


def test_task_process_lingering_after_its_report_is_killed():
    # a non-daemon thread keeps the child alive after it reported; the supervisor must not
    # wait for it forever
    import time

    started = time.monotonic()
    result, client = supervise("lingers_after_success", exit_timeout=0.5)
    assert time.monotonic() - started < 30
    assert result.succeeded
    assert client.names() == ["start", "succeed"]
    assert result.exit_code is not None
    assert result.exit_code < 0


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        pytest.param(
            ["--server", "http://[::1"], {}, "error: argument --server: ", id="bad-server-url"
        ),
        pytest.param(
            [],
            {"TASK_SDK_TRY_NUMBER": "abc"},
            "error: argument --try-number: invalid int value: 'abc'",
            id="bad-env-number",
        ),
    ],
)
def test_cli_bad_input_is_a_one_line_usage_error(args, env, message):
    base = {k: v for k, v in os.environ.items() if not k.startswith("TASK_SDK_")}
    base["PYTHONPATH"] = str(Path(__import__("task_sdk").__file__).parent.parent)
    done = subprocess.run(
        [sys.executable, "-m", "task_sdk", "run", "--ti-id", TI_ID, "--token", "t"]
        + (args or ["--server", "http://127.0.0.1:9"])
        + [task_ref("chatty")],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert message in done.stderr.strip().splitlines()[-1]
