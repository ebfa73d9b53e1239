"""The task process: ``python -m task_sdk.runner`` (started by the supervisor).

It receives ``StartupDetails`` on the inherited message channel, loads the task function,
runs it with a context holding ``outlet_events``, ``inlet_events`` and
``triggering_asset_events``, and reports the outcome: ``SucceedTask`` with ``task_outlets`` /
``outlet_events`` in the Airflow 3 wire format, or ``TaskState`` ``failed`` / ``up_for_retry``
when the task raised, or when what it wrote (outlet events, its return value) cannot be stored
as JSON: that is checked before anything is sent. Its stdout and stderr are the task's log.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from task_sdk.comms import COMMS_FD_ENV, Channel
from task_sdk.decorators import Task, as_task
from task_sdk.definitions import AssetNameRef, AssetUniqueKey, AssetUriRef
from task_sdk.inlets import AssetEventsQuery, InletEventsAccessors, TriggeringAssetEventsAccessor
from task_sdk.jsonvalues import check_json_value
from task_sdk.outlets import OutletEventAccessors, build_task_outlets, serialize_outlet_events
from task_sdk.timestamps import isoformat, now

logger = logging.getLogger("task_sdk.runner")


class TaskLoadError(Exception):
    """The task reference does not name a loadable function."""


def load_task(ref: str) -> Task:
    """Load ``path/to/file.py:function`` or ``package.module:function`` as a ``Task``."""
    location, sep, attribute = ref.rpartition(":")
    if not sep or not location or not attribute:
        raise TaskLoadError(f"task must be 'path/to/file.py:function', got {ref!r}")
    if location.endswith(".py") or os.sep in location:
        path = Path(location).resolve()
        if not path.is_file():
            raise TaskLoadError(f"task file not found: {location}")
        sys.path.insert(0, str(path.parent))
        module_name = f"task_sdk_user_{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise TaskLoadError(f"cannot import {location}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(location)
    obj: Any = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TaskLoadError(f"{location} has no attribute {attribute!r}") from None
    return as_task(obj)


def tries_remain(ti_context: dict[str, Any], try_number: int | None) -> bool:
    """Whether a failure should become ``up_for_retry``.

    The server's ``should_retry`` decides when the run context carries it; otherwise
    ``try_number <= max_tries``.
    """
    if ti_context.get("should_retry") is not None:
        return bool(ti_context["should_retry"])
    return (try_number or 1) <= int(ti_context.get("max_tries") or 0)


class TaskRunner:
    """Runs one task inside the task process, talking to the supervisor over ``channel``."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def resolve_ref(self, ref: AssetNameRef | AssetUriRef) -> tuple[AssetUniqueKey, dict[str, Any]]:
        if isinstance(ref, AssetNameRef):
            reply = self.channel.request({"type": "GetAssetByName", "name": ref.name})
        else:
            reply = self.channel.request({"type": "GetAssetByUri", "uri": ref.uri})
        if reply.get("type") != "AssetResult":
            raise LookupError(f"cannot resolve {ref!r}: {reply.get('detail') or reply}")
        return AssetUniqueKey(name=reply["name"], uri=reply["uri"]), reply.get("extra") or {}

    def fetch_asset_events(self, query: AssetEventsQuery) -> list[dict[str, Any]]:
        """Ask the supervisor for ``/asset-events`` of an asset or alias."""
        bounds = {
            "after": isoformat(query.after) if query.after else None,
            "before": isoformat(query.before) if query.before else None,
            "ascending": query.ascending,
            "limit": query.limit,
        }
        message: dict[str, Any]
        if query.alias_name is not None:
            message = {"type": "GetAssetEventByAssetAlias", "alias_name": query.alias_name}
        else:
            message = {"type": "GetAssetEventByAsset", "name": query.name, "uri": query.uri}
        reply = self.channel.request({**message, **bounds})
        if reply.get("type") != "AssetEventsResult":
            raise LookupError(f"cannot read asset events: {reply.get('detail') or reply}")
        events: list[dict[str, Any]] = reply["asset_events"]
        return events

    def _request_ok(self, message: dict[str, Any]) -> None:
        reply = self.channel.request(message)
        if reply.get("type") == "ErrorResponse":
            raise RuntimeError(f"{message['type']} failed: {reply.get('detail')}")

    def build_context(self, task: Task, startup: dict[str, Any]) -> dict[str, Any]:
        ti_context = startup.get("ti_context") or {}
        dag_run = ti_context.get("dag_run") or {}
        context: dict[str, Any] = {
            "ti_id": startup["ti_id"],
            "task_id": startup.get("task_id") or task.task_id,
            "try_number": startup.get("try_number"),
            "max_tries": ti_context.get("max_tries"),
            "map_index": startup.get("map_index", -1),
            "dag_run": dag_run,
            "dag_id": dag_run.get("dag_id"),
            "run_id": dag_run.get("run_id"),
            "logical_date": dag_run.get("logical_date"),
            "task": task,
            "inlets": task.inlets,
            "outlets": task.outlets,
            "outlet_events": OutletEventAccessors(resolver=self.resolve_ref),
            "inlet_events": InletEventsAccessors(
                task.inlets, fetch=self.fetch_asset_events, resolver=self.resolve_ref
            ),
            "triggering_asset_events": TriggeringAssetEventsAccessor.from_run_context(
                ti_context, resolver=self.resolve_ref
            ),
        }
        context["context"] = context
        return context

    def run(self) -> int:
        startup = self.channel.receive()
        if startup.get("type") != "StartupDetails":
            raise RuntimeError(f"expected StartupDetails, got {startup.get('type')!r}")
        ti_context = startup.get("ti_context") or {}
        try:
            task = load_task(startup["task"])
            context = self.build_context(task, startup)
            result = task.execute(context)
            # checked before anything is sent: a value the server cannot store fails the task
            task_outlets = build_task_outlets(task.outlets)
            outlet_events = serialize_outlet_events(context["outlet_events"])
            if result is not None and context["dag_id"] and context["run_id"]:
                check_json_value(result, where="return value")
                self._request_ok(
                    {
                        "type": "SetXCom",
                        "dag_id": context["dag_id"],
                        "run_id": context["run_id"],
                        "task_id": context["task_id"],
                        "key": "return_value",
                        "value": result,
                        "map_index": context["map_index"],
                    }
                )
            message = {
                "type": "SucceedTask",
                "end_date": isoformat(now()),
                "task_outlets": task_outlets,
                "outlet_events": outlet_events,
                "rendered_map_index": None,
            }
        except BaseException as exc:
            traceback.print_exc()
            state = (
                "up_for_retry" if tries_remain(ti_context, startup.get("try_number")) else "failed"
            )
            failed: dict[str, Any] = {
                "type": "TaskState",
                "state": state,
                "end_date": isoformat(now()),
                "rendered_map_index": None,
            }
            if state == "up_for_retry":  # the wire says why only for a retry (Airflow's too)
                failed["retry_reason"] = exception_line(exc)
            reply = self.channel.request(failed)
            return 1 if reply.get("type") != "ErrorResponse" else 2
        reply = self.channel.request(message)
        return 0 if reply.get("type") == "OK" else 2


#: The longest reason sent with a retry (the server keeps 500 characters).
REASON_MAX_LENGTH = 500


def exception_line(exc: BaseException) -> str:
    """``Type: message`` of an exception, on one line, as a try's failure reason."""
    message = " ".join(str(exc).split())
    return (f"{type(exc).__name__}: {message}" if message else type(exc).__name__)[
        :REASON_MAX_LENGTH
    ]


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    fd = int(os.environ[COMMS_FD_ENV])
    channel = Channel(socket.socket(fileno=fd))
    try:
        return TaskRunner(channel).run()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        channel.close()


if __name__ == "__main__":
    sys.exit(main())
