"""``manage.py variables set|get|delete|list``: Airflow's ``airflow variables`` commands."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assets_app.exceptions import VariableNotFoundError
from assets_app.management.base import domain_errors
from assets_app.selectors.secrets import variable_get, variable_list, variable_value
from assets_app.services.audit import Actor
from assets_app.services.secrets.variables import variable_delete, variable_set


class Command(BaseCommand):
    help = (
        "Manage the variables tasks read with Variable.get: set KEY VALUE, get KEY, "
        "delete KEY, list. Values are stored encrypted with FERNET_KEY."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        set_ = sub.add_parser("set", help="create or replace a variable")
        set_.add_argument("key")
        set_.add_argument("value")
        set_.add_argument("--description", default=None, help="what the variable is for")
        set_.add_argument(
            "--json",
            action="store_true",
            help="VALUE is JSON: checked, and stored as its compact JSON text",
        )
        get = sub.add_parser("get", help="print a variable's value")
        get.add_argument("key")
        get.add_argument("--json", action="store_true", help="the value is JSON: print it indented")
        get.add_argument(
            "--default", default=None, help="print this instead of failing when there is none"
        )
        delete = sub.add_parser("delete", help="delete a variable")
        delete.add_argument("key")
        listing = sub.add_parser("list", help="list the keys (never the values)")
        listing.add_argument("--json", action="store_true", help="one JSON array of objects")

    def handle(self, *args: Any, **options: Any) -> None:
        with domain_errors():
            getattr(self, f"_{options['action']}")(options)

    def _set(self, options: dict[str, Any]) -> None:
        value: str = options["value"]
        if options["json"]:
            try:
                value = json.dumps(json.loads(value), separators=(",", ":"))
            except ValueError as exc:
                raise CommandError(
                    f"VALUE is not valid JSON ({exc}); drop --json to store text"
                ) from exc
        variable_set(
            key=options["key"],
            value=value,
            description=options["description"],
            actor=Actor.of_command(),
        )
        self.stdout.write(self.style.SUCCESS(f"Variable {options['key']} set"))

    def _get(self, options: dict[str, Any]) -> None:
        try:
            value = variable_value(variable_get(key=options["key"]))
        except VariableNotFoundError:
            if options["default"] is None:
                raise
            value = options["default"]
        if options["json"] and value is not None:
            try:
                value = json.dumps(json.loads(value), indent=2)
            except ValueError as exc:
                raise CommandError(
                    f"Variable {options['key']} does not hold JSON ({exc}); drop --json"
                ) from exc
        self.stdout.write("" if value is None else value)

    def _delete(self, options: dict[str, Any]) -> None:
        if not variable_delete(key=options["key"], actor=Actor.of_command()):
            raise CommandError(f"Variable with key '{options['key']}' not found")
        self.stdout.write(self.style.SUCCESS(f"Variable {options['key']} deleted"))

    def _list(self, options: dict[str, Any]) -> None:
        rows = list(variable_list().values("key", "description", "is_encrypted"))
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        for row in rows:
            self.stdout.write(row["key"])
