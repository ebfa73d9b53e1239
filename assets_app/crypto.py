"""Encryption at rest of variable values and connection passwords and extras: the one module
that owns the Fernet key.

Airflow's ``[core] fernet_key`` semantics: ``FERNET_KEY`` holds one key or a comma-separated
list (``new,old``). The first key encrypts; every key decrypts (``MultiFernet``), so a key is
rotated by prepending the new one, running ``manage.py rotate_fernet_key`` (which re-encrypts
every row with the first key) and then dropping the old one.

With no key configured:

- local development and the test suite (``FERNET_KEY_DEVELOPMENT_FALLBACK = True``) use a key
  derived from ``SECRET_KEY``, so that secrets are still never stored in plain text;
- production refuses to store a secret (:class:`FernetKeyMissingError`) instead of writing it
  in plain text as Airflow does; the system check ``assets_app.W010`` says so at start-up.

Values are text in and text out; a ``None`` secret is stored as ``None``, unencrypted.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from assets_app.exceptions import FernetKeyMissingError, SecretDecryptError

logger = logging.getLogger(__name__)

_DERIVATION_SALT = b"asset-registry development fernet key\x00"


def configured_keys() -> list[str]:
    """The keys of ``settings.FERNET_KEYS`` (blank entries dropped), first one encrypting."""
    keys = getattr(settings, "FERNET_KEYS", [])
    if isinstance(keys, str):
        keys = keys.split(",")
    return [key.strip() for key in keys if key and key.strip()]


def development_key(secret_key: str) -> str:
    """The key used when none is configured outside production: derived from ``SECRET_KEY``
    (SHA-256), so that every process of one installation agrees on it."""
    digest = hashlib.sha256(_DERIVATION_SALT + secret_key.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()


def key_problems(keys: list[str]) -> list[str]:
    """Why each unusable key cannot be a Fernet key (by position, never echoing the key)."""
    problems = []
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key.encode())
        except (ValueError, TypeError):
            problems.append(
                f"FERNET_KEY entry {position} is not a Fernet key (32 url-safe base64-encoded "
                "bytes; make one with `python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`)"
            )
    return problems


def is_configured() -> bool:
    """Whether secrets can be encrypted: a key is set, or the development fallback is on."""
    return bool(configured_keys()) or bool(
        getattr(settings, "FERNET_KEY_DEVELOPMENT_FALLBACK", False)
    )


@lru_cache(maxsize=8)
def _multi_fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in keys])


def _fernet() -> MultiFernet | None:
    keys = configured_keys()
    if not keys and getattr(settings, "FERNET_KEY_DEVELOPMENT_FALLBACK", False):
        keys = [development_key(settings.SECRET_KEY)]
    if not keys:
        return None
    return _multi_fernet(tuple(keys))


def secret_encrypt(value: str, *, what: str) -> str:
    """``value`` encrypted with the first key; ``what`` ("connection 'x' password") names it
    in the error raised when no key is configured."""
    fernet = _fernet()
    if fernet is None:
        raise FernetKeyMissingError(
            f"Cannot store the {what}: {FernetKeyMissingError.default_message}"
        )
    return fernet.encrypt(value.encode("utf-8")).decode("ascii")


def secret_decrypt(stored: str, *, is_encrypted: bool, what: str) -> str:
    """The plain text of a stored secret (stored as is when ``is_encrypted`` is false, as rows
    written by Airflow without a key are)."""
    if not is_encrypted:
        return stored
    fernet = _fernet()
    if fernet is None:
        raise SecretDecryptError(
            f"The {what} is encrypted but no FERNET_KEY is configured to decrypt it"
        )
    try:
        return fernet.decrypt(stored.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError) as exc:
        logger.error("the %s cannot be decrypted with any configured FERNET_KEY", what)
        raise SecretDecryptError(
            f"The {what} cannot be decrypted with any configured FERNET_KEY (was the key "
            "that encrypted it removed from the list?)"
        ) from exc


def secret_rotate(stored: str, *, is_encrypted: bool, what: str) -> str:
    """``stored`` re-encrypted with the first key (a plain-text value encrypted)."""
    fernet = _fernet()
    if fernet is None:
        raise FernetKeyMissingError(
            f"Cannot re-encrypt the {what}: {FernetKeyMissingError.default_message}"
        )
    if not is_encrypted:
        return secret_encrypt(stored, what=what)
    try:
        return fernet.rotate(stored.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeError) as exc:
        raise SecretDecryptError(
            f"The {what} cannot be decrypted with any configured FERNET_KEY, so it cannot be "
            "re-encrypted (keep the old key in the list until the rotation is done)"
        ) from exc
