"""Reads of variables and connections, and the only place their secrets are decrypted.

A decrypted value leaves this module only for a caller that must hand it on unmasked: the
execution API (a task's ``Variable.get`` / ``get_connection``), ``manage.py variables_get``,
the services that merge an edit into a stored value, and :func:`secrets_masker`, whose masker
hides them in task logs. Everything shown to operators
(admin, operator API, listings) reads only the non-secret columns or masks
(``assets_app.masking``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from assets_app import crypto
from assets_app.exceptions import ConnectionNotFoundError, SecretsError, VariableNotFoundError
from assets_app.masking import REPLACEMENT, TextMasker, is_sensitive, redact, secret_values
from assets_app.models import Connection, Variable


def variable_list() -> QuerySet[Variable]:
    return Variable.objects.order_by("key")


def variable_get(*, key: str) -> Variable:
    """The variable stored under ``key``, else ``VariableNotFoundError``."""
    variable = Variable.objects.filter(key=key).first()
    if variable is None:
        raise VariableNotFoundError(f"Variable with key '{key}' not found")
    return variable


def variable_value(variable: Variable) -> str | None:
    """The variable's plain-text value."""
    if variable.encrypted_val is None:
        return None
    return crypto.secret_decrypt(
        variable.encrypted_val,
        is_encrypted=variable.is_encrypted,
        what=f"value of variable '{variable.key}'",
    )


def variable_masked_value(variable: Variable) -> str | None:
    """The value as an operator may see it, on either API: ``***`` under a sensitive key; a
    JSON object or list with its sensitive keys' values ``***`` (Airflow's
    ``VariableResponse.redact_val``); anything else as stored."""
    value = variable_value(variable)
    if value is None:
        return None
    if is_sensitive(variable.key):
        return REPLACEMENT
    try:
        loaded = json.loads(value)
    except ValueError:
        return value
    if isinstance(loaded, dict | list):
        return json.dumps(redact(loaded))
    return value


def variable_keys(*, prefix: str | None, limit: int, offset: int) -> tuple[list[str], int]:
    """A page of keys in key order (those starting with ``prefix``, taken literally), and how
    many keys match in all: Airflow's ``GET /variables/keys``."""
    keys = Variable.objects.order_by("key")
    if prefix is not None:
        keys = keys.filter(key__startswith=prefix)
    total = keys.count()
    page = list(keys.values_list("key", flat=True)[offset : offset + limit])
    return page, total


def connection_list() -> QuerySet[Connection]:
    return Connection.objects.order_by("conn_id")


def connection_get(*, conn_id: str) -> Connection:
    """The connection ``conn_id``, else ``ConnectionNotFoundError``."""
    connection = Connection.objects.filter(conn_id=conn_id).first()
    if connection is None:
        raise ConnectionNotFoundError(f"Connection with ID {conn_id} not found")
    return connection


@dataclass(frozen=True)
class ConnectionSecrets:
    """A connection's decrypted password and extra (JSON text). Its ``repr`` hides both, so
    that a traceback or a debug log line never shows them."""

    password: str | None
    extra: str | None

    def __repr__(self) -> str:
        return "ConnectionSecrets(password=***, extra=***)"

    def extra_dict(self) -> dict[str, Any]:
        """The extra as a dict (``{}`` when there is none)."""
        if not self.extra:
            return {}
        loaded = json.loads(self.extra)
        return loaded if isinstance(loaded, dict) else {}


def connection_secrets(connection: Connection) -> ConnectionSecrets:
    """Decrypt the connection's password and extra."""
    password = extra = None
    if connection.encrypted_password is not None:
        password = crypto.secret_decrypt(
            connection.encrypted_password,
            is_encrypted=connection.is_encrypted,
            what=f"password of connection '{connection.conn_id}'",
        )
    if connection.encrypted_extra is not None:
        extra = crypto.secret_decrypt(
            connection.encrypted_extra,
            is_encrypted=connection.is_extra_encrypted,
            what=f"extra of connection '{connection.conn_id}'",
        )
    return ConnectionSecrets(password=password, extra=extra)


def connection_masked_password(connection: Connection) -> str | None:
    """``***`` when a password is stored, else ``None``: passwords are write-only on both
    operator faces (Airflow's ``ConnectionResponse.redact_password``)."""
    return REPLACEMENT if connection.has_password else None


def connection_masked_extra(connection: Connection) -> str | None:
    """The extra as JSON text with every sensitive key's value ``***`` (Airflow's public API).

    An extra that is not a JSON object is hidden whole, never shown unmasked.
    """
    extra = connection_secrets(connection).extra
    if not extra:
        return extra
    try:
        loaded = json.loads(extra)
    except ValueError:
        return REPLACEMENT
    if not isinstance(loaded, dict):
        return REPLACEMENT
    return json.dumps(redact(loaded))


# --- every secret, to mask in task logs ----------------------------------------------------------

#: Plain text by stored form (``None``: it cannot be decrypted). A Fernet token is new each
#: time a value is written or re-encrypted, so a stored form never changes meaning: each is
#: decrypted once per process, not on every log append.
_plain_by_stored: dict[tuple[str, bool], str | None] = {}
_masker_lock = threading.Lock()
_masker: tuple[frozenset[str], TextMasker] = (frozenset(), TextMasker(()))


def _plain(
    stored: str | None, *, is_encrypted: bool, what: str, seen: set[tuple[str, bool]]
) -> str | None:
    if stored is None:
        return None
    key = (stored, is_encrypted)
    seen.add(key)
    if key not in _plain_by_stored:
        try:
            _plain_by_stored[key] = crypto.secret_decrypt(
                stored, is_encrypted=is_encrypted, what=what
            )
        except SecretsError:  # logged by crypto; no task can read it either
            _plain_by_stored[key] = None
    return _plain_by_stored[key]


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _stored_secret_values(seen: set[tuple[str, bool]]) -> Iterator[str]:
    """What Airflow's task SDK masks in a task's log once the task has read it, for every
    secret kept here: a connection's password and its extra (the text whole, and each value
    under a sensitive key); a variable's value under a sensitive key, and the values under
    sensitive keys inside a JSON variable. Adds each stored form read to ``seen``."""
    for (
        conn_id,
        password,
        password_encrypted,
        extra,
        extra_encrypted,
    ) in Connection.objects.values_list(
        "conn_id", "encrypted_password", "is_encrypted", "encrypted_extra", "is_extra_encrypted"
    ):
        what = f"connection '{conn_id}'"
        plain = _plain(
            password, is_encrypted=password_encrypted, what=f"password of {what}", seen=seen
        )
        if plain is not None:
            yield from secret_values(plain)
        plain = _plain(extra, is_encrypted=extra_encrypted, what=f"extra of {what}", seen=seen)
        if plain is not None:
            yield from secret_values(plain)
            yield from secret_values(_json_or_none(plain))
    for key, value, encrypted in Variable.objects.values_list(
        "key", "encrypted_val", "is_encrypted"
    ):
        plain = _plain(value, is_encrypted=encrypted, what=f"value of variable '{key}'", seen=seen)
        if plain is None:
            continue
        yield from secret_values(plain, key)
        loaded = _json_or_none(plain)
        if isinstance(loaded, dict | list):
            yield from secret_values(loaded, key)


def secrets_masker() -> TextMasker:
    """A masker of every secret stored now (:func:`_stored_secret_values`): one query per
    table; decrypting and compiling only what changed since the last call in this process."""
    global _masker
    seen: set[tuple[str, bool]] = set()
    values = frozenset(_stored_secret_values(seen))
    for gone in set(_plain_by_stored) - seen:  # forget the forms no longer stored
        _plain_by_stored.pop(gone, None)
    with _masker_lock:
        if values != _masker[0]:
            _masker = (values, TextMasker(values))
        return _masker[1]
