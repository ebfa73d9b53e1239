"""Django model permissions decide what each user may read or change, as in the admin."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request


class RoutePermissions(BasePermission):
    """The view's ``required_permissions[method]``: every one of them, or a 403 naming them."""

    message = "Forbidden"

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            return False
        method = "GET" if request.method in ("HEAD", "OPTIONS") else request.method
        needed: list[str] = view.required_permissions.get(method, [])
        missing = [perm for perm in needed if not user.has_perm(perm)]
        if missing:
            self.message = f"Forbidden: needs the permission {' and '.join(missing)}"
            return False
        return True
