"""``manage.py ensure_admin``: the operator's admin login."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assets_app.services.accounts import admin_user_ensure


class Command(BaseCommand):
    help = (
        "Create the admin superuser if missing and print its username and a new random "
        "password; an existing one keeps its password unless --reset-password (used by "
        "`make run`)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin", help="login name (default admin)")
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="give an existing user a new random password and print it",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        try:
            password = admin_user_ensure(
                username=username, reset_password=options["reset_password"]
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if password is None:
            self.stdout.write(
                f"Admin login: username={username}, password unchanged (/admin/; "
                "`python manage.py ensure_admin --reset-password` prints a new one)"
            )
            return
        self.stdout.write(
            self.style.SUCCESS(f"Admin login: username={username} password={password} (/admin/)")
        )
