"""``manage.py declare_dags FILE``: load a DAG manifest (``assets_app.services.manifest``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from assets_app.management.base import domain_errors
from assets_app.services.dags import dags_declare_from_file


class Command(BaseCommand):
    help = (
        "Load a YAML or JSON manifest of DAGs (tasks with inlets/outlets, asset schedules) and "
        "store them with their asset references, like Airflow's DAG processor. Idempotent; DAGs "
        "loaded earlier from the same file but missing now are marked stale."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="path of the manifest (.yaml/.yml, or .json)")

    def handle(self, *args: Any, **options: Any) -> None:
        with domain_errors():
            result = dags_declare_from_file(path=options["file"])
        for warning in result.warnings:
            self.stderr.write(self.style.WARNING(warning))
        stale = f"; marked stale: {', '.join(result.stale_dag_ids)}" if result.stale_dag_ids else ""
        self.stdout.write(
            self.style.SUCCESS(
                f"Declared {len(result.dag_ids)} DAG(s) from {result.fileloc}: "
                f"{result.assets_created} asset(s) created, {result.assets_updated} updated, "
                f"{result.aliases_created} alias(es) created, {result.activated} asset(s) "
                f"activated, {result.deactivated} deactivated{stale}"
            )
        )
