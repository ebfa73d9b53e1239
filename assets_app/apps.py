from django.apps import AppConfig


class AssetsAppConfig(AppConfig):
    name = "assets_app"
    verbose_name = "Assets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from assets_app import checks  # noqa: F401  (registers the system checks)
        from assets_app.tokens import settings_check

        settings_check()  # in every process, gunicorn's too: token settings a token can use
