"""The message channel between the supervisor and the task process.

A dedicated socket pair (not stdout/stderr, which the supervisor captures as the task's log)
carrying one JSON object per line. The task process sends a request and waits for its reply;
the supervisor only answers.

Task → supervisor: ``GetAssetByName``, ``GetAssetByUri``, ``GetAssetEventByAsset``,
``GetAssetEventByAssetAlias``, ``SetXCom``, ``SetRenderedFields``, ``SucceedTask`` and
``TaskState`` (``failed`` / ``up_for_retry``).
Supervisor → task: ``StartupDetails`` first, then one reply per request: ``OK``,
``AssetResult``, ``AssetEventsResult`` or ``ErrorResponse``.
"""

from __future__ import annotations

import json
import socket
from typing import Any

#: Environment variable telling the task process which inherited fd is its channel.
COMMS_FD_ENV = "TASK_SDK_COMMS_FD"


class ChannelClosedError(Exception):
    """The other side closed the channel."""


class Channel:
    """Newline-delimited JSON over a stream socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def _next(self) -> dict[str, Any] | None:
        """Take the first complete message out of the buffer; None when there is none."""
        while (end := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            if line.strip():
                message = json.loads(line)
                if not isinstance(message, dict):
                    raise ValueError(f"a message must be a JSON object, got {line[:200]!r}")
                return message
        return None

    def pending(self) -> list[dict[str, Any]]:
        """Messages complete in the buffer (after ``feed``)."""
        return list(iter(self._next, None))

    def feed(self) -> bool:
        """Read what is available (call when the socket is readable); False at end of stream."""
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            return False
        self._buffer.extend(data)
        return True

    def receive(self) -> dict[str, Any]:
        """Block until one whole message arrived."""
        while (message := self._next()) is None:
            if not self.feed():
                raise ChannelClosedError("the other side closed the message channel")
        return message

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.receive()

    def close(self) -> None:
        self.sock.close()
