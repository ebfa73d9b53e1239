"""Permissions of the execution API."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from assets_app.models import TaskInstance, TaskInstanceState
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


class RunningTaskInstanceWrites(IsTaskRunner):
    """Reads: any valid task token. Writes (any method but ``GET``, ``HEAD`` and
    ``OPTIONS``): the token's task instance must exist and be running, so that a token whose
    task is gone or finished writes nothing."""

    message = {
        "reason": "access_denied",
        "message": "The token's task instance is not running, so it may not write",
    }

    def has_permission(self, request: Request, view: Any) -> bool:
        if not super().has_permission(request, view):
            return False
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        runner = request.user
        assert isinstance(runner, TaskRunner)  # noqa: S101 - checked by IsTaskRunner; narrows the type
        try:
            return TaskInstance.objects.filter(
                pk=runner.task_instance_id, state=TaskInstanceState.RUNNING
            ).exists()
        except (ValueError, TypeError, DjangoValidationError):  # a sub that is no UUID
            return False
