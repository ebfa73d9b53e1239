"""``manage.py issue_token TI_ID``: a fresh runner token for an existing task instance."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from assets_app.management.base import domain_errors
from assets_app.services.runs.dag_runs import task_instance_token_issue


class Command(BaseCommand):
    help = "Print a JWT that authenticates a task runner for one existing task instance."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("task_instance_id", metavar="TI_ID", help="task instance UUID")
        parser.add_argument(
            "--ttl", type=int, default=None, help="lifetime in seconds (default from settings)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with domain_errors():
            token = task_instance_token_issue(
                task_instance_id=options["task_instance_id"], ttl_seconds=options["ttl"]
            )
        self.stdout.write(token)
