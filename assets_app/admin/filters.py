"""The admin's list filters, for every area.

Choices come from the small tables (``dag``, ``asset_alias``), never from a ``DISTINCT`` scan
of a big one.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from assets_app.models import AssetAlias, AssetAliasAssetEvent, Dag


class ChoiceFilter(admin.SimpleListFilter):
    """Rows whose ``field_path`` equals the chosen value; subclasses list the choices."""

    field_path: str

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value():
            return queryset.filter(**{self.field_path: self.value()})
        return queryset


class DagIdFilter(ChoiceFilter):
    """Filter by DAG id."""

    title = "DAG"
    parameter_name = "dag_id"
    field_path = "dag_id"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(dag_id, dag_id) for dag_id in Dag.objects.values_list("dag_id", flat=True)]


class SourceDagFilter(DagIdFilter):
    title = "source DAG"
    parameter_name = "source_dag"
    field_path = "source_dag_id"


class TargetDagFilter(DagIdFilter):
    title = "target DAG"
    parameter_name = "target_dag"
    field_path = "target_dag_id"


class AliasFilter(ChoiceFilter):
    title = "alias"
    parameter_name = "alias"
    field_path = "alias_id"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(pk), name) for pk, name in AssetAlias.objects.values_list("pk", "name")]


class SourceAliasFilter(AliasFilter):
    """Events emitted through an alias: ``id IN (the alias's linked event ids)``, not a join.

    A semi-join cannot repeat an event, and both databases can drive it from the link
    table's ``(alias_id, event_id)`` index instead of hashing against every event.
    """

    title = "source alias"
    parameter_name = "source_alias"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value():
            links = super().queryset(request, AssetAliasAssetEvent.objects.all())
            return queryset.filter(pk__in=links.values("event_id"))
        return queryset


class PresenceFilter(admin.SimpleListFilter):
    """Rows where ``field_path`` is set (the ``present`` choice) or null (``absent``)."""

    field_path: str
    present: tuple[str, str] = ("yes", "Yes")
    absent: tuple[str, str] = ("no", "No")

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [self.present, self.absent]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in (self.present[0], self.absent[0]):
            is_null = self.value() == self.absent[0]
            return queryset.filter(**{f"{self.field_path}__isnull": is_null})
        return queryset


class AssetActiveFilter(PresenceFilter):
    title = "active"
    parameter_name = "active"
    field_path = "active"


class HasScheduleFilter(PresenceFilter):
    title = "asset schedule"
    parameter_name = "scheduled"
    field_path = "asset_expression"
    present = ("yes", "scheduled on assets")
    absent = ("no", "no asset schedule")


class EventSourceFilter(PresenceFilter):
    title = "source"
    parameter_name = "source"
    field_path = "source_dag_id"
    present = ("task", "a task")
    absent = ("manual", "manual (no task)")
