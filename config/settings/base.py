"""Settings shared by every environment. Everything configurable comes from ``config.env``."""

import sys
from pathlib import Path

import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from config.env import BASE_DIR, env

# Generic Django classes (ModelAdmin[Asset], Paginator[...]) subscriptable at run time, as the
# type checker's stubs declare them.
django_stubs_ext.monkeypatch()

DATA_DIR = Path(env("ASSET_REGISTRY_DATA_DIR", default=str(BASE_DIR / "var")))

SECRET_KEY = env("DJANGO_SECRET_KEY", default="insecure-local-development-key")
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",  # the operator API's user tokens (manage.py drf_create_token)
    "django_filters",
    "drf_spectacular",
    "assets_app",
    "executionapi",
    "operatorapi",
    "publicapi",
    "runtime",
    "drf_spectacular_sidecar",  # Swagger UI / Redoc files served by the app, no CDN
]

# database sessions that refuse keys Django could not have made (config/sessions.py)
SESSION_ENGINE = "config.sessions"

MIDDLEWARE = [
    "config.middleware.ChunkedBodyMiddleware",  # before anything reads a body
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.login_throttle.LoginThrottleMiddleware",  # 429 for a throttled login
]

# The execution API must never redirect (the Airflow client treats 3xx as an error).
APPEND_SLASH = False

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
_db = DATABASES["default"]
if not _db.get("ENGINE"):  # empty, or no scheme django-environ knows (the URL is not echoed)
    raise ImproperlyConfigured(
        "DATABASE_URL is not a database URL: give postgres://user:password@host:5432/name or "
        "sqlite:////absolute/path.sqlite3, or leave it unset for SQLite in db.sqlite3"
    )
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # Writers queue on the database lock instead of failing with "database is locked".
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": env.int("SQLITE_TIMEOUT", default=30),
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    _db["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
    _db["CONN_HEALTH_CHECKS"] = True
    # psycopg prepares a hand-written hot-path statement after this many runs on a connection
    # (assets_app.services.sql.statements_cursor; the ORM's are never prepared). Set
    # DATABASE_PREPARE_THRESHOLD=none behind a pooler that cannot keep prepared statements
    # (PgBouncer before 1.21 in transaction mode).
    _threshold = env.str("DATABASE_PREPARE_THRESHOLD", default="5").strip().lower()
    if _threshold != "none" and not _threshold.isdigit():
        raise ImproperlyConfigured(
            f"DATABASE_PREPARE_THRESHOLD must be a whole number or 'none', not {_threshold!r}"
        )
    _db.setdefault("OPTIONS", {})["prepare_threshold"] = (
        None if _threshold == "none" else int(_threshold)
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# one timestamp format everywhere (the admin): with seconds and the time zone
FORMAT_MODULE_PATH = ["assets_app.formats"]

STATIC_URL = "static/"
# Only needed for `collectstatic`; unset, the files are served from the installed apps.
STATIC_ROOT = env("DJANGO_STATIC_ROOT", default=None)
# The admin's static files are served by the app itself (WhiteNoise), straight from the
# installed apps unless `collectstatic` has filled STATIC_ROOT.
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    # one handler for the execution API's error shapes
    "EXCEPTION_HANDLER": "executionapi.exceptions.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Asset registry execution API",
    "DESCRIPTION": "Wire-compatible with Apache Airflow 3's task execution API.",
    "VERSION": "2026-06-30",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {"OutletTypeEnum": "executionapi.serializers.outlets.OUTLET_TYPES"},
    "COMPONENT_SPLIT_PATCH": False,  # PATCH bodies here are whole payloads, not partial updates
    # this default schema is the execution API's; the operator API serves its own
    "PREPROCESSING_HOOKS": ["operatorapi.schema.exclude_operator_api"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",  # the default
        "executionapi.schema.request_bodies_required",
        "executionapi.schema.nullable_answers",
    ],
}

OPERATOR_API = {
    # rows per page of the /api/v1/ lists, unless ?page_size= asks for another number up to MAX
    "PAGE_SIZE": env.int("OPERATOR_API_PAGE_SIZE", default=100),
    "MAX_PAGE_SIZE": env.int("OPERATOR_API_MAX_PAGE_SIZE", default=1000),
    # largest `extra` (bytes of compact JSON) accepted by POST /api/v1/asset-events
    "MAX_EXTRA_BYTES": env.int("OPERATOR_API_MAX_EXTRA_BYTES", default=64 * 1024),
}


# Slowing down password guessing on every face that takes a password (/auth/token,
# /auth/token/cli, the admin's login): after USER_FAILURES
# failed logins of one user from one client address (or ADDRESS_FAILURES from one address for
# any users), each further try waits BASE_SECONDS, doubled per failure up to MAX_SECONDS, and
# is answered 429 with Retry-After without checking the password. A success resets the user's
# count; counts lapse after MAX_SECONDS without failures (docs/deployment.md, "Logins").
LOGIN_THROTTLE = {
    "USER_FAILURES": env.int("LOGIN_THROTTLE_USER_FAILURES", default=5),
    "ADDRESS_FAILURES": env.int("LOGIN_THROTTLE_ADDRESS_FAILURES", default=50),
    "BASE_SECONDS": env.float("LOGIN_THROTTLE_BASE_SECONDS", default=1.0),
    "MAX_SECONDS": env.float("LOGIN_THROTTLE_MAX_SECONDS", default=900.0),
    # password hashes a server process computes at once; a login waiting longer is a 429
    "CONCURRENT_CHECKS": env.int("LOGIN_THROTTLE_CONCURRENT_CHECKS", default=2),
    "CHECK_WAIT_SECONDS": env.float("LOGIN_THROTTLE_CHECK_WAIT_SECONDS", default=10.0),
}

AUTHENTICATION_BACKENDS = ["config.login_throttle.ThrottledModelBackend"]

# How long a request of the execution API or /api/v2/ is run again while the database is
# unavailable (a restart, a failover) before it is answered 503 with Retry-After
# (assets_app.edge.outage)
DATABASE_OUTAGE_RETRY_SECONDS = env.float("DATABASE_OUTAGE_RETRY_SECONDS", default=30.0)

EXECUTION_API = {
    # The signing secret of task tokens. Empty: one is generated when a token is first signed
    # or checked, and kept in DATA_DIR/jwt_secret (assets_app.tokens.signing_secret).
    "JWT_SECRET": env("JWT_SECRET", default=""),
    "JWT_AUDIENCE": env("JWT_AUDIENCE", default="urn:airflow.apache.org:task"),
    "JWT_ISSUER": env("JWT_ISSUER", default=""),
    "JWT_TTL_SECONDS": env.int("JWT_TTL_SECONDS", default=600),
    "JWT_LEEWAY_SECONDS": env.int("JWT_LEEWAY_SECONDS", default=5),
    # Largest number of outlet events accepted in one state patch.
    "MAX_OUTLET_EVENTS": env.int("EXECUTION_API_MAX_OUTLET_EVENTS", default=10_000),
}
# Largest `extra` (and `dest_asset_extra`) of an asset event, in bytes of compact JSON, that a
# task may report; bigger → 422 naming the event. Airflow has no cap: keep it generous.
ASSET_EVENT_EXTRA_MAX_BYTES = env.int("ASSET_EVENT_EXTRA_MAX_BYTES", default=1024 * 1024)
# Seconds without a heartbeat (or, before the first, since its start) after which the scheduler
# fails a running task instance, or sets it up_for_retry while tries remain (Airflow's
# [scheduler] task_instance_heartbeat_timeout).
TASK_INSTANCE_HEARTBEAT_TIMEOUT = env.float("TASK_INSTANCE_HEARTBEAT_TIMEOUT", default=300.0)
# Seconds a task instance may stay queued (claimed or created for an outside runner) without
# its runner starting it; then the scheduler fails it, or sets it up_for_retry while tries
# remain (Airflow's [scheduler] task_queued_timeout).
TASK_QUEUED_TIMEOUT = env.float("TASK_QUEUED_TIMEOUT", default=600.0)
# The most map indexes one mapped task may expand into (Airflow's [core] max_map_length, read
# from AIRFLOW__CORE__MAX_MAP_LENGTH too): a task pushing more for a mapped downstream fails.
MAX_MAP_LENGTH = env.int(
    "MAX_MAP_LENGTH", default=env.int("AIRFLOW__CORE__MAX_MAP_LENGTH", default=1024)
)
# Who runs task instances: "local" (`manage.py worker` processes claim them from the
# database) or "celery" (the scheduler sends each to Celery as Airflow's ExecuteTask workload,
# on its task's queue, through CELERY_BROKER_URL (amqp://… or redis://…); `manage.py
# celery_worker` runs them: docs/deployment.md). CELERY_VISIBILITY_TIMEOUT: seconds before Redis
# hands an unacknowledged message to another worker.
EXECUTOR = env.str("EXECUTOR", default="local").strip().lower()
if EXECUTOR not in ("local", "celery"):
    raise ImproperlyConfigured(f"EXECUTOR: expected local or celery, got {EXECUTOR!r}")
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="")
CELERY_VISIBILITY_TIMEOUT = env.int("CELERY_VISIBILITY_TIMEOUT", default=21600)
# The most triggers one ``manage.py triggerer`` runs at once (Airflow's [triggerer] capacity;
# its --capacity overrides it), and the seconds without a heartbeat after which a triggerer
# counts as dead and its triggers move to a live one (Airflow's [triggerer]
# triggerer_health_check_threshold). docs/triggerer.md
TRIGGERER_CAPACITY = env.int("TRIGGERER_CAPACITY", default=1000)
TRIGGERER_HEALTH_CHECK_THRESHOLD = env.float("TRIGGERER_HEALTH_CHECK_THRESHOLD", default=30.0)
# Where ``manage.py worker`` sends task instances' API calls (the server's root URL), and where
# it writes one log file per task-instance try.
EXECUTION_API_URL = env("EXECUTION_API_URL", default="http://127.0.0.1:8000")
WORKER_LOG_DIR = Path(env("WORKER_LOG_DIR", default=str(DATA_DIR / "task_logs")))
# The worker's warm parent (runtime.warm): DAG-file tasks forked from a process that imported
# Airflow once (WORKER_WARM_PYTHON runs it; default: this interpreter), started again after
# WORKER_WARM_MAX_TASKS forks or above WORKER_WARM_MAX_MEMORY_MB of PSS. Off: a new process
# per task, as before.
WORKER_WARM = env.bool("WORKER_WARM", default=True)
WORKER_WARM_PYTHON = env("WORKER_WARM_PYTHON", default=sys.executable)
WORKER_WARM_MAX_TASKS = env.int("WORKER_WARM_MAX_TASKS", default=1000)
WORKER_WARM_MAX_MEMORY_MB = env.int("WORKER_WARM_MAX_MEMORY_MB", default=1024)

# The DAG-file loader (runtime.dag_processing): Airflow's parser runs in a subprocess
# under DAG_PARSER_PYTHON (an interpreter with apache-airflow-core; default: this one), one
# file per process, DAG_PARSER_PROCESSES at a time ([dag_processor] parsing_processes).
# DAGBAG_IMPORT_TIMEOUT is Airflow's [core] dagbag_import_timeout (the import itself),
# DAG_FILE_PROCESSOR_TIMEOUT its [dag_processor] dag_file_processor_timeout (the process is
# killed after it); DAGS_ARE_PAUSED_AT_CREATION is [core] dags_are_paused_at_creation.
DAG_PARSER_PYTHON = env("DAG_PARSER_PYTHON", default=sys.executable)
DAG_PARSER_PROCESSES = env.int("DAG_PARSER_PROCESSES", default=2)
DAG_PARSER_HOME = Path(env("DAG_PARSER_HOME", default=str(DATA_DIR / "dag_parser")))
DAGBAG_IMPORT_TIMEOUT = env.float("DAGBAG_IMPORT_TIMEOUT", default=30.0)
DAG_FILE_PROCESSOR_TIMEOUT = env.float("DAG_FILE_PROCESSOR_TIMEOUT", default=50.0)
DAGS_ARE_PAUSED_AT_CREATION = env.bool("DAGS_ARE_PAUSED_AT_CREATION", default=True)

# Mail of a task's email_on_failure / email_on_retry (docs/configuration.md): Django's email
# backend; the console backend (the process's stdout) unless an SMTP server is set up
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
EMAIL_TIMEOUT = env.float("EMAIL_TIMEOUT", default=30.0)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="airflow@example.com")
# Largest request body (bytes) the app reads; bigger bodies get 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("EXECUTION_API_MAX_BODY_BYTES", default=20 * 1024 * 1024)

# Task logs (docs/worker.md, "Reading a task's log"): the worker ships each try's log to the
# server while it runs, every TASK_LOG_SHIP_INTERVAL seconds (0: not at all), in chunks of at
# most TASK_LOG_CHUNK_MAX_BYTES (the server refuses bigger ones; the worker sends smaller ones
# when a chunk's JSON would not fit EXECUTION_API_MAX_BODY_BYTES); at the end of a try, or when
# the worker stops, it waits up to TASK_LOG_FLUSH_TIMEOUT seconds for the rest to be sent. The
# server keeps at most TASK_LOG_MAX_BYTES per try, then a line saying the log was truncated.


def _task_log_setting(name: str, default: float, *, least: float, whole: bool = False) -> float:
    """The variable ``name`` as a finite number (``whole``: a whole number) of at least
    ``least``; else ``ImproperlyConfigured`` naming it."""
    raw = env.str(name, default=str(default)).strip()
    try:
        value = float(int(raw)) if whole else float(raw)
    except ValueError:
        value = float("nan")
    if not least <= value < float("inf"):  # NaN fails too
        what = "a whole number" if whole else "a number"
        raise ImproperlyConfigured(f"{name} must be {what} of at least {least:g}, got {raw!r}")
    return value


TASK_LOG_MAX_BYTES = int(_task_log_setting("TASK_LOG_MAX_BYTES", 5242880, least=1024, whole=True))
TASK_LOG_CHUNK_MAX_BYTES = int(
    _task_log_setting("TASK_LOG_CHUNK_MAX_BYTES", 262144, least=1024, whole=True)
)
TASK_LOG_SHIP_INTERVAL = _task_log_setting("TASK_LOG_SHIP_INTERVAL", 1.0, least=0)
TASK_LOG_FLUSH_TIMEOUT = _task_log_setting("TASK_LOG_FLUSH_TIMEOUT", 30.0, least=0)

# Encryption at rest of variable values and connection passwords and extras (assets_app.crypto):
# FERNET_KEY is one Fernet key or a comma-separated list, the first encrypting, all decrypting
# (rotate with `manage.py rotate_fernet_key`). With none set, production refuses to store a
# secret; local development and the tests derive a key from SECRET_KEY instead.
FERNET_KEYS = env.list("FERNET_KEY", default=[])
FERNET_KEY_DEVELOPMENT_FALLBACK = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("DJANGO_LOG_LEVEL", default="INFO")},
}
