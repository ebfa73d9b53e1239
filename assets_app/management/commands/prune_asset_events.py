"""``manage.py prune_asset_events``: delete old asset events, keeping those still awaited."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from assets_app.formats import timestamp_human
from assets_app.management.base import domain_errors, progress_bar
from assets_app.services.assets.events import PruneProgress, asset_events_prune


class Command(BaseCommand):
    help = (
        "Delete asset events older than N days, with their alias and DAG-run links, one "
        "transaction per batch, oldest first. An event still waiting for a consumer is kept "
        "unless --include-unconsumed: one that the next asset-triggered run of a DAG with "
        "asset_dag_run_queue rows (paused and stale DAGs included) would consume, i.e. on an "
        "asset its schedule names directly or by ref, or emitted through one of its aliases; "
        "without a partition key; consumed by no run of that DAG yet; and, if the DAG has had "
        "an asset-triggered run, stamped later than 10 minutes before the latest one was "
        "created (the scheduler never consumes older ones). Shows a progress bar when stderr "
        "is a terminal; prints a one-line summary (deleted, kept) on stdout in any case, log "
        "lines on stderr. --dry-run counts the same way and deletes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than-days", type=int, required=True, help="age in days (0 or more)"
        )
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")
        parser.add_argument("--batch-size", type=int, default=1000, help="events per transaction")
        parser.add_argument(
            "--include-unconsumed",
            action="store_true",
            help="also delete old events still waiting for a consumer DAG's next run",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["older_than_days"]
        if days < 0:
            raise CommandError(f"--older-than-days must be 0 or more, got {days}")
        if options["batch_size"] <= 0:
            raise CommandError(f"--batch-size must be positive, got {options['batch_size']}")
        cutoff = timezone.now() - timedelta(days=days)
        dry_run = options["dry_run"]
        with (
            domain_errors(),
            progress_bar(self, total=None, desc="examined", unit="event") as bar,
        ):

            def show(progress: PruneProgress) -> None:
                if bar is None:
                    return
                if bar.total is None:
                    bar.reset(total=progress.total)
                # integers as such (a dict postfix would print 20000 as 2e+4)
                done = "would delete" if dry_run else "deleted"
                bar.set_postfix_str(
                    f"{done}={progress.deleted}, kept={progress.kept_unconsumed}", refresh=False
                )
                bar.update(progress.examined - bar.n)

            result = asset_events_prune(
                older_than=cutoff,
                dry_run=dry_run,
                batch_size=options["batch_size"],
                include_unconsumed=options["include_unconsumed"],
                progress=show if bar is not None else None,
            )
        verb = "Would delete" if dry_run else "Deleted"
        kept = (
            ""
            if options["include_unconsumed"]
            else f"; kept {result.kept_unconsumed} still waiting for a consumer"
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"{verb} {result.deleted} asset event(s) older than {timestamp_human(cutoff)}{kept}"
            )
        )
