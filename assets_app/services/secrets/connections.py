"""Writes of connections. The password and the extra are encrypted before they reach the
database (``assets_app.crypto``); log lines name the ``conn_id``, never a secret.

An update takes :data:`~assets_app.services.inputs.KEEP` for every field it leaves
alone, so that an edit that does not retype the password keeps the stored one; a masked
password (``***``) or extra (``***`` at its sensitive keys) sent back keeps the stored values.
Both operator APIs (``/api/v1/`` and ``/api/v2/``) write through these functions.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, fields, replace
from typing import Any

from django.db import IntegrityError, transaction

from assets_app import crypto
from assets_app.exceptions import ConnectionExistsError, ConnectionNotFoundError, InvalidInputError
from assets_app.masking import REPLACEMENT, redacted_merge
from assets_app.models import SECRET_ID_LENGTH, Connection
from assets_app.selectors.secrets import connection_secrets
from assets_app.services.audit import Actor, connection_extra, event_log_record
from assets_app.services.inputs import KEEP, Keep, checked_text

logger = logging.getLogger(__name__)

#: Airflow's ``RE_SANITIZE_CONN_ID``: the characters a ``conn_id`` may hold.
CONN_ID_PATTERN = re.compile(r"[\w#!()\-.:/\\]+")
PORT_MAX = 65535


def connection_id_check(conn_id: str) -> str:
    """A ``conn_id`` Airflow accepts: 1 to 250 of letters, digits and ``_#!()-.:/\\``."""
    checked_text(conn_id, field="conn_id", max_length=SECRET_ID_LENGTH, required=True)
    if not CONN_ID_PATTERN.fullmatch(conn_id):
        raise InvalidInputError(
            "conn_id may hold only letters, digits and the characters _ # ! ( ) - . : / \\",
            field="conn_id",
        )
    return conn_id


def checked_extra(extra: str | None) -> str | None:
    """A connection's extra: ``None``/empty, or the JSON text of an object (Airflow's
    ``Connection._validate_extra`` refuses anything else)."""
    if extra is None or extra == "":
        return None
    if not isinstance(extra, str):
        raise InvalidInputError("extra must be the JSON text of an object", field="extra")
    try:
        loaded: Any = json.loads(extra)
    except ValueError as exc:
        raise InvalidInputError(
            f"extra must be the JSON text of an object: {exc}", field="extra"
        ) from exc
    if not isinstance(loaded, dict):
        raise InvalidInputError("extra must be a JSON object", field="extra")
    return extra


@dataclass
class ConnectionFields:
    """A connection's fields as a create or an update gives them (``KEEP``: as stored)."""

    conn_type: str | Keep = KEEP
    description: str | Keep | None = KEEP
    host: str | Keep | None = KEEP
    schema: str | Keep | None = KEEP
    login: str | Keep | None = KEEP
    password: str | Keep | None = KEEP
    port: int | Keep | None = KEEP
    extra: str | Keep | None = KEEP

    def check(self) -> None:
        """``InvalidInputError`` naming the first field that cannot be stored."""
        if not isinstance(self.conn_type, Keep):
            checked_text(self.conn_type, field="conn_type", max_length=500, required=True)
        if not isinstance(self.description, Keep):
            checked_text(self.description, field="description", max_length=5000)
        for name in ("host", "schema"):
            value = getattr(self, name)
            if not isinstance(value, Keep):
                checked_text(value, field=name, max_length=500)
        for name in ("login", "password"):
            value = getattr(self, name)
            if not isinstance(value, Keep):
                checked_text(value, field=name)
        if not isinstance(self.port, Keep) and self.port is not None:
            if isinstance(self.port, bool) or not isinstance(self.port, int):
                raise InvalidInputError("port must be an integer", field="port")
            if not 0 <= self.port <= PORT_MAX:
                raise InvalidInputError(f"port must be between 0 and {PORT_MAX}", field="port")
        if not isinstance(self.extra, Keep):
            checked_extra(self.extra)


def _apply(connection: Connection, changes: ConnectionFields, *, old_extra: str | None) -> None:
    """Set ``changes`` on ``connection`` (not saved), encrypting the secrets."""
    for field in fields(ConnectionFields):
        value = getattr(changes, field.name)
        if isinstance(value, Keep) or field.name in ("password", "extra"):
            continue
        setattr(connection, field.name, value)
    conn_id = connection.conn_id
    if not isinstance(changes.password, Keep):
        password = changes.password or None  # an empty password is no password
        connection.encrypted_password = (
            None
            if password is None
            else crypto.secret_encrypt(password, what=f"password of connection '{conn_id}'")
        )
        connection.is_encrypted = password is not None
    if not isinstance(changes.extra, Keep):
        extra = checked_extra(changes.extra)
        if extra is not None and old_extra:
            merged = redacted_merge(json.loads(extra), json.loads(old_extra))
            extra = json.dumps(merged)
        connection.encrypted_extra = (
            None
            if extra is None
            else crypto.secret_encrypt(extra, what=f"extra of connection '{conn_id}'")
        )
        connection.is_extra_encrypted = extra is not None


def connection_create(
    *, conn_id: str, values: ConnectionFields, actor: Actor | None = None
) -> Connection:
    """Store a new connection; ``ConnectionExistsError`` when ``conn_id`` is taken. Fields
    left at ``KEEP`` are empty; ``conn_type`` is required."""
    connection_id_check(conn_id)
    if isinstance(values.conn_type, Keep):
        raise InvalidInputError("conn_type is required", field="conn_type")
    values.check()
    connection = Connection(conn_id=conn_id)
    _apply(connection, values, old_extra=None)
    try:
        with transaction.atomic():
            connection.save(force_insert=True)
            event_log_record(
                actor, "post_connection", extra=_audit_fields(conn_id=conn_id, given=values)
            )
            transaction.on_commit(lambda: logger.info("connection %s created", conn_id))
    except IntegrityError as exc:
        if Connection.objects.filter(conn_id=conn_id).exists():
            raise ConnectionExistsError(
                f"A connection with conn_id '{conn_id}' already exists", conn_id=conn_id
            ) from exc
        raise
    return connection


def connection_update(
    *, conn_id: str, changes: ConnectionFields, actor: Actor | None = None
) -> Connection:
    """Change the fields of ``changes`` that are not ``KEEP``; ``ConnectionNotFoundError``
    when there is no such connection. Locks the row for the read-merge-write of the extra.

    A ``password`` of ``***`` (the mask a read shows) keeps the stored one, as Airflow's
    ``merge``: a client that sends back what it read changes no secret."""
    if changes.password == REPLACEMENT:
        changes = replace(changes, password=KEEP)
    changes.check()
    with transaction.atomic():
        connection = (
            Connection.objects.select_for_update().filter(conn_id=conn_id).order_by("pk").first()
        )
        if connection is None:
            raise ConnectionNotFoundError(f"Connection with ID {conn_id} not found")
        old_extra = None
        if not isinstance(changes.extra, Keep) and connection.encrypted_extra:
            old_extra = checked_extra(connection_secrets(connection).extra)
        _apply(connection, changes, old_extra=old_extra)
        connection.save()
        event_log_record(
            actor, "patch_connection", extra=_audit_fields(conn_id=conn_id, given=changes)
        )
        transaction.on_commit(lambda: logger.info("connection %s updated", conn_id))
    return connection


def connection_delete(*, conn_id: str, actor: Actor | None = None) -> None:
    """Delete the connection ``conn_id``; ``ConnectionNotFoundError`` when there is none."""
    with transaction.atomic():
        deleted, _ = Connection.objects.filter(conn_id=conn_id).delete()
        if not deleted:
            raise ConnectionNotFoundError(f"Connection with ID {conn_id} not found")
        event_log_record(actor, "delete_connection", extra={"connection_id": conn_id})
        transaction.on_commit(lambda: logger.info("connection %s deleted", conn_id))


def _audit_fields(*, conn_id: str, given: ConnectionFields) -> dict[str, Any]:
    """The fields given, for the event log: the password and the extra's values masked."""
    values = {
        f.name: getattr(given, f.name)
        for f in fields(given)
        if not isinstance(getattr(given, f.name), Keep)
    }
    return connection_extra(connection_id=conn_id, **values)
