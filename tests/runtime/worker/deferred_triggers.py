"""A trigger for tests/runtime/worker/test_worker_deferred.py that the triggerer imports by
classpath: it raises, failing its task instance with the reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class Raises(BaseTrigger):
    def __init__(self, why: str) -> None:
        super().__init__()
        self.why = why

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("tests.runtime.worker.deferred_triggers.Raises", {"why": self.why})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        raise RuntimeError(self.why)
        yield TriggerEvent(None)  # an async generator, as every trigger
