"""Settings of the benchmarks: production's, plus statement counting. Bench only.

``config.settings.production`` (DEBUG off, INFO logging, persistent connections with health
checks) with, on PostgreSQL, the counting backend ``bench.counting_backend`` and the
``X-Bench-Statements`` middleware outermost. Production refuses to start without
``DJANGO_SECRET_KEY``, ``JWT_SECRET`` and ``DATABASE_URL``: ``bench.common.bench_environment``
sets them (the benchmark's child processes inherit them).
"""

from config.settings.production import *  # noqa: F403
from config.settings.production import DATABASES, MIDDLEWARE

DATABASES = {"default": dict(DATABASES["default"])}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["ENGINE"] = "bench.counting_backend"
    MIDDLEWARE = ["bench.middleware.StatementCountMiddleware", *MIDDLEWARE]
