"""Rows as Airflow 3.3's public API datamodels (``airflow/api_fastapi/core_api/datamodels``)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagCode,
    DagImportError,
    DagRun,
    DagRunState,
    DagRunTriggeredBy,
    DagRunType,
    DagTask,
    EventLog,
    TaskInstance,
    XCom,
)
from assets_app.params import params_load
from assets_app.selectors.dags import dag_schedule_description

#: the version these routes follow
AIRFLOW_VERSION = "3.3.2"


def when(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def alias(row: AssetAlias) -> dict[str, Any]:
    return {"id": row.pk, "name": row.name, "group": row.group}


def import_error(row: DagImportError) -> dict[str, Any]:
    """Airflow's ``ImportErrorResponse``; every file is in the one ``dags-folder`` bundle."""
    return {
        "import_error_id": row.pk,
        "timestamp": when(row.timestamp),
        "filename": row.filename,
        "bundle_name": "dags-folder",
        "stack_trace": row.stacktrace,
    }


def event_log(row: EventLog) -> dict[str, Any]:
    """Airflow's ``EventLogResponse``; display names are the ids (the registry has none
    other), null where Airflow's join finds no DAG or task."""
    return {
        "event_log_id": row.pk,
        "when": when(row.dttm),
        "dag_id": row.dag_id,
        "task_id": row.task_id,
        "run_id": row.run_id,
        "map_index": row.map_index,
        "try_number": row.try_number,
        "event": row.event,
        "logical_date": when(row.logical_date),
        "owner": row.owner,
        "extra": row.extra,
        "dag_display_name": row.dag_id,
        "task_display_name": row.task_id,
    }


def asset(row: Asset) -> dict[str, Any]:
    """Needs ``assets_app.selectors.assets.asset_list_detailed``'s prefetches and annotations."""
    return {
        "id": row.pk,
        "name": row.name,
        "uri": row.uri,
        "group": row.group,
        "extra": row.extra,
        "created_at": when(row.created_at),
        "updated_at": when(row.updated_at),
        "scheduled_dags": [
            {"dag_id": r.dag_id, "created_at": when(r.created_at), "updated_at": when(r.updated_at)}
            for r in row.scheduled_dags.all()
        ],
        "producing_tasks": [_task_ref(r) for r in row.producing_tasks.all()],
        "consuming_tasks": [_task_ref(r) for r in row.consuming_tasks.all()],
        "aliases": [alias(a) for a in row.aliases.all()],
        "watchers": [
            {
                "name": w.name,
                "trigger_id": w.trigger_id,
                "created_date": when(w.trigger.created_date),
            }
            for w in row.watchers.all()
        ],
        "last_asset_event": {
            "id": getattr(row, "last_event_id", None),
            "timestamp": when(getattr(row, "last_event_timestamp", None)),
        },
    }


def _task_ref(row: Any) -> dict[str, Any]:
    # task references keep one date: created and last updated are the same
    return {
        "dag_id": row.dag_id,
        "task_id": row.task_id,
        "created_at": when(row.created_at),
        "updated_at": when(row.created_at),
    }


def asset_event(row: AssetEvent) -> dict[str, Any]:
    target = row.asset
    return {
        "id": row.pk,
        "asset_id": row.asset_id,
        "uri": target.uri if target else None,
        "name": target.name if target else None,
        "group": target.group if target else None,
        "extra": row.extra,
        "source_task_id": row.source_task_id,
        "source_dag_id": row.source_dag_id,
        "source_run_id": row.source_run_id,
        "source_map_index": row.source_map_index,
        "created_dagruns": [
            {
                "run_id": run.run_id,
                "dag_id": run.dag_id,
                "logical_date": when(run.logical_date),
                "start_date": when(run.start_date or run.run_after),
                "end_date": when(run.end_date),
                "state": run.state,
                "data_interval_start": when(run.data_interval_start),
                "data_interval_end": when(run.data_interval_end),
                "partition_key": run.partition_key,
                "triggering": True,
            }
            for run in row.created_dagruns.all()
        ],
        "timestamp": when(row.timestamp),
        "partition_key": row.partition_key,
    }


def queued_event(row: AssetDagRunQueue) -> dict[str, Any]:
    return {
        "dag_id": row.target_dag_id,
        "asset_id": row.asset_id,
        "created_at": when(row.created_at),
        "dag_display_name": row.target_dag_id,
    }


def _timetable_summary(row: Dag) -> str | None:
    """As Airflow summarises a schedule: the cron/preset/timedelta, ``Asset``, or both."""
    if row.asset_expression and row.timetable:
        return f"Asset or {row.timetable_summary}"
    if row.asset_expression:
        return "Asset"
    return row.timetable_summary or None


def dag(row: Dag) -> dict[str, Any]:
    timetable = row.timetable or {}
    return {
        "dag_id": row.dag_id,
        "dag_display_name": row.dag_id,
        "is_paused": row.is_paused,
        "is_stale": row.is_stale,
        "last_parsed_time": when(row.last_parsed_time),
        "last_parse_duration": None,
        "last_expired": None,
        "bundle_name": None,
        "bundle_version": None,
        "relative_fileloc": None,
        "fileloc": row.fileloc,
        "description": None,
        "timetable_summary": _timetable_summary(row),
        "timetable_description": dag_schedule_description(row),
        "timetable_partitioned": False,
        "timetable_periodic": bool(timetable) and not timetable.get("once"),
        "tags": [
            {"name": tag, "dag_id": row.dag_id, "dag_display_name": row.dag_id} for tag in row.tags
        ],
        "max_active_tasks": row.max_active_tasks,
        "max_active_runs": row.max_active_runs,
        "max_consecutive_failed_dag_runs": 0,
        "has_task_concurrency_limits": False,
        # annotated by publicapi.selectors.dags (a row from elsewhere: not known, False)
        "has_import_errors": bool(getattr(row, "has_import_error", False)),
        "next_dagrun_logical_date": when(row.next_dagrun),
        "next_dagrun_data_interval_start": when(row.next_dagrun),
        "next_dagrun_data_interval_end": when(row.next_dagrun),
        "next_dagrun_run_after": when(row.next_dagrun_create_after),
        "allowed_run_types": None,
        "owners": list(row.owners),
        "is_backfillable": False,
        "file_token": "",
    }


def _duration(seconds: float | None) -> str | None:
    """A duration as ISO 8601 (Pydantic's ``timedelta`` form: ``P1DT2H0M0S``)."""
    if seconds is None:
        return None
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, rest = divmod(rest, 60)
    whole = f"{rest:.6f}".rstrip("0").rstrip(".")
    return f"P{int(days)}DT{int(hours)}H{int(minutes)}M{whole}S"


def dag_details(row: Dag, *, active_runs: int) -> dict[str, Any]:
    """Airflow's ``DAGDetailsResponse``: the DAG and what its file says of it."""
    timetable = row.timetable or {}
    return {
        **dag(row),
        "catchup": row.catchup,
        "dag_run_timeout": _duration(row.dagrun_timeout),
        "asset_expression": row.asset_expression,
        "doc_md": None,
        "start_date": when(row.start_date),
        "end_date": when(row.end_date),
        "is_paused_upon_creation": None,
        "params": {
            spec.name: {
                "value": None if spec.required else spec.default,
                "schema": dict(spec.schema),
                "description": spec.description,
                "source": None,
            }
            for spec in params_load(row.params)
        },
        "render_template_as_native_obj": False,
        "template_search_path": None,
        "timezone": str(timetable.get("timezone", "UTC")),
        "last_parsed": when(row.last_parsed_time),
        "default_args": None,
        "rerun_with_latest_version": None,
        "owner_links": None,
        "is_favorite": False,
        "active_runs_count": active_runs,
        "concurrency": row.max_active_tasks,
        "latest_dag_version": None,
    }


def _timedelta(seconds: float | None) -> dict[str, Any] | None:
    """Airflow's ``TimeDelta`` object of a number of seconds."""
    if seconds is None:
        return None
    delta = timedelta(seconds=seconds)
    return {
        "__type": "TimeDelta",
        "days": delta.days,
        "seconds": delta.seconds,
        "microseconds": delta.microseconds,
    }


def task(row: DagTask, *, dag: Dag, downstream: list[str]) -> dict[str, Any]:
    """Airflow's ``TaskResponse``: a task as its DAG file or manifest declares it (what the
    registry does not keep, as Airflow's defaults: no colours or templates)."""
    return {
        "task_id": row.task_id,
        "task_display_name": row.task_id,
        "owner": row.owner,
        "start_date": when(dag.start_date),
        "end_date": when(dag.end_date),
        "trigger_rule": row.trigger_rule,
        "depends_on_past": row.depends_on_past,
        "wait_for_downstream": row.wait_for_downstream,
        "retries": row.retries,
        "queue": row.queue,
        "pool": row.pool,
        "pool_slots": row.pool_slots,
        "execution_timeout": None,
        "retry_delay": _timedelta(row.retry_delay),
        "retry_exponential_backoff": row.retry_exponential_backoff,
        "priority_weight": row.priority_weight,
        "weight_rule": row.weight_rule,
        "ui_color": None,
        "ui_fgcolor": None,
        "template_fields": None,
        "downstream_task_ids": downstream,
        "doc_md": None,
        "operator_name": None,
        "params": None,
        "class_ref": None,
        "is_mapped": False,
        "extra_links": [],
    }


def dag_source(row: Dag, code: DagCode) -> dict[str, Any]:
    """Airflow's ``DAGSourceResponse``: the registry keeps one version of a DAG's file."""
    return {
        "content": code.source_code,
        "dag_id": row.dag_id,
        "version_number": 1,
        "dag_display_name": row.dag_id,
    }


def dag_stats(dag_id: str, by_state: dict[str, int]) -> dict[str, Any]:
    """Airflow's ``DagStatsResponse``: every run state, in Airflow's order, with its count."""
    return {
        "dag_id": dag_id,
        "dag_display_name": dag_id,
        "stats": [
            {"state": state, "count": by_state.get(state, 0)} for state in DagRunState.values
        ],
    }


def dag_run(row: DagRun) -> dict[str, Any]:
    duration = (
        (row.end_date - row.start_date).total_seconds()
        if row.end_date is not None and row.start_date is not None
        else None
    )
    triggered_by = row.triggered_by
    if triggered_by is None and row.run_type == DagRunType.ASSET_TRIGGERED:
        triggered_by = DagRunTriggeredBy.ASSET  # a run made before runs recorded it
    return {
        "dag_run_id": row.run_id,
        "dag_id": row.dag_id,
        "logical_date": when(row.logical_date),
        "queued_at": when(row.created_at),
        "start_date": when(row.start_date),
        "end_date": when(row.end_date),
        "duration": duration,
        "data_interval_start": when(row.data_interval_start),
        "data_interval_end": when(row.data_interval_end),
        "run_after": when(row.run_after),
        "last_scheduling_decision": None,
        "run_type": row.run_type,
        "state": row.state,
        "triggered_by": triggered_by,
        "triggering_user_name": row.triggering_user_name,
        "conf": row.conf,
        "note": _note(row),
        "dag_versions": [],
        "bundle_version": None,
        "dag_display_name": row.dag_id,
        "partition_key": row.partition_key,
        "partition_date": None,
    }


def _note(row: DagRun) -> str | None:
    """The run's note (``dag_run_note``, joined by ``assets_app.selectors.runs.dag_run_list``)."""
    note = getattr(row, "dag_run_note", None)
    return note.content if note is not None else None


def task_instance(row: TaskInstance) -> dict[str, Any]:
    """Needs the run joined (``dag_run``)."""
    run = row.dag_run
    return {
        "id": str(row.pk),
        "task_id": row.task_id,
        "dag_id": row.dag_id,
        "dag_run_id": row.run_id,
        "map_index": row.map_index,
        "logical_date": when(run.logical_date),
        "run_after": when(run.run_after),
        "start_date": when(row.start_date),
        "end_date": when(row.end_date),
        "duration": row.duration,
        "state": row.state,
        "try_number": row.try_number,
        "max_tries": row.max_tries,
        "task_display_name": row.task_id,
        "dag_display_name": row.dag_id,
        "hostname": row.hostname or None,
        "unixname": row.unixname or None,
        "pool": row.pool,
        "pool_slots": row.pool_slots,
        "queue": "default",
        "priority_weight": row.priority_weight,
        "operator": None,
        "operator_name": None,
        "queued_when": None,
        "scheduled_when": None,
        "pid": row.pid,
        "executor": None,
        "executor_config": "{}",
        "note": None,
        "rendered_map_index": row.rendered_map_index,
        "rendered_fields": row.rendered_fields,
        **_trigger(row),
        "dag_version": None,
    }


def _trigger(row: TaskInstance) -> dict[str, Any]:
    """A deferred task instance's ``trigger`` (Airflow's ``TriggerResponse``, its deprecated
    ``kwargs`` emptied as Airflow does) and ``triggerer_job`` (``JobResponse`` of the triggerer
    running it); null otherwise. Needs them joined (``task_instances_of_run``)."""
    trigger = row.trigger if row.trigger_id is not None else None
    if trigger is None:
        return {"trigger": None, "triggerer_job": None}
    triggerer = trigger.triggerer
    return {
        "trigger": {
            "id": trigger.pk,
            "classpath": trigger.classpath,
            "kwargs": "",
            "created_date": when(trigger.created_date),
            "queue": trigger.queue,
            "triggerer_id": trigger.triggerer_id,
        },
        "triggerer_job": None
        if triggerer is None
        else {
            "id": triggerer.pk,
            "dag_id": None,
            "state": "success" if triggerer.ended_at else "running",
            "job_type": "TriggererJob",
            "start_date": when(triggerer.started_at),
            "end_date": when(triggerer.ended_at),
            "latest_heartbeat": when(triggerer.heartbeat),
            "executor_class": None,
            "hostname": triggerer.hostname or None,
            "unixname": None,
            "dag_display_name": None,
        },
    }


def xcom_entry(row: XCom) -> dict[str, Any]:
    """``XComResponse``: an entry of the XCom list, without its value."""
    run = row.dag_run
    return {
        "key": row.key,
        "timestamp": when(row.timestamp),
        "logical_date": when(run.logical_date),
        "map_index": row.map_index,
        "task_id": row.task_id,
        "dag_id": row.dag_id,
        "run_id": row.run_id,
        "dag_display_name": row.dag_id,
        "task_display_name": row.task_id,
        "run_after": when(run.run_after),
    }


def xcom(row: XCom, *, stringify: bool) -> dict[str, Any]:
    """``XComResponseString`` (the value as text, Airflow's default) or ``…Native``."""
    value: Any = row.value
    if stringify:
        value = value if isinstance(value, str) or value is None else json.dumps(value)
    return {**xcom_entry(row), "value": value}
