"""DAG files that failed to load (Airflow's import errors), read-only: the DAG processor
writes and removes them (``assets_app.services.dags.dag_files``)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html
from django.utils.safestring import SafeString

from assets_app.admin.common import ReadOnlyAdminMixin
from assets_app.models import DagImportError


@admin.register(DagImportError)
class DagImportErrorAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[DagImportError]):
    list_display = ("filename", "timestamp", "error_line")
    search_fields = ("filename", "stacktrace")
    list_filter = ("timestamp",)
    ordering = ("filename",)
    date_hierarchy = "timestamp"
    fields = ("filename", "timestamp", "traceback")
    readonly_fields = ("filename", "timestamp", "traceback")

    @admin.display(description="error")
    def error_line(self, obj: DagImportError) -> str:
        """The last line of the traceback (the exception), or the refusal."""
        lines = [line for line in obj.stacktrace.strip().splitlines() if line.strip()]
        return lines[-1] if lines else ""

    @admin.display(description="traceback")
    def traceback(self, obj: DagImportError) -> SafeString:
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', obj.stacktrace)
