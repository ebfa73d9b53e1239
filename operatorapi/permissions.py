"""Model permissions, reads included: what the user may do in the admin, they may do here."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import DjangoModelPermissions
from rest_framework.request import Request

_VIEW = "%(app_label)s.view_%(model_name)s"


class ModelPermissions(DjangoModelPermissions):
    """``view`` for GET/HEAD/OPTIONS (DRF requires nothing for them), ``add`` for POST,
    ``change`` for PUT/PATCH, ``delete`` for DELETE; the 403 names the missing permission."""

    perms_map = {
        **DjangoModelPermissions.perms_map,
        "GET": [_VIEW],
        "HEAD": [_VIEW],
        "OPTIONS": [_VIEW],
    }

    def has_permission(self, request: Request, view: Any) -> bool:
        if not super().has_permission(request, view):
            user = request.user
            if user is not None and user.is_authenticated:
                model = self._queryset(view).model
                needed = self.get_required_permissions(request.method or "GET", model)
                missing = [perm for perm in needed if not user.has_perm(perm)]
                self.message = (
                    f"You need the permission {' and '.join(missing)} to "
                    f"{request.method} this resource"
                )
            return False
        return True


class ClearPermission(ModelPermissions):
    """Clearing a run's task instances needs ``change_taskinstance`` (and ``view_dagrun``), as
    the admin's *Clear* actions do."""

    def get_required_permissions(self, method: str, model_cls: Any) -> list[str]:
        return ["assets_app.view_dagrun", "assets_app.change_taskinstance"]


class TriggerPermission(ModelPermissions):
    """Triggering a DAG run needs ``add_dagrun`` (and ``view_dag``), as the admin's *Trigger*."""

    def get_required_permissions(self, method: str, model_cls: Any) -> list[str]:
        return ["assets_app.view_dag", "assets_app.add_dagrun"]
