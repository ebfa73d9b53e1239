from django.apps import AppConfig


class DevtoolsConfig(AppConfig):
    """Development and demonstration tooling: starting server processes, ``manage.py demo``.

    Kept out of the domain app (``assets_app``): nothing here is needed to serve the registry.
    """

    name = "devtools"
    verbose_name = "Development tools"
