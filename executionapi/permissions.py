"""Permissions of the execution API."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from executionapi.authentication import TaskRunner


class IsTaskRunner(BasePermission):
    """Any request carrying a valid task token."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, TaskRunner)


class TokenMatchesTaskInstance(IsTaskRunner):
    """On ``/task-instances/{id}/…`` the token's ``sub`` must be ``{id}``."""

    message = {
        "reason": "access_denied",
        "message": "The token is not valid for this task instance",
    }

    def has_permission(self, request: Request, view: Any) -> bool:
        runner = request.user
        if not isinstance(runner, TaskRunner):
            return False
        task_instance_id = view.kwargs.get("task_instance_id")
        if task_instance_id is None:
            return True
        try:
            return uuid.UUID(runner.task_instance_id) == uuid.UUID(str(task_instance_id))
        except ValueError:
            return False
