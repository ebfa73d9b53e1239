"""Key rotation: every stored secret re-encrypted with the first ``FERNET_KEY``."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction

from assets_app import crypto
from assets_app.models import Connection, Variable

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RotationResult:
    variables: int
    connections: int


def secrets_rotate() -> RotationResult:
    """Re-encrypt every variable value and connection password and extra with the first key
    (plain-text rows, as Airflow writes them without a key, get encrypted), in one
    transaction with every row locked: a value that no configured key decrypts rolls it all
    back (``SecretDecryptError`` naming the row), so nothing is left half-rotated."""
    variables = connections = 0
    with transaction.atomic():
        for variable in Variable.objects.select_for_update().order_by("pk"):
            if variable.encrypted_val is None:
                continue
            variable.encrypted_val = crypto.secret_rotate(
                variable.encrypted_val,
                is_encrypted=variable.is_encrypted,
                what=f"value of variable '{variable.key}'",
            )
            variable.is_encrypted = True
            variable.save(update_fields=["encrypted_val", "is_encrypted"])
            variables += 1
        for connection in Connection.objects.select_for_update().order_by("pk"):
            if connection.encrypted_password is None and connection.encrypted_extra is None:
                continue
            if connection.encrypted_password is not None:
                connection.encrypted_password = crypto.secret_rotate(
                    connection.encrypted_password,
                    is_encrypted=connection.is_encrypted,
                    what=f"password of connection '{connection.conn_id}'",
                )
                connection.is_encrypted = True
            if connection.encrypted_extra is not None:
                connection.encrypted_extra = crypto.secret_rotate(
                    connection.encrypted_extra,
                    is_encrypted=connection.is_extra_encrypted,
                    what=f"extra of connection '{connection.conn_id}'",
                )
                connection.is_extra_encrypted = True
            connection.save(
                update_fields=[
                    "encrypted_password",
                    "is_encrypted",
                    "encrypted_extra",
                    "is_extra_encrypted",
                ]
            )
            connections += 1
        result = RotationResult(variables=variables, connections=connections)
        transaction.on_commit(
            lambda: logger.info(
                "re-encrypted %s variables and %s connections with the first FERNET_KEY",
                result.variables,
                result.connections,
            )
        )
    return result
