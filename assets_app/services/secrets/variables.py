"""Writes of variables (Airflow's ``Variable.set`` / ``Variable.delete``).

The value is encrypted before it reaches the database (``assets_app.crypto``); log lines
name the key, never the value.
"""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction

from assets_app import crypto
from assets_app.exceptions import VariableExistsError, VariableNotFoundError
from assets_app.models import SECRET_ID_LENGTH, Variable
from assets_app.services.inputs import KEEP, Keep, checked_text

logger = logging.getLogger(__name__)


def variable_key_check(key: str) -> str:
    """A key that can be stored: 1 to 250 characters, no NUL."""
    return checked_text(key, field="key", max_length=SECRET_ID_LENGTH, required=True) or ""


def variable_set(*, key: str, value: str | None, description: str | Keep | None = KEEP) -> Variable:
    """Store ``value`` under ``key``, creating or replacing it (a race-safe upsert).

    ``description`` is replaced when given (Airflow's ``Variable.set`` replaces it, with
    ``None`` by default: the execution API passes it), kept as stored when ``KEEP``.
    """
    variable_key_check(key)
    checked_text(value, field="value")
    if not isinstance(description, Keep):
        checked_text(description, field="description")
    encrypted = (
        None if value is None else crypto.secret_encrypt(value, what=f"value of variable '{key}'")
    )
    with transaction.atomic():
        row = Variable(
            key=key,
            encrypted_val=encrypted,
            is_encrypted=encrypted is not None,
            description=None if isinstance(description, Keep) else description,
        )
        update_fields = ["encrypted_val", "is_encrypted"]
        if not isinstance(description, Keep):
            update_fields.append("description")
        Variable.objects.bulk_create(
            [row], update_conflicts=True, unique_fields=["key"], update_fields=update_fields
        )
        variable = Variable.objects.get(key=key)
        transaction.on_commit(lambda: logger.info("variable %s set", key))
    return variable


def variable_create(*, key: str, value: str | None, description: str | None) -> Variable:
    """Store a new variable; ``VariableExistsError`` when ``key`` is taken (race-safe: the
    unique key decides)."""
    variable_key_check(key)
    checked_text(value, field="value")
    checked_text(description, field="description")
    encrypted = (
        None if value is None else crypto.secret_encrypt(value, what=f"value of variable '{key}'")
    )
    variable = Variable(
        key=key,
        encrypted_val=encrypted,
        is_encrypted=encrypted is not None,
        description=description,
    )
    try:
        with transaction.atomic():
            variable.save(force_insert=True)
            transaction.on_commit(lambda: logger.info("variable %s created", key))
    except IntegrityError as exc:
        if Variable.objects.filter(key=key).exists():
            raise VariableExistsError(
                f"A variable with key '{key}' already exists", key=key
            ) from exc
        raise
    return variable


def variable_update_description(*, key: str, description: str | None) -> Variable:
    """Change only the description of the variable ``key`` (``VariableNotFoundError``)."""
    checked_text(description, field="description")
    with transaction.atomic():
        updated = Variable.objects.filter(key=key).update(description=description)
        if not updated:
            raise VariableNotFoundError(f"Variable with key '{key}' not found")
        transaction.on_commit(lambda: logger.info("variable %s description changed", key))
    return Variable.objects.get(key=key)


def variable_delete(*, key: str) -> int:
    """Delete the variable ``key``; the number of rows removed (0 when there was none, as
    Airflow's ``Variable.delete``)."""
    with transaction.atomic():
        deleted, _ = Variable.objects.filter(key=key).delete()
        if deleted:
            transaction.on_commit(lambda: logger.info("variable %s deleted", key))
    return deleted
