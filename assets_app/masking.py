"""Airflow's masking of sensitive values (``airflow._shared.secrets_masker``): a value is
hidden when the name it is stored under (a variable's key, a key of a connection's extra)
contains one of :data:`SENSITIVE_FIELDS`, compared lower-case with non-word runs as ``_``.

Pure functions, no database: the operator API and the admin mask with them, and
:func:`redacted_merge` puts stored values back where an edited copy still holds ``***``.
:func:`secret_values` and :class:`TextMasker` mask secrets inside text, as Airflow's masker
does in task logs (``assets_app.services.runs.logs`` on the way in).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

REPLACEMENT = "***"

#: Airflow 3.3's ``DEFAULT_SENSITIVE_FIELDS``.
SENSITIVE_FIELDS = frozenset(
    {
        "access_key",
        "access_token",
        "api_key",
        "apikey",
        "auth_header",
        "authorization",
        "bearer",
        "connection_string",
        "dsn",
        "passphrase",
        "passwd",
        "password",
        "private_key",
        "proxy",
        "proxy_password",
        "proxies",
        "secret",
        "service_account",
        "service_key",
        "token",
        "keyfile_dict",
        "webhook_url",
    }
)

_NON_WORD = re.compile(r"\W+")


def is_sensitive(name: object) -> bool:
    """Whether a value stored under ``name`` is hidden (Airflow's ``should_hide_value_for_key``)."""
    if not isinstance(name, str):
        return False
    normalized = _NON_WORD.sub("_", name.strip().lower())
    return any(field in normalized for field in SENSITIVE_FIELDS)


def redact(value: Any, name: str | None = None) -> Any:
    """``value`` with every value under a sensitive name replaced by ``***`` (the whole value
    when ``name`` itself is sensitive), walking dicts and lists."""
    if name is not None and is_sensitive(name):
        return REPLACEMENT
    if isinstance(value, dict):
        return {key: redact(item, key) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def redacted_merge(new: Any, old: Any, name: str | None = None) -> Any:
    """``new`` with each ``***`` left at a sensitive place replaced by ``old``'s value there
    (Airflow's ``merge``, and item by item in lists of the same length, as :func:`redact`
    walks them): a client that edits a masked extra or variable keeps the hidden values."""
    if name is not None and is_sensitive(name) and new == REPLACEMENT:
        return old
    if isinstance(new, dict) and isinstance(old, dict):
        return {key: redacted_merge(item, old.get(key), key) for key, item in new.items()}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [redacted_merge(item, was) for item, was in zip(new, old, strict=True)]
    return new


# --- masking secrets in text (task logs) --------------------------------------------------------

#: Airflow's ``[logging] min_length_masked_secret``: a shorter secret is not masked in text (it
#: would hide every occurrence of a common word).
MIN_MASKED_LENGTH = 5
#: Airflow's ``SECRETS_TO_SKIP_MASKING``.
NEVER_MASKED = frozenset({"airflow"})


def secret_values(value: Any, name: str | None = None) -> Iterator[str]:
    """The strings Airflow's ``mask_secret(value, name)`` masks in log text: a string when it
    has no name or a sensitive one, the values of a dict under its own keys, the items of a
    list under ``name``; never one shorter than :data:`MIN_MASKED_LENGTH` or in
    :data:`NEVER_MASKED`."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from secret_values(item, str(key))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from secret_values(item, name)
    elif isinstance(value, str):
        if len(value) < MIN_MASKED_LENGTH or value.lower() in NEVER_MASKED:
            return
        if name is None or is_sensitive(name):
            yield value


class TextMasker:
    """Replaces every occurrence of any of ``secrets`` in a text with ``***`` (Airflow's
    ``SecretsMasker.redact`` of a log line); where two overlap, the longer one.

    The secrets are compiled into one regular expression shaped as their prefix tree, so that
    the work per character of text does not grow with the number of secrets."""

    def __init__(self, secrets: Iterable[str]) -> None:
        unique = sorted(set(secrets))
        self.pattern = re.compile(_prefix_tree_pattern(unique)) if unique else None

    def mask(self, text: str) -> str:
        if self.pattern is None:
            return text
        return self.pattern.sub(REPLACEMENT, text)


_END = ""  # marks, in a prefix tree node, that a secret ends there


def _prefix_tree_pattern(words: list[str]) -> str:
    """A regular expression matching any of ``words`` (not empty), the longest where several
    match: ``ab``, ``abc``, ``ad`` → ``a(?:b(?:c)?|d)``."""
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[_END] = {}
    return _node_pattern(tree)


def _node_pattern(node: dict[str, Any]) -> str:
    branches = []
    for char, child in sorted(node.items()):
        if char == _END:
            continue
        literal = [char]
        # a run of single children is one literal (a long secret is no deep recursion)
        while len(child) == 1 and _END not in child:
            (char, child), *_ = child.items()
            literal.append(char)
        branches.append(re.escape("".join(literal)) + _node_pattern(child))
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if _END in node else body
