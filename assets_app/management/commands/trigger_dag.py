"""``manage.py trigger_dag``: start a run of a declared DAG now, as ``airflow dags trigger``."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assets_app.management.base import domain_errors
from assets_app.services.audit import Actor
from assets_app.services.runs.dag_runs import NOW, Now, dag_run_trigger


class Command(BaseCommand):
    help = (
        "Trigger a manual run of a declared DAG: a queued run with one scheduled task instance "
        "per task, for `manage.py worker` to run (a paused DAG's run waits until it is "
        "unpaused). Prints the run id."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dag_id", help="the DAG to run")
        parser.add_argument(
            "--run-id", default=None, help="the run's id (default manual__<logical date>)"
        )
        parser.add_argument("--conf", default=None, help="the run's conf, a JSON object")
        parser.add_argument(
            "--logical-date",
            default=None,
            help="ISO 8601 with a timezone, e.g. 2026-12-01T00:00:00+00:00 (default now)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        conf = None
        if options["conf"] is not None:
            try:
                conf = json.loads(options["conf"])
            except json.JSONDecodeError as exc:
                raise CommandError(f"--conf is not valid JSON: {exc}") from exc
            if not isinstance(conf, dict):
                raise CommandError(f"--conf must be a JSON object, got {type(conf).__name__}")
        logical_date: datetime | Now = NOW  # dated now, as before
        if options["logical_date"] is not None:
            try:
                logical_date = datetime.fromisoformat(options["logical_date"])
            except ValueError as exc:
                raise CommandError(f"--logical-date is not an ISO 8601 date-time: {exc}") from exc
            if logical_date.tzinfo is None:
                raise CommandError("--logical-date needs a timezone, e.g. +00:00")
        with domain_errors():
            dag_run = dag_run_trigger(
                dag_id=options["dag_id"],
                run_id=options["run_id"],
                conf=conf,
                logical_date=logical_date,
                actor=Actor.of_command(),  # triggered_by cli, the OS user, as Airflow's CLI
            )
        count = dag_run.task_instances.count()
        self.stdout.write(
            self.style.SUCCESS(
                f"Triggered {dag_run.dag_id} run {dag_run.run_id} ({dag_run.state}, "
                f"{count} task instance(s))"
            )
        )
