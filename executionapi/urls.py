"""Execution API routes, mounted at ``/execution/``.

No trailing slashes and no redirects. The viewsets are routed by a ``SimpleRouter`` (a
task instance's id must be a UUID); the XCom and DAG run routes, whose ``run_id`` arrives
unencoded (``manual__2026-01-01T00:00:00+00:00``), are plain ``path()``s. Anything else
under ``/execution/`` is a JSON 404. ``docs/execution-api.md`` lists Airflow's routes and
which are served.
"""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from executionapi import (
    views,
    views_dag_runs,
    views_logs,
    views_routes,
    views_secrets,
    views_state_stores,
    views_xcoms,
)
from executionapi.exceptions import not_found

app_name = "executionapi"

router = SimpleRouter(trailing_slash=False, use_regex_path=False)
router.register("task-instances", views.TaskInstanceViewSet, basename="ti")
router.register("assets", views.AssetViewSet, basename="asset")
router.register("asset-events", views.AssetEventViewSet, basename="asset-events")

XCOM = "xcoms/<str:dag_id>/<str:run_id>/<str:task_id>/<path:key>"

urlpatterns = [
    path("health", views_dag_runs.HealthView.as_view(), name="health"),
    path("health/ping", views_dag_runs.HealthPingView.as_view(), name="health-ping"),
    # before the routers' patterns: ``assets/by-alias`` is not an asset's detail route
    path("assets/by-alias", views_routes.AssetsByAliasView.as_view(), name="assets-by-alias"),
    path("task-instances/count", views_routes.TaskInstanceCountView.as_view(), name="ti-count"),
    path("task-instances/states", views_routes.TaskInstanceStatesView.as_view(), name="ti-states"),
    path(
        "task-instances/breadcrumbs",
        views_routes.TaskInstanceBreadcrumbsView.as_view(),
        name="ti-breadcrumbs",
    ),
    path(
        "task-instances/previous/<str:dag_id>/<str:task_id>",
        views_routes.PreviousTaskInstanceView.as_view(),
        name="ti-previous",
    ),
    path(
        "task-instances/<uuid:task_instance_id>/previous-successful-dagrun",
        views_routes.PreviousSuccessfulDagRunView.as_view(),
        name="ti-previous-successful-dagrun",
    ),
    path(
        "task-instances/<uuid:task_instance_id>/logs",
        views_logs.TaskLogView.as_view(),
        name="ti-logs",
    ),
    path(
        "task-reschedules/<uuid:task_instance_id>/start_date",
        views_routes.TaskRescheduleStartDateView.as_view(),
        name="task-reschedule-start-date",
    ),
    *router.urls,
    # a key may hold slashes (Airflow's ``{key:path}``): ``…/slice`` and ``…/item/{offset}``
    # are matched first, as in Airflow
    path(f"{XCOM}/item/<str:offset>", views_xcoms.XComItemView.as_view(), name="xcom-item"),
    path(f"{XCOM}/slice", views_xcoms.XComSliceView.as_view(), name="xcom-slice"),
    path(XCOM, views.XComView.as_view(), name="xcom"),
    path("dag-runs/count", views_dag_runs.DagRunCountView.as_view(), name="dag-run-count"),
    path("dag-runs/previous", views_dag_runs.DagRunPreviousView.as_view(), name="dag-run-previous"),
    path(
        "dag-runs/<str:dag_id>/<str:run_id>/clear",
        views_dag_runs.DagRunClearView.as_view(),
        name="dag-run-clear",
    ),
    path(
        "dag-runs/<str:dag_id>/<str:run_id>/state",
        views_dag_runs.DagRunStateView.as_view(),
        name="dag-run-state",
    ),
    path("dag-runs/<str:dag_id>/<str:run_id>", views_dag_runs.DagRunView.as_view(), name="dag-run"),
    path("dags/<str:dag_id>", views_dag_runs.DagView.as_view(), name="dag"),
    path("variables/keys", views_secrets.VariableKeysView.as_view(), name="variable-keys"),
    path("variables/<path:variable_key>", views_secrets.VariableView.as_view(), name="variable"),
    path(
        "connections/<str:connection_id>",
        views_secrets.ConnectionView.as_view(),
        name="connection",
    ),
    path(
        "store/ti/<uuid:task_instance_id>",
        views_state_stores.TaskStateClearView.as_view(),
        name="task-state-clear",
    ),
    # a key may hold slashes (Airflow's ``{key:path}``; the SDK sends them as ``%2F``)
    path(
        "store/ti/<uuid:task_instance_id>/<path:key>",
        views_state_stores.TaskStateView.as_view(),
        name="task-state",
    ),
    path(
        "store/asset/by-name/value",
        views_state_stores.AssetStateByNameView.as_view(),
        name="asset-state-by-name",
    ),
    path(
        "store/asset/by-name/clear",
        views_state_stores.AssetStateClearByNameView.as_view(),
        name="asset-state-clear-by-name",
    ),
    path(
        "store/asset/by-uri/value",
        views_state_stores.AssetStateByUriView.as_view(),
        name="asset-state-by-uri",
    ),
    path(
        "store/asset/by-uri/clear",
        views_state_stores.AssetStateClearByUriView.as_view(),
        name="asset-state-clear-by-uri",
    ),
    path("openapi.json", SpectacularJSONAPIView.as_view(), name="openapi"),
    path("docs", SpectacularSwaggerView.as_view(url_name="executionapi:openapi"), name="docs"),
    # any other path, newlines included (a plain ``.`` stops at one): the JSON 404
    re_path(r"^[\s\S]*\Z", not_found, name="not-found"),
]
