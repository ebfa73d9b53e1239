"""``manage.py clear_task_instances``: run finished task instances again (Airflow's clear)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from assets_app.management.base import domain_errors
from assets_app.services.audit import Actor
from assets_app.services.runs.clearing import task_instances_clear, task_instances_select


class Command(BaseCommand):
    help = (
        "Clear the finished task instances of a DAG (of one run, of one task, only the failed "
        "ones): each becomes scheduled again as a new try, with its retries again, and its "
        "finished run goes back to queued. Refused, with nothing changed, if a selected task "
        "instance is running."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dag-id", required=True, help="the DAG")
        parser.add_argument("--run-id", default=None, help="only this run (default: all runs)")
        parser.add_argument("--task-id", default=None, help="only this task (default: all)")
        parser.add_argument(
            "--map-index",
            type=int,
            default=None,
            help="only this map index of a mapped task (default: all)",
        )
        parser.add_argument(
            "--only-failed",
            action="store_true",
            help="only failed and upstream_failed task instances",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="say what would be cleared; change nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with domain_errors():
            result = task_instances_clear(
                task_instances=task_instances_select(
                    dag_id=options["dag_id"],
                    run_id=options["run_id"],
                    task_id=options["task_id"],
                    only_failed=options["only_failed"],
                    map_index=options["map_index"],
                ),
                dry_run=options["dry_run"],
                actor=Actor.of_command(),
                dag_id=options["dag_id"],
                run_id=options["run_id"],
                task_id=options["task_id"],
                extra={"only_failed": options["only_failed"], "map_index": options["map_index"]},
            )
        verb = "would clear" if result.dry_run else "cleared"
        for cleared in result.cleared:
            self.stdout.write(
                f"{verb} {cleared.label}: {cleared.previous_state} → scheduled as try "
                f"{cleared.try_number} (max_tries {cleared.max_tries})"
            )
        for label, state in result.left_alone:
            self.stdout.write(f"left alone {label}: {state} (not finished)")
        for run in result.runs_requeued:
            self.stdout.write(f"{'would requeue' if result.dry_run else 'requeued'} run {run}")
        summary = (
            f"{verb} {len(result.cleared)} task instance(s), "
            f"{len(result.runs_requeued)} run(s) back to queued"
        )
        self.stdout.write(self.style.SUCCESS(summary) if result.cleared else summary)
