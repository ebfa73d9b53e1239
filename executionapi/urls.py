"""Execution API routes, mounted at ``/execution/``.

No trailing slashes and no redirects. The viewsets are routed by a ``SimpleRouter`` (a
task instance's id must be a UUID); the XCom route, with four path parameters and a
``run_id`` that arrives unencoded (``manual__2026-01-01T00:00:00+00:00``), is a plain
``path()``. Anything else under ``/execution/`` is a JSON 404.
"""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from executionapi import views, views_routes, views_secrets
from executionapi.exceptions import not_found

app_name = "executionapi"

router = SimpleRouter(trailing_slash=False, use_regex_path=False)
router.register("task-instances", views.TaskInstanceViewSet, basename="ti")
router.register("assets", views.AssetViewSet, basename="asset")
router.register("asset-events", views.AssetEventViewSet, basename="asset-events")

urlpatterns = [
    # before the routers' patterns: ``assets/by-alias`` is not an asset's detail route
    path("assets/by-alias", views_routes.AssetsByAliasView.as_view(), name="assets-by-alias"),
    path(
        "task-instances/<uuid:task_instance_id>/previous-successful-dagrun",
        views_routes.PreviousSuccessfulDagRunView.as_view(),
        name="ti-previous-successful-dagrun",
    ),
    path(
        "task-reschedules/<uuid:task_instance_id>/start_date",
        views_routes.TaskRescheduleStartDateView.as_view(),
        name="task-reschedule-start-date",
    ),
    *router.urls,
    path(
        "xcoms/<str:dag_id>/<str:run_id>/<str:task_id>/<str:key>",
        views.XComView.as_view(),
        name="xcom",
    ),
    path("variables/keys", views_secrets.VariableKeysView.as_view(), name="variable-keys"),
    path("variables/<path:variable_key>", views_secrets.VariableView.as_view(), name="variable"),
    path(
        "connections/<str:connection_id>",
        views_secrets.ConnectionView.as_view(),
        name="connection",
    ),
    path("openapi.json", SpectacularJSONAPIView.as_view(), name="openapi"),
    path("docs", SpectacularSwaggerView.as_view(url_name="executionapi:openapi"), name="docs"),
    # any other path, newlines included (a plain ``.`` stops at one): the JSON 404
    re_path(r"^[\s\S]*\Z", not_found, name="not-found"),
]
