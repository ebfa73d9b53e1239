"""The supervisor: runs one task instance in a child process and talks to the server.

It starts ``python -m task_sdk.runner`` with a dedicated message socket, marks the task
instance running (``/run``), sends the child its ``StartupDetails``, heartbeats while the child
runs, relays the child's requests to the HTTP client and reports the final state. The child's
stdout and stderr go to the ``task_sdk.task`` logger, never into the message channel.

A heartbeat answered with 404/409/410 means the server no longer wants this task: the child is
killed and no state is reported. A child that exits without reporting a state (killed,
segfault, ``os._exit``) is reported ``failed`` (``up_for_retry`` when tries remain). A final
state call that fails is resent once after the child exited, as the Airflow supervisor does.
A child still alive ``exit_timeout`` seconds after its channel closed (e.g. a non-daemon
thread keeps it running after it reported) is killed.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Protocol

import httpx

from task_sdk.client import ServerResponseError, now
from task_sdk.comms import COMMS_FD_ENV, Channel
from task_sdk.runner import tries_remain

logger = logging.getLogger(__name__)
task_logger = logging.getLogger("task_sdk.task")

#: Heartbeat answers that mean "stop this task" (Airflow: not found, conflict, gone).
STOP_STATUSES = frozenset({404, 409, 410})
#: Seconds between heartbeats unless told otherwise.
DEFAULT_HEARTBEAT_INTERVAL = 5.0
#: Seconds the task process may live on after closing its channel before it is killed.
DEFAULT_EXIT_TIMEOUT = 20.0


class ExecutionClient(Protocol):
    """The calls the supervisor makes (``task_sdk.client.Client`` or a test fake)."""

    def start(self, ti_id: str, *, pid: int) -> dict[str, Any]: ...

    def heartbeat(self, ti_id: str, *, pid: int) -> None: ...

    def succeed(self, ti_id: str, when: Any, task_outlets: Any, outlet_events: Any) -> None: ...

    def finish(self, ti_id: str, state: str, when: Any) -> None: ...

    def asset_by_name(self, name: str) -> dict[str, Any]: ...

    def asset_by_uri(self, uri: str) -> dict[str, Any]: ...

    def xcom_set(self, *args: Any, **kwargs: Any) -> None: ...

    def set_rtif(self, ti_id: str, fields: dict[str, Any]) -> None: ...


@dataclass
class TaskResult:
    """Outcome of one supervised run."""

    ti_id: str
    state: str | None  # the state reported to the server, None when none could be reported
    exit_code: int | None  # the task process's exit code (negative: killed by that signal)
    reason: str | None = None  # one line, when the task did not succeed
    log: list[str] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.state == "success" and self.reason is None


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    # make the package importable in the child even when it is not installed (source tree)
    package_root = str(Path(__file__).resolve().parent.parent)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if package_root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([package_root, *paths])
    return env


class Supervisor:
    """Supervise one task instance: ``Supervisor(client, ti_id, "file.py:func").run()``."""

    def __init__(
        self,
        client: ExecutionClient,
        ti_id: str,
        task: str,
        *,
        try_number: int | None = None,
        task_id: str | None = None,
        heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL,
        exit_timeout: float = DEFAULT_EXIT_TIMEOUT,
        python: str = sys.executable,
    ) -> None:
        self.client = client
        self.ti_id = str(ti_id)
        self.task = task
        self.try_number = try_number
        self.task_id = task_id
        self.heartbeat_interval = heartbeat_interval
        self.exit_timeout = exit_timeout
        self.python = python
        self.log_lines: list[str] = []
        self._log_lock = threading.Lock()
        self.ti_context: dict[str, Any] = {}
        self.final_state: str | None = None  # state the server accepted
        self._unsent_final: dict[str, Any] | None = None  # final message whose call failed
        # why no state is reported: /run was refused, or a heartbeat said the server stopped it
        self._stop_reason: str | None = None
        self._pumps: list[threading.Thread] = []
        self._process: subprocess.Popen | None = None
        self.terminated: bool = False  # terminate() was called (e.g. the CLI got SIGTERM)

    # -- child process ---------------------------------------------------------------------

    def _pump(self, stream: IO[bytes], name: str) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            with self._log_lock:
                self.log_lines.append(line)
            task_logger.info("[%s] %s", name, line)
        stream.close()

    def _spawn(self, child_sock: socket.socket) -> subprocess.Popen:
        env = _child_env()
        env[COMMS_FD_ENV] = str(child_sock.fileno())
        process = subprocess.Popen(
            [self.python, "-m", "task_sdk.runner"],
            pass_fds=[child_sock.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._pumps = [
            threading.Thread(target=self._pump, args=(process.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._pump, args=(process.stderr, "stderr"), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()
        return process

    def terminate(self) -> None:
        """Stop the task from outside (signal-handler safe): SIGTERM the task process.

        ``run()`` then goes on as for any task process that dies without reporting: it
        reports ``failed`` (``up_for_retry`` while tries remain) unless the task had already
        reported its state, so the task instance is not left ``running``.
        """
        self.terminated = True
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()

    @staticmethod
    def _kill(process: subprocess.Popen, grace: float = 5.0) -> None:
        if process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    @staticmethod
    def _send(channel: Channel, message: dict[str, Any]) -> bool:
        """Send ``message`` to the child; False when the child is gone (its end is closed)."""
        try:
            channel.send(message)
        except OSError as exc:  # BrokenPipeError, ConnectionResetError
            logger.warning("the task process is gone, %s not delivered: %s", message["type"], exc)
            return False
        return True

    # -- requests from the child -----------------------------------------------------------

    def _handle(self, message: dict[str, Any]) -> dict[str, Any]:
        kind = message.get("type")
        try:
            if kind == "GetAssetByName":
                return {"type": "AssetResult", **self.client.asset_by_name(message["name"])}
            if kind == "GetAssetByUri":
                return {"type": "AssetResult", **self.client.asset_by_uri(message["uri"])}
            if kind == "SetXCom":
                self.client.xcom_set(
                    message["dag_id"],
                    message["run_id"],
                    message["task_id"],
                    message["key"],
                    message["value"],
                    map_index=message.get("map_index", -1),
                )
                return {"type": "OK"}
            if kind == "SetRenderedFields":
                self.client.set_rtif(self.ti_id, message["fields"])
                return {"type": "OK"}
            if kind in ("SucceedTask", "TaskState"):
                return self._report_final(message)
        except (ServerResponseError, httpx.HTTPError) as exc:
            return {"type": "ErrorResponse", "error": type(exc).__name__, "detail": str(exc)}
        return {"type": "ErrorResponse", "error": "UnknownMessage", "detail": f"{kind!r}"}

    def _send_final(self, message: dict[str, Any]) -> None:
        when = message["end_date"]
        if message["type"] == "SucceedTask":
            self.client.succeed(
                self.ti_id, _parse_when(when), message["task_outlets"], message["outlet_events"]
            )
            self.final_state = "success"
        else:
            self.client.finish(self.ti_id, message["state"], _parse_when(when))
            self.final_state = message["state"]

    def _report_final(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.final_state is not None or self._unsent_final is not None:
            return {"type": "ErrorResponse", "error": "AlreadyFinished", "detail": "state sent"}
        try:
            self._send_final(message)
        except (ServerResponseError, httpx.HTTPError) as exc:
            logger.warning("reporting %s failed, will resend once: %s", message["type"], exc)
            self._unsent_final = message
            return {"type": "ErrorResponse", "error": type(exc).__name__, "detail": str(exc)}
        return {"type": "OK"}

    # -- main loop -------------------------------------------------------------------------

    def _heartbeat(self, process: subprocess.Popen) -> None:
        try:
            self.client.heartbeat(self.ti_id, pid=process.pid)
        except ServerResponseError as exc:
            if exc.status_code in STOP_STATUSES:
                self._stop_reason = f"server stopped the task: {exc}"
                logger.error("%s; killing the task process", self._stop_reason)
                self._kill(process)
            else:
                logger.warning("heartbeat failed: %s", exc)
        except httpx.HTTPError as exc:
            logger.warning("heartbeat failed: %s", exc)

    def _loop(self, process: subprocess.Popen, channel: Channel) -> None:
        next_heartbeat = time.monotonic() + self.heartbeat_interval
        open_channel = True
        while open_channel:
            timeout = max(0.0, min(next_heartbeat - time.monotonic(), 0.5))
            readable, _, _ = select.select([channel], [], [], timeout)
            if readable:
                open_channel = channel.feed()
                for message in channel.pending():
                    if not self._send(channel, self._handle(message)):
                        open_channel = False
                        break
            elif process.poll() is not None:
                # the child is gone; read whatever it left in the socket, then stop
                readable, _, _ = select.select([channel], [], [], 0)
                if not readable:
                    break
            if time.monotonic() >= next_heartbeat:
                if (
                    open_channel
                    and self._stop_reason is None
                    and self.final_state is None
                    and process.poll() is None
                ):
                    self._heartbeat(process)
                # also when no heartbeat is due any more: a deadline left in the past would
                # make the select() above return at once, spinning until the channel closes
                next_heartbeat = time.monotonic() + self.heartbeat_interval
        self._wait_exit(process)

    def _wait_exit(self, process: subprocess.Popen) -> None:
        try:
            process.wait(timeout=self.exit_timeout)
        except subprocess.TimeoutExpired:
            logger.warning(
                "the task process is still running %gs after closing its channel; killing it",
                self.exit_timeout,
            )
            self._kill(process)

    def run(self) -> TaskResult:
        parent_sock, child_sock = socket.socketpair()
        channel = Channel(parent_sock)
        try:
            process = self._spawn(child_sock)
        except BaseException:
            channel.close()
            raise
        finally:
            child_sock.close()
        self._process = process
        if self.terminated:  # terminate() came before the task process existed
            process.terminate()
        try:
            try:
                self.ti_context = self.client.start(self.ti_id, pid=process.pid)
            except (ServerResponseError, httpx.HTTPError) as exc:
                self._kill(process, grace=1.0)
                self._stop_reason = f"could not start task instance {self.ti_id}: {exc}"
                if isinstance(exc, ServerResponseError) and (
                    exc.reason == "invalid_state"
                    and isinstance(exc.detail, dict)
                    and exc.detail.get("previous_state") == "running"
                ):
                    self._stop_reason = f"task instance {self.ti_id} is already running"
            else:
                startup = {
                    "type": "StartupDetails",
                    "ti_id": self.ti_id,
                    "task": self.task,
                    "task_id": self.task_id,
                    "try_number": self.try_number,
                    "ti_context": self.ti_context,
                }
                if self._send(channel, startup):
                    self._loop(process, channel)
                else:
                    self._wait_exit(process)
        except BaseException:
            self._kill(process, grace=1.0)
            raise
        finally:
            channel.close()
        return self._finish(process)

    def _finish(self, process: subprocess.Popen) -> TaskResult:
        code = process.returncode
        for pump in self._pumps:
            pump.join(timeout=5)
        if self._stop_reason is not None:
            return self._result(self.final_state, process, self._stop_reason)
        if self._unsent_final is not None:
            message, self._unsent_final = self._unsent_final, None
            try:
                self._send_final(message)
            except (ServerResponseError, httpx.HTTPError) as exc:
                return self._result(None, process, f"could not report the task's state: {exc}")
        if self.final_state is None:
            state = "up_for_retry" if tries_remain(self.ti_context, self.try_number) else "failed"
            reason = f"task process {describe_exit(code)} without reporting a state"
            logger.error("%s; reporting %s", reason, state)
            try:
                self.client.finish(self.ti_id, state, now())
            except (ServerResponseError, httpx.HTTPError) as exc:
                return self._result(None, process, f"{reason}; reporting {state} failed: {exc}")
            return self._result(state, process, reason)
        if self.final_state != "success":
            last = self._last_error_line()
            reason = f"task {self.final_state.replace('_', ' ')}" + (f": {last}" if last else "")
            return self._result(self.final_state, process, reason)
        return self._result("success", process, None)

    def _last_error_line(self) -> str | None:
        with self._log_lock:
            lines = [line for line in self.log_lines if line.strip()]
        return lines[-1].strip() if lines else None

    def _result(
        self, state: str | None, process: subprocess.Popen, reason: str | None
    ) -> TaskResult:
        with self._log_lock:
            log = list(self.log_lines)
        return TaskResult(self.ti_id, state, process.returncode, reason, log)


def _parse_when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
