"""A task file whose import fails (for the worker's missing-code test)."""

import module_that_does_not_exist  # noqa: F401


def task():
    pass
