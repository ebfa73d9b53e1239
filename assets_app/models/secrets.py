"""Variables and connections (Airflow's ``variable`` and ``connection`` tables), their
secrets encrypted at rest (``assets_app.crypto``)."""

from __future__ import annotations

from django.db import models

# --- variables and connections (Airflow's ``variable`` and ``connection`` tables) -------------

#: Airflow's ``ID_LEN``: the longest variable key and connection id.
SECRET_ID_LENGTH = 250


class Variable(models.Model):
    """A key → value setting that tasks read (``Variable.get``) and write.

    The value is stored encrypted (``assets_app.crypto``); read it with
    ``assets_app.selectors_secrets.variable_value``, write it with
    ``assets_app.services.variables``.
    """

    key = models.CharField(max_length=SECRET_ID_LENGTH, unique=True)
    # Fernet token of the value (plain text only when ``is_encrypted`` is false: rows
    # written by Airflow without a key); Airflow's ``val`` column
    encrypted_val = models.TextField(db_column="val", null=True, blank=True, editable=False)  # noqa: DJ001
    description = models.TextField(null=True, blank=True)  # noqa: DJ001
    is_encrypted = models.BooleanField(default=False, editable=False)

    class Meta:
        db_table = "variable"
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key


class Connection(models.Model):
    """How tasks reach an outside system (``BaseHook.get_connection``).

    ``password`` and ``extra`` are stored encrypted (``assets_app.crypto``) and shown
    nowhere but in the execution-API read of a task; read them with
    ``assets_app.selectors_secrets.connection_secrets``.
    """

    conn_id = models.CharField(max_length=SECRET_ID_LENGTH, unique=True)
    conn_type = models.CharField(max_length=500)
    description = models.TextField(max_length=5000, null=True, blank=True)  # noqa: DJ001
    host = models.CharField(max_length=500, null=True, blank=True)  # noqa: DJ001
    schema = models.CharField(max_length=500, null=True, blank=True)  # noqa: DJ001
    login = models.TextField(null=True, blank=True)  # noqa: DJ001
    # Fernet tokens (plain text only when the flag is false); Airflow's columns
    encrypted_password = models.TextField(  # noqa: DJ001
        db_column="password", null=True, blank=True, editable=False
    )
    port = models.IntegerField(null=True, blank=True)
    encrypted_extra = models.TextField(db_column="extra", null=True, blank=True, editable=False)  # noqa: DJ001
    is_encrypted = models.BooleanField(default=False, editable=False)
    is_extra_encrypted = models.BooleanField(default=False, editable=False)

    class Meta:
        db_table = "connection"
        ordering = ["conn_id"]

    def __str__(self) -> str:
        return self.conn_id

    @property
    def has_password(self) -> bool:
        return bool(self.encrypted_password)

    @property
    def has_extra(self) -> bool:
        return bool(self.encrypted_extra)
