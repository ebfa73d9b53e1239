"""Query-parameter filters of the lists (django-filter), strict about what they accept.

Every value is checked before the query runs: a bad date, a boolean that is not ``true`` or
``false``, an id that is not an integer, an unknown state, a parameter the list does not
know, or a single-valued parameter given twice is a 400 naming the parameter. An empty value
(``?name=``) means "no filter". Text filters match exactly (index-backed); datetime bounds
are ISO 8601 and inclusive, read by :func:`operatorapi.params.parse_datetime_parameter`
(a time outside years 1 to 9999 in UTC is refused too). A NUL character in any parameter is
refused before the filters run (:func:`operatorapi.params.refuse_nul`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import django_filters
from django import forms
from django.db.models import Exists, OuterRef, QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions
from rest_framework.request import Request

from assets_app.models import (
    NAME_LENGTH,
    Asset,
    AssetAlias,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagImportError,
    DagRun,
    DagRunAssetEvent,
    DagRunState,
    DagRunType,
)
from operatorapi.params import DatetimeParameterError, parse_datetime_parameter

_BIGINT_MAX = 2**63 - 1


class _StrictBooleanField(forms.Field):
    def to_python(self, value: Any) -> bool | None:
        if value in (None, ""):
            return None
        if value in ("true", "false"):
            return bool(value == "true")
        raise forms.ValidationError("Must be true or false.", code="invalid")


class BooleanFilter(django_filters.BooleanFilter):
    """``true`` or ``false`` only (django-filter's own ignores anything else silently)."""

    field_class = _StrictBooleanField


@extend_schema_field(OpenApiTypes.INT)
class IdFilter(django_filters.NumberFilter):
    """A positive integer id that fits the column."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", _BIGINT_MAX)
        super().__init__(*args, **kwargs)


class _DatetimeField(forms.Field):
    def to_python(self, value: Any) -> datetime | None:
        if value in (None, ""):
            return None
        try:
            return parse_datetime_parameter(str(value))
        except DatetimeParameterError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None


class DatetimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 datetime bound (:func:`~operatorapi.params.parse_datetime_parameter`)."""

    field_class = _DatetimeField


def _text(field_name: str, help_text: str, *, max_length: int = NAME_LENGTH) -> Any:
    return django_filters.CharFilter(
        field_name=field_name, max_length=max_length, help_text=help_text
    )


class AssetFilter(django_filters.FilterSet):
    name = _text("name", "Assets with exactly this name.")
    uri = _text("uri", "Assets with exactly this uri.")
    group = _text("group", "Assets in exactly this group.")
    active = BooleanFilter(
        field_name="is_active",
        help_text="Active assets (some declared, non-stale DAG uses them), or inactive ones.",
    )

    class Meta:
        model = Asset
        fields: list[str] = []


class AssetAliasFilter(django_filters.FilterSet):
    name = _text("name", "The alias with exactly this name.")
    group = _text("group", "Aliases in exactly this group.")

    class Meta:
        model = AssetAlias
        fields: list[str] = []


class AssetEventFilter(django_filters.FilterSet):
    asset_id = IdFilter(field_name="asset_id", help_text="Events on the asset with this id.")
    asset_name = _text("asset__name", "Events on assets with exactly this name.")
    asset_uri = _text("asset__uri", "Events on assets with exactly this uri.")
    alias = extend_schema_field(OpenApiTypes.STR)(
        django_filters.CharFilter(
            method="filter_alias",
            max_length=NAME_LENGTH,
            help_text="Events emitted through the alias with exactly this name.",
        )
    )
    source_dag_id = _text("source_dag_id", "Events produced by this DAG.", max_length=250)
    source_task_id = _text("source_task_id", "Events produced by this task.", max_length=250)
    source_run_id = _text("source_run_id", "Events produced in this DAG run.", max_length=250)
    source_map_index = IdFilter(
        field_name="source_map_index",
        min_value=-1,
        max_value=2**31 - 1,
        help_text="Events produced by this map index of a mapped task (-1: an unmapped task).",
    )
    consumed_by_run = IdFilter(
        method="filter_consumed_by_run", help_text="Events the DAG run with this id consumed."
    )
    after = DatetimeFilter(
        field_name="timestamp",
        lookup_expr="gte",
        help_text="Events stamped at or after this time (ISO 8601, e.g. 2026-01-01T00:00:00Z).",
    )
    before = DatetimeFilter(
        field_name="timestamp",
        lookup_expr="lte",
        help_text="Events stamped at or before this time (ISO 8601).",
    )

    class Meta:
        model = AssetEvent
        fields: list[str] = []

    def filter_alias(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return queryset.filter(
            Exists(AssetAliasAssetEvent.objects.filter(event=OuterRef("pk"), alias__name=value))
        )

    def filter_consumed_by_run(
        self, queryset: QuerySet[Any], name: str, value: int
    ) -> QuerySet[Any]:
        return queryset.filter(
            Exists(DagRunAssetEvent.objects.filter(event=OuterRef("pk"), dag_run_id=value))
        )


class DagFilter(django_filters.FilterSet):
    is_paused = BooleanFilter(field_name="is_paused", help_text="Paused DAGs, or unpaused ones.")
    is_stale = BooleanFilter(
        field_name="is_stale", help_text="DAGs gone from their manifest, or declared ones."
    )

    class Meta:
        model = Dag
        fields: list[str] = []


class ImportErrorFilter(django_filters.FilterSet):
    filename = _text(
        "filename", "The import error of this file (its absolute path).", max_length=2000
    )

    class Meta:
        model = DagImportError
        fields: list[str] = []


class DagRunFilter(django_filters.FilterSet):
    dag_id = _text("dag_id", "Runs of this DAG.", max_length=250)
    run_id = _text("run_id", "Runs with this run id.", max_length=250)
    state = django_filters.MultipleChoiceFilter(
        field_name="state",
        choices=DagRunState.choices,
        help_text="Runs in this state; repeat the parameter for several.",
    )
    run_type = django_filters.MultipleChoiceFilter(
        field_name="run_type",
        choices=DagRunType.choices,
        help_text="Runs of this type; repeat the parameter for several.",
    )

    class Meta:
        model = DagRun
        fields: list[str] = []


class QueueFilter(django_filters.FilterSet):
    dag_id = _text("target_dag_id", "Rows of this waiting DAG.", max_length=250)
    asset_id = IdFilter(field_name="asset_id", help_text="Rows for the asset with this id.")

    class Meta:
        model = AssetDagRunQueue
        fields: list[str] = []


class StrictFilterBackend(DjangoFilterBackend):
    """django-filter's backend, refusing query parameters the view does not know.

    A list accepts its filters and the pagination parameters; any other action (retrieve)
    accepts none. A filter other than a multiple-choice one takes one value. Unknown
    parameters and bad values are reported together, one key per parameter.
    """

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> Any:
        params = request.query_params
        if getattr(view, "action", None) != "list":
            if params:
                raise exceptions.ValidationError(
                    {name: ["This resource takes no query parameters."] for name in params}
                )
            return queryset
        filterset = self.get_filterset(request, queryset, view)
        filters = dict(filterset.filters) if filterset is not None else {}
        paginator = getattr(view, "paginator", None)
        accepted = set(filters) | {
            getattr(paginator, "cursor_query_param", "cursor"),
            getattr(paginator, "page_size_query_param", "page_size"),
        }
        errors: dict[str, list[str]] = {}
        for name in params:
            if name not in accepted:
                errors[name] = [
                    f"Unknown query parameter; this list accepts {', '.join(sorted(accepted))}."
                ]
            elif len(params.getlist(name)) > 1 and not isinstance(
                filters.get(name), django_filters.MultipleChoiceFilter
            ):
                errors[name] = ["Give this parameter once."]
        if filterset is not None and not filterset.is_valid():
            for name, messages in filterset.errors.items():
                errors.setdefault(name, list(messages))
        if errors:
            raise exceptions.ValidationError(errors)
        return filterset.qs if filterset is not None else queryset
