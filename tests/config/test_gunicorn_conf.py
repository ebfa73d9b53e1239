"""``gunicorn.conf.py`` (docs/deployment.md, "Deployment notes"): one control socket per server
or none, and request lines up to gunicorn's maximum, with real gunicorn processes."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.live_server import start_server, stop_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _wait_for(path: Path, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.1)
    return False


def test_two_servers_on_one_host_create_no_shared_control_socket(tmp_path):
    runtime = tmp_path / "xdg"
    runtime.mkdir()
    servers = [
        start_server(tmp_path, workers=1, threads=1, env={"XDG_RUNTIME_DIR": str(runtime)})
        for _ in range(2)
    ]
    try:
        time.sleep(1)  # gunicorn would have created the default socket by now
        assert list(runtime.iterdir()) == []
    finally:
        for server in servers:
            stop_server(server)


def test_a_server_given_a_control_socket_creates_it_there(tmp_path):
    socket = tmp_path / "app-1.ctl"
    server = start_server(
        tmp_path, workers=1, threads=1, env={"GUNICORN_CONTROL_SOCKET": str(socket)}
    )
    try:
        assert _wait_for(socket), server.log()
        assert socket.is_socket()
    finally:
        stop_server(server)


def test_request_lines_up_to_8190_bytes_reach_the_app(tmp_path):
    server = start_server(tmp_path, workers=1, threads=1)
    try:
        long_name = "n" * (8190 - len("GET /execution/assets/by-name?name= HTTP/1.1"))
        reached = httpx.get(f"{server.url}/execution/assets/by-name?name={long_name}")
        too_long = httpx.get(f"{server.url}/execution/assets/by-name?name={long_name}n")
    finally:
        stop_server(server)

    assert reached.status_code == 401  # the app's answer (no token), as JSON
    assert reached.headers["Content-Type"] == "application/json"
    assert too_long.status_code == 414  # gunicorn's, declared in the OpenAPI schema
