"""Writes of variables (Airflow's ``Variable.set`` / ``Variable.delete``).

The value is encrypted before it reaches the database (``assets_app.crypto``); log lines
name the key, never the value.
"""

from __future__ import annotations

import json
import logging

from django.db import IntegrityError, transaction

from assets_app import crypto
from assets_app.exceptions import VariableExistsError, VariableNotFoundError
from assets_app.masking import REPLACEMENT, is_sensitive, redacted_merge
from assets_app.models import SECRET_ID_LENGTH, Variable
from assets_app.selectors.secrets import variable_value
from assets_app.services.audit import Actor, event_log_record, variable_extra
from assets_app.services.inputs import KEEP, Keep, checked_text

logger = logging.getLogger(__name__)


def variable_key_check(key: str) -> str:
    """A key that can be stored: 1 to 250 characters, no NUL."""
    return checked_text(key, field="key", max_length=SECRET_ID_LENGTH, required=True) or ""


def variable_set(
    *,
    key: str,
    value: str | None,
    description: str | Keep | None = KEEP,
    keep_masked: bool = False,
    actor: Actor | None = None,
) -> Variable:
    """Store ``value`` under ``key``, creating or replacing it (a race-safe upsert).

    ``description`` is replaced when given (Airflow's ``Variable.set`` replaces it, with
    ``None`` by default: the execution API passes it), kept as stored when ``KEEP``.
    ``keep_masked`` (the operator faces, which show values masked): a ``***`` left where the
    masked value had one keeps the stored secret (:func:`masked_value_merge`), so a value read
    and written back loses nothing. ``actor``: recorded as ``post_variable`` (a new key) or
    ``patch_variable``, the value masked.
    """
    variable_key_check(key)
    checked_text(value, field="value")
    if not isinstance(description, Keep):
        checked_text(description, field="description")
    with transaction.atomic():
        existed = actor is not None and Variable.objects.filter(key=key).exists()
        if keep_masked and value is not None:
            stored = Variable.objects.select_for_update().filter(key=key).first()
            if stored is not None:
                value = masked_value_merge(key=key, value=value, stored=variable_value(stored))
        encrypted = (
            None
            if value is None
            else crypto.secret_encrypt(value, what=f"value of variable '{key}'")
        )
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
        event_log_record(
            actor,
            "patch_variable" if existed else "post_variable",
            extra=variable_extra(
                key=key,
                value=value,
                **({} if isinstance(description, Keep) else {"description": description}),
            ),
        )
        transaction.on_commit(lambda: logger.info("variable %s set", key))
    return variable


def variable_create(
    *, key: str, value: str | None, description: str | None, actor: Actor | None = None
) -> Variable:
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
            event_log_record(
                actor,
                "post_variable",
                extra=variable_extra(key=key, value=value, description=description),
            )
            transaction.on_commit(lambda: logger.info("variable %s created", key))
    except IntegrityError as exc:
        if Variable.objects.filter(key=key).exists():
            raise VariableExistsError(
                f"A variable with key '{key}' already exists", key=key
            ) from exc
        raise
    return variable


def variable_update_description(
    *, key: str, description: str | None, actor: Actor | None = None
) -> Variable:
    """Change only the description of the variable ``key`` (``VariableNotFoundError``)."""
    checked_text(description, field="description")
    with transaction.atomic():
        updated = Variable.objects.filter(key=key).update(description=description)
        if not updated:
            raise VariableNotFoundError(f"Variable with key '{key}' not found")
        event_log_record(
            actor, "patch_variable", extra=variable_extra(key=key, description=description)
        )
        transaction.on_commit(lambda: logger.info("variable %s description changed", key))
    return Variable.objects.get(key=key)


def variable_delete(*, key: str, actor: Actor | None = None) -> int:
    """Delete the variable ``key``; the number of rows removed (0 when there was none, as
    Airflow's ``Variable.delete``)."""
    with transaction.atomic():
        deleted, _ = Variable.objects.filter(key=key).delete()
        if deleted:
            event_log_record(actor, "delete_variable", extra={"variable_key": key})
            transaction.on_commit(lambda: logger.info("variable %s deleted", key))
    return deleted


def masked_value_merge(*, key: str, value: str, stored: str | None) -> str:
    """``value`` as written back from a masked copy (``variable_masked_value``), with the
    stored secrets where it still holds ``***``: the whole value under a sensitive key; in a
    JSON object or list, each sensitive key's value (``redacted_merge``). Anything else is
    ``value`` as written."""
    if stored is None or REPLACEMENT not in value:
        return value
    if is_sensitive(key):
        return stored if value == REPLACEMENT else value
    try:
        new, old = json.loads(value), json.loads(stored)
    except ValueError:
        return value
    if not isinstance(new, dict | list):
        return value
    merged = redacted_merge(new, old)
    return value if merged == new else json.dumps(merged)
