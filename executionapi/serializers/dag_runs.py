"""``/dag-runs/…``, ``/dags/{dag_id}`` and the task-instance queries of a DAG
(``/task-instances/count``, ``states``, ``previous/…``, ``breadcrumbs``): Airflow 3.3.2's
``TriggerDAGRunPayload``, ``DagRun``, ``DagRunStateResponse``, ``DagResponse``,
``PreviousTIResponse``, ``TaskStatesResponse`` and ``TaskBreadcrumbsResponse``, and the query
parameters of each route."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from assets_app.models import PARTITION_KEY_LENGTH, Dag, DagRunState, TaskInstanceState
from executionapi.serializers.common import (
    INTEGER_MAX,
    AwareDateTimeField,
    JSONObjectField,
    QueryIntegerField,
    StrictSerializer,
    StrictStringField,
)
from executionapi.serializers.task_instances import DagRunContextSerializer


def _query_text(**kwargs: Any) -> serializers.CharField:
    """A query string as sent: blank allowed (it matches nothing), no NUL (a 422)."""
    return serializers.CharField(trim_whitespace=False, allow_blank=True, **kwargs)


def _query_texts() -> serializers.ListField:
    return serializers.ListField(child=_query_text(), required=False)


# --- POST /dag-runs/{dag_id}/{run_id} -------------------------------------------------------


class TriggerDAGRunPayloadSerializer(StrictSerializer):
    """``TriggerDAGRunPayload``: every key optional, no other key."""

    logical_date = AwareDateTimeField(required=False, allow_null=True)
    run_after = AwareDateTimeField(required=False, allow_null=True)
    conf = JSONObjectField(required=False, allow_null=True)
    reset_dag_run = serializers.BooleanField(required=False, default=False)
    partition_key = StrictStringField(
        required=False, allow_null=True, max_length=PARTITION_KEY_LENGTH
    )
    note = StrictStringField(required=False, allow_null=True, max_length=1000)


# --- GET /dag-runs/{dag_id}/{run_id}, /state, /previous -------------------------------------


class DagRunDetailSerializer(DagRunContextSerializer):
    """``DagRun``: the run context's ``dag_run`` (with its ``conf``); what the registry does
    not keep (clears, the triggering user, notes, teams, partition dates) as Airflow's
    defaults."""

    clear_number = serializers.SerializerMethodField()
    triggering_user_name = serializers.SerializerMethodField()
    partition_date = serializers.SerializerMethodField()
    note = serializers.SerializerMethodField()
    team_name = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.INT)
    def get_clear_number(self, dag_run: Any) -> int:
        return 0

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_triggering_user_name(self, dag_run: Any) -> None:
        return None

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_partition_date(self, dag_run: Any) -> None:
        return None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_note(self, dag_run: Any) -> None:
        return None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_team_name(self, dag_run: Any) -> None:
        return None


class DagRunStateResponseSerializer(serializers.Serializer[Any]):
    state = serializers.ChoiceField(choices=DagRunState.choices)


class DagRunPreviousQuerySerializer(serializers.Serializer[Any]):
    dag_id = _query_text()
    logical_date = AwareDateTimeField()
    state = serializers.ChoiceField(choices=DagRunState.choices, required=False)


class DagRunCountQuerySerializer(serializers.Serializer[Any]):
    """``GET /dag-runs/count``: the list parameters repeat (``run_ids=a&run_ids=b``)."""

    dag_id = _query_text()
    logical_dates = serializers.ListField(child=AwareDateTimeField(), required=False)
    run_ids = _query_texts()
    states = _query_texts()


# --- GET /dags/{dag_id} ------------------------------------------------------------------------


class DagResponseSerializer(serializers.Serializer[Dag]):
    """``DagResponse``. The registry keeps no bundles; ``owners`` is its tasks' owners
    joined by ``", "`` (Airflow's ``DagModel.owners``, sorted here); a DAG loaded from a file
    names the file (its name: the registry keeps no bundle root to be relative to)."""

    dag_id = serializers.CharField()
    is_paused = serializers.BooleanField()
    bundle_name = serializers.SerializerMethodField()
    bundle_version = serializers.SerializerMethodField()
    relative_fileloc = serializers.SerializerMethodField()
    owners = serializers.SerializerMethodField()
    tags = serializers.SerializerMethodField()
    next_dagrun = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_bundle_name(self, dag: Dag) -> None:
        return None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_bundle_version(self, dag: Dag) -> None:
        return None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_relative_fileloc(self, dag: Dag) -> str | None:
        return PurePath(dag.fileloc).name if dag.fileloc.endswith(".py") else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_owners(self, dag: Dag) -> str | None:
        return ", ".join(dag.owners) or None

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_tags(self, dag: Dag) -> list[str]:
        return sorted(str(tag) for tag in dag.tags or ())


# --- GET /task-instances/count, /states, /previous/{dag_id}/{task_id}, /breadcrumbs ----------


class TaskInstancesQuerySerializer(serializers.Serializer[Any]):
    """The filters ``count`` and ``states`` share (list parameters repeat)."""

    dag_id = _query_text()
    map_index = QueryIntegerField(required=False, min_value=-INTEGER_MAX, max_value=INTEGER_MAX)
    task_ids = _query_texts()
    task_group_id = _query_text(required=False)
    logical_dates = serializers.ListField(child=AwareDateTimeField(), required=False)
    run_ids = _query_texts()


class TaskInstanceCountQuerySerializer(TaskInstancesQuerySerializer):
    states = serializers.ListField(
        child=_query_text(),
        required=False,
        help_text='Task instance states; "null" stands for no state',
    )


class TaskStatesResponseSerializer(serializers.Serializer[Any]):
    task_states = serializers.DictField(
        child=serializers.DictField(child=serializers.CharField(allow_null=True)),
        help_text="run id → task id (``<task id>_<map index>`` when mapped) → state",
    )


class PreviousTIQuerySerializer(serializers.Serializer[Any]):
    logical_date = AwareDateTimeField(required=False)
    map_index = QueryIntegerField(
        required=False, default=-1, min_value=-INTEGER_MAX, max_value=INTEGER_MAX
    )
    state = serializers.ChoiceField(choices=TaskInstanceState.choices, required=False)


class PreviousTIResponseSerializer(serializers.Serializer[Any]):
    task_id = serializers.CharField()
    dag_id = serializers.CharField()
    run_id = serializers.CharField()
    logical_date = serializers.DateTimeField(source="dag_run.logical_date", allow_null=True)
    start_date = serializers.DateTimeField(allow_null=True)
    end_date = serializers.DateTimeField(allow_null=True)
    state = serializers.CharField(allow_null=True)
    try_number = serializers.IntegerField()
    map_index = serializers.IntegerField()
    duration = serializers.FloatField(allow_null=True)


class BreadcrumbsQuerySerializer(serializers.Serializer[Any]):
    dag_id = _query_text()
    run_id = _query_text()


class BreadcrumbSerializer(serializers.Serializer[Any]):
    task_id = serializers.CharField()
    map_index = serializers.IntegerField()
    state = serializers.CharField()
    operator = serializers.SerializerMethodField(help_text="Not kept by the registry: null")
    duration = serializers.FloatField(allow_null=True)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_operator(self, ti: Any) -> None:
        return None


class TaskBreadcrumbsResponseSerializer(serializers.Serializer[Any]):
    breadcrumbs = BreadcrumbSerializer(many=True)


# --- GET /health ---------------------------------------------------------------------------------


class HealthResponseSerializer(serializers.Serializer[Any]):
    status = serializers.CharField()


class PingResponseSerializer(serializers.Serializer[Any]):
    ok = serializers.ListField(child=serializers.CharField())
    failing = serializers.DictField(child=serializers.CharField())


# --- path parameters: no NUL (no column holds one, and PostgreSQL refuses it in a query) -------


def _path_id() -> serializers.CharField:
    return serializers.CharField(trim_whitespace=False)


class DagPathSerializer(serializers.Serializer[Any]):
    dag_id = _path_id()


class DagRunPathSerializer(DagPathSerializer):
    run_id = _path_id()


class TaskPathSerializer(DagPathSerializer):
    task_id = _path_id()
