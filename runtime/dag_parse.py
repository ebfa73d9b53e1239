"""Parse one Airflow DAG file with Airflow's own parser and print what the registry declares.

Run as a script by :mod:`runtime.dag_processing` (which imports it only for its path and
:data:`NO_AIRFLOW`), under the interpreter ``DAG_PARSER_PYTHON`` names — one that has
``apache-airflow-core``::

    python runtime/dag_parse.py /dags/producer.py --bundle /dags

It imports the file with Airflow's ``DagBag`` (its import timeout, its validation and cycle
checks) and prints one JSON document on stdout::

    {"file": "/dags/producer.py", "dags": [MANIFEST DAG ENTRY, ...], "errors": [TEXT, ...]}

Each DAG entry uses the manifest keys (``assets_app.services.dags.manifest``). ``errors`` holds the
file's import errors (Airflow's traceback) and one message per feature the registry cannot
run, naming the DAG, the task and the feature (the attribute, for those the table of
``runtime/dag_contract.py`` refuses). Whatever the file's code prints goes to stderr,
so stdout carries only the document. Standalone on purpose: it imports nothing of the
registry but ``dag_contract`` beside it (standalone too), so the parser interpreter needs only
Airflow.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta
from typing import Any

#: Timetables whose runs the registry's scheduler makes (``assets_app.timetables``).
_TIME_TIMETABLES = ("CronTriggerTimetable", "DeltaTriggerTimetable", "OnceTimetable")


#: The exit status when this interpreter has no Airflow (read by ``runtime.dag_processing``).
NO_AIRFLOW = 3


class RefusedError(Exception):
    """A feature of a DAG the registry cannot run; the message names where and what."""


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat()


def _timezone_name(tz: Any) -> str:
    if isinstance(tz, str):
        return tz
    return str(getattr(tz, "name", tz))


def _leaf(obj: Any, where: str) -> dict[str, Any]:
    """An asset, alias or reference as a manifest leaf."""
    from airflow.sdk import Asset, AssetAlias
    from airflow.sdk.definitions.asset import AssetNameRef, AssetUriRef

    if isinstance(obj, Asset):
        try:
            json.dumps(obj.extra)
        except (TypeError, ValueError) as exc:
            raise RefusedError(
                f"{where}: the extra of asset {obj.name!r} is not JSON: {exc}"
            ) from None
        return {"asset": {"name": obj.name, "uri": obj.uri, "group": obj.group, "extra": obj.extra}}
    if isinstance(obj, AssetAlias):
        return {"alias": {"name": obj.name, "group": obj.group}}
    if isinstance(obj, AssetNameRef):
        return {"asset_ref": {"name": obj.name}}
    if isinstance(obj, AssetUriRef):
        return {"asset_ref": {"uri": obj.uri}}
    raise RefusedError(
        f"{where}: {type(obj).__name__} {obj!r} is not an Asset, AssetAlias or Asset.ref "
        "(the only inlets and outlets the registry records)"
    )


def _condition(obj: Any, where: str) -> dict[str, Any]:
    """An asset schedule (``&`` / ``|`` trees of assets, aliases and refs) as a manifest
    condition."""
    from airflow.sdk.definitions.asset import AssetAll, AssetAny

    if isinstance(obj, AssetAll | AssetAny):
        children = [_condition(child, where) for child in obj.objects]
        return {"all" if isinstance(obj, AssetAll) else "any": children}
    return _leaf(obj, where)


def _time(timetable: Any, where: str) -> tuple[Any, str]:
    """A time timetable as a manifest schedule, and the timezone its cron is read in."""
    kind = type(timetable).__name__
    if kind == "OnceTimetable":
        return "@once", "UTC"
    if kind == "CronTriggerTimetable":
        if timetable.interval or timetable.run_immediately:
            raise RefusedError(
                f"{where}: CronTriggerTimetable with interval= or run_immediately= is not "
                "supported by the registry (its runs cover the one instant they are due)"
            )
        return timetable.expression, _timezone_name(timetable.timezone)
    if kind == "DeltaTriggerTimetable":
        if not isinstance(timetable.delta, timedelta) or timetable.interval:
            raise RefusedError(
                f"{where}: a relativedelta schedule or DeltaTriggerTimetable(interval=) is not "
                "supported by the registry (a plain timedelta is)"
            )
        return {"timedelta": timetable.delta.total_seconds()}, "UTC"
    raise RefusedError(
        f"{where}: the {kind} timetable is not supported by the registry (it runs cron strings "
        "and presets, timedeltas, @once, asset conditions and AssetOrTimeSchedule)"
    )


def _schedule(dag: Any) -> tuple[Any, str]:
    """The DAG's schedule as the manifest writes it, and its timezone."""
    from airflow.sdk.definitions.timetables.assets import AssetOrTimeSchedule

    timetable = dag.timetable
    kind = type(timetable).__name__
    where = f"DAG {dag.dag_id!r}, schedule"
    if "Partition" in kind:
        raise RefusedError(
            f"{where}: partitioned schedules ({kind}) are not supported by the registry"
        )
    if kind == "NullTimetable":
        return None, _timezone_name(dag.timezone)
    if isinstance(timetable, AssetOrTimeSchedule):
        time, tz = _time(timetable.timetable, where)
        assets = _condition(timetable.asset_condition, where)
        return {"asset_or_time": {"assets": assets, "time": time}}, tz
    if kind == "AssetTriggeredTimetable":
        return _condition(timetable.asset_condition, where), _timezone_name(dag.timezone)
    return _time(timetable, where)


_TEMPLATE_MARKS = ("{{", "{%", "{#")


def _asset_watchers(dag: Any) -> list[dict[str, Any]]:
    """The asset watchers (AIP-82) declared on the assets the DAG uses (its schedule, its
    tasks' inlets and outlets, as Airflow collects them), each ``{"asset": {"name", "uri"},
    "name", "classpath", "kwargs"}`` with ``kwargs`` the JSON text of the trigger's
    ``serialize()`` kwargs in the SDK's serde form (as a deferral stores them). A watcher's
    trigger must be a ``BaseEventTrigger``, as Airflow requires."""
    from airflow.sdk import Asset
    from airflow.sdk.serde import serialize
    from airflow.triggers.base import BaseEventTrigger

    found: list[Any] = []

    def walk(obj: Any) -> None:
        if isinstance(obj, Asset):
            found.append(obj)
        for child in getattr(obj, "objects", None) or ():  # AssetAll / AssetAny
            walk(child)

    walk(getattr(dag.timetable, "asset_condition", None))
    for task in dag.task_dict.values():
        for obj in [*task.inlets, *task.outlets]:
            walk(obj)
    watchers: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str, str]] = set()
    for asset in found:
        for watcher in getattr(asset, "watchers", None) or []:
            where = f"DAG {dag.dag_id!r}, asset {asset.name!r}, watcher {watcher.name!r}"
            trigger = watcher.trigger
            if not isinstance(trigger, BaseEventTrigger):
                raise RefusedError(
                    f"{where}: its trigger {type(trigger).__name__} is not a BaseEventTrigger "
                    "(Airflow runs only event triggers as asset watchers)"
                )
            try:
                classpath, kwargs = trigger.serialize()
                text = json.dumps(serialize(dict(kwargs)), sort_keys=True)
            except Exception as exc:
                raise RefusedError(f"{where}: its trigger cannot be serialized: {exc}") from None
            key = (asset.name, asset.uri, str(classpath), text)
            if key in seen:
                continue
            seen.add(key)
            watchers.append(
                {
                    "asset": {"name": asset.name, "uri": asset.uri},
                    "name": str(watcher.name),
                    "classpath": str(classpath),
                    "kwargs": text,
                }
            )
    return watchers


def _templated(value: Any) -> bool:
    if isinstance(value, str):
        return any(mark in value for mark in _TEMPLATE_MARKS)
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_templated(v) for v in value)
    return False


def _start_trigger_args(task: Any, where: str) -> dict[str, Any] | None:
    """A task that starts in the triggerer (``start_from_trigger`` with its
    ``start_trigger_args``, docs/triggerer.md): the trigger's class, kwargs (the SDK's serde
    form, as a deferral sends them), the method and kwargs to resume with, the timeout in
    seconds. ``None`` when it starts on a worker (as Airflow's ``defer_task`` without
    ``start_trigger_args``). Templated kwargs (Airflow renders them in its triggerer with the
    task's context) are refused."""
    args = getattr(task, "start_trigger_args", None)
    if not getattr(task, "start_from_trigger", False) or args is None:
        return None
    from airflow.sdk.serde import serialize

    trigger_kwargs = dict(args.trigger_kwargs or {})
    next_kwargs = dict(args.next_kwargs or {})
    if _templated(trigger_kwargs) or _templated(next_kwargs):
        raise RefusedError(
            f"{where}: start_from_trigger with templated trigger kwargs (rendered by Airflow's "
            "triggerer with the task's context) is not supported by the registry"
        )
    try:
        encoded = serialize(trigger_kwargs), serialize(next_kwargs)
        json.dumps(encoded)
    except Exception as exc:
        raise RefusedError(f"{where}: start_trigger_args cannot be serialized: {exc}") from None
    return {
        "trigger_cls": str(args.trigger_cls),
        "trigger_kwargs": encoded[0],
        "next_method": str(args.next_method),
        "next_kwargs": encoded[1],
        "timeout": args.timeout.total_seconds() if args.timeout else None,
    }


def _task(dag: Any, task: Any) -> dict[str, Any]:
    where = f"DAG {dag.dag_id!r}, task {task.task_id!r}"
    mapped = _mapped(task, where) if task.get_needs_expansion() else None
    starts = _start_trigger_args(task, where)
    if mapped and starts is not None:
        raise RefusedError(
            f"{where}: start_from_trigger on a mapped task is not supported by the registry "
            "(each map index would start in the triggerer)"
        )
    return {
        **({"start_trigger_args": starts} if starts is not None else {}),
        "task_id": task.task_id,
        "upstream": sorted(task.upstream_task_ids),
        "trigger_rule": str(getattr(task.trigger_rule, "value", task.trigger_rule)),
        "retries": int(task.retries or 0),
        "retry_delay": task.retry_delay.total_seconds(),
        "retry_exponential_backoff": _backoff(task.retry_exponential_backoff),
        "max_retry_delay": _seconds(task.max_retry_delay),
        "depends_on_past": bool(task.depends_on_past),
        "wait_for_downstream": bool(task.wait_for_downstream),
        "ignore_first_depends_on_past": bool(task.ignore_first_depends_on_past),
        "email": _emails(task.email),
        "email_on_failure": bool(task.email_on_failure),
        "email_on_retry": bool(task.email_on_retry),
        "outlets": [_leaf(o, f"{where}, outlets") for o in task.outlets],
        "inlets": [_leaf(i, f"{where}, inlets") for i in task.inlets],
        **_pool_and_priority(task, where),
        **({"mapped": mapped} if mapped else {}),
        # run by the DAG processor when a try fails outside its process (a heartbeat timeout,
        # never started, ended by its trigger), as Airflow's TaskCallbackRequest
        **{name: True for name in _TASK_CALLBACK_FLAGS if getattr(task, name)},
    }


#: A task's callbacks the DAG processor runs (Airflow's ``TaskCallbackRequest``: failure and
#: retry only); the others run in the task's process only.
_TASK_CALLBACK_FLAGS = ("has_on_failure_callback", "has_on_retry_callback")


def _mapped(task: Any, where: str) -> dict[str, Any]:
    """A mapped task's ``mapped`` declaration (``assets_app/mapping.py``'s grammar): its
    length is the product of its own expansion (``.expand`` / ``.expand_kwargs``) and that of
    each mapped task group around it; ``group`` is the closest one (its tasks depend on each
    other per map index)."""
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    lengths = [
        _expand_input_length(group._expand_input, f"{where}, mapped task group {group.group_id!r}")
        for group in task.iter_mapped_task_groups()
    ]
    if isinstance(task, MappedOperator):
        lengths.insert(0, _expand_input_length(task._get_specified_expand_input(), where))
    group = task.get_closest_mapped_task_group()
    return {
        "length": lengths[0] if len(lengths) == 1 else {"product": lengths},
        "group": group.group_id if group is not None else None,
    }


def _expand_input_length(expand_input: Any, where: str) -> Any:
    """How many map indexes an ``.expand(...)`` (the cross product of its arguments) or an
    ``.expand_kwargs(...)`` (one per mapping) makes."""
    from airflow.sdk.definitions._internal.expandinput import DictOfListsExpandInput

    if isinstance(expand_input, DictOfListsExpandInput):
        lengths = [
            _value_length(v, f"{where}, argument {k!r}") for k, v in expand_input.value.items()
        ]
        return lengths[0] if len(lengths) == 1 else {"product": lengths}
    return _value_length(expand_input.value, f"{where}, expand_kwargs")


def _value_length(value: Any, where: str) -> Any:
    """A mapped argument's length expression: a literal's length, or an XCom reference's."""
    from airflow.sdk.definitions.xcom_arg import (
        ConcatXComArg,
        MapXComArg,
        PlainXComArg,
        ZipXComArg,
    )

    if isinstance(value, PlainXComArg):
        return {"xcom": value.operator.task_id}
    if isinstance(value, MapXComArg):
        return _value_length(value.arg, where)
    if isinstance(value, ZipXComArg):
        from airflow.sdk.definitions._internal.types import is_arg_set

        args = [_value_length(arg, where) for arg in value.args]
        return {"zip": args, "fill": bool(is_arg_set(value.fillvalue))}
    if isinstance(value, ConcatXComArg):
        return {"concat": [_value_length(arg, where) for arg in value.args]}
    if isinstance(value, list | tuple | dict | set):
        return len(value)
    raise RefusedError(
        f"{where}: mapping over a {type(value).__name__} is not supported by the registry "
        "(a list, a dict or an XCom reference is)"
    )


def _pool_and_priority(task: Any, where: str) -> dict[str, Any]:
    """The task's pool, priority and concurrency limits as the manifest keys (docs/pools.md)."""
    rule = task.weight_rule
    rule = str(getattr(rule, "value", rule))
    if rule not in ("downstream", "upstream", "absolute"):
        raise RefusedError(
            f"{where}: weight_rule {rule!r} (a custom priority weight strategy) is not supported "
            "by the registry (downstream, upstream and absolute are)"
        )
    return {
        "pool": task.pool,
        "pool_slots": int(task.pool_slots),
        "priority_weight": int(task.priority_weight),
        "weight_rule": rule,
        "max_active_tis_per_dag": task.max_active_tis_per_dag,
        "max_active_tis_per_dagrun": task.max_active_tis_per_dagrun,
        "owner": str(task.owner),
        "queue": str(task.queue),
    }


def _backoff(value: Any) -> float:
    """``retry_exponential_backoff`` as Airflow's serializer reads it (``True``: 2)."""
    if isinstance(value, bool):
        return 2.0 if value else 0.0
    return float(value or 0)


def _seconds(value: Any) -> float | None:
    """A ``timedelta`` or seconds (``max_retry_delay``, ``dagrun_timeout``) as seconds."""
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _emails(value: Any) -> list[str]:
    """A task's ``email`` (an address, a list, or a comma/semicolon-separated string)."""
    if not value:
        return []
    if isinstance(value, str):
        value = value.replace(";", ",").split(",")
    return [str(item).strip() for item in value if str(item).strip()]


def _params(dag: Any) -> dict[str, Any]:
    """The DAG's params as the manifest's ``params``: ``{name: {default, description,
    schema}}`` in the DAG's order, as Airflow's serializer writes each ``Param`` (``default``
    left out when it has none); a run's conf is checked against them when it is triggered."""
    from airflow.sdk.definitions._internal.types import is_arg_set

    params: dict[str, Any] = {}
    for name in dag.params:
        param = dag.params.get_param(name)
        spec: dict[str, Any] = {"description": param.description, "schema": param.schema}
        if is_arg_set(param.value):
            spec["default"] = param.value
        try:
            json.dumps(spec)
        except (TypeError, ValueError) as exc:
            raise RefusedError(
                f"DAG {dag.dag_id!r}, param {name!r}: its default or schema is not JSON: {exc}"
            ) from None
        params[name] = spec
    return params


def dag_entry(dag: Any, *, path: str) -> dict[str, Any]:
    """One DAG as a manifest entry; raises ``RefusedError`` for what the registry cannot run."""
    schedule, timezone = _schedule(dag)
    entry: dict[str, Any] = {
        "dag_id": dag.dag_id,
        "airflow_dag_file": path,
        "tasks": [_task(dag, task) for task in dag.task_dict.values()],
        "schedule": schedule,
        "timezone": timezone,
        "start_date": _iso(dag.start_date),
        "end_date": _iso(dag.end_date),
        "catchup": bool(dag.catchup),
        "max_active_runs": dag.max_active_runs,
        "max_active_tasks": dag.max_active_tasks,
        "tags": sorted(dag.tags),
        "params": _params(dag),
        "dagrun_timeout": _seconds(dag.dagrun_timeout),
        "has_on_success_callback": bool(dag.on_success_callback),
        "has_on_failure_callback": bool(dag.on_failure_callback),
    }
    if watchers := _asset_watchers(dag):
        entry["asset_watchers"] = watchers
    if dag.is_paused_upon_creation is not None:
        entry["is_paused_upon_creation"] = bool(dag.is_paused_upon_creation)
    _refuse_by_contract(dag)
    return entry


def _refuse_by_contract(dag: Any) -> None:
    """Refuse every attribute the contract refuses (``runtime/dag_contract.py``: its
    ``refusals``), one line each; imported beside this script when it runs as one."""
    import importlib

    name = f"{__package__}.dag_contract" if __package__ else "dag_contract"
    contract = importlib.import_module(name)
    if messages := contract.refusals(dag):
        raise RefusedError("\n".join(messages))


def parse(path: str, *, bundle: str | None) -> dict[str, Any]:
    """Import ``path`` with Airflow's ``DagBag`` and describe what it holds; with a ``bundle``
    (the DAGs folder), as Airflow's DAG processor does: the folder on ``sys.path``, so that a
    file in a subfolder imports the folder's top-level modules (``BundleDagBag``)."""
    from pathlib import Path

    from airflow.dag_processing.dagbag import BundleDagBag, DagBag

    bag = (BundleDagBag if bundle else DagBag)(
        dag_folder=path,
        bundle_path=Path(bundle) if bundle else None,
        bundle_name="dags-folder",
        safe_mode=False,  # the caller already chose the file
        collect_dags=True,
    )
    errors = [str(text) for _, text in sorted(bag.import_errors.items())]
    dags = []
    for dag_id in sorted(bag.dags):
        try:
            dags.append(dag_entry(bag.dags[dag_id], path=path))
        except RefusedError as exc:
            errors.append(str(exc))
    return {"file": path, "dags": dags, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", help="the DAG file (.py)")
    parser.add_argument("--bundle", help="the DAGs folder the file belongs to")
    args = parser.parse_args(argv)
    try:
        import airflow.dag_processing.dagbag  # noqa: F401
    except ImportError as exc:
        sys.stderr.write(
            f"{sys.executable} cannot parse DAG files: {exc} (install apache-airflow-core, "
            "pip install -e '.[airflow]', or point DAG_PARSER_PYTHON at an interpreter that "
            "has it)\n"
        )
        return NO_AIRFLOW
    # stdout carries the document only: the file's own output (print, C code) goes to stderr
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    document = parse(os.path.abspath(args.file), bundle=args.bundle)
    json.dump(document, out)
    out.write("\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
