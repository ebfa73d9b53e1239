from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    """The processes that run things: the scheduler and the worker (``manage.py scheduler``,
    ``manage.py worker``), over the domain's services in ``assets_app``."""

    name = "runtime"
    verbose_name = "Runtime"
