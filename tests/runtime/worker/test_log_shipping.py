"""The log shipper (``runtime.log_shipping``) against a fake execution API: what it sends of a
try's log file and when, how it resumes after a failing server, a gap, the cap and a stale
token, and the command pipe it is driven through (the shipper imports no Django); and the
chunk size the worker's handle takes from the settings."""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from runtime.log_shipping import REFRESHED_TOKEN_HEADER, LogShipping, Shipper, serve

TI = "0195e0b8-0000-7000-8000-0000000000aa"
CHUNK = 1024


def jwt(issued: float, expires: float) -> str:
    """A token with these times (unsigned: the shipper only reads them)."""
    payload = json.dumps({"sub": TI, "iat": issued, "exp": expires}).encode()
    return "h." + base64.urlsafe_b64encode(payload).decode().rstrip("=") + ".s"


@dataclass
class FakeServer:
    """The log route as the server answers it, recording what it was sent."""

    received: bytearray = field(default_factory=bytearray)
    posts: list[dict] = field(default_factory=list)
    gets: int = 0
    tokens: list[str] = field(default_factory=list)
    fail_next: int = 0  # answer the next N requests 503
    truncate_at: int | None = None  # answer truncated once this many bytes are received
    status: int | None = None  # answer every request this (a refusal)
    refresh_with: str | None = None
    closed: bool = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == f"/execution/task-instances/{TI}/logs"
        self.tokens.append(request.headers["Authorization"].removeprefix("Bearer "))
        headers = {REFRESHED_TOKEN_HEADER: self.refresh_with} if self.refresh_with else {}
        if self.status is not None:
            return httpx.Response(self.status, json={"detail": {"reason": "not_found"}})
        if self.fail_next:
            self.fail_next -= 1
            return httpx.Response(503, json={"detail": {"reason": "retry"}})
        if request.method == "GET":
            self.gets += 1
            return httpx.Response(200, json=self._position(), headers=headers)
        body = json.loads(request.content)
        self.posts.append(body)
        data = body["content"].encode()
        if body["offset"] > len(self.received):
            return httpx.Response(
                409,
                json={
                    "detail": {"reason": "log_offset_gap", "expected_offset": len(self.received)}
                },
            )
        self.received += data[len(self.received) - body["offset"] :]
        self.closed = body["final"]
        return httpx.Response(200, json=self._position(), headers=headers)

    def _position(self) -> dict:
        truncated = self.truncate_at is not None and len(self.received) >= self.truncate_at
        return {
            "next_offset": len(self.received),
            "stored_bytes": len(self.received),
            "truncated": truncated,
            "closed": self.closed,
        }


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake() -> FakeServer:
    return FakeServer()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def shipper(fake, clock) -> Shipper:
    client = httpx.Client(
        transport=httpx.MockTransport(fake.handle), base_url="http://server/execution/"
    )
    return Shipper(
        server="http://server",
        interval=1.0,
        chunk_bytes=CHUNK,
        flush_timeout=30.0,
        client=client,
        clock=clock,
    )


def follow(shipper: Shipper, path: Path, *, start: int = 0, token: str | None = None) -> None:
    shipper.command(
        {"op": "follow", "id": TI, "path": str(path), "start": start, "token": token or "tok"}
    )


def test_whole_lines_go_now_a_partial_line_waits_and_the_end_goes_with_final(
    shipper, fake, tmp_path
):
    log = tmp_path / "attempt=1.log"
    log.write_bytes(b"one\ntwo\npart")
    follow(shipper, log)

    shipper.pump()
    sent_while_running = bytes(fake.received)
    with log.open("ab") as file:
        file.write(b"ial")
    shipper.command({"op": "finish", "id": TI})
    shipper.pump()

    assert fake.gets == 1  # where to start, asked once
    assert sent_while_running == b"one\ntwo\n"
    assert bytes(fake.received) == b"one\ntwo\npartial"
    assert [p["final"] for p in fake.posts] == [False, True]
    assert fake.closed is True
    assert shipper.tails == {}


def test_what_the_file_held_before_the_try_started_is_not_sent(shipper, fake, tmp_path):
    log = tmp_path / "attempt=1.log"
    log.write_bytes(b"an earlier attempt\n")
    start = log.stat().st_size
    with log.open("ab") as file:
        file.write(b"this attempt\n")
    follow(shipper, log, start=start)

    shipper.pump()

    assert bytes(fake.received) == b"this attempt\n"


def test_a_line_longer_than_a_chunk_is_cut_between_characters(shipper, fake, tmp_path):
    log = tmp_path / "attempt=1.log"
    text = "é" * CHUNK  # 2 KiB, no line end
    log.write_text(text + "\n")
    follow(shipper, log)

    shipper.pump()

    assert [len(p["content"].encode()) for p in fake.posts] == [1024, 1024, 1]
    assert fake.received.decode() == text + "\n"


def test_bytes_that_are_not_utf8_and_nul_are_replaced(shipper, fake, tmp_path):
    log = tmp_path / "attempt=1.log"
    log.write_bytes(b"bad \xff byte and a \x00 nul\n")
    follow(shipper, log)

    shipper.pump()

    assert fake.posts[0]["content"] == "bad \ufffd byte and a \ufffd nul\n"


def test_a_failing_server_is_tried_again_later_and_nothing_is_lost(shipper, fake, clock, tmp_path):
    log = tmp_path / "attempt=1.log"
    log.write_bytes(b"one\n")
    follow(shipper, log)
    shipper.pump()
    with log.open("ab") as file:
        file.write(b"two\n")
    fake.fail_next = 2

    shipper.pump()  # 503: wait 1 s
    shipper.pump()  # too early: nothing sent
    clock.now += 1.5
    shipper.pump()  # 503 again: wait 2 s
    clock.now += 2.5
    shipper.pump()

    assert bytes(fake.received) == b"one\ntwo\n"
    assert len(fake.posts) == 2


def test_an_answer_that_is_not_the_routes_is_tried_again_later(shipper, fake, clock, tmp_path):
    log = tmp_path / "attempt=1.log"
    log.write_bytes(b"one\n")
    follow(shipper, log)
    shipper.pump()
    with log.open("ab") as file:
        file.write(b"two\n")
    handle = fake.handle
    fake.handle = lambda request: httpx.Response(200, text="<html>a proxy's page</html>")
    shipper.client = httpx.Client(
        transport=httpx.MockTransport(lambda request: fake.handle(request)),
        base_url="http://server/execution/",
    )

    shipper.pump()  # not JSON: no crash, wait 1 s
    fake.handle = handle
    clock.now += 1.5
    shipper.pump()

    assert bytes(fake.received) == b"one\ntwo\n"


def test_a_gap_is_resent_from_where_the_server_is(shipper, fake, tmp_path):
    log = tmp_path / "attempt=1.log"
    log.write_bytes(b"one\n")
    follow(shipper, log)
    shipper.pump()
    shipper.tails[TI].offset = 100  # as if the server had lost what it acknowledged
    with log.open("ab") as file:
        file.write(b"two\n")

    shipper.pump()

    assert [p["offset"] for p in fake.posts] == [0, 100, 4]
    assert bytes(fake.received) == b"one\ntwo\n"


def test_once_the_server_caps_the_log_the_rest_is_skipped_and_only_the_end_is_said(
    shipper, fake, tmp_path
):
    fake.truncate_at = 2048
    log = tmp_path / "attempt=1.log"
    log.write_bytes((b"x" * 511 + b"\n") * 40)  # 20 KiB
    follow(shipper, log)

    shipper.pump()
    shipper.command({"op": "finish", "id": TI})
    shipper.pump()

    assert len(fake.received) == 2048  # two chunks, then nothing
    assert fake.posts[-1] == {"offset": 2048, "content": "", "final": True}
    assert len(fake.posts) == 3


def test_a_try_the_server_refuses_is_dropped(shipper, fake, tmp_path):
    fake.status = 404
    log = tmp_path / "attempt=1.log"
    log.write_bytes(b"one\n")
    follow(shipper, log)

    shipper.pump()

    assert shipper.tails == {}


def test_a_token_near_its_end_is_renewed_through_the_server(shipper, fake, tmp_path):
    now = time.time()
    old = jwt(now - 540, now + 60)  # 90 % of its life gone
    fresh = jwt(now, now + 600)
    log = tmp_path / "attempt=1.log"
    log.write_bytes(b"one\n")
    follow(shipper, log, token=jwt(now, now + 600))
    shipper.pump()
    shipper.tails[TI].token = old
    fake.refresh_with = fresh

    shipper.pump()  # nothing new to send: it asks where the log stands, to be given a token
    with log.open("ab") as file:
        file.write(b"two\n")
    fake.refresh_with = None
    shipper.pump()

    assert fake.gets == 2
    assert fake.tokens[-2] == old
    assert fake.tokens[-1] == fresh


def test_the_end_of_a_log_is_given_up_after_the_flush_timeout(shipper, fake, clock, tmp_path):
    fake.fail_next = 1000
    log = tmp_path / "attempt=1.log"
    log.write_bytes(b"one\n")
    follow(shipper, log)
    shipper.command({"op": "finish", "id": TI})

    shipper.pump()
    clock.now += 31
    shipper.pump()

    assert shipper.tails == {}
    assert fake.received == b""


def test_serve_follows_the_commands_and_sends_everything_when_its_input_ends(fake, tmp_path):
    # given a log file and the commands the worker sends: follow it, the try ended, no more
    log = tmp_path / "attempt=1.log"
    log.write_bytes(b"hello\nworld")
    read_end, write_end = os.pipe()
    commands = [
        {"op": "follow", "id": TI, "path": str(log), "start": 0, "token": "tok"},
        {"op": "finish", "id": TI},
    ]
    os.write(write_end, b"".join(json.dumps(c).encode() + b"\n" for c in commands))
    os.close(write_end)
    client = httpx.Client(
        transport=httpx.MockTransport(fake.handle), base_url="http://server/execution/"
    )
    shipper = Shipper(
        server="http://server", interval=0.05, chunk_bytes=CHUNK, flush_timeout=5, client=client
    )

    # when the shipper serves them
    with os.fdopen(read_end, "rb") as pipe:
        serve(shipper, pipe)

    # then it sent the whole file, the last chunk final, and returned
    assert bytes(fake.received) == b"hello\nworld"
    assert fake.closed is True


def test_the_worker_sends_chunks_whose_json_fits_the_largest_body(settings):
    settings.TASK_LOG_CHUNK_MAX_BYTES = 262144
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 20 * 1024 * 1024
    roomy = LogShipping.from_settings(server="http://server", report=print)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 601024
    tight = LogShipping.from_settings(server="http://server", report=print)
    settings.TASK_LOG_SHIP_INTERVAL = 0
    off = LogShipping.from_settings(server="http://server", report=print)

    assert roomy.chunk_bytes == 262144
    assert tight.chunk_bytes == 100000  # six bytes a character at worst, and 1 KiB of JSON
    assert (roomy.enabled, off.enabled) == (True, False)
