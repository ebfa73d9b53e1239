"""Helpers for starting child processes (server, schedulers) that share this database."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO
from urllib.parse import quote

import httpx
from django.db import connection


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def current_database_url() -> str:
    """DATABASE_URL of the database this process is connected to, for a child process."""
    cfg = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{cfg['NAME']}"
    user = quote(cfg.get("USER") or "postgres", safe="")
    password = f":{quote(cfg['PASSWORD'], safe='')}" if cfg.get("PASSWORD") else ""
    host = cfg.get("HOST") or "127.0.0.1"
    port = cfg.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{cfg['NAME']}"


REPO = Path(__file__).resolve().parent.parent


class ServerStartError(RuntimeError):
    """The child server exited or did not answer in time."""


def server_start(
    *,
    env: Mapping[str, str],
    stdout: IO[bytes],
    workers: int = 2,
    threads: int = 8,
    timeout: float = 30.0,
) -> tuple[subprocess.Popen[bytes], str]:
    """Serve the app with gunicorn (gthread) on a free port; return the process and its URL.

    ``env`` is the child's whole environment (settings module, ``DATABASE_URL``, ...); its
    output goes to ``stdout``. Returns once ``/admin/login/`` answers; raises
    ``ServerStartError`` (and stops the child) if it exits first or ``timeout`` passes.
    """
    port = free_port()
    process = subprocess.Popen(  # noqa: S603 - an argv list we build, no shell
        [
            *(sys.executable, "-m", "gunicorn", "config.wsgi:application"),
            *("--bind", f"127.0.0.1:{port}", "--worker-class", "gthread"),
            *("--workers", str(workers), "--threads", str(threads)),
            *("--timeout", "120", "--log-level", "warning"),
        ],
        cwd=REPO,
        env=dict(env),
        stdout=stdout,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerStartError(f"the server exited with status {process.returncode}")
        try:
            httpx.get(f"{url}/admin/login/", timeout=1)
        except httpx.TransportError:
            time.sleep(0.1)
        else:
            return process, url
    process_stop(process)
    raise ServerStartError(f"the server did not answer within {timeout:g} s")


def process_stop(process: subprocess.Popen[bytes], *, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
