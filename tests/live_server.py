"""A real HTTP server process (gunicorn) serving the app against the test database.

Use the ``server`` fixture from tests that need a live server; they must use the
``transactional_db`` fixture (or ``django_db(transaction=True)``) so that rows they create
are committed and visible to the server process, and vice versa.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from assets_app.processes import current_database_url, free_port

REPO = Path(__file__).resolve().parent.parent


def test_database_url() -> str:
    """DATABASE_URL of the database the tests are using right now."""
    return current_database_url()


def server_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.test",
        DATABASE_URL=test_database_url(),
        PYTHONPATH=str(REPO),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


@dataclass
class ServerProcess:
    url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_server(
    tmp_path: Path, *, workers: int = 2, threads: int = 8, env: dict[str, str] | None = None
) -> ServerProcess:
    port = free_port()
    log_path = tmp_path / f"server-{port}.log"
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--worker-class",
            "gthread",
            "--timeout",
            "120",
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=server_env(**(env or {})),
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log_path.read_text(errors='replace')}")
        try:
            httpx.get(f"{url}/admin/login/", timeout=1)
            return ServerProcess(url=url, process=process, log_path=log_path)
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"server did not answer:\n{log_path.read_text(errors='replace')}")


def stop_server(server: ServerProcess) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def serve(tmp_path: Path, **kwargs) -> Iterator[ServerProcess]:
    server = start_server(tmp_path, **kwargs)
    try:
        yield server
    finally:
        stop_server(server)
