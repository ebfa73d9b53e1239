"""Template tags of the registry's admin pages."""

from __future__ import annotations

import datetime
from typing import Any

from django import template
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet, Subquery
from django.utils import formats, timezone
from django.utils.safestring import SafeString
from django.utils.text import capfirst

from assets_app.admin.common import (
    asset_link,
    change_url,
    changelist_url,
    consumers,
    duration,
    ident,
    link_list,
    source_links,
    state_badge,
    when,
)
from assets_app.admin.panels import EventRow, Overview, overview

register = template.Library()


def _months(first: datetime.date, last: datetime.date) -> list[datetime.date]:
    months = []
    year, month = first.year, first.month
    while (year, month) <= (last.year, last.month):
        months.append(datetime.date(year, month, 1))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return months


def _first_and_last(queryset: QuerySet[Any], field_name: str) -> dict[str, Any]:
    """The selection's first and last ``field_name`` in one query, each an ``ORDER BY ...
    LIMIT 1`` subquery: PostgreSQL walks the field's index from either end until a row matches
    the filters, where ``MIN``/``MAX`` over a filtered selection would join it whole."""
    first = queryset.order_by(field_name).values(field_name)[:1]
    last = queryset.order_by(f"-{field_name}").values(field_name)[:1]
    row = (
        queryset.model._default_manager.order_by()
        .annotate(first=Subquery(first), last=Subquery(last))
        .values("first", "last")
        .first()
    )
    return row or {"first": None, "last": None}


@register.inclusion_tag("admin/date_hierarchy.html")
def range_date_hierarchy(cl: ChangeList) -> dict[str, Any]:
    """The admin's date drill-down for a big table, from one ``MIN``/``MAX`` query.

    Django's own ``{% date_hierarchy %}`` lists the years, months or days that have rows with
    a ``SELECT DISTINCT`` truncation over every row of the selection: a scan of the whole
    event table. This one offers every year, month or day between the selection's first and
    last row (both read from the timestamp index); a day without rows lists nothing.
    """
    field_name = cl.date_hierarchy
    year_field, month_field, day_field = (
        f"{field_name}__year",
        f"{field_name}__month",
        f"{field_name}__day",
    )
    year, month, day = (cl.params.get(f) for f in (year_field, month_field, day_field))

    def link(filters: dict[str, Any]) -> str:
        return cl.get_query_string(filters, [f"{field_name}__"])

    def fmt(value: datetime.date, format_name: str) -> str:
        return capfirst(formats.date_format(value, format_name))

    if year and month and day:
        chosen = datetime.date(int(year), int(month), int(day))
        return {
            "show": True,
            "back": {
                "link": link({year_field: year, month_field: month}),
                "title": fmt(chosen, "YEAR_MONTH_FORMAT"),
            },
            "choices": [{"title": fmt(chosen, "MONTH_DAY_FORMAT")}],
        }
    span = _first_and_last(cl.queryset, field_name)
    if span["first"] is None or span["last"] is None:
        return {"show": False}
    first = timezone.localtime(span["first"]).date()
    last = timezone.localtime(span["last"]).date()
    if not year and first.year == last.year:
        year = str(first.year)
        if first.month == last.month:
            month = str(first.month)
    if year and month:
        days = [first + datetime.timedelta(days=n) for n in range((last - first).days + 1)]
        return {
            "show": True,
            "back": {"link": link({year_field: year}), "title": year},
            "choices": [
                {
                    "link": link({year_field: year, month_field: month, day_field: d.day}),
                    "title": fmt(d, "MONTH_DAY_FORMAT"),
                }
                for d in days
            ],
        }
    if year:
        return {
            "show": True,
            "back": {"link": link({}), "title": "All dates"},
            "choices": [
                {
                    "link": link({year_field: year, month_field: m.month}),
                    "title": fmt(m, "YEAR_MONTH_FORMAT"),
                }
                for m in _months(first, last)
            ],
        }
    return {
        "show": True,
        "back": None,
        "choices": [
            {"link": link({year_field: str(y)}), "title": str(y)}
            for y in range(first.year, last.year + 1)
        ],
    }


# --- panels -----------------------------------------------------------------------------------


@register.simple_tag
def registry_overview() -> Overview:
    """The overview the admin index shows (``assets_app.admin.panels.overview``)."""
    return overview()


@register.filter
def ar_when(value: datetime.datetime | None) -> SafeString | str:
    return when(value)


@register.filter
def ar_duration(value: datetime.timedelta | float | None) -> SafeString | str:
    return duration(value)


@register.simple_tag
def ar_source(row: EventRow) -> SafeString | str:
    event = row.event
    return source_links(
        event.source_dag_id, event.source_task_id, row.source_run_pk, event.source_run_id
    )


@register.simple_tag
def ar_consumers(row: EventRow) -> SafeString | str:
    return consumers(row.consumer_runs, row.waiting_dags)


@register.simple_tag
def ar_aliases(row: EventRow) -> SafeString | str:
    return link_list(
        (change_url("assetalias", alias.pk), alias.name) for alias in row.event.source_aliases.all()
    )


@register.simple_tag
def ar_badge(state: str | None) -> SafeString | str:
    return state_badge(state)


@register.simple_tag
def ar_ident(value: Any) -> SafeString:
    return ident(value)


@register.simple_tag
def ar_asset(row: EventRow) -> SafeString | str:
    return asset_link(row.event.asset, row.event.asset_id)


@register.simple_tag(takes_context=False)
def ar_changelist(model_name: str, **params: Any) -> str:
    return changelist_url(model_name, **params)


@register.filter
def ar_split(value: str) -> list[str]:
    """``"a b c"|ar_split``: the words of a literal, to loop over in a template."""
    return value.split()


@register.filter
def ar_state_word(state: str) -> str:
    """A state as a legend says it: ``up_for_retry`` → ``up for retry``, ``none`` → ``no
    state``."""
    return "no state" if state == "none" else state.replace("_", " ")
