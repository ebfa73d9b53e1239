"""Domain errors raised by the services, each with a stable snake_case ``code``.

The execution API maps them onto HTTP responses in one place
(``executionapi.exceptions.exception_handler``); services never raise DRF exceptions.
"""

from __future__ import annotations

from typing import Any


class AssetsError(Exception):
    """Base of every domain error. ``context`` holds extra fields for the error body."""

    code = "error"
    default_message = "The request could not be processed"

    def __init__(self, message: str | None = None, **context: Any) -> None:
        self.message = message or self.default_message
        self.context = context
        super().__init__(self.message)


class NotFoundError(AssetsError):
    code = "not_found"
    default_message = "Not found"


class TaskInstanceNotFoundError(NotFoundError):
    default_message = "Task instance not found"


class DagRunNotFoundError(NotFoundError):
    default_message = "DAG run not found"


class AssetNotFoundError(NotFoundError):
    default_message = "Asset not found"


class XComNotFoundError(NotFoundError):
    default_message = "XCom not found"


class ConflictError(AssetsError):
    code = "conflict"


class TaskInstanceInvalidStateError(ConflictError):
    """The task instance is not in a state that allows the requested transition.

    ``previous_state`` (the stored state) goes into the error body.
    """

    code = "invalid_state"
    default_message = "TI was not in the running state so it cannot be updated"


class TaskInstanceRunningElsewhereError(ConflictError):
    """A heartbeat came from another host or process than the one running the task."""

    code = "running_elsewhere"
    default_message = "TI is already running elsewhere"


class TaskInstanceNotRunningError(ConflictError):
    """A heartbeat for a task instance that is not running."""

    code = "not_running"
    default_message = "TI is no longer in the running state and task should terminate"
