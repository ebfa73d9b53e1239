from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AssetsAppConfig(AppConfig):
    name = "assets_app"
    verbose_name = "Assets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from assets_app import checks  # noqa: F401  (registers the system checks)
        from assets_app.tokens import settings_check

        settings_check()  # in every process, gunicorn's too: token settings a token can use
        post_migrate.connect(_default_pool_ensure, sender=self)


def _default_pool_ensure(*, using: str = "default", **kwargs: Any) -> None:
    """After ``migrate`` (and a test's flush): ``default_pool`` exists, as Airflow's does."""
    from django.db import connections

    from assets_app.models import Pool
    from assets_app.services.runs.pools import default_pool_ensure

    tables = connections[using].introspection.table_names()
    if Pool._meta.db_table in tables:  # a migrate back to before 0025 has no pool table
        default_pool_ensure()
