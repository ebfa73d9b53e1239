"""``manage.py celery_worker``: the Celery worker of ``EXECUTOR=celery``
(:mod:`runtime.celery_worker`). ``manage.py`` runs it before Django starts (it needs no
settings, database nor secret); this command is what ``manage.py help`` lists, and runs it
the same way when called otherwise (``call_command``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.celery_worker import main


class Command(BaseCommand):
    help = (
        "Run the ExecuteTask workloads the scheduler sends with EXECUTOR=celery, from the "
        "Celery queues --queues (default: default), --concurrency at once, each as `manage.py "
        "worker` runs a DAG file's task. Needs only CELERY_BROKER_URL, EXECUTION_API_URL and "
        "AIRFLOW__CORE__DAGS_FOLDER: no DATABASE_URL, JWT_SECRET nor DJANGO_SECRET_KEY "
        "(docs/deployment.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queues", default="default", help="comma-separated queues")
        parser.add_argument("--concurrency", type=int, default=4, help="workloads at once")
        parser.add_argument("--hostname", default="", help="the Celery node name")
        parser.add_argument("--loglevel", default="INFO", help="Celery's log level")

    def handle(self, *args: Any, **options: Any) -> None:
        argv = [
            *("--queues", options["queues"]),
            *("--concurrency", str(options["concurrency"])),
            *("--loglevel", options["loglevel"]),
        ]
        if options["hostname"]:
            argv += ["--hostname", options["hostname"]]
        code = main(argv)
        if code:
            raise CommandError(f"the Celery worker exited with {code}")
