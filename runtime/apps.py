from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    """The processes that run things: the scheduler, the DAG processor and the worker
    (``manage.py scheduler``, ``dag_processor``, ``worker``; ``declare_dags``, whose
    ``--dags-folder`` runs the DAG processor's loader once), over the domain's services in
    ``assets_app``."""

    name = "runtime"
    verbose_name = "Runtime"
