"""Encryption at rest: FERNET_KEY lists, the development key, production's refusal, rotation."""

from __future__ import annotations

import io

import pytest
from cryptography.fernet import Fernet
from django.core.checks import run_checks
from django.core.management import CommandError, call_command

from assets_app import crypto
from assets_app.exceptions import FernetKeyMissingError, SecretDecryptError
from assets_app.models import Connection, Variable
from assets_app.selectors.secrets import (
    connection_get,
    connection_secrets,
    variable_get,
    variable_value,
)
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set

pytestmark = pytest.mark.django_db

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def _store_secrets() -> None:
    variable_set(key="v", value="variable-secret")
    connection_create(
        conn_id="c",
        values=ConnectionFields(conn_type="x", password="conn-secret", extra='{"k": "e"}'),
    )


def test_first_key_encrypts_and_every_key_decrypts(settings):
    settings.FERNET_KEYS = [OLD]
    _store_secrets()
    token = Variable.objects.get().encrypted_val or ""
    assert Fernet(OLD.encode()).decrypt(token.encode()) == b"variable-secret"

    settings.FERNET_KEYS = [NEW, OLD]  # a new key prepended: old rows still read
    assert variable_value(variable_get(key="v")) == "variable-secret"
    variable_set(key="w", value="written-after")
    new_token = Variable.objects.get(key="w").encrypted_val or ""
    assert Fernet(NEW.encode()).decrypt(new_token.encode()) == b"written-after"


def test_rotation_reencrypts_every_row_with_the_first_key(settings):
    # given secrets written with the old key, and a plain-text row as Airflow writes one
    settings.FERNET_KEYS = [OLD]
    _store_secrets()
    Variable.objects.create(key="plain", encrypted_val="plain-text", is_encrypted=False)

    # when the new key is prepended and the rotation runs
    settings.FERNET_KEYS = [NEW, OLD]
    out = io.StringIO()
    call_command("rotate_fernet_key", stdout=out)

    # then every value reads with the new key alone
    assert "Re-encrypted 2 variable(s) and 1 connection(s)" in out.getvalue()
    settings.FERNET_KEYS = [NEW]
    assert variable_value(variable_get(key="v")) == "variable-secret"
    assert variable_value(variable_get(key="plain")) == "plain-text"
    assert Variable.objects.get(key="plain").is_encrypted
    secrets = connection_secrets(connection_get(conn_id="c"))
    assert (secrets.password, secrets.extra) == ("conn-secret", '{"k": "e"}')
    settings.FERNET_KEYS = [OLD]
    with pytest.raises(SecretDecryptError):
        variable_value(variable_get(key="v"))


def test_rotation_without_the_old_key_changes_nothing(settings):
    settings.FERNET_KEYS = [OLD]
    _store_secrets()
    before = list(Connection.objects.values_list("encrypted_password", flat=True))
    settings.FERNET_KEYS = [NEW]  # the old key dropped too early

    with pytest.raises(CommandError, match="cannot be decrypted with any configured FERNET_KEY"):
        call_command("rotate_fernet_key", stdout=io.StringIO())

    assert list(Connection.objects.values_list("encrypted_password", flat=True)) == before
    settings.FERNET_KEYS = [OLD]
    assert variable_value(variable_get(key="v")) == "variable-secret"


def test_no_key_in_production_refuses_to_store_a_secret(settings):
    settings.FERNET_KEYS = []
    settings.FERNET_KEY_DEVELOPMENT_FALLBACK = False

    with pytest.raises(FernetKeyMissingError, match="password of connection 'c'"):
        connection_create(conn_id="c", values=ConnectionFields(conn_type="x", password="p"))
    with pytest.raises(FernetKeyMissingError):
        variable_set(key="v", value="x")
    # a connection without secrets needs no key
    connection_create(conn_id="plain", values=ConnectionFields(conn_type="x", host="h"))

    assert list(Connection.objects.values_list("conn_id", flat=True)) == ["plain"]
    assert not Variable.objects.exists()
    assert "assets_app.W010" in {message.id for message in run_checks()}


def test_development_fallback_derives_a_stable_key_from_the_secret_key(settings):
    settings.FERNET_KEYS = []
    settings.FERNET_KEY_DEVELOPMENT_FALLBACK = True
    _store_secrets()

    key = crypto.development_key(settings.SECRET_KEY)
    token = Variable.objects.get().encrypted_val or ""
    assert Fernet(key.encode()).decrypt(token.encode()) == b"variable-secret"
    assert "assets_app.W010" not in {message.id for message in run_checks()}


def test_a_malformed_key_is_a_check_error_that_does_not_echo_it(settings):
    settings.FERNET_KEYS = [NEW, "not-a-fernet-key-value"]

    errors = [message for message in run_checks() if message.id == "assets_app.E010"]

    assert len(errors) == 1
    assert "entry 2" in errors[0].msg
    assert "not-a-fernet-key-value" not in errors[0].msg
