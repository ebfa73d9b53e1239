"""Helpers for starting child processes (server, schedulers) that share this database."""

from __future__ import annotations

import socket
from urllib.parse import quote

from django.db import connection


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
