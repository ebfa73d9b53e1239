"""``manage.py pools list|get|set|delete|import|export``: Airflow's ``airflow pools`` commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assets_app.management.base import domain_errors
from assets_app.models import Pool
from assets_app.selectors.runs import pool_get, pool_list, pools_slots
from assets_app.services.audit import Actor
from assets_app.services.runs.pools import (
    PoolSpec,
    pool_delete,
    pool_set,
    pools_export,
    pools_import,
)


class Command(BaseCommand):
    help = (
        "Manage the pools task instances take slots of (docs/pools.md): list, get NAME, "
        "set NAME SLOTS DESCRIPTION [--include-deferred], delete NAME, import FILE, export FILE."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        listing = sub.add_parser("list", help="list the pools with their used and open slots")
        listing.add_argument("--json", action="store_true", help="one JSON array of objects")
        get = sub.add_parser("get", help="show one pool")
        get.add_argument("name")
        get.add_argument("--json", action="store_true", help="one JSON object")
        set_ = sub.add_parser("set", help="create or replace a pool")
        set_.add_argument("name")
        set_.add_argument("slots", help="how many slots (-1: unlimited)")
        set_.add_argument("description")
        set_.add_argument(
            "--include-deferred",
            action="store_true",
            help="deferred task instances take slots too",
        )
        delete = sub.add_parser("delete", help="delete a pool (never default_pool)")
        delete.add_argument("name")
        import_ = sub.add_parser(
            "import",
            help='set the pools of a JSON file {"NAME": {"slots": N, "description": "...", '
            '"include_deferred": false}} (all or none)',
        )
        import_.add_argument("file")
        export = sub.add_parser("export", help="write every pool to a JSON file (import's shape)")
        export.add_argument("file")

    def handle(self, *args: Any, **options: Any) -> None:
        with domain_errors():
            getattr(self, f"_{options['action']}")(options)

    def _rows(self, pools: list[Pool]) -> list[dict[str, Any]]:
        slots = pools_slots(pool.pool for pool in pools)
        return [
            {
                "pool": pool.pool,
                "slots": pool.slots,
                "description": pool.description,
                "include_deferred": pool.include_deferred,
                "running": slots[pool.pool].running,
                "queued": slots[pool.pool].queued,
                "scheduled": slots[pool.pool].scheduled,
                "deferred": slots[pool.pool].deferred,
                "open": slots[pool.pool].open(pool),
            }
            for pool in pools
        ]

    def _print(self, rows: list[dict[str, Any]], *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        columns = ("pool", "slots", "running", "queued", "open", "include_deferred", "description")
        table = [
            columns,
            *[tuple("" if row[c] is None else str(row[c]) for c in columns) for row in rows],
        ]
        widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
        for line in table:
            self.stdout.write("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)))

    def _list(self, options: dict[str, Any]) -> None:
        self._print(self._rows(list(pool_list())), as_json=options["json"])

    def _get(self, options: dict[str, Any]) -> None:
        rows = self._rows([pool_get(name=options["name"])])
        if options["json"]:
            self.stdout.write(json.dumps(rows[0], indent=2))
        else:
            self._print(rows, as_json=False)

    def _set(self, options: dict[str, Any]) -> None:
        try:
            slots = int(options["slots"])
        except ValueError:
            raise CommandError(
                f"SLOTS must be a whole number (-1: unlimited), got {options['slots']!r}"
            ) from None
        pool = pool_set(
            PoolSpec(
                name=options["name"],
                slots=slots,
                description=options["description"],
                include_deferred=options["include_deferred"],
            ),
            actor=Actor.of_command(),
        )
        self.stdout.write(self.style.SUCCESS(f"Pool {pool.pool} set: {pool.slots} slots"))

    def _delete(self, options: dict[str, Any]) -> None:
        pool_delete(name=options["name"], actor=Actor.of_command())
        self.stdout.write(self.style.SUCCESS(f"Pool {options['name']} deleted"))

    def _import(self, options: dict[str, Any]) -> None:
        path = Path(options["file"])
        try:
            pools = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from exc
        except ValueError as exc:
            raise CommandError(f"{path} is not valid JSON: {exc}") from exc
        imported = pools_import(pools, actor=Actor.of_command())
        self.stdout.write(self.style.SUCCESS(f"{len(imported)} pool(s) imported from {path}"))

    def _export(self, options: dict[str, Any]) -> None:
        path = Path(options["file"])
        pools = pools_export()
        try:
            path.write_text(json.dumps(pools, indent=4, sort_keys=True) + "\n", encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from exc
        self.stdout.write(self.style.SUCCESS(f"{len(pools)} pool(s) exported to {path}"))
