"""The rule for DAG, task and run ids, shared by the manifest and ``create_task_instance``."""

from __future__ import annotations

import re

from assets_app.models import ID_LENGTH

#: Airflow's rule for DAG and task ids (run ids only have the length limit).
KEY_PATTERN = re.compile(r"^[\w.-]+$")


def validate_id(value: object, *, pattern: bool = True) -> str:
    """Return ``value`` when it is a valid DAG or task id (a run id with ``pattern=False``).

    Raises ``ValueError`` saying what is wrong without naming the field; callers prefix the
    field's name and raise their own domain error.
    """
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    if len(value) > ID_LENGTH:
        raise ValueError(
            f"must be 1-{ID_LENGTH} characters, got {len(value)} (longer than {ID_LENGTH})"
        )
    if pattern and not KEY_PATTERN.match(value):
        raise ValueError(
            f"{value!r} may only contain letters, digits, underscores, dots and dashes"
        )
    return value
