"""The task log settings: a value no log could be kept or shipped with stops every process at
start-up, naming the variable."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.config.test_settings import _clean_env, load

# each case starts a Python that reads the settings: a real process
pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"TASK_LOG_MAX_BYTES": "100"},
            "TASK_LOG_MAX_BYTES must be a whole number of at least 1024, got '100'",
            id="cap-too-small",
        ),
        pytest.param(
            {"TASK_LOG_MAX_BYTES": "5MB"},
            "TASK_LOG_MAX_BYTES must be a whole number of at least 1024, got '5MB'",
            id="cap-not-a-number",
        ),
        pytest.param(
            {"TASK_LOG_CHUNK_MAX_BYTES": "10"},
            "TASK_LOG_CHUNK_MAX_BYTES must be a whole number of at least 1024, got '10'",
            id="chunk-too-small",
        ),
        pytest.param(
            {"TASK_LOG_SHIP_INTERVAL": "-1"},
            "TASK_LOG_SHIP_INTERVAL must be a number of at least 0, got '-1'",
            id="interval-negative",
        ),
        pytest.param(
            {"TASK_LOG_FLUSH_TIMEOUT": "nan"},
            "TASK_LOG_FLUSH_TIMEOUT must be a number of at least 0, got 'nan'",
            id="flush-timeout-nan",
        ),
        pytest.param(
            {"TASK_LOG_FLUSH_TIMEOUT": "inf"},
            "TASK_LOG_FLUSH_TIMEOUT must be a number of at least 0, got 'inf'",
            id="flush-timeout-infinite",
        ),
    ],
)
def test_a_task_log_setting_no_log_could_use_is_refused_at_start_up(tmp_path, env, message):
    result = load("config.settings.local", tmp_path, sign=False, **env)

    assert result.returncode != 0
    assert f"django.core.exceptions.ImproperlyConfigured: {message}" in result.stderr


def test_the_task_log_settings_default_and_come_from_the_environment(tmp_path):
    script = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.TASK_LOG_MAX_BYTES, s.TASK_LOG_CHUNK_MAX_BYTES, "
        "s.TASK_LOG_SHIP_INTERVAL, s.TASK_LOG_FLUSH_TIMEOUT]))"
    )
    env = _clean_env("config.settings.local", tmp_path)

    default = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    chosen = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "TASK_LOG_MAX_BYTES": "2048", "TASK_LOG_SHIP_INTERVAL": "0.5"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )

    assert json.loads(default.stdout) == [5242880, 262144, 1.0, 30.0]
    assert json.loads(chosen.stdout) == [2048, 262144, 0.5, 30.0]
