"""The Audit log: the event log (``assets_app.models.EventLog``), read-only. The services write
it (``assets_app.services.audit``); a DAG's page links to its events."""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.safestring import SafeString

from assets_app.admin.common import BigTableAdminMixin, ReadOnlyAdminMixin, pretty_json
from assets_app.models import EventLog


@admin.register(EventLog)
class EventLogAdmin(BigTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin[EventLog]):
    list_display = ("dttm", "event", "owner", "via", "dag_id", "run_id", "task_id")
    search_fields = ("=dag_id", "=run_id", "=task_id", "owner", "event")
    list_filter = ("event", "dttm")
    ordering = ("-dttm", "-id")
    date_hierarchy = "dttm"
    fields = (
        "dttm",
        "event",
        "owner",
        "owner_display_name",
        "via",
        "dag_id",
        "run_id",
        "task_id",
        "map_index",
        "try_number",
        "logical_date",
        "extra_pretty",
    )
    readonly_fields = fields

    @admin.display(description="via")
    def via(self, obj: EventLog) -> str:
        """The face the event came through (``ui``, ``rest_api``, ``cli``), from ``extra``."""
        try:
            extra = json.loads(obj.extra or "{}")
        except ValueError:
            return ""
        return str(extra.get("via", "")) if isinstance(extra, dict) else ""

    @admin.display(description="extra")
    def extra_pretty(self, obj: EventLog) -> SafeString | str:
        try:
            return pretty_json(json.loads(obj.extra)) if obj.extra else ""
        except ValueError:
            return obj.extra or ""
