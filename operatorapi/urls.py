"""Operator API routes, mounted at ``/api/v1/``: a router, no trailing slashes.

``GET /api/v1/`` lists the resources; ``openapi.json`` and ``docs`` describe this API alone.
Anything else under ``/api/v1/`` is a JSON 404.
"""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from operatorapi import secrets, views
from operatorapi.exceptions import not_found
from operatorapi.schema import OPERATOR_SCHEMA_SETTINGS

app_name = "operatorapi"


class OperatorRouter(DefaultRouter):
    APIRootView = views.OperatorAPIRootView
    include_format_suffixes = False


router = OperatorRouter(trailing_slash=False)
router.register("assets", views.AssetViewSet, basename="asset")
router.register("asset-aliases", views.AssetAliasViewSet, basename="asset-alias")
router.register("asset-events", views.AssetEventViewSet, basename="asset-event")
router.register("dags", views.DagViewSet, basename="dag")
router.register("import-errors", views.ImportErrorViewSet, basename="import-error")
router.register("dag-runs", views.DagRunViewSet, basename="dag-run")
router.register("queue", views.QueueViewSet, basename="queue")
router.register("executor", views.ExecutorViewSet, basename="executor")
router.register("variables", secrets.VariableViewSet, basename="variable")
router.register("connections", secrets.ConnectionViewSet, basename="connection")
# Clearing task instances (issue 9) belongs here once runs can be cleared: a task-instances
# viewset (list/retrieve) whose `clear` action calls the clearing service, permission
# `assets_app.change_taskinstance`.

urlpatterns = [
    path(
        "openapi.json",
        SpectacularJSONAPIView.as_view(custom_settings=OPERATOR_SCHEMA_SETTINGS),
        name="openapi",
    ),
    path(
        "docs",
        SpectacularSwaggerView.as_view(
            url_name="operatorapi:openapi", title=OPERATOR_SCHEMA_SETTINGS["TITLE"]
        ),
        name="docs",
    ),
    *router.urls,
    re_path(r"^[\s\S]*$", not_found, name="not-found"),  # a path holding a newline too
]
