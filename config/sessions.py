"""The session engine (``SESSION_ENGINE``): Django's database sessions, with a session key
that is not one Django could have made treated as no session.

Django makes session keys of lowercase letters and digits, but reads any cookie value as a key
and looks it up; a cookie holding a NUL (``"\\000"`` in a quoted cookie decodes to one) then
failed on PostgreSQL with a 500. Such a request is simply not logged in."""

from __future__ import annotations

from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore


class SessionStore(DatabaseSessionStore):
    def _validate_session_key(self, key: str | None) -> bool:
        return bool(super()._validate_session_key(key)) and all(
            char in VALID_KEY_CHARS for char in key or ""
        )
