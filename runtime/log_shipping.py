"""Ship each try's log from the worker to the server while the try runs (docs/worker.md,
"Reading a task's log").

The worker writes a try's output to its log file (``WORKER_LOG_DIR``); nothing else reads that
disk, so a process of its own, the *shipper*, tails every running try's file and sends what is
new to ``POST /execution/task-instances/{id}/logs`` with the try's own token (the one the
worker gave its child), every ``TASK_LOG_SHIP_INTERVAL`` seconds:

- in chunks of at most ``TASK_LOG_CHUNK_MAX_BYTES``, cut after a line end (a line longer than a
  chunk is cut between two characters), decoded as UTF-8 (a byte that is not: U+FFFD; U+0000,
  which no text column stores: U+FFFD too);
- each chunk says where it starts (``offset``, the UTF-8 bytes sent before it, which the
  shipper asks the server for first): a chunk sent again after a lost answer is not stored
  twice, and the file is read on only once a chunk is acknowledged, so a server that is down
  for a while loses nothing (the shipper tries again, waiting longer each time, up to 30 s);
- once the server answers that the log reached ``TASK_LOG_MAX_BYTES``, the rest of the file is
  skipped, not sent;
- when the try's process has ended, the rest of the file is sent with ``final`` (the log is
  complete); the worker, when it stops, waits up to ``TASK_LOG_FLUSH_TIMEOUT`` for that.

The shipper is a separate process, not a thread of the worker: the worker forks each task's
supervisor, which it only does while it runs a single thread (``task_sdk.forking``). The worker
starts it (:class:`LogShipping`) and tells it, one JSON line each on its stdin, which file to
follow for which try and with which token, and when a try has ended; the end of its stdin is
"send everything and exit". It imports nothing of the registry (``httpx`` and the standard
library only) and is started as a script::

    python runtime/log_shipping.py --server URL --interval 1 --chunk-bytes 262144 --flush-timeout 30

It keeps a token fresh by adopting the ``Refreshed-API-Token`` the server sends while less than
a fifth of its lifetime is left (it asks for the log's position then, if it had nothing to
send). It logs to its stderr (the worker's output), never a token nor a line of a log.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import logging
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

logger = logging.getLogger("runtime.log_shipping")

SCRIPT = Path(__file__).resolve()
#: Chunks sent for one try per round while it runs (the rest waits for the next round).
CHUNKS_PER_ROUND = 32
#: The longest wait before trying a failing server again.
MAX_BACKOFF = 30.0
#: A token is refreshed once this share of its lifetime is gone (the server refreshes in the
#: last fifth).
REFRESH_AFTER = 0.85
REFRESHED_TOKEN_HEADER = "Refreshed-API-Token"  # noqa: S105 - a header's name


def log_size(path: Path) -> int:
    """The bytes ``path`` holds now (0 when it does not exist): where a new try's output
    starts in a file an earlier attempt of the same try wrote to."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


# --- the shipper process -------------------------------------------------------------------------


def _token_times(token: str) -> tuple[float, float] | None:
    """``(iat, exp)`` of a JWT, read without checking it (the server checks it)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["iat"]), float(claims["exp"])
    except (IndexError, KeyError, TypeError, ValueError):
        return None


#: (length, lead bits) of UTF-8 characters longer than a byte: ``110xxxxx`` starts two bytes …
_LEADS = ((2, 0b110), (3, 0b1110), (4, 0b11110))


def _whole_characters(data: bytes) -> int:
    """``len(data)`` less an incomplete UTF-8 character at its end (its rest is still in the
    file)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: look further back for the lead byte
            continue
        length = next((n for n, lead in _LEADS if byte >> (8 - n - 1) == lead), 1)
        return len(data) if back >= length else len(data) - back
    return len(data)


@dataclass
class Tail:
    """One try's log file, followed."""

    task_instance_id: str
    path: Path
    position: int  # the next byte of the file to send
    token: str
    offset: int | None = None  # bytes the server has received (None: not asked yet)
    finishing: bool = False
    finish_by: float = 0.0
    skipping: bool = False  # the server keeps no more (truncated): skip to the end
    failures: int = 0
    retry_at: float = 0.0
    file: IO[bytes] | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"task instance {self.task_instance_id}"

    def read(self, size: int) -> bytes:
        if self.file is None:
            try:
                self.file = self.path.open("rb")
            except FileNotFoundError:
                return b""
        self.file.seek(self.position)
        return self.file.read(size)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class Gone(Exception):  # noqa: N818 - a state, not an error of ours
    """The server will never take this try's log (no such try, token refused …)."""


class Shipper:
    """Follows the tries it is told about and sends their logs (see the module docstring)."""

    def __init__(
        self,
        *,
        server: str,
        interval: float,
        chunk_bytes: int,
        flush_timeout: float,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.chunk_bytes = chunk_bytes
        self.flush_timeout = flush_timeout
        self.clock = clock
        self.client = client or httpx.Client(
            base_url=server.rstrip("/") + "/execution/",
            timeout=httpx.Timeout(10.0, connect=5.0),
        )
        self.tails: dict[str, Tail] = {}

    # -- commands -----------------------------------------------------------------------------

    def command(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        ti_id = str(message.get("id"))
        if op == "follow":
            old = self.tails.pop(ti_id, None)
            if old is not None:
                old.close()
            self.tails[ti_id] = Tail(
                ti_id, Path(message["path"]), int(message["start"]), str(message["token"])
            )
        elif op == "finish" and ti_id in self.tails:
            self._finishing(self.tails[ti_id])
        elif op != "finish":
            logger.error("log shipping: unknown command %r", op)

    def finish_all(self) -> None:
        for tail in self.tails.values():
            if not tail.finishing:
                self._finishing(tail)

    def _finishing(self, tail: Tail) -> None:
        tail.finishing = True
        tail.finish_by = self.clock() + self.flush_timeout
        tail.retry_at = 0.0

    # -- sending ------------------------------------------------------------------------------

    def pump(self) -> None:
        """One round: what is new of every tail (all of a finishing one), for each whose
        server is not being waited for."""
        now = self.clock()
        for tail in list(self.tails.values()):
            if tail.finishing and now > tail.finish_by:
                logger.warning(
                    "log shipping: gave up sending the end of the log of %s after %.0f s",
                    tail.label,
                    self.flush_timeout,
                )
                self._drop(tail)
                continue
            if now < tail.retry_at:
                continue
            try:
                done = self._send(tail)
            except Gone as exc:
                logger.warning("log shipping: the log of %s is not taken: %s", tail.label, exc)
                self._drop(tail)
                continue
            except (httpx.HTTPError, OSError, ValueError, KeyError, TypeError) as exc:
                # unreachable, 5xx, or an answer that is not the route's: try again later
                tail.failures += 1
                wait = min(2.0 ** (tail.failures - 1), MAX_BACKOFF)
                tail.retry_at = now + wait
                logger.warning(
                    "log shipping: sending the log of %s failed (%s); trying again in %.0f s",
                    tail.label,
                    type(exc).__name__,
                    wait,
                )
                continue
            tail.failures = 0
            if done:
                self._drop(tail)

    def _drop(self, tail: Tail) -> None:
        tail.close()
        self.tails.pop(tail.task_instance_id, None)

    def _send(self, tail: Tail) -> bool:
        """Send what is due of ``tail``; ``True`` once its last chunk (``final``) is sent."""
        if tail.offset is None:
            self._position(tail)
        elif self._token_old(tail.token):
            self._position(tail)  # the answer carries a fresh token
        rounds = 0
        while tail.finishing or rounds < CHUNKS_PER_ROUND:
            rounds += 1
            if tail.finishing and self.clock() > tail.finish_by:
                return False
            if tail.skipping:  # nothing more is kept: only the end is worth saying
                tail.position = max(tail.position, log_size(tail.path))
                if tail.finishing:
                    self._append(tail, "", final=True)
                return tail.finishing
            data = tail.read(self.chunk_bytes)
            at_end = len(data) < self.chunk_bytes
            cut = self._cut(data, at_end=at_end, finishing=tail.finishing)
            final = tail.finishing and at_end and cut == len(data)
            if cut == 0 and not final:
                return False
            text = data[:cut].decode("utf-8", "replace").replace("\x00", "\ufffd")
            self._append(tail, text, final=final)
            tail.position += cut
            if final:
                return True
        return False

    def _cut(self, data: bytes, *, at_end: bool, finishing: bool) -> int:
        """How much of ``data`` to send now: up to its last line end; all of it at the end of
        a finished try's file; a whole chunk without a line end cut between characters."""
        if finishing and at_end:
            return len(data)
        line_end = data.rfind(b"\n") + 1
        if line_end:
            return line_end
        if len(data) >= self.chunk_bytes:
            return _whole_characters(data) or len(data)
        return 0

    def _headers(self, tail: Tail) -> dict[str, str]:
        return {"Authorization": f"Bearer {tail.token}"}

    def _answer(self, tail: Tail, response: httpx.Response) -> dict[str, Any]:
        """The JSON body of a 200 (adopting a refreshed token); raises ``Gone`` on a refusal
        that will not change, ``httpx.HTTPStatusError`` on one that may (5xx)."""
        refreshed = response.headers.get(REFRESHED_TOKEN_HEADER)
        if refreshed:
            tail.token = refreshed
        if response.status_code == 200:
            body: dict[str, Any] = response.json()
            return body
        if response.status_code >= 500 or response.status_code == 429:
            response.raise_for_status()
        reason = ""
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            reason = response.json()["detail"]["reason"]
        raise Gone(f"HTTP {response.status_code} {reason}".strip())

    def _position(self, tail: Tail) -> None:
        url = f"task-instances/{tail.task_instance_id}/logs"
        body = self._answer(tail, self.client.get(url, headers=self._headers(tail)))
        self._adopt(tail, body)

    def _append(self, tail: Tail, text: str, *, final: bool) -> None:
        url = f"task-instances/{tail.task_instance_id}/logs"
        payload = {"offset": tail.offset, "content": text, "final": final}
        for _ in range(2):  # a gap: once more from where the server is
            response = self.client.post(url, json=payload, headers=self._headers(tail))
            if response.status_code == 409:
                expected = response.json().get("detail", {}).get("expected_offset")
                if isinstance(expected, int):
                    logger.warning(
                        "log shipping: the server has %s bytes of the log of %s, not %s; "
                        "going on from there",
                        expected,
                        tail.label,
                        tail.offset,
                    )
                    payload["offset"] = tail.offset = expected
                    continue
            self._adopt(tail, self._answer(tail, response))
            return
        raise Gone("the server keeps refusing the chunk's offset")

    @staticmethod
    def _adopt(tail: Tail, body: dict[str, Any]) -> None:
        tail.offset = int(body["next_offset"])
        if body.get("truncated") and not tail.skipping:
            tail.skipping = True
            logger.info("log shipping: the log of %s reached the size cap", tail.label)

    def _token_old(self, token: str) -> bool:
        times = _token_times(token)
        if times is None:
            return False
        issued, expires = times
        return time.time() > issued + REFRESH_AFTER * (expires - issued)


def _read_commands(buffer: bytearray) -> list[dict[str, Any]]:
    """The complete lines of ``buffer`` as commands (removed from it)."""
    commands = []
    while (end := buffer.find(b"\n")) >= 0:
        line = bytes(buffer[:end])
        del buffer[: end + 1]
        try:
            commands.append(json.loads(line))
        except ValueError:
            logger.error("log shipping: a command that is not JSON was ignored")
    return commands


def serve(shipper: Shipper, commands: IO[bytes], *, parent: int | None = None) -> None:
    """Follow the commands on ``commands`` until it ends (or the process ``parent``, the
    worker, is gone: a forked task may hold the pipe open), then send everything and return."""
    fd = commands.fileno()
    os.set_blocking(fd, False)
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    buffer = bytearray()
    open_ = True
    next_round = shipper.clock()
    while open_ or shipper.tails:
        urgent = any(t.finishing and t.retry_at <= shipper.clock() for t in shipper.tails.values())
        wait = 0.0 if urgent else max(next_round - shipper.clock(), 0.0)
        if open_ and selector.select(timeout=wait):
            try:
                data: bytes | None = os.read(fd, 65536)
            except BlockingIOError:  # woken for nothing
                data = None
            if data:
                buffer += data
                for message in _read_commands(buffer):
                    shipper.command(message)
            elif data is not None:  # the worker closed it (or exited): send everything and go
                open_ = False
                selector.unregister(fd)
                shipper.finish_all()
        if open_ and parent is not None and os.getppid() != parent:
            logger.warning("log shipping: the worker is gone; sending what is left")
            open_ = False
            selector.unregister(fd)
            shipper.finish_all()
        elif not open_ and wait:
            time.sleep(min(wait, 0.1))
        if urgent or shipper.clock() >= next_round:
            shipper.pump()
            next_round = shipper.clock() + shipper.interval


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Ship task logs to the server.")
    parser.add_argument("--server", required=True)
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--chunk-bytes", type=int, required=True)
    parser.add_argument("--flush-timeout", type=float, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # its lines would name every request
    shipper = Shipper(
        server=args.server,
        interval=args.interval,
        chunk_bytes=args.chunk_bytes,
        flush_timeout=args.flush_timeout,
    )
    with contextlib.suppress(KeyboardInterrupt):
        serve(shipper, sys.stdin.buffer, parent=os.getppid())
    return 0


# --- the worker's side -------------------------------------------------------------------------


class LogShipping:
    """The worker's handle on its shipper process: started at the first try it follows,
    told what to follow and when a try has ended, closed (and waited for) when the worker
    stops. A shipper that cannot be started or has died is reported and started again for
    the next try; the worker never fails because of it. Disabled (``interval`` 0): does
    nothing."""

    def __init__(
        self,
        *,
        server: str,
        interval: float,
        chunk_bytes: int,
        flush_timeout: float,
        report: Callable[[str], None] = logger.warning,
    ) -> None:
        self.server = server
        self.interval = interval
        self.chunk_bytes = chunk_bytes
        self.flush_timeout = flush_timeout
        self.report = report
        self.process: subprocess.Popen[bytes] | None = None
        self._pending = bytearray()  # written when the pipe has room again

    @classmethod
    def from_settings(cls, *, server: str, report: Callable[[str], None]) -> LogShipping:
        from django.conf import settings

        # a chunk's JSON (a character escaped at worst as \uXXXX, six bytes) fits a body
        body_room = (settings.DATA_UPLOAD_MAX_MEMORY_SIZE - 1024) // 6
        return cls(
            server=server,
            interval=settings.TASK_LOG_SHIP_INTERVAL,
            chunk_bytes=max(min(settings.TASK_LOG_CHUNK_MAX_BYTES, body_room), 64),
            flush_timeout=settings.TASK_LOG_FLUSH_TIMEOUT,
            report=report,
        )

    @classmethod
    def disabled(cls) -> LogShipping:
        return cls(server="", interval=0, chunk_bytes=0, flush_timeout=0)

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def follow(self, *, task_instance_id: Any, path: Path, start: int, token: str) -> None:
        """Ship ``path`` from byte ``start`` as the log of the try ``task_instance_id``."""
        self._send(
            {
                "op": "follow",
                "id": str(task_instance_id),
                "path": str(path),
                "start": start,
                "token": token,
            },
            start=True,
        )

    def finish(self, *, task_instance_id: Any) -> None:
        """The try's process has ended: send the rest of its log."""
        self._send({"op": "finish", "id": str(task_instance_id)}, start=False)

    def close(self) -> None:
        """Let the shipper send everything (up to the flush timeout), then end it."""
        process = self.process
        if process is None or process.stdin is None:
            return
        self.process = None
        try:
            os.set_blocking(process.stdin.fileno(), True)
            if self._pending:
                process.stdin.write(bytes(self._pending))
            process.stdin.close()
        except OSError:
            pass
        self._pending.clear()
        try:
            process.wait(timeout=self.flush_timeout + 10)
        except subprocess.TimeoutExpired:
            self.report("log shipping: the shipper did not finish in time; ended")
            process.kill()
            process.wait()

    def _send(self, message: dict[str, Any], *, start: bool) -> None:
        if not self.enabled:
            return
        if self.process is not None and self.process.poll() is not None:
            self.report(
                f"log shipping: the shipper exited ({self.process.returncode}); the logs it "
                "was sending stop there, a new one takes the next tries"
            )
            self.process = None
            self._pending.clear()
        if self.process is None:
            if not start:
                return
            self._start()
            if self.process is None:
                return
        self._pending += json.dumps(message).encode() + b"\n"
        assert self.process.stdin is not None  # noqa: S101 - started with a pipe
        try:
            written = os.write(self.process.stdin.fileno(), bytes(self._pending))
        except BlockingIOError:  # the shipper is busy: the next call writes it
            return
        except OSError as exc:
            self.report(f"log shipping: cannot reach the shipper: {exc}")
            return
        del self._pending[:written]

    def _start(self) -> None:
        try:
            self.process = subprocess.Popen(  # noqa: S603 - an argv list we build, no shell
                [
                    sys.executable,
                    str(SCRIPT),
                    *("--server", self.server),
                    *("--interval", str(self.interval)),
                    *("--chunk-bytes", str(self.chunk_bytes)),
                    *("--flush-timeout", str(self.flush_timeout)),
                ],
                stdin=subprocess.PIPE,
                start_new_session=True,  # a Ctrl-C meant for the worker leaves it to flush
            )
        except OSError as exc:
            self.report(f"log shipping: the shipper could not be started: {exc}")
            return
        assert self.process.stdin is not None  # noqa: S101 - started with a pipe
        os.set_blocking(self.process.stdin.fileno(), False)


if __name__ == "__main__":
    sys.exit(main())
