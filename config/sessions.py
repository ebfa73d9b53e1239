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
        # Django's own rule (at least 8 characters), and only the characters it uses
        return key is not None and len(key) >= 8 and all(c in VALID_KEY_CHARS for c in key)
