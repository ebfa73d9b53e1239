"""``manage.py asset_events``: the newest asset events, as a table or as JSON lines.

It lives in ``executionapi`` because ``--json`` prints each event as the execution API
renders it (:class:`~executionapi.serializers.assets.AssetEventResponseSerializer`).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.serializers import ListSerializer

from assets_app.management.base import add_asset_arguments
from assets_app.models import AssetEvent
from assets_app.selectors.assets import asset_events_query
from executionapi.serializers.assets import AssetEventResponseSerializer

MAX_LIMIT = 10_000
EXTRA_WIDTH = 60


def _source(event: AssetEvent) -> str:
    if event.source_dag_id is None:
        return "manual"
    index = f"[{event.source_map_index}]" if event.source_map_index >= 0 else ""
    return f"{event.source_dag_id}.{event.source_task_id}{index} @ {event.source_run_id}"


def _asset(event: AssetEvent) -> str:
    if event.asset is None:
        return f"(deleted asset {event.asset_id})"
    return str(event.asset)


def _extra(event: AssetEvent) -> str:
    text = json.dumps(event.extra, sort_keys=True)
    return text if len(text) <= EXTRA_WIDTH else text[: EXTRA_WIDTH - 1] + "…"


class Command(BaseCommand):
    help = (
        "List asset events, newest first. Filters combine (AND). --json prints one JSON object "
        "per line in the execution API's asset-event item shape."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_asset_arguments(parser)
        parser.add_argument("--alias", help="alias the events were emitted through")
        parser.add_argument("--dag", help="source DAG id")
        parser.add_argument(
            "--limit", type=int, default=20, help=f"how many events (1-{MAX_LIMIT}, default 20)"
        )
        parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")

    def handle(self, *args: Any, **options: Any) -> None:
        limit = options["limit"]
        if not 1 <= limit <= MAX_LIMIT:
            raise CommandError(f"--limit must be between 1 and {MAX_LIMIT}, got {limit}")
        events = asset_events_query(
            name=options["name"],
            uri=options["uri"],
            alias=options["alias"],
            dag_id=options["dag"],
            ascending=False,
        )
        if options["json"]:
            items = ListSerializer(events[:limit], child=AssetEventResponseSerializer())
            for item in items.data:
                self.stdout.write(json.dumps(item))
            return
        # the table shows the source aliases, not the created DAG runs the query prefetches
        events = events.prefetch_related(None).prefetch_related("source_aliases")[:limit]
        rows = [
            (
                str(event.pk),
                event.timestamp.isoformat(timespec="seconds"),
                _asset(event),
                _source(event),
                ", ".join(alias.name for alias in event.source_aliases.all()) or "-",
                event.partition_key or "-",
                _extra(event),
            )
            for event in events
        ]
        if not rows:
            self.stdout.write("No asset events.")
            return
        header = ("ID", "TIMESTAMP", "ASSET", "SOURCE", "ALIASES", "PARTITION", "EXTRA")
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write(
                "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            )
