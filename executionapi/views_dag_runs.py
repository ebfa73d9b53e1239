"""``/dag-runs/…``, ``/dags/{dag_id}`` and ``/health``: Airflow 3.3.2's routes
(``airflow/api_fastapi/execution_api/routes/dag_runs.py``, ``dags.py``, ``health.py``), same
paths, query parameters, bodies, status codes and error bodies.

What a task does with them: ``TriggerDagRunOperator`` triggers (and, with
``reset_dag_run``, clears) a run and polls its state; ``get_dr_count``,
``get_dagrun_state``, ``get_previous_dagrun`` and ``get_dag`` read. Any valid task token
reads; triggering and clearing also need the token's task instance to be running.
"""

from __future__ import annotations

from typing import Any, NoReturn, cast

from django.db import DatabaseError, connection
from django.http import HttpResponseBase
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import APIException, NotFound
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from assets_app.exceptions import (
    DagNotFoundError,
    DagRunConfError,
    DagRunExistsError,
    DagStaleError,
    TaskInstanceClearRefusedError,
    TaskInstanceInputError,
)
from assets_app.models import Dag, DagImportError, DagRun, DagRunTriggeredBy
from assets_app.services.runs.clearing import task_instances_clear
from assets_app.services.runs.dag_runs import dag_run_trigger
from executionapi import selectors
from executionapi.exceptions import BadRequest
from executionapi.permissions import RunningTaskInstanceWrites
from executionapi.serializers import common
from executionapi.serializers import dag_runs as dr_s
from executionapi.views import (
    BODY_ERRORS,
    CONFLICT,
    ERRORS,
    GATEWAY_ERRORS,
    NOT_FOUND,
    ExecutionAPIView,
    _body,
    _valid,
    _valid_query,
    json_answer,
)


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def _not_found(message: str) -> NoReturn:
    raise NotFound({"reason": "not_found", "message": message})


def _triggerable_dag(dag_id: str) -> Dag:
    """The DAG a task may trigger or clear a run of: declared, not stale, its file loading
    (Airflow's ``DagModel`` checks); else Airflow's 404 or 400."""
    dag = Dag.objects.filter(dag_id=dag_id, is_stale=False).first()
    if dag is None:
        _not_found(f"Dag with dag_id: '{dag_id}' not found")
    if dag.fileloc and DagImportError.objects.filter(filename=dag.fileloc).exists():
        raise BadRequest(
            {
                "reason": "import_errors",
                "message": f"Dag with dag_id '{dag_id}' has import errors and cannot be triggered",
            }
        )
    return dag


def _path(serializer_class: type[dr_s.DagPathSerializer], view: ExecutionAPIView) -> None:
    """A 422 naming the path parameter that holds a NUL (which no id holds)."""
    _valid(serializer_class(data=view.kwargs), location="path")


def _run_not_found(dag_id: str, run_id: str) -> NoReturn:
    _not_found(f"Dag run with dag_id '{dag_id}' and run_id '{run_id}' was not found")


TRIGGER_ERRORS = {
    400: OpenApiResponse(
        common.ErrorResponseSerializer,
        description="The DAG has import errors, or the payload cannot be used",
    ),
    404: OpenApiResponse(common.ErrorResponseSerializer, description="No such DAG"),
}


@extend_schema(tags=["Dag Runs"])
class DagRunView(ExecutionAPIView):
    """``/dag-runs/{dag_id}/{run_id}``: read a run, or trigger one."""

    permission_classes = [RunningTaskInstanceWrites]

    @extend_schema(
        operation_id="get_dag_run",
        summary="Get detail of a Dag run",
        responses={200: dr_s.DagRunDetailSerializer, **NOT_FOUND, **ERRORS},
    )
    def get(self, request: Request, dag_id: str, run_id: str) -> Response:
        _path(dr_s.DagRunPathSerializer, self)
        dag_run = selectors.dag_run_detail(dag_id=dag_id, run_id=run_id)
        if dag_run is None:
            _run_not_found(dag_id, run_id)
        return Response(dr_s.DagRunDetailSerializer(dag_run).data)

    @extend_schema(
        operation_id="trigger_dag_run",
        summary="Trigger a Dag run",
        description=(
            "A queued run with one scheduled task instance per task. Without a "
            "`logical_date` the run has none (and no data interval), as in Airflow."
        ),
        request=dr_s.TriggerDAGRunPayloadSerializer,
        responses={
            204: OpenApiResponse(description="Triggered"),
            **TRIGGER_ERRORS,
            **CONFLICT,
            **BODY_ERRORS,
            **ERRORS,
        },
    )
    def post(self, request: Request, dag_id: str, run_id: str) -> Response:
        _path(dr_s.DagRunPathSerializer, self)
        payload = _valid(dr_s.TriggerDAGRunPayloadSerializer(data=_body(request))).validated_data
        _triggerable_dag(dag_id)
        if payload.get("partition_key") is not None:
            raise BadRequest(
                {
                    "reason": "not_partitioned",
                    "message": (
                        f"Dag '{dag_id}' is not a partitioned Dag and does not accept a "
                        "partition_key."
                    ),
                }
            )
        try:
            dag_run_trigger(
                dag_id=dag_id,
                run_id=run_id,
                conf=payload.get("conf") or {},
                logical_date=payload.get("logical_date"),
                run_after=payload.get("run_after"),
                triggered_by=DagRunTriggeredBy.OPERATOR,
                triggering_user_name=selectors.run_triggering_user_name(
                    task_instance_id=cast(Any, request.user).task_instance_id
                ),
            )
        except (DagNotFoundError, DagStaleError):  # gone since the check above
            _not_found(f"Dag with dag_id: '{dag_id}' not found")
        except DagRunExistsError as exc:
            raise Conflict(
                {
                    "reason": "already_exists",
                    "message": f"A run already exists for Dag '{dag_id}' with run_id '{run_id}'",
                }
            ) from exc
        except (TaskInstanceInputError, DagRunConfError) as exc:
            raise BadRequest({"reason": "value_error", "message": exc.message}) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["Dag Runs"])
class DagRunClearView(ExecutionAPIView):
    """``POST /dag-runs/{dag_id}/{run_id}/clear``: every finished task instance of the run
    runs again (``assets_app.services.runs.clearing``)."""

    permission_classes = [RunningTaskInstanceWrites]

    @extend_schema(
        operation_id="clear_dag_run",
        summary="Clear a Dag run",
        description=(
            "A run with a running task instance is not cleared: 409 `clear_refused` "
            "(Airflow would restart the running ones)."
        ),
        request=None,
        responses={
            204: OpenApiResponse(description="Cleared"),
            **TRIGGER_ERRORS,
            **CONFLICT,
            **ERRORS,
        },
    )
    def post(self, request: Request, dag_id: str, run_id: str) -> Response:
        _path(dr_s.DagRunPathSerializer, self)
        _triggerable_dag(dag_id)
        dag_run = DagRun.objects.filter(dag_id=dag_id, run_id=run_id).first()
        if dag_run is None:
            _not_found(f"Dag run with run_id: '{run_id}' not found")
        try:
            task_instances_clear(task_instances=dag_run.task_instances.all())
        except TaskInstanceClearRefusedError as exc:
            raise Conflict({"reason": exc.code, "message": exc.message}) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["Dag Runs"])
class DagRunStateView(ExecutionAPIView):
    """``GET /dag-runs/{dag_id}/{run_id}/state``."""

    @extend_schema(
        operation_id="get_dagrun_state",
        summary="Get a Dag run State",
        responses={200: dr_s.DagRunStateResponseSerializer, **NOT_FOUND, **ERRORS},
    )
    def get(self, request: Request, dag_id: str, run_id: str) -> Response:
        _path(dr_s.DagRunPathSerializer, self)
        state = (
            DagRun.objects.filter(dag_id=dag_id, run_id=run_id)
            .values_list("state", flat=True)
            .first()
        )
        if state is None:
            _run_not_found(dag_id, run_id)
        return Response(dr_s.DagRunStateResponseSerializer({"state": state}).data)


@extend_schema(tags=["Dag Runs"])
class DagRunCountView(ExecutionAPIView):
    """``GET /dag-runs/count?dag_id=…``: an integer."""

    @extend_schema(
        operation_id="get_dr_count",
        summary="Get the count of Dag runs matching the given criteria",
        parameters=[dr_s.DagRunCountQuerySerializer],
        responses={200: OpenApiResponse({"type": "integer"}), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = _valid_query(dr_s.DagRunCountQuerySerializer, request).validated_data
        count = selectors.dag_runs_count(
            dag_id=query["dag_id"],
            logical_dates=query.get("logical_dates", ()),
            run_ids=query.get("run_ids", ()),
            states=query.get("states", ()),
        )
        return Response(count)


@extend_schema(tags=["Dag Runs"])
class DagRunPreviousView(ExecutionAPIView):
    """``GET /dag-runs/previous?dag_id=…&logical_date=…``: the run before, or ``null``."""

    @extend_schema(
        operation_id="get_previous_dagrun",
        summary="Get the previous Dag run before the given logical date",
        parameters=[dr_s.DagRunPreviousQuerySerializer],
        responses={
            200: OpenApiResponse(
                dr_s.DagRunDetailSerializer, description="The run, or null when there is none"
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> HttpResponseBase:
        query = _valid_query(dr_s.DagRunPreviousQuerySerializer, request).validated_data
        dag_run = selectors.dag_run_previous(
            dag_id=query["dag_id"], logical_date=query["logical_date"], state=query.get("state")
        )
        return json_answer(None if dag_run is None else dr_s.DagRunDetailSerializer(dag_run).data)


@extend_schema(tags=["Dags"])
class DagView(ExecutionAPIView):
    """``GET /dags/{dag_id}``."""

    @extend_schema(
        operation_id="get_dag",
        summary="Get a DAG",
        responses={200: dr_s.DagResponseSerializer, **NOT_FOUND, **ERRORS},
    )
    def get(self, request: Request, dag_id: str) -> Response:
        _path(dr_s.DagPathSerializer, self)
        dag = Dag.objects.filter(dag_id=dag_id).first()
        if dag is None:
            _not_found(f"The Dag with dag_id: `{dag_id}` was not found")
        return Response(dr_s.DagResponseSerializer(dag).data)


@extend_schema(tags=["Health"])
class HealthView(ExecutionAPIView):
    """``GET /health``: no token needed (Airflow's health router is outside its auth)."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="health",
        auth=[],
        responses={200: dr_s.HealthResponseSerializer, **GATEWAY_ERRORS},
    )
    def get(self, request: Request) -> Response:
        return Response(dr_s.HealthResponseSerializer({"status": "healthy"}).data)


@extend_schema(tags=["Health"])
class HealthPingView(HealthView):
    """``GET /health/ping``: each service the API needs, pinged (here: the database); 500
    when one fails, as Airflow."""

    @extend_schema(
        operation_id="ping",
        auth=[],
        responses={
            200: dr_s.PingResponseSerializer,
            500: dr_s.PingResponseSerializer,
            **GATEWAY_ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        ok: list[str] = []
        failing: dict[str, str] = {}
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            ok.append("database")
        except DatabaseError as exc:
            failing["database"] = repr(exc)
        body = dr_s.PingResponseSerializer({"ok": ok, "failing": failing}).data
        return Response(body, status=status.HTTP_500_INTERNAL_SERVER_ERROR if failing else 200)
