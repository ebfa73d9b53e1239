"""Reads of the event log (``assets_app.models.EventLog``), shared by the admin's Audit log
and ``/api/v2/eventLogs``."""

from __future__ import annotations

from django.db.models import QuerySet

from assets_app.models import EventLog


def event_log_list() -> QuerySet[EventLog]:
    """Every recorded event (one query per page: the rows hold all a reader shows)."""
    return EventLog.objects.all()


def event_log_get(*, event_log_id: int) -> EventLog | None:
    return EventLog.objects.filter(pk=event_log_id).first()


def event_logs_of_dag(*, dag_id: str) -> QuerySet[EventLog]:
    """The events that name ``dag_id``, newest first."""
    return EventLog.objects.filter(dag_id=dag_id).order_by("-dttm", "-id")
