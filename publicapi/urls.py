"""Airflow 3.3's public API, mounted at ``/api/v2/``; ``/auth/token`` is in ``config.urls``.

``openapi.json`` is Airflow's own document for the routes served here (``publicapi.schema``),
``docs`` the Swagger UI over it.
Anything else under ``/api/v2/`` is FastAPI's JSON 404.
"""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularSwaggerView

from publicapi import logs, pools, schema, secrets, views
from publicapi.exceptions import not_found

app_name = "publicapi"

KEY = r"[^/]+"
RUN = rf"^dags/(?P<dag_id>{KEY})/dagRuns/(?P<dag_run_id>{KEY})"

urlpatterns = [
    path("openapi.json", schema.openapi_view, name="openapi"),
    # Airflow's Swagger UI over its document, from the sidecar's files (no CDN)
    path(
        "docs",
        SpectacularSwaggerView.as_view(
            url_name="publicapi:openapi", title="Asset registry: Airflow public API"
        ),
        name="docs",
    ),
    path("version", views.VersionView.as_view(), name="version"),
    path("monitor/health", views.HealthView.as_view(), name="health"),
    path("assets", views.AssetListView.as_view(), name="assets"),
    path("assets/aliases", views.AliasListView.as_view(), name="aliases"),
    re_path(rf"^assets/aliases/(?P<asset_alias_id>{KEY})$", views.AliasDetailView.as_view()),
    path("assets/events", views.AssetEventListView.as_view(), name="asset-events"),
    re_path(rf"^assets/(?P<asset_id>{KEY})/queuedEvents$", views.QueuedEventsView.as_view()),
    re_path(rf"^assets/(?P<asset_id>{KEY})$", views.AssetDetailView.as_view()),
    re_path(rf"^assets/(?P<asset_id>{KEY})/materialize$", views.MaterializeView.as_view()),
    re_path(rf"^dags/(?P<dag_id>{KEY})/assets/queuedEvents$", views.QueuedEventsView.as_view()),
    re_path(
        rf"^dags/(?P<dag_id>{KEY})/assets/(?P<asset_id>{KEY})/queuedEvents$",
        views.QueuedEventsView.as_view(),
    ),
    path("importErrors", views.ImportErrorListView.as_view(), name="import-errors"),
    re_path(rf"^importErrors/(?P<import_error_id>{KEY})$", views.ImportErrorDetailView.as_view()),
    path("dags", views.DagListView.as_view(), name="dags"),
    re_path(rf"^dagSources/(?P<dag_id>{KEY})$", views.DagSourceView.as_view()),
    path("dagStats", views.DagStatsView.as_view(), name="dag-stats"),
    path("dagTags", views.DagTagListView.as_view(), name="dag-tags"),
    re_path(rf"^dags/(?P<dag_id>{KEY})$", views.DagDetailView.as_view()),
    re_path(rf"^dags/(?P<dag_id>{KEY})/details$", views.DagDetailsView.as_view()),
    re_path(rf"^dags/(?P<dag_id>{KEY})/tasks$", views.TaskListView.as_view()),
    re_path(rf"^dags/(?P<dag_id>{KEY})/tasks/(?P<task_id>{KEY})$", views.TaskDetailView.as_view()),
    re_path(rf"^dags/(?P<dag_id>{KEY})/dagRuns$", views.DagRunListView.as_view()),
    re_path(rf"{RUN}$", views.DagRunDetailView.as_view()),
    re_path(rf"{RUN}/clear$", views.DagRunClearView.as_view()),
    re_path(rf"{RUN}/taskInstances$", views.TaskInstanceListView.as_view()),
    re_path(rf"{RUN}/taskInstances/(?P<task_id>{KEY})$", views.TaskInstanceDetailView.as_view()),
    re_path(
        rf"{RUN}/taskInstances/(?P<task_id>{KEY})/listMapped$",
        views.MappedTaskInstanceListView.as_view(),
    ),
    re_path(rf"{RUN}/taskInstances/(?P<task_id>{KEY})/xcomEntries$", views.XComListView.as_view()),
    re_path(
        rf"{RUN}/taskInstances/(?P<task_id>{KEY})/dependencies$",
        views.TaskInstanceDependenciesView.as_view(),
    ),
    re_path(
        rf"{RUN}/taskInstances/(?P<task_id>{KEY})/xcomEntries/(?P<xcom_key>{KEY})$",
        views.XComDetailView.as_view(),
    ),
    re_path(
        rf"{RUN}/taskInstances/(?P<task_id>{KEY})/logs/(?P<try_number>{KEY})$",
        logs.TaskInstanceLogView.as_view(),
    ),
    # after the task instance's named sub-routes: any other part is a map index (an integer,
    # else FastAPI's 422 at ["path", "map_index"])
    re_path(
        rf"{RUN}/taskInstances/(?P<task_id>{KEY})/(?P<map_index>{KEY})$",
        views.MappedTaskInstanceDetailView.as_view(),
    ),
    path("variables", secrets.VariableListView.as_view(), name="variables"),
    # [\s\S], not ".": a key or name may hold a newline; it is then looked up (404 JSON)
    re_path(r"^variables/(?P<variable_key>[\s\S]+)$", secrets.VariableDetailView.as_view()),
    path("connections", secrets.ConnectionListView.as_view(), name="connections"),
    re_path(rf"^connections/(?P<connection_id>{KEY})$", secrets.ConnectionDetailView.as_view()),
    path("eventLogs", views.EventLogListView.as_view(), name="event-logs"),
    re_path(rf"^eventLogs/(?P<event_log_id>{KEY})$", views.EventLogDetailView.as_view()),
    path("pools", pools.PoolListView.as_view(), name="pools"),
    re_path(r"^pools/(?P<pool_name>[\s\S]+)$", pools.PoolDetailView.as_view()),
    re_path(r"^[\s\S]*$", not_found, name="not-found"),
]
