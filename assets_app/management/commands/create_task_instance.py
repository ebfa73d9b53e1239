"""``manage.py create_task_instance``: a task instance for a runner, with its token."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from assets_app.management.base import domain_errors, optional_int_argument
from assets_app.models import FINISHED_TI_STATES, TaskInstanceState
from assets_app.services.runs.clearing import clear_command_hint
from assets_app.services.runs.dag_runs import (
    CREATABLE_STATES,
    task_instance_create,
    task_instance_token_issue,
    token_ttl_check,
)


class Command(BaseCommand):
    help = (
        "Create (or find) a task instance, with its DAG and DAG run when missing, and print one "
        'JSON line {"id": "<uuid>", "token": "<jwt>"} for a task runner.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dag-id", required=True, help="DAG id (created if undeclared)")
        parser.add_argument("--task-id", required=True, help="task id")
        parser.add_argument(
            "--run-id",
            required=True,
            help="run id; a prefix like scheduled__ or asset_triggered__ sets the run type "
            "(default manual)",
        )
        parser.add_argument("--map-index", type=int, default=-1, help="map index (default -1)")
        parser.add_argument(
            "--state",
            choices=[state.value for state in CREATABLE_STATES],
            default=TaskInstanceState.QUEUED,
            help="state of a new task instance (default queued)",
        )
        optional_int_argument(
            parser,
            "--max-tries",
            help="retries allowed (default: the task's declared retries, else 0)",
        )
        optional_int_argument(
            parser,
            "--ttl",
            help="token lifetime in seconds, at most ten years (default from settings)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with domain_errors():
            token_ttl_check(options["ttl"])  # before anything is written
            result = task_instance_create(
                dag_id=options["dag_id"],
                task_id=options["task_id"],
                run_id=options["run_id"],
                map_index=options["map_index"],
                state=options["state"],
                max_tries=options["max_tries"],
            )
            token = task_instance_token_issue(
                task_instance_id=result.task_instance.pk, ttl_seconds=options["ttl"]
            )
        ti = result.task_instance
        if not result.created:
            hint = ""
            if ti.state in FINISHED_TI_STATES:
                hint = f"; it is finished: to run it again, {clear_command_hint(ti)}"
            self.stderr.write(
                self.style.WARNING(
                    f"task instance {ti.pk} already existed (state {ti.state}, try "
                    f"{ti.try_number}){hint}"
                )
            )
        self.stdout.write(json.dumps({"id": str(ti.pk), "token": token}))
