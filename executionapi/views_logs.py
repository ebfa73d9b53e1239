"""``/execution/task-instances/{id}/logs``: the worker ships each try's log here while the try
runs (``runtime.log_shipping``), with the try's own token (its ``sub`` must be ``{id}``, as on
every ``/task-instances/{id}/…`` route). A registry route, not one of Airflow's execution API
(Airflow's workers keep their logs and serve them themselves); documented in
docs/api-execution.md, "Task logs".

``{id}`` is the try's id: the task instance's, or an earlier try's (its id in the task
instance's history), so that the end of a try's log is accepted after the try has become
history (a retry, a clear).
"""

from __future__ import annotations

import uuid

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from assets_app.services.runs.logs import task_log_append, task_log_position
from executionapi.serializers import common
from executionapi.serializers import logs as log_s
from executionapi.views import (
    BODY_ERRORS,
    ERRORS,
    ExecutionAPIView,
    _body,
    _valid,
)

NOT_FOUND_TRY = {
    404: OpenApiResponse(
        common.ErrorResponseSerializer, description="No such try (current or earlier)"
    )
}
GAP = {
    409: OpenApiResponse(
        common.ErrorResponseSerializer,
        description="`log_offset_gap`: the chunk starts past the bytes received "
        "(`expected_offset` says where the next one must start)",
    )
}


@extend_schema(tags=["Task Logs"])
class TaskLogView(ExecutionAPIView):
    """A try's log: where it stands (``GET``), and the next chunk of it (``POST``)."""

    @extend_schema(
        operation_id="ti_log_position",
        summary="Where the try's log stands: the offset its next chunk starts at",
        responses={200: log_s.TaskLogPositionSerializer, **NOT_FOUND_TRY, **ERRORS},
    )
    def get(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        position = task_log_position(task_instance_id=task_instance_id)
        return Response(log_s.TaskLogPositionSerializer(position).data)

    @extend_schema(
        operation_id="ti_log_append",
        summary="Append the next chunk of the try's log",
        description=(
            "The chunk is masked (every secret the server keeps becomes `***`) and stored; "
            "past TASK_LOG_MAX_BYTES the log is cut with a marker line and later chunks are "
            "counted, not kept. A chunk received already (same `offset`) is acknowledged and "
            "not stored again."
        ),
        request=log_s.TaskLogAppendSerializer,
        responses={
            200: log_s.TaskLogPositionSerializer,
            **BODY_ERRORS,
            **NOT_FOUND_TRY,
            **GAP,
            **ERRORS,
        },
    )
    def post(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        data = _valid(log_s.TaskLogAppendSerializer(data=_body(request))).validated_data
        position = task_log_append(
            task_instance_id=task_instance_id,
            offset=data["offset"],
            content=data["content"],
            final=data["final"],
        )
        return Response(log_s.TaskLogPositionSerializer(position).data)
