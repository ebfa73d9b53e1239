"""Settings read from the environment: defaults, the kept JWT secret, production's refusals.

Each case imports a settings module in a fresh interpreter with a controlled environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live_server import REPO

# every case starts a fresh interpreter
pytestmark = pytest.mark.slow

GOOD_SECRET = "s" * 64

PRINT_SETTINGS = """
import json, sys, django
from django.conf import settings
django.setup()
from assets_app.tokens import signing_secret
db = settings.DATABASES["default"]
print(json.dumps({
    "engine": db["ENGINE"], "name": str(db["NAME"]), "options": db.get("OPTIONS", {}),
    "debug": settings.DEBUG, "append_slash": settings.APPEND_SLASH,
    "jwt_secret": signing_secret() if "--sign" in sys.argv else None,
    "heartbeat_timeout": settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT,
}))
"""


def load(
    module: str, tmp_path: Path, *, sign: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    """Import ``module`` in a fresh interpreter and print its values; with ``sign``, the
    secret tokens are signed with (which generates the kept one when none is configured)."""
    return subprocess.run(
        [sys.executable, "-c", PRINT_SETTINGS, *(["--sign"] if sign else [])],
        cwd=tmp_path,  # no .env file here
        env=_clean_env(module, tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _clean_env(module: str, tmp_path: Path, **env: str) -> dict[str, str]:
    clean = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "JWT_", "DATABASE_URL", "ASSET_REGISTRY_"))
    }
    clean.update(
        DJANGO_SETTINGS_MODULE=module,
        ASSET_REGISTRY_DATA_DIR=str(tmp_path / "var"),
        PYTHONPATH=str(REPO),
        **env,
    )
    return clean


def test_local_defaults_to_an_embedded_sqlite_database_that_queues_writers(tmp_path):
    result = load("config.settings.local", tmp_path)
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert values["engine"] == "django.db.backends.sqlite3"
    assert values["name"].endswith("db.sqlite3")
    assert values["options"]["transaction_mode"] == "IMMEDIATE"
    assert values["options"]["timeout"] > 0
    assert "journal_mode=WAL" in values["options"]["init_command"]
    assert values["debug"] is True
    assert values["append_slash"] is False


def test_heartbeat_timeout_defaults_to_airflows_300_s_and_comes_from_the_environment(tmp_path):
    default = json.loads(load("config.settings.local", tmp_path).stdout)
    configured = load("config.settings.local", tmp_path, TASK_INSTANCE_HEARTBEAT_TIMEOUT="12.5")
    assert default["heartbeat_timeout"] == 300
    assert json.loads(configured.stdout)["heartbeat_timeout"] == 12.5


def test_jwt_secret_is_generated_once_and_kept(tmp_path):
    first = json.loads(load("config.settings.local", tmp_path).stdout)["jwt_secret"]
    second = json.loads(load("config.settings.local", tmp_path).stdout)["jwt_secret"]
    assert first == second
    assert len(first.encode()) >= 64
    secret_file = tmp_path / "var" / "jwt_secret"
    assert secret_file.read_text() == first
    assert secret_file.stat().st_mode & 0o777 == 0o600  # readable by the owner only
    assert [p.name for p in secret_file.parent.iterdir()] == ["jwt_secret"]  # nothing aside


def test_jwt_secret_file_is_written_only_when_a_token_is_signed(tmp_path):
    result = load("config.settings.local", tmp_path, sign=False)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "var" / "jwt_secret").exists()


def test_jwt_secret_file_is_created_with_mode_600_whatever_the_umask(tmp_path):
    old = os.umask(0)  # the child inherits it: a plain write would make the file 0666
    try:
        result = load("config.settings.local", tmp_path)
    finally:
        os.umask(old)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "var" / "jwt_secret").stat().st_mode & 0o777 == 0o600


def test_racing_processes_share_one_kept_secret(tmp_path):
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", PRINT_SETTINGS, "--sign"],
            cwd=tmp_path,
            env=_clean_env("config.settings.local", tmp_path),
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    secrets = {json.loads(p.communicate(timeout=60)[0])["jwt_secret"] for p in processes}
    assert secrets == {(tmp_path / "var" / "jwt_secret").read_text()}


def test_jwt_secret_from_the_environment_wins(tmp_path):
    result = load("config.settings.local", tmp_path, JWT_SECRET=GOOD_SECRET)
    assert json.loads(result.stdout)["jwt_secret"] == GOOD_SECRET
    assert not (tmp_path / "var" / "jwt_secret").exists()


def test_database_url_selects_postgresql(tmp_path):
    result = load(
        "config.settings.local", tmp_path, DATABASE_URL="postgres://u:p@db.example:5433/registry"
    )
    values = json.loads(result.stdout)
    assert values["engine"] == "django.db.backends.postgresql"
    assert values["name"] == "registry"


NOT_A_URL = "ImproperlyConfigured: DATABASE_URL is not a database URL"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", NOT_A_URL),
        ("  ", NOT_A_URL),
        ("db.sqlite3", NOT_A_URL),
        ("x://admin:s3cret@db.example/registry", "'x' isn't an available database backend"),
    ],
)
def test_a_database_url_that_is_no_url_is_refused_at_start_up_without_echoing_it(
    tmp_path, value, message
):
    result = load("config.settings.local", tmp_path, DATABASE_URL=value)
    assert result.returncode != 0
    assert message in result.stderr
    assert "s3cret" not in result.stderr


@pytest.mark.parametrize(
    ("value", "threshold"), [(None, 5), ("2", 2), ("0", 0), ("none", None), (" None ", None)]
)
def test_postgresql_prepares_hot_statements_after_a_threshold_from_the_environment(
    tmp_path, value, threshold
):
    env = {} if value is None else {"DATABASE_PREPARE_THRESHOLD": value}
    result = load(
        "config.settings.local",
        tmp_path,
        DATABASE_URL="postgres://u:p@db.example:5433/registry",
        **env,
    )
    assert json.loads(result.stdout)["options"]["prepare_threshold"] == threshold


@pytest.mark.parametrize("value", ["-1", "often", "2.5"])
def test_a_bad_prepare_threshold_is_refused_at_start_up_naming_the_variable(tmp_path, value):
    result = load(
        "config.settings.local",
        tmp_path,
        DATABASE_URL="postgres://u:p@db.example:5433/registry",
        DATABASE_PREPARE_THRESHOLD=value,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"DATABASE_PREPARE_THRESHOLD must be a whole number or 'none', not {value!r}" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"JWT_SECRET": GOOD_SECRET, "DATABASE_URL": "sqlite:///x.db"},
            "DJANGO_SECRET_KEY",
            id="no-secret-key",
        ),
        pytest.param(
            {
                "DJANGO_SECRET_KEY": "short",
                "JWT_SECRET": GOOD_SECRET,
                "DATABASE_URL": "sqlite:///x.db",
            },
            "DJANGO_SECRET_KEY",
            id="short-secret-key",
        ),
        pytest.param(
            {"DJANGO_SECRET_KEY": GOOD_SECRET, "DATABASE_URL": "sqlite:///x.db"},
            "JWT_SECRET",
            id="no-jwt-secret",
        ),
        pytest.param(
            {
                "DJANGO_SECRET_KEY": GOOD_SECRET,
                "JWT_SECRET": "j" * 63,
                "DATABASE_URL": "sqlite:///x.db",
            },
            "JWT_SECRET must be set to a random string of 64+ bytes",
            id="jwt-secret-below-64-bytes",
        ),
        pytest.param(
            {"DJANGO_SECRET_KEY": GOOD_SECRET, "JWT_SECRET": GOOD_SECRET},
            "DATABASE_URL",
            id="no-database-url",
        ),
    ],
)
def test_production_refuses_to_start_without_real_secrets(tmp_path, env, message):
    result = load("config.settings.production", tmp_path, **env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr
    assert not (tmp_path / "var").exists()  # no secret file written by a refused start


def test_production_starts_with_real_secrets(tmp_path):
    result = load(
        "config.settings.production",
        tmp_path,
        DJANGO_SECRET_KEY=GOOD_SECRET,
        JWT_SECRET=GOOD_SECRET,
        DATABASE_URL=f"sqlite:///{tmp_path / 'prod.db'}",
    )
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert values["debug"] is False
    assert values["jwt_secret"] == GOOD_SECRET


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"JWT_TTL_SECONDS": "0"}, "JWT_TTL_SECONDS must be a positive number of seconds, got 0"),
        (
            {"JWT_TTL_SECONDS": "400000000"},
            "JWT_TTL_SECONDS must be at most 315360000 seconds (ten years), got 400000000",
        ),
        (
            {"JWT_LEEWAY_SECONDS": "-1"},
            "JWT_LEEWAY_SECONDS must be 0 or more and less than JWT_TTL_SECONDS (600), got -1",
        ),
    ],
)
def test_token_settings_no_token_could_use_stop_every_process_at_start_up(tmp_path, env, message):
    # django.setup() is what gunicorn's workers, manage.py and the worker all run first
    result = load("config.settings.local", tmp_path, sign=False, **env)

    assert result.returncode != 0
    assert f"django.core.exceptions.ImproperlyConfigured: {message}" in result.stderr
