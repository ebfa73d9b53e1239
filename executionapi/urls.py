"""Execution API routes, mounted at ``/execution/``.

Explicit ``path()``s (no router): no trailing slashes, and an XCom route with four path
parameters whose ``run_id`` arrives unencoded (``manual__2026-01-01T00:00:00+00:00``).
Anything else under ``/execution/`` is a JSON 404.
"""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView

from executionapi import views
from executionapi.exceptions import not_found

app_name = "executionapi"

TI = "task-instances/<uuid:task_instance_id>"

urlpatterns = [
    path(f"{TI}/state", views.TaskInstanceStateView.as_view(), name="ti-state"),
    path(f"{TI}/run", views.TaskInstanceRunView.as_view(), name="ti-run"),
    path(f"{TI}/heartbeat", views.TaskInstanceHeartbeatView.as_view(), name="ti-heartbeat"),
    path(f"{TI}/rtif", views.TaskInstanceRenderedFieldsView.as_view(), name="ti-rtif"),
    path(
        f"{TI}/validate-inlets-and-outlets",
        views.TaskInstanceValidateInletsOutletsView.as_view(),
        name="ti-validate-inlets-and-outlets",
    ),
    path("assets/by-name", views.AssetByNameView.as_view(), name="asset-by-name"),
    path("assets/by-uri", views.AssetByUriView.as_view(), name="asset-by-uri"),
    path(
        "asset-events/by-asset",
        views.AssetEventsByAssetView.as_view(),
        name="asset-events-by-asset",
    ),
    path(
        "asset-events/by-asset-alias",
        views.AssetEventsByAliasView.as_view(),
        name="asset-events-by-asset-alias",
    ),
    path(
        "xcoms/<str:dag_id>/<str:run_id>/<str:task_id>/<str:key>",
        views.XComView.as_view(),
        name="xcom",
    ),
    path("openapi.json", SpectacularJSONAPIView.as_view(), name="openapi"),
    path("docs", SpectacularSwaggerView.as_view(url_name="executionapi:openapi"), name="docs"),
    re_path(r"^.*$", not_found, name="not-found"),
]
