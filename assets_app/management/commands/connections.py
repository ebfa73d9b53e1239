"""``manage.py connections add|delete|list``: Airflow's ``airflow connections`` commands.

The password is best given with ``--conn-password-stdin`` (a command line is visible to
other users of the machine and kept in shell history). ``list`` never prints a password:
``***`` when one is stored; the extra is masked as the operator API masks it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assets_app.management.base import domain_errors
from assets_app.masking import REPLACEMENT
from assets_app.selectors.secrets import connection_list, connection_masked_extra
from assets_app.services.audit import Actor
from assets_app.services.secrets.connections import (
    ConnectionFields,
    connection_create,
    connection_delete,
)

#: ``--conn-json`` keys → the fields of a connection.
JSON_FIELDS = ("conn_type", "description", "host", "schema", "login", "password", "port", "extra")


class Command(BaseCommand):
    help = (
        "Manage the connections tasks read with BaseHook.get_connection: add CONN_ID, "
        "delete CONN_ID, list. Passwords and extras are stored encrypted with FERNET_KEY."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        add = sub.add_parser("add", help="add a connection")
        add.add_argument("conn_id")
        add.add_argument(
            "--conn-type", help="e.g. postgres, http, aws (required without --conn-json)"
        )
        add.add_argument("--conn-description")
        add.add_argument("--conn-host")
        add.add_argument("--conn-schema")
        add.add_argument("--conn-login")
        add.add_argument("--conn-password", help="prefer --conn-password-stdin")
        add.add_argument(
            "--conn-password-stdin", action="store_true", help="read the password from stdin"
        )
        add.add_argument("--conn-port", type=int)
        add.add_argument("--conn-extra", help="a JSON object")
        add.add_argument(
            "--conn-json",
            help=f"all fields as one JSON object (keys: {', '.join(JSON_FIELDS)})",
        )
        delete = sub.add_parser("delete", help="delete a connection")
        delete.add_argument("conn_id")
        listing = sub.add_parser("list", help="list connections (passwords never shown)")
        listing.add_argument("--json", action="store_true", help="one JSON array of objects")

    def handle(self, *args: Any, **options: Any) -> None:
        with domain_errors():
            getattr(self, f"_{options['action']}")(options)

    def _fields(self, options: dict[str, Any]) -> ConnectionFields:
        if options["conn_json"] is not None:
            flags = [
                f"--conn-{name.replace('_', '-')}"
                for name in (
                    "type",
                    "description",
                    "host",
                    "schema",
                    "login",
                    "password",
                    "port",
                    "extra",
                )
                if options[f"conn_{name}"] is not None
            ]
            if flags or options["conn_password_stdin"]:
                raise CommandError(
                    "--conn-json cannot be combined with "
                    + (", ".join(flags) or "--conn-password-stdin")
                )
            try:
                given = json.loads(options["conn_json"])
            except ValueError as exc:
                raise CommandError(f"--conn-json is not valid JSON: {exc}") from exc
            if not isinstance(given, dict):
                raise CommandError("--conn-json must be a JSON object")
            unknown = sorted(set(given) - set(JSON_FIELDS))
            if unknown:
                raise CommandError(
                    f"--conn-json has unknown keys {', '.join(unknown)}; "
                    f"expected {', '.join(JSON_FIELDS)}"
                )
            extra = given.get("extra")
            if extra is not None and not isinstance(extra, str):
                given["extra"] = json.dumps(extra)
            if "conn_type" not in given:
                raise CommandError("--conn-json needs a conn_type")
            return ConnectionFields(**given)
        if options["conn_type"] is None:
            raise CommandError("--conn-type is required (or give every field with --conn-json)")
        password = options["conn_password"]
        if options["conn_password_stdin"]:
            if password is not None:
                raise CommandError("give --conn-password or --conn-password-stdin, not both")
            password = sys.stdin.readline().rstrip("\r\n")
        return ConnectionFields(
            conn_type=options["conn_type"],
            description=options["conn_description"],
            host=options["conn_host"],
            schema=options["conn_schema"],
            login=options["conn_login"],
            password=password,
            port=options["conn_port"],
            extra=options["conn_extra"],
        )

    def _add(self, options: dict[str, Any]) -> None:
        connection_create(
            conn_id=options["conn_id"], values=self._fields(options), actor=Actor.of_command()
        )
        self.stdout.write(self.style.SUCCESS(f"Connection {options['conn_id']} added"))

    def _delete(self, options: dict[str, Any]) -> None:
        connection_delete(conn_id=options["conn_id"], actor=Actor.of_command())
        self.stdout.write(self.style.SUCCESS(f"Connection {options['conn_id']} deleted"))

    def _list(self, options: dict[str, Any]) -> None:
        rows = [
            {
                "conn_id": connection.conn_id,
                "conn_type": connection.conn_type,
                "description": connection.description,
                "host": connection.host,
                "schema": connection.schema,
                "login": connection.login,
                "port": connection.port,
                "password": REPLACEMENT if connection.has_password else None,
                "extra": connection_masked_extra(connection),
            }
            for connection in connection_list()
        ]
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        for row in rows:
            where = (
                f"{row['host'] or ''}{':' + str(row['port']) if row['port'] is not None else ''}"
            )
            self.stdout.write(f"{row['conn_id']}\t{row['conn_type']}\t{where}")
