"""Top-level routes: the admin at /admin/, the execution API at /execution/ (task runners),
the operator API at /api/v1/ (scripts and other services), Airflow's public API at /api/v2/
(Airflow's own client and CLI) with its login at /auth/token."""

from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from executionapi.exceptions import not_found
from publicapi import auth as public_auth

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("execution/", include("executionapi.urls")),
    re_path(r"^execution\Z", not_found),  # the API's root without its slash: its JSON 404
    path("api/v1/", include("operatorapi.urls")),
    path("api/v2/", include("publicapi.urls")),
    path("auth/token", public_auth.token, name="public-token"),
    path("auth/token/cli", public_auth.token_cli, name="public-token-cli"),
]
