"""A real HTTP server process (gunicorn) serving the app against the test database.

Use the ``server`` fixture from tests that need a live server; they must use the
``transactional_db`` fixture (or ``django_db(transaction=True)``) so that rows they create
are committed and visible to the server process, and vice versa.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devtools.processes import (
    REPO,
    ServerStartError,
    current_database_url,
    process_stop,
    server_start,
)

__all__ = ["REPO", "ServerProcess", "serve", "server_env", "start_server", "stop_server"]


def server_env(**extra: str) -> dict[str, str]:
    """The environment of a child process using the database the tests are using right now."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.test",
        DATABASE_URL=current_database_url(),
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


#: How long a test waits for its server to answer: the suite runs a process per core, each
#: starting servers, workers and Airflow processes, so a start can take several times its
#: usual ~5 s on a loaded machine; a server that never answers still fails the test.
SERVER_START_TIMEOUT = 90.0


def start_server(
    tmp_path: Path, *, workers: int = 2, threads: int = 8, env: dict[str, str] | None = None
) -> ServerProcess:
    log_path = tmp_path / f"server-{time.monotonic_ns()}.log"
    with log_path.open("wb") as log_file:
        try:
            process, url = server_start(
                env=server_env(**(env or {})),
                stdout=log_file,
                workers=workers,
                threads=threads,
                timeout=SERVER_START_TIMEOUT,
            )
        except ServerStartError as exc:
            raise RuntimeError(f"{exc}:\n{log_path.read_text(errors='replace')}") from exc
    return ServerProcess(url=url, process=process, log_path=log_path)


def stop_server(server: ServerProcess) -> None:
    process_stop(server.process)


def serve(tmp_path: Path, **kwargs) -> Iterator[ServerProcess]:
    server = start_server(tmp_path, **kwargs)
    try:
        yield server
    finally:
        stop_server(server)
