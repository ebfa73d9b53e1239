"""Recording the event log (Airflow's ``log`` table, ``assets_app.models.EventLog``).

Every service that changes state on someone's behalf takes an ``actor: Actor | None`` and,
when one is given, records its event with :func:`event_log_record` inside its own transaction:
the row commits with the change or not at all. ``None`` (the scheduler, the worker, tests that
do not care) records nothing.

The event names are those Airflow 3.3's REST API records (its ``action_logging`` decorator:
``trigger_dag_run``, ``patch_dag``, ``patch_dag_run``, ``clear_dag_run``,
``post_clear_task_instances``, ``post_variable``, ``patch_variable``, ``delete_variable``,
``post_connection``, ``patch_connection``, ``delete_connection``), whichever face acted;
``extra`` holds the arguments as a JSON text plus ``via`` (``ui``, ``rest_api`` or ``cli``),
with secrets masked: a variable's value always, a connection's password always and its extra's
values always (only its keys are kept), anything else by name (``assets_app.masking``).
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from assets_app.masking import REPLACEMENT, redact
from assets_app.models import DagRunTriggeredBy, EventLog

Via = Literal["ui", "rest_api", "cli"]


@dataclass(frozen=True)
class Actor:
    """Who acts (``name``, Airflow's ``owner``; ``display_name``, its ``owner_display_name``)
    and through which face (``via``)."""

    name: str
    via: Via
    display_name: str = ""

    @classmethod
    def of_request(cls, request: Any, via: Via) -> Actor:
        """The request's user: the admin (``ui``) or an API (``rest_api``); ``anonymous`` when
        nobody is logged in, as Airflow."""
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return cls(name="anonymous", via=via, display_name="")
        name = user.get_username()
        return cls(name=name, via=via, display_name=user.get_full_name() or name)

    @classmethod
    def of_command(cls) -> Actor:
        """The OS user running a management command (``cli``), as Airflow's CLI records."""
        try:
            name = getpass.getuser()
        except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER
            name = "unknown"
        return cls(name=name, via="cli", display_name=name)

    @property
    def triggered_by(self) -> DagRunTriggeredBy:
        """The run's ``triggered_by`` for a run this actor triggers."""
        return DagRunTriggeredBy(self.via)


def event_log_record(
    actor: Actor | None,
    event: str,
    *,
    dag_id: str | None = None,
    task_id: str | None = None,
    run_id: str | None = None,
    map_index: int | None = None,
    try_number: int | None = None,
    logical_date: datetime | None = None,
    extra: Mapping[str, Any] | None = None,
) -> EventLog | None:
    """Record ``event`` by ``actor`` (nothing when ``actor`` is ``None``); call it inside the
    use case's transaction. ``extra`` values are masked by name (``assets_app.masking``);
    secrets that a name does not reveal must be masked by the caller
    (:func:`variable_extra`, :func:`connection_extra`)."""
    if actor is None:
        return None
    row = _event_log(
        actor,
        event,
        dag_id=dag_id,
        task_id=task_id,
        run_id=run_id,
        map_index=map_index,
        try_number=try_number,
        logical_date=logical_date,
        extra=extra,
    )
    row.save(force_insert=True)
    return row


def event_logs_record(
    actor: Actor | None, event: str, *, dag_ids: Iterable[str], extra: Mapping[str, Any]
) -> None:
    """Record ``event`` once per DAG of ``dag_ids`` (a pause of many DAGs) in one statement;
    nothing when ``actor`` is ``None``."""
    if actor is None:
        return
    EventLog.objects.bulk_create(
        [_event_log(actor, event, dag_id=dag_id, extra=extra) for dag_id in dag_ids]
    )


def _event_log(
    actor: Actor, event: str, *, extra: Mapping[str, Any] | None, **columns: Any
) -> EventLog:
    fields = {key: redact(value, key) for key, value in (extra or {}).items()}
    fields["via"] = actor.via
    return EventLog(
        event=event,
        owner=actor.name,
        owner_display_name=actor.display_name,
        extra=json.dumps(fields, default=str),
        **columns,
    )


def variable_extra(**fields: Any) -> dict[str, Any]:
    """A variable's fields for ``extra``: the value masked whatever its key (Airflow's
    ``_mask_variable_entity``)."""
    return {k: REPLACEMENT if k in ("val", "value") else v for k, v in fields.items()}


def connection_extra(**fields: Any) -> dict[str, Any]:
    """A connection's fields for ``extra``: the password masked, the extra's keys with every
    value masked (Airflow's ``_mask_connection_entity``), the rest by name."""
    result: dict[str, Any] = {}
    for key, value in fields.items():
        if key == "password":
            result[key] = REPLACEMENT if value else value
        elif key == "extra" and value:
            try:
                parsed = json.loads(value) if isinstance(value, str) else value
            except ValueError:
                result[key] = "Encountered non-JSON in `extra` field"
                continue
            result[key] = (
                dict.fromkeys(parsed, REPLACEMENT)
                if isinstance(parsed, dict)
                else "Expected JSON object in `extra` field, got non-dict JSON"
            )
        else:
            result[key] = redact(value, key)
    return result
