"""``manage.py rotate_fernet_key``: re-encrypt every stored secret with the first key."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from assets_app.management.base import domain_errors
from assets_app.services.secrets.rotation import secrets_rotate


class Command(BaseCommand):
    help = (
        "Re-encrypt every variable value and connection password and extra with the first "
        "key of FERNET_KEY (Airflow's `airflow rotate-fernet-key`). Rotate by setting "
        "FERNET_KEY=new,old, running this, then dropping the old key. All rows or none: a "
        "value no configured key decrypts stops it with nothing changed."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        with domain_errors():
            result = secrets_rotate()
        self.stdout.write(
            self.style.SUCCESS(
                f"Re-encrypted {result.variables} variable(s) and {result.connections} "
                "connection(s) with the first FERNET_KEY"
            )
        )
