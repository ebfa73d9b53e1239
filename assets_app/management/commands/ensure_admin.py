"""``manage.py ensure_admin``: the operator's admin login, with a fresh password."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assets_app.services.accounts import admin_user_ensure


class Command(BaseCommand):
    help = (
        "Create the admin superuser if missing, set a new random password and print the "
        "username and password (used by `make run`)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin", help="login name (default admin)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            password = admin_user_ensure(username=options["username"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Admin login: username={options['username']} password={password} (/admin/)"
            )
        )
