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

REPO = Path(__file__).resolve().parent.parent
GOOD_SECRET = "s" * 40

PRINT_SETTINGS = """
import json, django
from django.conf import settings
django.setup()
db = settings.DATABASES["default"]
print(json.dumps({
    "engine": db["ENGINE"], "name": str(db["NAME"]), "options": db.get("OPTIONS", {}),
    "debug": settings.DEBUG, "jwt_secret": settings.EXECUTION_API["JWT_SECRET"],
    "append_slash": settings.APPEND_SLASH,
    "heartbeat_timeout": settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT,
}))
"""


def load(module: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
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
    return subprocess.run(
        [sys.executable, "-c", PRINT_SETTINGS],
        cwd=tmp_path,  # no .env file here
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


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
    assert len(first) >= 32
    secret_file = tmp_path / "var" / "jwt_secret"
    assert secret_file.read_text() == first
    assert secret_file.stat().st_mode & 0o077 == 0  # readable by the owner only


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


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"JWT_SECRET": GOOD_SECRET, "DATABASE_URL": "sqlite:///x.db"},
            "DJANGO_SECRET_KEY",
            id="no-secret-key",
        ),
        pytest.param(
            {"DJANGO_SECRET_KEY": "short", "JWT_SECRET": GOOD_SECRET, "DATABASE_URL": "x://"},
            "DJANGO_SECRET_KEY",
            id="short-secret-key",
        ),
        pytest.param(
            {"DJANGO_SECRET_KEY": GOOD_SECRET, "DATABASE_URL": "sqlite:///x.db"},
            "JWT_SECRET",
            id="no-jwt-secret",
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
