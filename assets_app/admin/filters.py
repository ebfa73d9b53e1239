"""The admin's list filters, for every area.

Choices come from the small tables (``dag``, ``asset_alias``), never from a ``DISTINCT`` scan
of a big one.
"""

from __future__ import annotations

from typing import Any, Self, cast

from django.contrib import admin
from django.db.models import Exists, Model, OuterRef, QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from assets_app.admin.common import ident
from assets_app.models import (
    AssetAlias,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    TaskInstance,
)
from assets_app.selectors.dags import dag_tag_names


class FieldFilter(admin.SimpleListFilter):
    """A list filter over one field (``field_path``)."""

    field_path: str

    @classmethod
    def on(cls, field_path: str, *, title: str, parameter_name: str, **attrs: Any) -> type[Self]:
        """This filter over ``field_path``, declared in one line: ``title`` heads its choices in
        the sidebar, ``parameter_name`` is its URL query key, and ``attrs`` override other class
        attributes (``PresenceFilter.present`` …)."""
        if unknown := sorted(set(attrs) - set(dir(cls))):
            raise TypeError(f"{cls.__name__} has no attribute {', '.join(unknown)}")
        body = {"field_path": field_path, "title": title, "parameter_name": parameter_name}
        name = f"{cls.__name__}[{parameter_name}]"
        return cast("type[Self]", type(name, (cls,), {**body, **attrs}))


class ChoiceFilter(FieldFilter):
    """Rows whose ``field_path`` equals the chosen value; subclasses list the choices."""

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value():
            return queryset.filter(**{self.field_path: self.value()})
        return queryset


class DagIdFilter(ChoiceFilter):
    """Filter by DAG id: the DAGs that occur in the list's table (``occurs_in`` rows whose
    ``field_path`` names them), each tested with an ``EXISTS`` on that field's index.

    ``occurs_in`` is the listed model; the event list's ``source_dag`` filter offers only DAGs
    that produced events, the run list's only DAGs that have runs.
    """

    title = "DAG"
    parameter_name = "dag_id"
    field_path = "dag_id"
    occurs_in: type[Model] = DagRun

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, SafeString]]:
        rows = self.occurs_in._default_manager.order_by().filter(
            **{self.field_path: OuterRef("pk")}
        )
        dag_ids = (
            Dag.objects.filter(Exists(rows)).order_by("dag_id").values_list("dag_id", flat=True)
        )
        return [(dag_id, ident(dag_id, two_lines=False)) for dag_id in dag_ids]


SourceDagFilter = DagIdFilter.on(
    "source_dag_id", title="source DAG", parameter_name="source_dag", occurs_in=AssetEvent
)
TargetDagFilter = DagIdFilter.on(
    "target_dag_id", title="target DAG", parameter_name="target_dag", occurs_in=AssetDagRunQueue
)
TaskInstanceDagFilter = DagIdFilter.on(
    "dag_id", title="DAG", parameter_name="dag_id", occurs_in=TaskInstance
)


class AliasFilter(ChoiceFilter):
    """Filter by alias: the aliases that occur in the listed link table (``model_admin``'s
    model), each tested with an ``EXISTS`` on its ``alias_id`` index."""

    title = "alias"
    parameter_name = "alias"
    field_path = "alias_id"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, SafeString]]:
        return self._aliases_in(model_admin.model)

    @staticmethod
    def _aliases_in(model: type[Model]) -> list[tuple[str, SafeString]]:
        rows = model._default_manager.order_by().filter(alias_id=OuterRef("pk"))
        aliases = AssetAlias.objects.filter(Exists(rows)).order_by("name")
        return [
            (str(pk), ident(name, two_lines=False))
            for pk, name in aliases.values_list("pk", "name")
        ]


class SourceAliasFilter(AliasFilter):
    """Events emitted through an alias: ``id IN (the alias's linked event ids)``, not a join.

    A semi-join cannot repeat an event, and both databases can drive it from the link
    table's ``(alias_id, event_id)`` index instead of hashing against every event.
    """

    title = "source alias"
    parameter_name = "source_alias"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, SafeString]]:
        return self._aliases_in(AssetAliasAssetEvent)  # aliases some event was emitted through

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value():
            links = super().queryset(request, AssetAliasAssetEvent.objects.all())
            return queryset.filter(pk__in=links.values("event_id"))
        return queryset


class PresenceFilter(FieldFilter):
    """Rows where ``field_path`` is set (the ``present`` choice) or null (``absent``)."""

    present: tuple[str, str] = ("yes", "Yes")
    absent: tuple[str, str] = ("no", "No")

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [self.present, self.absent]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in (self.present[0], self.absent[0]):
            is_null = self.value() == self.absent[0]
            return queryset.filter(**{f"{self.field_path}__isnull": is_null})
        return queryset


AssetActiveFilter = PresenceFilter.on("active", title="active", parameter_name="active")
HasScheduleFilter = PresenceFilter.on(
    "asset_expression",
    title="asset schedule",
    parameter_name="scheduled",
    present=("yes", "scheduled on assets"),
    absent=("no", "no asset schedule"),
)
EventSourceFilter = PresenceFilter.on(
    "source_dag_id",
    title="source",
    parameter_name="source",
    present=("task", "a task"),
    absent=("manual", "manual (no task)"),
)


class DagTagFilter(admin.SimpleListFilter):
    """DAGs with the chosen tag (Airflow's tag filter); the choices are the tags DAGs have.
    The DAG table is small: its tags are read whole, on both databases alike."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(tag, tag) for tag in sorted(dag_tag_names(), key=str)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if not self.value():
            return queryset
        tagged = [
            dag_id
            for dag_id, tags in Dag.objects.values_list("dag_id", "tags")
            if self.value() in (tags or ())
        ]
        return queryset.filter(dag_id__in=tagged)
