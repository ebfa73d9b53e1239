"""Top-level routes: the admin at /admin/, the execution API at /execution/ (task runners),
the operator API at /api/v1/ (scripts and other services)."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
    path("execution/", include("executionapi.urls")),
    path("api/v1/", include("operatorapi.urls")),
]
