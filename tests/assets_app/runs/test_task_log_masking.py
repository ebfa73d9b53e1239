"""Masking secrets inside text (task logs): which values Airflow's masker hides, and the
masker that hides them, whatever their number."""

from __future__ import annotations

import json
import time

import pytest

from assets_app.masking import TextMasker, secret_values
from assets_app.selectors.secrets import secrets_masker
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set


@pytest.mark.parametrize(
    ("value", "name", "expected"),
    [
        pytest.param("hunter2-long", None, ["hunter2-long"], id="no-name"),
        pytest.param("hunter2-long", "db_password", ["hunter2-long"], id="sensitive-name"),
        pytest.param("hello world", "greeting", [], id="plain-name"),
        pytest.param("abcd", None, [], id="shorter-than-5"),
        pytest.param("Airflow", None, [], id="never-masked"),
        pytest.param(
            {"api_key": "k-123456", "region": "eu-west-1", "nested": {"token": "t-123456"}},
            None,
            ["k-123456", "t-123456"],
            id="dict-by-its-keys",
        ),
        pytest.param(
            ["one-secret", "two-secret"], "passwords", ["one-secret", "two-secret"], id="list"
        ),
        pytest.param(["one-secret"], "names", [], id="list-plain-name"),
    ],
)
def test_secret_values_are_what_airflows_masker_hides(value, name, expected):
    assert list(secret_values(value, name)) == expected


def test_the_masker_hides_every_occurrence_the_longest_first():
    masker = TextMasker(["secret-1", "secret-12", "other-value"])

    assert masker.mask("a secret-12 b secret-1 c other-value secret-123") == (
        "a *** b *** c *** ***3"
    )
    assert masker.mask("nothing here") == "nothing here"
    assert TextMasker([]).mask("secret-1") == "secret-1"


def test_regex_characters_in_a_secret_are_literal():
    masker = TextMasker(["a.b*c(d)", "x|y+z?"])

    assert masker.mask("a.b*c(d) aXb*c(d) x|y+z? xy") == "*** aXb*c(d) *** xy"


def test_a_long_secret_and_thousands_of_them_compile_and_mask_fast():
    long_key = "-----BEGIN PRIVATE KEY-----" + "A" * 4000 + "-----END PRIVATE KEY-----"
    many = [f"secret-value-{n:05d}" for n in range(5000)]
    masker = TextMasker([long_key, *many])
    text = ("ordinary log line without anything in it\n" * 5000) + many[4321] + "\n" + long_key

    started = time.perf_counter()
    masked = masker.mask(text)
    took = time.perf_counter() - started

    assert masked.endswith("\n***\n***")
    assert took < 2.0  # the work per character does not grow with the number of secrets


@pytest.mark.django_db
def test_the_stored_secrets_masker_follows_what_is_stored():
    # given a connection and variables
    connection_create(
        conn_id="warehouse",
        values=ConnectionFields(
            conn_type="postgres",
            password="pg-pass-81Qz",
            extra=json.dumps({"private_key": "pk-000111222", "sslmode": "require"}),
        ),
    )
    variable_set(key="api_token", value="tok-55667788")
    variable_set(key="plain", value="not-a-secret-value")

    masker = secrets_masker()
    masked = masker.mask("pg-pass-81Qz pk-000111222 require tok-55667788 not-a-secret-value")

    # then the secrets are hidden, the rest is not; a changed secret is followed at once
    assert masked == "*** *** require *** not-a-secret-value"
    variable_set(key="api_token", value="tok-99999999")
    assert secrets_masker().mask("tok-55667788 tok-99999999") == "tok-55667788 ***"
