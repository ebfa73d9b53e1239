"""``manage.py prune_asset_events``: delete old asset events."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from assets_app.services.asset_events import asset_events_prune


class Command(BaseCommand):
    help = (
        "Delete asset events older than N days, with their alias and DAG-run links, in "
        "batches. --dry-run only counts them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than-days", type=int, required=True, help="age in days (0 or more)"
        )
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")
        parser.add_argument("--batch-size", type=int, default=1000, help="events per transaction")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["older_than_days"]
        if days < 0:
            raise CommandError(f"--older-than-days must be 0 or more, got {days}")
        if options["batch_size"] <= 0:
            raise CommandError(f"--batch-size must be positive, got {options['batch_size']}")
        cutoff = timezone.now() - timedelta(days=days)
        count = asset_events_prune(
            older_than=cutoff, dry_run=options["dry_run"], batch_size=options["batch_size"]
        )
        verb = "Would delete" if options["dry_run"] else "Deleted"
        self.stdout.write(
            self.style.SUCCESS(f"{verb} {count} asset event(s) older than {cutoff.isoformat()}")
        )
