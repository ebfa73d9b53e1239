"""The supervisor: runs one task instance in a child process and talks to the server.

It starts ``python -m task_sdk.runner`` with a dedicated message socket, marks the task
instance running (``/run``), sends the child its ``StartupDetails``, heartbeats while the child
runs, relays the child's requests to the HTTP client and reports the final state. The child's
stdout and stderr go to the ``task_sdk.task`` logger, never into the message channel.

A heartbeat answered with 404/409/410 means the server no longer wants this task: the child is
killed and no state is reported. A child that exits without reporting a state (killed,
segfault, ``os._exit``) is reported ``failed`` (``up_for_retry`` when tries remain). A final
state call that fails is resent once after the child exited, as the Airflow supervisor does; a
success the server refuses outright (a 4xx other than 404/409/410, e.g. 422 for an ``extra``
over its size limit) is reported as a failure instead, so the task instance is not left
``running``. A child still alive ``exit_timeout`` seconds after its channel closed (e.g. a
non-daemon thread keeps it running after it reported) is killed.

The child runs in a session (and process group) of its own, and whatever it started stays in
that group unless it moves itself out. Killing the task kills the whole group: SIGTERM, then
SIGKILL ``kill_grace`` seconds later if the task process has not exited by then. When the run
is over (the task process has exited, by itself or killed), anything left in the group gets
SIGTERM and, once the task's output is closed or ``kill_grace`` has passed, SIGKILL: a
grandchild holding the task's stdout open neither outlives the task nor hangs the supervisor.
The task process is reaped only after that, so its group id cannot have been reused.
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
from typing import IO, Any

import httpx

from task_sdk.client import Client, ServerResponseError
from task_sdk.comms import COMMS_FD_ENV, Channel
from task_sdk.runner import tries_remain
from task_sdk.timestamps import isoformat, now

logger = logging.getLogger(__name__)
task_logger = logging.getLogger("task_sdk.task")

#: Heartbeat answers that mean "stop this task" (Airflow: not found, conflict, gone).
STOP_STATUSES = frozenset({404, 409, 410})
#: Seconds between heartbeats unless told otherwise.
DEFAULT_HEARTBEAT_INTERVAL = 5.0
#: Seconds the task process may live on after closing its channel before it is killed.
DEFAULT_EXIT_TIMEOUT = 20.0
#: Seconds between SIGTERM and SIGKILL when the task's process group is stopped.
DEFAULT_KILL_GRACE = 5.0
#: How often a wait for the task process to exit checks on it.
_POLL_INTERVAL = 0.02


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
        client: Client,
        ti_id: str,
        task: str,
        *,
        try_number: int | None = None,
        task_id: str | None = None,
        heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL,
        exit_timeout: float = DEFAULT_EXIT_TIMEOUT,
        kill_grace: float = DEFAULT_KILL_GRACE,
        python: str = sys.executable,
    ) -> None:
        self.client = client
        self.ti_id = str(ti_id)
        self.task = task
        self.try_number = try_number
        self.task_id = task_id
        self.heartbeat_interval = heartbeat_interval
        self.exit_timeout = exit_timeout
        self.kill_grace = kill_grace
        self.python = python
        self.log_lines: list[str] = []
        self._log_lock = threading.Lock()
        self.ti_context: dict[str, Any] = {}
        self.final_state: str | None = None  # state the server accepted
        self._unsent_final: dict[str, Any] | None = None  # final message whose call failed
        # why no state is reported: /run was refused, or a heartbeat said the server stopped it
        self._stop_reason: str | None = None
        # why a failure was reported for a task that succeeded (the server refused the success)
        self._failure_reason: str | None = None
        self._pumps: list[threading.Thread] = []
        self._process: subprocess.Popen[bytes] | None = None
        self.terminated: bool = False  # terminate() was called (e.g. the CLI got SIGTERM)
        self._kill_deadline: float | None = None  # when terminate() escalates to SIGKILL

    # -- child process ---------------------------------------------------------------------

    def _pump(self, stream: IO[bytes], name: str) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            with self._log_lock:
                self.log_lines.append(line)
            task_logger.info("[%s] %s", name, line)
        stream.close()

    def _spawn(self, child_sock: socket.socket) -> subprocess.Popen[bytes]:
        env = _child_env()
        env[COMMS_FD_ENV] = str(child_sock.fileno())
        process = subprocess.Popen(  # noqa: S603 - an argv list we build, no shell
            [self.python, "-m", "task_sdk.runner"],
            pass_fds=[child_sock.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            # its own session and process group (id = its pid), so it and everything it starts
            # can be signalled together, and a terminal's signals do not reach it directly
            start_new_session=True,
        )
        # PIPE above: the asserts narrow the types for mypy
        assert process.stdout is not None  # noqa: S101 - narrows the type
        assert process.stderr is not None  # noqa: S101 - narrows the type
        self._pumps = [
            threading.Thread(target=self._pump, args=(process.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._pump, args=(process.stderr, "stderr"), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()
        return process

    # -- the task's process group ----------------------------------------------------------

    @staticmethod
    def _exited(process: subprocess.Popen[bytes]) -> bool:
        """Whether the task process has exited, without reaping it.

        Until it is reaped its pid, which is also its process group's id, cannot be reused, so
        signalling the group can never reach an unrelated process.
        """
        if process.returncode is not None:
            return True
        try:
            flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
            return os.waitid(os.P_PID, process.pid, flags) is not None
        except ChildProcessError:  # reaped already
            return True

    def _wait_exited(self, process: subprocess.Popen[bytes], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._exited(process):
            self._enforce_terminate(process)
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_INTERVAL)
        return True

    def _enforce_terminate(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL the group once ``kill_grace`` has passed since ``terminate()``."""
        if self._kill_deadline is not None and time.monotonic() >= self._kill_deadline:
            self._kill_deadline = None
            if not self._exited(process):
                logger.warning("the task ignored SIGTERM for %gs; killing it", self.kill_grace)
                self._signal_group(process, signal.SIGKILL)

    @staticmethod
    def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        """Send ``sig`` to every process in the task's group (signal-handler safe)."""
        if process.returncode is not None:
            return  # reaped: the group id may belong to someone else by now
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass  # nobody left in the group
        except PermissionError as exc:
            logger.warning("cannot signal the task's process group %s: %s", process.pid, exc)

    def _kill(self, process: subprocess.Popen[bytes], grace: float | None = None) -> None:
        """Kill the task: SIGTERM its whole group, SIGKILL the group if the task process is still
        alive ``grace`` seconds later. Returns once the task process has exited (not reaped)."""
        if self._exited(process):
            return
        self._signal_group(process, signal.SIGTERM)
        if not self._wait_exited(process, self.kill_grace if grace is None else grace):
            self._signal_group(process, signal.SIGKILL)
            os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)

    def _end_group(self, process: subprocess.Popen[bytes], grace: float | None = None) -> None:
        """After the run: stop what is left of the task's group, then reap the task process.

        SIGTERM, then SIGKILL once the task's stdout and stderr are closed (everything holding
        them has exited) or ``grace`` seconds have passed.
        """
        self._kill(process, grace)
        self._signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + (self.kill_grace if grace is None else grace)
        for pump in self._pumps:
            pump.join(timeout=max(0.0, deadline - time.monotonic()))
        self._signal_group(process, signal.SIGKILL)
        process.wait()
        for pump in self._pumps:  # only a process outside the group can still hold the pipes
            pump.join(timeout=1.0)

    def terminate(self) -> None:
        """Stop the task from outside (signal-handler safe): SIGTERM the task's process group,
        SIGKILL it ``kill_grace`` seconds later if the task process is still alive.

        ``run()`` then goes on as for any task process that dies without reporting: it
        reports ``failed`` (``up_for_retry`` while tries remain) unless the task had already
        reported its state, so the task instance is not left ``running``.
        """
        self.terminated = True
        self._kill_deadline = time.monotonic() + self.kill_grace
        process = self._process
        if process is not None:
            self._signal_group(process, signal.SIGTERM)

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
            if kind in ("GetAssetEventByAsset", "GetAssetEventByAssetAlias"):
                return {"type": "AssetEventsResult", "asset_events": self._asset_events(message)}
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
        except (ServerResponseError, httpx.HTTPError, ValueError) as exc:
            return {"type": "ErrorResponse", "error": type(exc).__name__, "detail": str(exc)}
        return {"type": "ErrorResponse", "error": "UnknownMessage", "detail": f"{kind!r}"}

    def _asset_events(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        target: dict[str, Any] = (
            {"alias_name": message["alias_name"]}
            if message["type"] == "GetAssetEventByAssetAlias"
            else {"name": message.get("name"), "uri": message.get("uri")}
        )
        return self.client.asset_events(
            **target,
            after=_parse_when(message["after"]) if message.get("after") else None,
            before=_parse_when(message["before"]) if message.get("before") else None,
            ascending=bool(message.get("ascending", True)),
            limit=message.get("limit"),
        )

    def _send_final(self, message: dict[str, Any]) -> None:
        when = message["end_date"]
        if message["type"] == "SucceedTask":
            self.client.succeed(
                self.ti_id, _parse_when(when), message["task_outlets"], message["outlet_events"]
            )
            self.final_state = "success"
        else:
            self.client.finish(
                self.ti_id,
                message["state"],
                _parse_when(when),
                retry_reason=message.get("retry_reason"),
            )
            self.final_state = message["state"]

    def _report_final(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.final_state is not None or self._unsent_final is not None:
            return {"type": "ErrorResponse", "error": "AlreadyFinished", "detail": "state sent"}
        try:
            self._send_final(message)
        except (ServerResponseError, httpx.HTTPError, ValueError) as exc:
            refused = isinstance(exc, ValueError) or (
                isinstance(exc, ServerResponseError)
                and 400 <= exc.status_code < 500
                and exc.status_code not in STOP_STATUSES
            )
            if refused and message["type"] == "SucceedTask":
                return self._report_refused_success(exc)
            logger.warning("reporting %s failed, will resend once: %s", message["type"], exc)
            self._unsent_final = message
            return {"type": "ErrorResponse", "error": type(exc).__name__, "detail": str(exc)}
        return {"type": "OK"}

    def _report_refused_success(self, exc: Exception) -> dict[str, Any]:
        """The success cannot be recorded, and sending it again cannot help: report a failure
        (``up_for_retry`` while tries remain) so the task instance is not left running."""
        self._failure_reason = (
            f"the task's success could not be sent: {exc}"
            if isinstance(exc, ValueError)
            else f"the server refused the task's success: {exc}"
        )
        state = "up_for_retry" if tries_remain(self.ti_context, self.try_number) else "failed"
        logger.error("%s; reporting %s", self._failure_reason, state)
        failure = {"type": "TaskState", "state": state, "end_date": isoformat(now())}
        try:
            self._send_final(failure)
        except (ServerResponseError, httpx.HTTPError) as error:
            logger.warning("reporting %s failed, will resend once: %s", state, error)
            self._unsent_final = failure
        return {"type": "ErrorResponse", "error": type(exc).__name__, "detail": str(exc)}

    # -- main loop -------------------------------------------------------------------------

    def _heartbeat(self, process: subprocess.Popen[bytes]) -> None:
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

    def _loop(self, process: subprocess.Popen[bytes], channel: Channel) -> None:
        next_heartbeat = time.monotonic() + self.heartbeat_interval
        open_channel = True
        while open_channel:
            self._enforce_terminate(process)
            timeout = max(0.0, min(next_heartbeat - time.monotonic(), 0.5))
            readable, _, _ = select.select([channel], [], [], timeout)
            if readable:
                open_channel = channel.feed()
                for message in channel.pending():
                    if not self._send(channel, self._handle(message)):
                        open_channel = False
                        break
            elif self._exited(process):
                # the child is gone; read whatever it left in the socket, then stop
                readable, _, _ = select.select([channel], [], [], 0)
                if not readable:
                    break
            if time.monotonic() >= next_heartbeat:
                if (
                    open_channel
                    and self._stop_reason is None
                    and self.final_state is None
                    and not self._exited(process)
                ):
                    self._heartbeat(process)
                # also when no heartbeat is due any more: a deadline left in the past would
                # make the select() above return at once, spinning until the channel closes
                next_heartbeat = time.monotonic() + self.heartbeat_interval
        self._wait_exit(process)

    def _wait_exit(self, process: subprocess.Popen[bytes]) -> None:
        if not self._wait_exited(process, self.exit_timeout):
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
            self._signal_group(process, signal.SIGTERM)
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
            self._end_group(process, grace=1.0)
            raise
        finally:
            channel.close()
        return self._finish(process)

    def _finish(self, process: subprocess.Popen[bytes]) -> TaskResult:
        self._end_group(process)
        code = process.returncode
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
            last = self._failure_reason or self._last_error_line()
            reason = f"task {self.final_state.replace('_', ' ')}" + (f": {last}" if last else "")
            return self._result(self.final_state, process, reason)
        return self._result("success", process, None)

    def _last_error_line(self) -> str | None:
        with self._log_lock:
            lines = [line for line in self.log_lines if line.strip()]
        return lines[-1].strip() if lines else None

    def _result(
        self, state: str | None, process: subprocess.Popen[bytes], reason: str | None
    ) -> TaskResult:
        with self._log_lock:
            log = list(self.log_lines)
        return TaskResult(self.ti_id, state, process.returncode, reason, log)


def _parse_when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
