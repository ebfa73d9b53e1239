"""Operator API views: thin viewsets over ``operatorapi.selectors`` (reads) and the services of
``assets_app`` (writes), mounted at ``/api/v1/`` by ``operatorapi.urls``.

Every route authenticates a Django user (``Authorization: Token <key>`` or the admin's session)
and checks the user's model permissions, reads included (:mod:`operatorapi.permissions`).
Answers are JSON; a browser of a user logged in to the admin gets DRF's browsable API.
Lists are cursor-paginated (:mod:`operatorapi.pagination`) and filtered by strict query
parameters (:mod:`operatorapi.filters`); errors follow :mod:`operatorapi.exceptions`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, routers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from assets_app.edge.parsers import JSONBodyParser
from assets_app.models import TaskInstance
from assets_app.selectors.dags import dag_list, import_error_list
from assets_app.selectors.runs import dag_run_list
from assets_app.services.assets.events import asset_event_create_manual
from assets_app.services.audit import Actor
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.clearing import task_instances_clear, task_instances_select
from assets_app.services.runs.dag_runs import dag_run_trigger
from operatorapi import selectors
from operatorapi import serializers as s
from operatorapi.authentication import AUTHENTICATION_CLASSES, session_user_logged_in
from operatorapi.exceptions import exception_handler
from operatorapi.executor import executor_state
from operatorapi.filters import (
    AssetAliasFilter,
    AssetEventFilter,
    AssetFilter,
    DagFilter,
    DagRunFilter,
    ImportErrorFilter,
    QueueFilter,
    StrictFilterBackend,
)
from operatorapi.pagination import KeysetPagination
from operatorapi.params import refuse_nul
from operatorapi.permissions import ClearPermission, ModelPermissions, TriggerPermission


class OperatorAPIMixin(APIView):
    """Auth, permissions, JSON in and out, and this API's own exception handler."""

    authentication_classes = AUTHENTICATION_CLASSES
    permission_classes = [ModelPermissions]
    renderer_classes = [JSONRenderer]
    parser_classes = [JSONBodyParser]

    def get_exception_handler(self) -> Any:
        return exception_handler

    def get_renderers(self) -> list[BaseRenderer]:
        """JSON; and DRF's browsable API for a browser (``Accept: text/html``) of a user logged
        in to the admin. JSON stays the default (``*/*``), and the schema knows only JSON."""
        renderers: list[BaseRenderer] = [JSONRenderer()]
        if not getattr(self, "swagger_fake_view", False) and session_user_logged_in(
            getattr(self, "request", None)
        ):
            renderers.append(BrowsableAPIRenderer())
        return renderers

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """Once the caller is known and allowed: no NUL in any parameter (400 naming a query
        parameter, 404 for a path id), before any filter, cursor or lookup reads them."""
        super().initial(request, *args, **kwargs)
        refuse_nul(request, kwargs)


class OperatorViewSet(OperatorAPIMixin, viewsets.GenericViewSet):  # type: ignore[type-arg]
    """Base of the resources: keyset pages ordered by ``cursor_ordering``, strict filters."""

    pagination_class = KeysetPagination
    filter_backends = [StrictFilterBackend]
    cursor_ordering: tuple[str, ...] = ("-id",)
    lookup_value_regex = "[0-9]+"


class ReadOnlyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, OperatorViewSet):
    pass


NOT_FOUND = {404: OpenApiResponse(description="No such object")}

ViewSetT = TypeVar("ViewSetT", bound=type[ReadOnlyViewSet])


def documented(*, plural: str, one: str, order: str) -> Callable[[ViewSetT], ViewSetT]:
    """The docs of a resource's list (``List <plural>``, in ``order``) and retrieve (``One
    <one>``, its ``serializer_class`` or a 404) operations."""

    def decorate(viewset: ViewSetT) -> ViewSetT:
        serializer = viewset.serializer_class  # type: ignore[misc]  # the class's, not generic
        return extend_schema_view(
            list=extend_schema(summary=f"List {plural}", description=order),
            retrieve=extend_schema(summary=f"One {one}", responses={200: serializer, **NOT_FOUND}),
        )(viewset)

    return decorate


@documented(plural="assets", one="asset", order="Oldest first (by id).")
class AssetViewSet(ReadOnlyViewSet):
    queryset = selectors.asset_list()
    serializer_class = s.AssetSerializer
    filterset_class = AssetFilter
    cursor_ordering = ("id",)


@documented(plural="asset aliases", one="asset alias", order="Oldest first (by id).")
class AssetAliasViewSet(ReadOnlyViewSet):
    queryset = selectors.asset_alias_list()
    serializer_class = s.AssetAliasSerializer
    filterset_class = AssetAliasFilter
    cursor_ordering = ("id",)


@documented(
    plural="asset events",
    one="asset event",
    order="Newest first (by timestamp, then id). Following the `next` links returns every event "
    "committed before the first page exactly once, whatever is inserted meanwhile.",
)
class AssetEventViewSet(ReadOnlyViewSet):
    queryset = selectors.asset_event_list()
    serializer_class = s.AssetEventSerializer
    filterset_class = AssetEventFilter
    cursor_ordering = ("-timestamp", "-id")

    @extend_schema(
        summary="Create an asset event by asset name or uri",
        description="Records a manual event (no source task) and queues the DAGs that consume "
        "the asset, exactly as a task's event would. Needs `assets_app.add_assetevent`.",
        request=s.AssetEventCreateSerializer,
        responses={
            201: s.AssetEventSerializer,
            400: OpenApiResponse(description="Bad input, or a name/uri matching several assets"),
            404: OpenApiResponse(description="No asset with that name/uri"),
            413: OpenApiResponse(description="Body too large"),
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        payload = s.AssetEventCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        event = asset_event_create_manual(
            **payload.validated_data, actor=Actor.of_request(request, "rest_api")
        )
        created = self.get_queryset().get(pk=event.pk)
        location = reverse("operatorapi:asset-event-detail", args=[event.pk], request=request)
        return Response(
            s.AssetEventSerializer(created).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": location},
        )


@documented(plural="DAGs", one="DAG", order="By dag_id.")
class DagViewSet(ReadOnlyViewSet):
    queryset = dag_list()
    serializer_class = s.DagSerializer
    filterset_class = DagFilter
    cursor_ordering = ("dag_id",)
    lookup_field = "dag_id"
    lookup_value_regex = "[^/]+"

    @extend_schema(
        summary="Pause or unpause a DAG",
        description="A paused DAG's queue rows wait until it is unpaused. Needs "
        "`assets_app.change_dag`.",
        request=s.DagPatchSerializer,
        responses={200: s.DagSerializer, **NOT_FOUND},
    )
    def partial_update(self, request: Request, dag_id: str) -> Response:
        dag = self.get_object()
        payload = s.DagPatchSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        dags_set_paused(
            dag_ids=[dag.dag_id],
            is_paused=payload.validated_data["is_paused"],
            actor=Actor.of_request(request, "rest_api"),
        )
        dag.refresh_from_db()
        return Response(s.DagSerializer(dag).data)

    def get_permissions(self) -> Sequence[Any]:
        if self.action == "trigger":
            return [TriggerPermission()]
        return super().get_permissions()

    @extend_schema(
        summary="Trigger a DAG run",
        description="A manual run of the DAG, as Airflow's *trigger*, with one task instance "
        "per declared task: `running` at once with its first tasks scheduled for a worker "
        "when the DAG has room (`max_active_runs`), else `queued` until it has (a paused DAG's "
        "run waits until it is unpaused); each next task is scheduled as its upstreams finish "
        "(its trigger rule). 409 `dag_run_exists` for a taken run id, 409 `dag_stale` for a stale "
        "DAG. Needs `assets_app.add_dagrun`.",
        request=s.DagRunTriggerSerializer,
        responses={
            201: s.DagRunSerializer,
            409: OpenApiResponse(description="The run id is taken, or the DAG is stale"),
            **NOT_FOUND,
        },
    )
    @action(detail=True, methods=["post"], url_path="runs")
    def trigger(self, request: Request, dag_id: str) -> Response:
        dag = self.get_object()
        payload = s.DagRunTriggerSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        dag_run = dag_run_trigger(
            dag_id=dag.dag_id,
            actor=Actor.of_request(request, "rest_api"),  # triggered_by and the user
            **payload.validated_data,
        )
        return Response(s.DagRunSerializer(dag_run).data, status=status.HTTP_201_CREATED)


@documented(plural="DAG runs", one="DAG run", order="Newest first (by id).")
@documented(
    plural="import errors",
    one="import error",
    order="By file path. One per DAG file that failed to load (Airflow's import errors): its "
    "traceback, or the features the registry refused; the row goes when the file loads again.",
)
class ImportErrorViewSet(ReadOnlyViewSet):
    queryset = import_error_list()
    serializer_class = s.ImportErrorSerializer
    filterset_class = ImportErrorFilter
    cursor_ordering = ("filename",)


class DagRunViewSet(ReadOnlyViewSet):
    queryset = dag_run_list()
    serializer_class = s.DagRunSerializer
    filterset_class = DagRunFilter

    def get_permissions(self) -> Sequence[Any]:
        if self.action == "clear":
            return [ClearPermission()]
        return super().get_permissions()

    @extend_schema(
        summary="Clear a DAG run's task instances",
        description="Airflow's *clear*: the run's finished task instances (or those of "
        "`task_ids`, or only the failed ones) run again as a new try, and the run goes back to "
        "`queued` if it had finished. Refused with 409 `clear_refused`, nothing written, when "
        "a selected task instance is running. Needs `assets_app.change_taskinstance`.",
        request=s.DagRunClearSerializer,
        responses={
            200: s.ClearResultSerializer,
            409: OpenApiResponse(description="A selected task instance is running"),
            **NOT_FOUND,
        },
    )
    @action(detail=True, methods=["post"])
    def clear(self, request: Request, pk: str) -> Response:
        run = self.get_object()
        payload = s.DagRunClearSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        options = payload.validated_data
        selected = task_instances_select(
            dag_id=run.dag_id, run_id=run.run_id, only_failed=options["only_failed"]
        )
        if "task_ids" in options:
            selected = selected.filter(task_id__in=options["task_ids"])
        result = task_instances_clear(
            task_instances=selected,
            dry_run=options["dry_run"],
            actor=Actor.of_request(request, "rest_api"),
            event="clear_dag_run",
            dag_id=run.dag_id,
            run_id=run.run_id,
            extra={"only_failed": options["only_failed"], "task_ids": options.get("task_ids")},
        )
        return Response(
            s.ClearResultSerializer(
                {
                    "dry_run": result.dry_run,
                    "cleared": result.cleared,
                    "left_alone": [
                        {"task_instance": label, "state": state}
                        for label, state in result.left_alone
                    ],
                    "runs_requeued": result.runs_requeued,
                }
            ).data
        )


@extend_schema_view(
    list=extend_schema(
        summary="List the asset DAG-run queue",
        description="Consumer DAGs waiting to run because an asset changed "
        "(`asset_dag_run_queue`), oldest first (by id).",
    ),
)
class QueueViewSet(mixins.ListModelMixin, OperatorViewSet):
    queryset = selectors.queue_list()
    serializer_class = s.QueueEntrySerializer
    filterset_class = QueueFilter
    cursor_ordering = ("id",)


class _OneObjectSchema(AutoSchema):
    """A ``list`` route that answers one object (not an array, not paginated)."""

    def _is_list_view(self, serializer: Any = None) -> bool:
        return False


class ExecutorViewSet(OperatorAPIMixin, viewsets.ViewSet):
    """The executor's queues and workers (``operatorapi.executor``); needs
    ``view_taskinstance``."""

    queryset = TaskInstance.objects.none()  # the model whose view permission it needs
    schema = _OneObjectSchema()

    @extend_schema(
        summary="The executor's queues and workers",
        description="Per task queue, the task instances queued (handed to the executor, not "
        "started) and scheduled (not handed over yet), and the oldest queued one's wait; with "
        "EXECUTOR=celery, the Celery workers that answered an inspect within a second and the "
        "queues they take.",
        responses={200: s.ExecutorStateSerializer},
    )
    def list(self, request: Request) -> Response:
        state = executor_state()
        body = {
            "executor": state.executor,
            "queues": [
                {
                    "queue": depth.queue,
                    "queued": depth.queued,
                    "scheduled": depth.scheduled,
                    "oldest_queued_at": depth.oldest_queued_at,
                    "oldest_wait_seconds": (
                        None
                        if depth.oldest_queued_at is None
                        else max((state.now - depth.oldest_queued_at).total_seconds(), 0.0)
                    ),
                }
                for depth in state.queues
            ],
            "workers": [{"name": w.name, "queues": w.queues} for w in state.workers],
            "workers_error": state.workers_error,
        }
        return Response(s.ExecutorStateSerializer(body).data)


class OperatorAPIRootView(OperatorAPIMixin, routers.APIRootView):
    """The resources of the operator API, and its schema and docs (any authenticated user)."""

    permission_classes = [IsAuthenticated]
    schema = AutoSchema()  # DRF leaves the root out of schemas; this API lists it

    @extend_schema(
        summary="The resources of this API",
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="name → URL")},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().get(request, *args, **kwargs)
        for name in ("openapi", "docs"):
            response.data[name] = reverse(f"operatorapi:{name}", request=request)
        return response
