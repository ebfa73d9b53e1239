"""Settings for the test suite."""

from config.settings.base import *  # noqa: F403

# the demo and the docs' screenshots (manage.py demo, manage.py screenshots): not in production
INSTALLED_APPS = [*INSTALLED_APPS, "devtools"]  # noqa: F405

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
REST_FRAMEWORK = {**REST_FRAMEWORK, "TEST_REQUEST_DEFAULT_FORMAT": "json"}  # noqa: F405
LOGGING = {**LOGGING, "root": {"handlers": ["console"], "level": "WARNING"}}  # noqa: F405

# A fixed secret so that server processes started by the tests accept the tests' tokens.
EXECUTION_API = {**EXECUTION_API, "JWT_SECRET": "test-jwt-secret-" + "x" * 48}  # noqa: F405

# On SQLite the test database is a file, so that real server processes started by the tests
# (tests/live_server.py) can share it. One file per test run.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    import os
    import tempfile

    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": os.path.join(tempfile.gettempdir(), f"asset_registry_test_{os.getpid()}.sqlite3")
    }

# No FERNET_KEY set: secrets are encrypted with a key derived from SECRET_KEY (assets_app.crypto)
FERNET_KEY_DEVELOPMENT_FALLBACK = True
