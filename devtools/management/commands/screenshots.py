"""``manage.py screenshots``: the admin's key pages as PNG files, for the docs.

On a scratch database (created and dropped again; the configured one is not touched) it seeds a
month of the example DAGs' history (``devtools.showcase``), serves the app from a child
gunicorn process, and renders each page in headless Chromium 1400 px wide.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test.utils import setup_test_environment, teardown_test_environment

from devtools.browser import BrowserMissingError, chromium_start, full_page_png, log_in
from devtools.processes import (
    REPO,
    ServerStartError,
    current_database_url,
    process_stop,
    server_start,
)
from devtools.showcase import GRAPH_DAG, PASSWORD, USERNAME, Showcase, showcase_seed

OUT = REPO / "docs" / "screenshots"


#: How much of a long page is shown: its top, about two screens.
TOP = 1300


def pages(showcase: Showcase) -> list[tuple[str, str, int | None]]:
    """(file name, path, height cut or None for the whole page) of every page the docs
    shows."""
    asset, dag = showcase.asset.pk, showcase.waiting_dag_id
    graph_run = showcase.graph_run.pk
    return [
        ("overview.png", "/admin/", TOP),
        ("asset.png", f"/admin/assets_app/asset/{asset}/change/", TOP),
        ("dag.png", f"/admin/assets_app/dag/{dag}/change/", 900),
        ("dag-graph.png", f"/admin/assets_app/dag/{GRAPH_DAG}/change/", 1000),
        ("run.png", f"/admin/assets_app/dagrun/{graph_run}/change/", 1000),
        ("runs.png", "/admin/assets_app/dagrun/", 900),
        ("events.png", "/admin/assets_app/assetevent/", 900),
        ("emit-event.png", f"/admin/assets_app/asset/{asset}/emit/", 600),
    ]


class Command(BaseCommand):
    help = (
        "Render the admin's key pages (overview, asset, DAG, task graph, run, runs, events, emit "
        "event) to PNG files "
        "in headless Chromium, from a scratch database seeded with a month of example history."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", default=str(OUT), help=f"directory (default {OUT})")
        parser.add_argument("--width", type=int, default=1400, help="viewport width in px")

    def handle(self, *args: Any, **options: Any) -> None:
        out = Path(options["out"])
        with tempfile.TemporaryDirectory() as scratch:
            # a database of its own, never the test runner's test_<name>
            if connection.vendor == "sqlite":  # a file, so that the server process shares it
                scratch_db = os.path.join(scratch, "db.sqlite3")
            else:
                scratch_db = f"screenshots_{connection.settings_dict['NAME']}"[:63]
            connection.settings_dict["TEST"]["NAME"] = scratch_db
            setup_test_environment()
            old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
            try:
                showcase = showcase_seed()
                written = self._capture(Path(scratch), out, options["width"], pages(showcase))
            finally:
                connection.creation.destroy_test_db(old_name, verbosity=0)
                teardown_test_environment()
        for path in written:
            self.stdout.write(f"wrote {path}")

    def _capture(
        self, scratch: Path, out: Path, width: int, targets: list[tuple[str, str, int | None]]
    ) -> list[Path]:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": settings.SETTINGS_MODULE,
            "DATABASE_URL": current_database_url(),
        }
        with (scratch / "server.log").open("wb") as log:
            try:
                process, url = server_start(env=env, stdout=log, workers=1, threads=4)
            except ServerStartError as exc:
                raise CommandError(f"{exc}:\n{(scratch / 'server.log').read_text()}") from exc
        try:
            try:
                driver = chromium_start(scratch, width=width)
            except BrowserMissingError as exc:
                raise CommandError(str(exc)) from exc
            try:
                log_in(driver, url, USERNAME, PASSWORD)
                written = []
                for name, path, max_height in targets:
                    driver.get(f"{url}{path}")
                    written.append(full_page_png(driver, out / name, max_height=max_height))
                return written
            finally:
                driver.quit()
        finally:
            process_stop(process)
