"""The consumer task of ``bench_e2e.py``: does nothing (its start is what is measured)."""

from task_sdk import task


@task
def consume() -> None:
    return None
