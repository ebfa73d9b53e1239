"""``assets_app.masking`` against Airflow's own ``SecretsMasker`` (read from the installed
``apache-airflow-core``, not restated): every string Airflow hides we hide, and what it shows
under a name that is not sensitive we show unchanged. Where Airflow leaves a number or a
boolean under a sensitive name (it replaces strings only), we hide the whole value."""

from __future__ import annotations

from typing import Any

import pytest

from assets_app.masking import REPLACEMENT, SENSITIVE_FIELDS, is_sensitive, redact, redacted_merge

secrets_masker = pytest.importorskip("airflow._shared.secrets_masker.secrets_masker")

SAMPLES: list[tuple[Any, str | None]] = [
    ({"sslmode": "require", "api_token": "t", "nested": {"Password": "p", "host": "h"}}, None),
    ({"list": [{"private_key": "k"}, "plain"], "AWS-Secret-Access-Key": "s"}, None),
    ({"proxies": {"http": "http://proxy"}, "timeout": 3, "webhook_url": "https://hook"}, None),
    ({"keyfile_dict": {"type": "service_account", "x": ["a", "b"]}}, None),
    ("value", "db_password"),
    ("value", "greeting"),
    ({"a": "b"}, "my-secret"),
]


def airflow_masker() -> Any:
    masker = secrets_masker.SecretsMasker()
    masker.sensitive_variables_fields = list(secrets_masker.DEFAULT_SENSITIVE_FIELDS)
    return masker


def leaves(value: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in leaves(item, (*path, key)).items()}
    if isinstance(value, list | tuple):
        return {
            k: v
            for index, item in enumerate(value)
            for k, v in leaves(item, (*path, index)).items()
        }
    return {path: value}


def at(value: Any, path: tuple[Any, ...]) -> Any:
    """The value at ``path``, or ``***`` when an ancestor was hidden whole."""
    for step in path:
        if value == REPLACEMENT:
            return value
        value = value[step]
    return value


def test_the_sensitive_names_are_airflows():
    assert frozenset(secrets_masker.DEFAULT_SENSITIVE_FIELDS) == SENSITIVE_FIELDS


@pytest.mark.parametrize(("value", "name"), SAMPLES)
def test_we_hide_what_airflow_hides_and_show_what_it_shows(value, name):
    theirs = airflow_masker().redact(value, name)
    ours = redact(value, name)

    for path, shown in leaves(theirs).items():
        original = at(value, path)
        if shown == REPLACEMENT and original != REPLACEMENT:
            assert at(ours, path) == REPLACEMENT, path
        elif not any(is_sensitive(step) for step in (name, *path)):
            assert at(ours, path) == original, path


@pytest.mark.parametrize("name", ["password", "DB-Password", "my api key", "x_token_y", "apikey"])
def test_sensitive_names_match_as_airflow_matches(name):
    assert is_sensitive(name) == airflow_masker().should_hide_value_for_key(name)


def test_a_masked_value_sent_back_keeps_the_stored_one():
    stored = {"token": "t-1", "a": 1, "nested": {"password": "p", "b": 2}}
    edited = {"token": REPLACEMENT, "a": 2, "nested": {"password": REPLACEMENT, "b": 3}}

    assert redacted_merge(edited, stored) == {
        "token": "t-1",
        "a": 2,
        "nested": {"password": "p", "b": 3},
    }
    # a literal *** under a name that is not sensitive is a value like any other
    assert redacted_merge({"a": REPLACEMENT}, {"a": 1}) == {"a": REPLACEMENT}
