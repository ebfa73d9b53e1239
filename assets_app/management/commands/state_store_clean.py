"""``manage.py state_store_clean``: delete the expired keys of task state stores (Airflow's
``airflow state-store clean``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from assets_app.management.base import domain_errors
from assets_app.services.state.state_stores import task_states_expired, task_states_expired_delete


class Command(BaseCommand):
    help = (
        "Delete the task state store keys whose expiry has passed (a task sets it with "
        "context['task_state_store'].set(key, value, retention=...), by default 30 days after "
        "the write; NEVER_EXPIRE keys and asset state are kept). Prints how many went. "
        "--dry-run lists them (DAG, run, task, map index, key) and deletes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="list, delete nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        with domain_errors():
            if options["dry_run"]:
                rows = task_states_expired().values_list(
                    "dag_id", "run_id", "task_id", "map_index", "key"
                )
                for dag_id, run_id, task_id, map_index, key in rows:
                    self.stdout.write(
                        f"{dag_id} {run_id} {task_id} map_index={map_index} key={key!r}"
                    )
                self.stdout.write(f"would delete {len(rows)} expired task state store key(s)")
                return
            deleted = task_states_expired_delete()
        self.stdout.write(self.style.SUCCESS(f"deleted {deleted} expired task state store key(s)"))
