"""``manage.py create_asset_event``: an operator's manual event on an existing asset."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assets_app.management.base import add_asset_arguments, domain_errors
from assets_app.services.assets.events import asset_event_create_manual
from assets_app.services.audit import Actor


class Command(BaseCommand):
    help = (
        "Record a manual asset event (no source task) on an existing asset, found by name "
        "and/or uri, and queue the DAGs scheduled on it. Prints the event id."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_asset_arguments(parser)
        parser.add_argument("--extra", default="{}", help="event extra, a JSON object (default {})")
        parser.add_argument("--partition-key", default=None, help="optional partition key")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["name"] and not options["uri"]:
            raise CommandError("give --name, --uri or both")
        try:
            extra = json.loads(options["extra"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--extra is not valid JSON: {exc}") from exc
        if not isinstance(extra, dict):
            raise CommandError(f"--extra must be a JSON object, got {type(extra).__name__}")
        with domain_errors():
            event = asset_event_create_manual(
                name=options["name"],
                uri=options["uri"],
                extra=extra,
                partition_key=options["partition_key"],
                actor=Actor.of_command(),
            )
        self.stdout.write(self.style.SUCCESS(f"Created asset event {event.pk} on {event.asset}"))
