"""``manage.py demo``: the seed scenario end to end on the configured database.

Declares the seed's four example DAGs, serves the app from a child gunicorn process on a free
port, runs the two producer tasks (``examples/tasks/seed_producers.py``) through the real
task_sdk supervisor → HTTP → execution API path and prints what was recorded; one scheduler
pass turns the queued consumers into asset-triggered runs, and the worker
(``runtime.worker``) runs their tasks (``examples/tasks/seed_consumers.py``), which read
the events that triggered them. Ends with the chain: producer → event → consumer run → what
the consumer read.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from assets_app.models import (
    Asset,
    AssetActive,
    AssetAliasAsset,
    AssetDagRunQueue,
    AssetEvent,
    DagRunAssetEvent,
    DagRunType,
    DagTask,
    TaskInstance,
)
from assets_app.services.runs.dag_runs import task_instance_create, task_instance_token_issue
from assets_app.services.scheduling.scheduler import scheduler_pass
from config.env import BASE_DIR
from devtools.processes import (
    ServerStartError,
    current_database_url,
    process_stop,
    server_start,
)
from runtime.worker import TaskOutcome, Worker
from task_sdk.client import Client
from task_sdk.supervisor import Supervisor

REPO = BASE_DIR
MANIFEST = REPO / "examples" / "dags.yaml"
#: (dag_id, task_id): the seed's producers, in the seed's order; their code is the manifest's
#: ``callable``.
PRODUCERS = [
    ("asset_s3_bucket_producer", "produce_asset_events"),
    ("asset_alias_example_alias_producer", "produce_asset_events_through_asset_alias"),
]


@contextmanager
def _serve() -> Iterator[str]:
    """The app served by gunicorn in a child process; yields its URL."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings.SETTINGS_MODULE,
        "DATABASE_URL": current_database_url(),
    }
    with tempfile.TemporaryFile() as log:
        try:
            process, url = server_start(env=env, stdout=log, workers=1, threads=4)
        except ServerStartError as exc:
            log.seek(0)
            raise CommandError(f"{exc}:\n{log.read().decode(errors='replace')}") from exc
        try:
            yield url
        finally:
            process_stop(process)


class Command(BaseCommand):
    help = (
        "Run the seed scenario: declare the example DAGs, serve the app on a free port, run "
        "the two producer tasks through task_sdk, and print the recorded assets, alias "
        "mappings, events and queued consumers; run one scheduler pass that turns the queued "
        "consumers into asset-triggered DAG runs, and a worker that runs their tasks; print "
        "the chain producer → event → consumer run → what it read."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--manifest", default=str(MANIFEST), help=f"DAG manifest (default {MANIFEST})"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # the task logs are printed below; keep per-request and per-line log records quiet
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("task_sdk.task").setLevel(logging.WARNING)
        call_command("declare_dags", options["manifest"], stdout=self.stdout)
        run_id = DagRunType.MANUAL.generate_run_id(suffix=f"demo_{timezone.now():%Y%m%dT%H%M%S%f}")
        with _serve() as url, tempfile.TemporaryDirectory(prefix="demo-logs-") as logs:
            self.stdout.write(f"server listening on {url}")
            producers = [self._run_producer(url, run_id, *producer) for producer in PRODUCERS]
            self._report(run_id, producers)
            self._schedule()
            consumers = self._run_consumers(url, Path(logs))
            self._chain(producers, consumers)

    def _run_producer(self, url: str, run_id: str, dag_id: str, task_id: str) -> TaskInstance:
        code = DagTask.objects.filter(dag_id=dag_id, task_id=task_id).first()
        if code is None or not code.callable:
            raise CommandError(f"the manifest names no callable for {dag_id}.{task_id}")
        ti = task_instance_create(dag_id=dag_id, task_id=task_id, run_id=run_id).task_instance
        token = task_instance_token_issue(task_instance_id=ti.pk)
        self.stdout.write(f"\nrunning {dag_id}.{task_id} (task instance {ti.pk})")
        with Client(url, token) as client:
            result = Supervisor(client, str(ti.pk), code.callable, task_id=task_id).run()
        for line in result.log:
            self.stdout.write(f"  | {line}")
        if not result.succeeded:
            raise CommandError(f"{dag_id}.{task_id} did not succeed: {result.reason}")
        self.stdout.write(self.style.SUCCESS(f"  -> {result.state}"))
        return ti

    def _report(self, run_id: str, task_instances: list[TaskInstance]) -> None:
        write = self.stdout.write
        write("\nTask instances:")
        tis = TaskInstance.objects.filter(pk__in=[t.pk for t in task_instances])
        for ti in tis.order_by("start_date"):
            write(f"  {ti.dag_id}.{ti.task_id}: {ti.state} (duration {ti.duration}s)")

        write("\nAssets (asset):")
        active = set(AssetActive.objects.values_list("asset_id", flat=True))
        for asset in Asset.objects.order_by("id"):
            flag = "active" if asset.pk in active else "inactive"
            write(f"  #{asset.pk} name={asset.name!r} uri={asset.uri!r} ({flag})")

        write("\nAlias → asset mappings (asset_alias_asset):")
        for link in AssetAliasAsset.objects.select_related("alias", "asset").order_by("id"):
            write(f"  {link.alias.name} → {link.asset.uri}")

        write(f"\nAsset events of run {run_id} (asset_event, asset_alias_asset_event):")
        events = (
            AssetEvent.objects.filter(source_run_id=run_id)
            .select_related("asset")
            .prefetch_related("source_aliases")
            .order_by("id")
        )
        for event in events:
            aliases = ", ".join(a.name for a in event.source_aliases.all()) or "none"
            uri = event.asset.uri if event.asset else "(deleted asset)"
            write(
                f"  #{event.pk} {uri} from {event.source_dag_id}."
                f"{event.source_task_id} extra={event.extra} source aliases: {aliases}"
            )

        write("\nQueued consumers (asset_dag_run_queue):")
        queue = AssetDagRunQueue.objects.select_related("asset").order_by("target_dag_id")
        for row in queue:
            write(f"  {row.target_dag_id} waits on {row.asset.uri}")
        if not queue:
            write("  none")

    def _schedule(self) -> None:
        """One scheduler pass: the queued consumers become asset-triggered runs."""
        write = self.stdout.write
        write("\nScheduler pass (manage.py scheduler --once):")
        created = scheduler_pass().created
        for run in created:
            write(
                f"  created {run.dag_id} {run.run_id}: consumed event(s) "
                f"{', '.join(f'#{pk}' for pk in run.event_ids)}, "
                f"scheduled task(s) {', '.join(run.task_ids) or 'none'}"
            )
        if not created:
            write("  no consumer was ready")

    def _run_consumers(self, url: str, log_dir: Path) -> list[TaskOutcome]:
        """The worker (as ``manage.py worker --once``) runs the consumer runs' tasks."""
        write = self.stdout.write
        write(f"\nWorker (manage.py worker --once --server {url}):")
        worker = Worker(
            server=url, log_dir=log_dir, once=True, report=lambda line: write(f"  {line}")
        )
        outcomes = worker.run().outcomes
        for outcome in outcomes:
            write(f"\n  output of {outcome.label}:")
            for line in _task_output(outcome):
                write(f"  | {line}")
        failed = [o for o in outcomes if o.state != "success"]
        if failed:
            raise CommandError(
                "consumer task(s) did not succeed: "
                + "; ".join(f"{o.label}: {o.state} {o.detail}" for o in failed)
            )
        return outcomes

    def _chain(self, producers: list[TaskInstance], consumers: list[TaskOutcome]) -> None:
        """producer → event → consumer run → what the consumer read, one block per run."""
        write = self.stdout.write
        write("\nThe chain (producer → event → consumer run → what it read):")
        outcomes = {outcome.task_instance_id: outcome for outcome in consumers}
        links = (
            DagRunAssetEvent.objects.select_related("event__asset", "dag_run")
            .prefetch_related("event__source_aliases", "dag_run__task_instances")
            .filter(event__source_run_id__in={ti.run_id for ti in producers})
            .order_by("dag_run__dag_id", "event_id")
        )
        by_run: dict[int, list[DagRunAssetEvent]] = {}
        for link in links:
            by_run.setdefault(link.dag_run_id, []).append(link)
        for run_links in by_run.values():
            for link in run_links:
                event = link.event
                aliases = ", ".join(a.name for a in event.source_aliases.all())
                asset = event.asset.uri if event.asset else f"deleted asset #{event.asset_id}"
                write(
                    f"  {event.source_dag_id}.{event.source_task_id} → event #{event.pk} on "
                    f"{asset}" + (f" (through {aliases})" if aliases else "")
                )
            run = run_links[0].dag_run
            write(f"    → {run.dag_id} {run.run_id} (run {run.state})")
            for ti in run.task_instances.all():
                outcome = outcomes.get(str(ti.pk))
                read = [
                    line.removeprefix("consumed ")
                    for line in (_task_output(outcome) if outcome else [])
                    if line.startswith("consumed ")
                ]
                write(f"    → {ti.task_id}: {ti.state}; it read {len(read)} event(s):")
                for line in read:
                    write(f"        {line}")


def _task_output(outcome: TaskOutcome) -> list[str]:
    """What the task printed, from its task_sdk log (``… task_sdk.task: [stdout] …``)."""
    if outcome.log_path is None:
        return []
    marker = "task_sdk.task: [stdout] "
    log = outcome.log_path.read_text(errors="replace")
    return [line.split(marker, 1)[1] for line in log.splitlines() if marker in line]
