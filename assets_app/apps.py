from django.apps import AppConfig


class AssetsAppConfig(AppConfig):
    name = "assets_app"
    verbose_name = "Assets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from assets_app import checks  # noqa: F401  (registers the system checks)
