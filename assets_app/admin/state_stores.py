"""The task and asset state stores (``assets_app.services.state.state_stores``), read-only: tasks
write them through the execution API. A value is shown shortened in the lists, whole (as
indented JSON) on its page."""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from assets_app.admin.common import (
    BigTableAdminMixin,
    ReadOnlyAdminMixin,
    asset_link,
    pretty_json,
    when,
)
from assets_app.models import AssetStateStore, TaskStateStore
from assets_app.services.state.state_stores import state_value_decode

#: Characters of a value a list shows.
SHOWN_VALUE = 80


def _short(text: str) -> str:
    return Truncator(text).chars(SHOWN_VALUE)


class StateValueMixin:
    """The ``short_value``, ``stored_value``, ``updated`` columns of a state store row."""

    @admin.display(description="value")
    def short_value(self, obj: TaskStateStore | AssetStateStore) -> str:
        return _short(obj.value)

    @admin.display(description="value")
    def stored_value(self, obj: TaskStateStore | AssetStateStore) -> SafeString:
        return pretty_json(state_value_decode(obj.value))

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, obj: TaskStateStore | AssetStateStore) -> SafeString | str:
        return when(obj.updated_at)


@admin.register(TaskStateStore)
class TaskStateStoreAdmin(
    StateValueMixin, BigTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin[TaskStateStore]
):
    list_display = ("key", "dag_id", "run_id", "task_id", "map_index", "short_value", "updated")
    search_fields = ("key", "dag_id", "run_id", "task_id")
    list_filter = ("updated_at",)
    ordering = ("dag_id", "run_id", "task_id", "map_index", "key")
    fields = (
        "dag_id",
        "run_id",
        "task_id",
        "map_index",
        "key",
        "stored_value",
        "updated",
        "expires",
    )
    readonly_fields = fields

    @admin.display(description="expires")
    def expires(self, obj: TaskStateStore) -> SafeString | str:
        return when(obj.expires_at) if obj.expires_at is not None else "never"


@admin.register(AssetStateStore)
class AssetStateStoreAdmin(
    StateValueMixin, BigTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin[AssetStateStore]
):
    list_display = ("key", "asset_name", "short_value", "updated", "written_by")
    list_select_related = ("asset",)
    search_fields = ("key", "asset__name", "asset__uri")
    list_filter = ("last_updated_by_kind",)
    ordering = ("asset__name", "key")
    fields = ("asset_name", "key", "stored_value", "updated", "written_by")
    readonly_fields = fields

    @admin.display(description="asset", ordering="asset__name")
    def asset_name(self, obj: AssetStateStore) -> SafeString | str:
        return asset_link(obj.asset, obj.asset_id)

    @admin.display(description="written by")
    def written_by(self, obj: AssetStateStore) -> str:
        """``dag.task[map] @ run`` of the task that wrote last, else its kind."""
        if obj.last_updated_by_task_id is None:
            return obj.last_updated_by_kind or "-"
        index = obj.last_updated_by_map_index
        suffix = f"[{index}]" if index is not None and index >= 0 else ""
        return (
            f"{obj.last_updated_by_dag_id}.{obj.last_updated_by_task_id}{suffix} "
            f"@ {obj.last_updated_by_run_id}"
        )
