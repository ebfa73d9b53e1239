"""Reading and validating a DAG manifest into typed declarations (no database access).

``assets_app.services.dags.declare`` stores what this module returns. Manifest format (YAML, or JSON
when the file name ends in ``.json``)::

    dags:
      - dag_id: asset_s3_bucket_producer     # 1-250 chars of letters, digits, _ . -
        is_paused: false                     # optional; default false on creation, kept after
        is_paused_upon_creation: true        # optional: the pause a new DAG gets (kept after)
        airflow_dag_file: dags/producer.py   # optional: a real Airflow DAG file runs the tasks
        airflow_dags_folder: dags            # optional: where its imports start (Airflow's
                                             # dags_folder); default: the file's folder
        tasks:
          - task_id: produce_asset_events
            outlets: [{asset: {uri: "s3://bucket/my-task"}}]
            inlets: []
            retries: 2                       # optional; default 0 (Airflow's default)
            retry_delay: 60                  # optional; seconds, default 300
            retry_exponential_backoff: 2     # optional: a multiplier (true: 2), default 0
            max_retry_delay: 3600            # optional: seconds, the backoff's cap
            depends_on_past: true            # optional: wait for the previous run's try
            wait_for_downstream: false       # optional: and its direct downstreams
            ignore_first_depends_on_past: true   # optional; default true
            email: [ops@example.com]         # optional: mailed when a try fails or retries
            email_on_failure: true           # optional; default true
            email_on_retry: true             # optional; default true
            callable: tasks/orders.py:export # optional: task_sdk code (or package.module:func)
          - task_id: report
            upstream: [produce_asset_events]   # optional: the tasks it waits for
            trigger_rule: all_done             # optional; one of Airflow's 13, default all_success
            pool: reports                      # optional; default default_pool (docs/pools.md)
            pool_slots: 1                      # optional; the pool slots it takes, default 1
            priority_weight: 1                 # optional; default 1
            weight_rule: downstream            # optional; downstream, upstream or absolute
            owner: data-eng                    # optional; default airflow
            queue: reports                     # optional; the Celery queue, default default
            max_active_tis_per_dag: 1          # optional; default no limit
            max_active_tis_per_dagrun: 1       # optional; default no limit
      - dag_id: asset_s3_bucket_consumer
        schedule: {asset: {uri: "s3://bucket/my-task"}}
        max_active_runs: 1                   # optional; default 16 (Airflow's default)
        max_active_tasks: 4                  # optional; default 16, per run (Airflow 3)
        one_run_per_event: false             # optional: one run per event instead of one for all
        dagrun_timeout: 3600                 # optional: seconds a run may run before it fails
      - dag_id: nightly
        schedule: "@daily"                   # a cron string or preset, or {timedelta: 3600}
        timezone: Europe/Berlin              # optional; the cron's timezone, default UTC
        start_date: 2026-01-01T00:00:00Z     # optional; end_date too
        catchup: false                       # optional; default false, as in Airflow 3
        tags: [reports]                      # optional
        params:                              # optional: Airflow's Params, a run's conf
          day: "2026-01-01"                  # is checked against (assets_app.params)
          limit: {default: 10, description: "rows", schema: {type: integer, minimum: 1}}
          region: {schema: {type: string}}   # no default: a trigger's conf must give it

A time schedule is a cron string, one of the presets (``@once``, ``@hourly``, ``@daily``,
``@weekly``, ``@monthly``, ``@quarterly``, ``@yearly``), ``{timedelta: SECONDS}`` (or
``{timedelta: "1 day, 2:00:00"}``), or ``{asset_or_time: {assets: CONDITION, time: CRON}}``
(Airflow's ``AssetOrTimeSchedule``: runs when the condition is met and when the time is due).

Inlet/outlet entries and schedule leaves:

- ``{asset: {name, uri, group, extra}}``: name or uri may be given alone and is copied to the
  other; the uri is normalized with Airflow's rules (``task_sdk.definitions.Asset``);
- ``{asset_ref: {name: N}}`` or ``{asset_ref: {uri: U}}``: a reference resolved at run time
  (a uri reference is kept normalized);
- ``{alias: NAME}`` or ``{alias: {name: NAME, group: G}}``.

A schedule is one leaf, ``{all: [...]}``, ``{any: [...]}`` (nestable, possibly empty), or a
plain list (all of). Leaves and conditions are read by the grammar of
``assets_app.conditions`` (:func:`~assets_app.conditions.leaf_parse`,
:func:`~assets_app.conditions.condition_parse`), the one a stored ``Dag.asset_expression`` is
read with, so the manifest and the stored form accept and refuse the same conditions. Paths in
``callable``, ``airflow_dag_file`` and ``airflow_dags_folder`` are relative to the manifest's
folder;
a task has either (its own ``callable`` wins over its DAG's ``airflow_dag_file``) or neither
(then nothing can run it automatically; ``create_task_instance`` still works).

A schedule parses into an ``assets_app.conditions`` tree whose leaves are the task SDK's keys and
references; ``conditions.condition_expression`` is its stored form. The assets and aliases a
manifest declares (with the group/extra the upserts need) are merged across the whole file: an
asset declared twice with two different groups or extras is an error.

Every error is a ``ManifestError`` whose message starts with the offending place: the file,
the DAG, the task and the field (``dags.yaml: DAG 'nightly', task 'load', outlets[2]: …``), or
the entry's position while it has no id (``dags.yaml.dags[1].dag_id: …``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml

from assets_app.conditions import (
    LEAF_KINDS,
    OPERATORS,
    Condition,
    DeclaredLeaf,
    Leaf,
    condition_parse,
    leaf_parse,
    node_kind,
)
from assets_app.exceptions import InvalidAssetExpression, ManifestError
from assets_app.mapping import MappingSpecError, length_upstreams, mapped_check
from assets_app.models import (
    DEFAULT_MAX_ACTIVE_RUNS,
    DEFAULT_MAX_ACTIVE_TASKS,
    DEFAULT_OWNER,
    DEFAULT_POOL,
    DEFAULT_QUEUE,
    OWNER_LENGTH,
    POOL_NAME_LENGTH,
    QUEUE_LENGTH,
)
from assets_app.params import ParamSpec, params_check_defaults, params_parse
from assets_app.timetables import Timetable, timetable_parse
from assets_app.trigger_rules import DEFAULT_TRIGGER_RULE, TRIGGER_RULE_VALUES
from assets_app.validators import validate_id, validate_keys
from assets_app.weight_rules import (
    DEFAULT_WEIGHT_RULE,
    PRIORITY_MAX,
    PRIORITY_MIN,
    WEIGHT_RULE_VALUES,
)
from task_sdk.definitions import AssetAliasUniqueKey, AssetUniqueKey

# --- declarations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AssetDecl:
    """An asset as declared. ``group``/``extra`` are ``None`` when the manifest omits them."""

    key: AssetUniqueKey
    group: str | None = None
    extra: dict[str, Any] | None = None


@dataclass(frozen=True)
class AliasDecl:
    """An alias as declared. ``group`` is ``None`` when the manifest omits it."""

    name: str
    group: str | None = None


Declaration = AssetDecl | AliasDecl


#: Airflow's defaults for ``retries`` and ``retry_delay`` (seconds).
DEFAULT_RETRIES = 0
DEFAULT_RETRY_DELAY = 300.0


@dataclass(frozen=True)
class TaskDecl:
    task_id: str
    outlets: tuple[Leaf, ...] = ()
    inlets: tuple[Leaf, ...] = ()
    retries: int = DEFAULT_RETRIES
    retry_delay: float = DEFAULT_RETRY_DELAY
    callable: str = ""  # absolute "path/file.py:function" or "package.module:function"
    airflow_dag_file: str = ""  # absolute path of a real Airflow DAG file
    #: absolute path of the DAGs folder the file's imports start from ("": the file's folder)
    airflow_dags_folder: str = ""
    upstream: tuple[str, ...] = ()  # the task ids it depends on directly
    trigger_rule: str = DEFAULT_TRIGGER_RULE.value
    retry_exponential_backoff: float = 0.0
    max_retry_delay: float | None = None
    depends_on_past: bool = False
    wait_for_downstream: bool = False
    ignore_first_depends_on_past: bool = True
    email: tuple[str, ...] = ()
    email_on_failure: bool = True
    email_on_retry: bool = True
    pool: str = DEFAULT_POOL
    pool_slots: int = 1
    priority_weight: int = 1
    weight_rule: str = DEFAULT_WEIGHT_RULE.value
    max_active_tis_per_dag: int | None = None
    max_active_tis_per_dagrun: int | None = None
    owner: str = DEFAULT_OWNER
    #: how it expands into map indexes (``assets_app.mapping``); ``None``: not mapped
    mapped: dict[str, Any] | None = None
    queue: str = DEFAULT_QUEUE
    #: starts in the triggerer (Airflow's ``start_from_trigger``): its ``start_trigger_args``
    start_trigger_args: dict[str, Any] | None = None
    #: the DAG file's task has these callbacks (the DAG-file loader sets them): a try that fails
    #: outside its process has the DAG processor run them
    has_on_failure_callback: bool = False
    has_on_retry_callback: bool = False


@dataclass(frozen=True)
class DagDecl:
    dag_id: str
    is_paused: bool | None = None  # None: keep the stored value (False for a new DAG)
    #: the pause a DAG gets when it is created (Airflow's ``is_paused_upon_creation``); a DAG
    #: that exists keeps its own (``is_paused`` overrides both)
    is_paused_upon_creation: bool | None = None
    tasks: tuple[TaskDecl, ...] = ()
    schedule: Condition | None = None  # the asset condition, if asset-scheduled
    timetable: Timetable | None = None  # the time schedule, if time-scheduled
    timetable_summary: str = ""  # the time schedule as declared ("@daily")
    start_date: datetime | None = None
    end_date: datetime | None = None
    catchup: bool = False
    max_active_runs: int = DEFAULT_MAX_ACTIVE_RUNS
    max_active_tasks: int = DEFAULT_MAX_ACTIVE_TASKS
    one_run_per_event: bool = False
    tags: tuple[str, ...] = ()
    params: tuple[ParamSpec, ...] = ()
    dagrun_timeout: float | None = None  # seconds
    #: the DAG file gives DAG-level callbacks (set by the DAG-file loader)
    has_on_success_callback: bool = False
    has_on_failure_callback: bool = False
    #: the asset watchers (AIP-82) its DAG file declares (set by the DAG-file loader), each
    #: ``{"asset": {"name", "uri"}, "name", "classpath", "kwargs"}``
    asset_watchers: tuple[dict[str, Any], ...] = ()

    @property
    def task_ids(self) -> list[str]:
        return [task.task_id for task in self.tasks]

    @property
    def leaf_task_ids(self) -> set[str]:
        """The tasks no other task of the DAG depends on."""
        upstream = {up for task in self.tasks for up in task.upstream}
        return {task.task_id for task in self.tasks if task.task_id not in upstream}


@dataclass(frozen=True)
class Manifest:
    """A validated manifest: its DAGs and every asset and alias it declares, merged.

    ``assets`` and ``aliases`` are in manifest order (each DAG's schedule, then its tasks'
    outlets and inlets), each with the group/extra some declaration gives.
    """

    dags: tuple[DagDecl, ...]
    assets: Mapping[AssetUniqueKey, AssetDecl] = field(default_factory=dict)
    aliases: Mapping[str, AliasDecl] = field(default_factory=dict)


def asset_describe(key: AssetUniqueKey) -> str:
    """An asset key as messages name it: ``(name='n', uri='s3://b/n')``."""
    return f"(name={key.name!r}, uri={key.uri!r})"


# --- reading ---------------------------------------------------------------------------------


def manifest_read(path: Path) -> Any:
    """Read the raw manifest document (JSON for ``*.json``, YAML otherwise)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ManifestError(f"{path}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from exc
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: invalid JSON: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: invalid YAML: {exc}") from exc


def manifest_load(path: Path) -> Manifest:
    """Read and validate a manifest file; error places start with the file's name."""
    resolved = path.expanduser().resolve()
    return manifest_parse(manifest_read(resolved), source=path.name, base_dir=resolved.parent)


def manifest_parse(
    document: Any, *, source: str = "manifest", base_dir: Path | None = None
) -> Manifest:
    """Validate a raw manifest document (see the module docstring) into typed declarations.

    Relative code paths resolve against ``base_dir`` (default: the current directory).
    """
    spec = _check_keys(document, source, allowed={"dags"}, required={"dags"})
    if not isinstance(spec["dags"], list):
        raise ManifestError(f"{source}.dags: expected a list")
    declared: list[Declaration] = []
    base = (base_dir or Path.cwd()).resolve()
    dags = tuple(
        _parse_named_dag(dag, source, f"{source}.dags[{i}]", declared, base)
        for i, dag in enumerate(spec["dags"])
    )
    _check_unique([dag.dag_id for dag in dags], f"{source}: duplicate dag_id(s)")
    return Manifest(dags=dags, assets=_merge_assets(declared), aliases=_merge_aliases(declared))


# --- places: errors name the DAG and the task --------------------------------------------------

#: A place under a DAG's entry: its task (``.tasks[2]``), then the rest (``.outlets[0]``).
_PLACE = re.compile(r"(?:\.tasks\[(?P<task>\d+)\])?(?P<rest>[^:]*):")


def _named_place(message: str, source: str, where: str, value: Any) -> str:
    """``message`` with its place under the DAG ``where`` (``dags.yaml.dags[1].tasks[0].upstream:
    …``) named by the DAG's and the task's ids (``dags.yaml: DAG 'nightly', task 'load',
    upstream: …``) when the entry gives them; otherwise as it is."""
    dag_id = value.get("dag_id") if isinstance(value, dict) else None
    match = _PLACE.match(message, len(where)) if message.startswith(where) else None
    if not isinstance(dag_id, str) or match is None:
        return message
    named = f"{source}: DAG {dag_id!r}"
    if match["task"] is not None:
        tasks = value.get("tasks")
        task = tasks[int(match["task"])] if isinstance(tasks, list) else None
        task_id = task.get("task_id") if isinstance(task, dict) else None
        if not isinstance(task_id, str):
            return message
        named += f", task {task_id!r}"
    rest = match["rest"]
    if rest.startswith("."):
        rest = f", {rest[1:]}"
    return f"{named}{rest}{message[match.end('rest') :]}"


def _parse_named_dag(
    value: Any, source: str, where: str, declared: list[Declaration], base: Path
) -> DagDecl:
    """:func:`_parse_dag`, its errors naming the DAG and the task (:func:`_named_place`)."""
    try:
        return _parse_dag(value, where, declared, base)
    except ManifestError as exc:
        raise type(exc)(_named_place(exc.message, source, where, value), **exc.context) from exc


# --- checks ----------------------------------------------------------------------------------


def _check_keys(value: Any, where: str, *, allowed: set[str], required: set[str]) -> dict[str, Any]:
    try:
        return dict(validate_keys(value, allowed=allowed, required=required))
    except ValueError as exc:
        raise ManifestError(f"{where}: {exc}") from exc


def _check_id(value: Any, where: str) -> str:
    try:
        return validate_id(value)
    except ValueError as exc:
        raise ManifestError(f"{where}: {exc}") from exc


def _check_unique(ids: list[str], problem: str) -> None:
    duplicates = sorted({value for value in ids if ids.count(value) > 1})
    if duplicates:
        raise ManifestError(f"{problem} {', '.join(duplicates)}")


# --- leaves and conditions: the grammar of assets_app.conditions ------------------------------


def _declare(leaves: Iterable[DeclaredLeaf], declared: list[Declaration]) -> None:
    """Add the assets and aliases among ``leaves`` to ``declared``, with what they declare."""
    for leaf in leaves:
        if isinstance(leaf.leaf, AssetUniqueKey):
            declared.append(AssetDecl(key=leaf.leaf, group=leaf.group, extra=leaf.extra))
        elif isinstance(leaf.leaf, AssetAliasUniqueKey):
            declared.append(AliasDecl(name=leaf.leaf.name, group=leaf.group))


def _parse_leaf(node: Any, where: str, declared: list[Declaration]) -> Leaf:
    """A task's inlet or outlet (:func:`assets_app.conditions.leaf_parse`); an asset or alias
    also goes to ``declared``."""
    try:
        leaf = leaf_parse(node, where=where)
    except InvalidAssetExpression as exc:
        raise ManifestError(exc.message) from exc
    _declare([leaf], declared)
    return leaf.leaf


def _parse_condition(node: Any, where: str, declared: list[Declaration]) -> Condition:
    """An asset condition (:func:`assets_app.conditions.condition_parse`, the grammar a stored
    ``Dag.asset_expression`` is read with too); its assets and aliases also go to
    ``declared``."""
    leaves: list[DeclaredLeaf] = []
    try:
        condition = condition_parse(node, where=where, declared=leaves)
    except InvalidAssetExpression as exc:
        raise ManifestError(exc.message) from exc
    _declare(leaves, declared)
    return condition


def _parse_leaves(value: Any, where: str, declared: list[Declaration]) -> tuple[Leaf, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ManifestError(f"{where}: expected a list")
    return tuple(
        _parse_leaf(node, f"{where}[{index}]", declared) for index, node in enumerate(value)
    )


# --- tasks and DAGs --------------------------------------------------------------------------


#: A task's settings that a manifest gives under their Airflow names and ``dag_task`` keeps
#: under the same names (``declare`` compares them to tell an unchanged declaration).
TASK_SETTINGS = (
    "trigger_rule",
    "retry_exponential_backoff",
    "max_retry_delay",
    "depends_on_past",
    "wait_for_downstream",
    "ignore_first_depends_on_past",
    "email",
    "email_on_failure",
    "email_on_retry",
    "pool",
    "pool_slots",
    "priority_weight",
    "weight_rule",
    "max_active_tis_per_dag",
    "max_active_tis_per_dagrun",
    "owner",
    "mapped",
    "queue",
    "start_trigger_args",
    "has_on_failure_callback",
    "has_on_retry_callback",
)
_TASK_KEYS = {
    "task_id",
    "outlets",
    "inlets",
    "retries",
    "retry_delay",
    "callable",
    "upstream",
    *TASK_SETTINGS,
}
_DAG_KEYS = {
    "dag_id",
    "is_paused",
    "is_paused_upon_creation",
    "tasks",
    "schedule",
    "airflow_dag_file",
    "airflow_dags_folder",
    "timezone",
    "start_date",
    "end_date",
    "catchup",
    "max_active_runs",
    "max_active_tasks",
    "one_run_per_event",
    "tags",
    "params",
    "dagrun_timeout",
    "has_on_success_callback",
    "has_on_failure_callback",
    "asset_watchers",
}


def _parse_mapped(value: Any, where: str, upstream: list[Any], code: str) -> dict[str, Any] | None:
    """A mapped task's expansion (``assets_app.mapping``): the grammar's, over upstreams of the
    task only, and for a task an Airflow DAG file runs (Airflow's runner resolves each map
    index's arguments; a ``task_sdk`` callable has none)."""
    if value is None:
        return None
    if code:
        raise ManifestError(
            f"{where}: only a task of an Airflow DAG file can be mapped (a callable cannot)"
        )
    try:
        mapped = mapped_check(value, where)
    except MappingSpecError as exc:
        raise ManifestError(str(exc)) from None
    for task_id in length_upstreams(mapped["length"]):
        if task_id not in upstream:
            raise ManifestError(
                f"{where}.length: it maps over {task_id!r}, which is not one of the task's "
                "upstreams"
            )
    return mapped


def _parse_task(
    value: Any,
    where: str,
    declared: list[Declaration],
    base: Path,
    airflow_dag_file: tuple[str, str],
) -> TaskDecl:
    spec = _check_keys(value, where, allowed=_TASK_KEYS, required={"task_id"})
    retries = spec.get("retries", DEFAULT_RETRIES)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10_000:
        raise ManifestError(f"{where}.retries: expected a whole number from 0 to 10000")
    retry_delay = spec.get("retry_delay", DEFAULT_RETRY_DELAY)
    if (
        isinstance(retry_delay, bool)
        or not isinstance(retry_delay, int | float)
        or not 0 <= retry_delay <= 365 * 86400
    ):
        raise ManifestError(f"{where}.retry_delay: expected seconds from 0 to 31536000")
    code = (
        _parse_callable(spec["callable"], f"{where}.callable", base) if "callable" in spec else ""
    )
    upstream = spec.get("upstream") or []
    if not isinstance(upstream, list):
        raise ManifestError(f"{where}.upstream: expected a list of task ids")
    depends_on_past = _parse_bool(spec.get("depends_on_past", False), f"{where}.depends_on_past")
    wait_for_downstream = _parse_bool(
        spec.get("wait_for_downstream", False), f"{where}.wait_for_downstream"
    )
    trigger_rule = spec.get("trigger_rule", DEFAULT_TRIGGER_RULE.value)
    if trigger_rule not in TRIGGER_RULE_VALUES:
        raise ManifestError(
            f"{where}.trigger_rule: unknown trigger rule {trigger_rule!r}; one of "
            f"{', '.join(TRIGGER_RULE_VALUES)}"
        )
    pool = spec.get("pool", DEFAULT_POOL)
    if not isinstance(pool, str) or not 1 <= len(pool) <= POOL_NAME_LENGTH or "\x00" in pool:
        raise ManifestError(
            f"{where}.pool: expected a pool name of 1 to {POOL_NAME_LENGTH} characters"
        )
    weight_rule = spec.get("weight_rule", DEFAULT_WEIGHT_RULE.value)
    if weight_rule not in WEIGHT_RULE_VALUES:
        raise ManifestError(
            f"{where}.weight_rule: unknown weight rule {weight_rule!r}; one of "
            f"{', '.join(WEIGHT_RULE_VALUES)}"
        )
    owner = spec.get("owner", DEFAULT_OWNER)
    if not isinstance(owner, str) or not 1 <= len(owner) <= OWNER_LENGTH or "\x00" in owner:
        raise ManifestError(f"{where}.owner: expected a name of 1 to {OWNER_LENGTH} characters")
    queue = spec.get("queue", DEFAULT_QUEUE)
    if not isinstance(queue, str) or not 1 <= len(queue) <= QUEUE_LENGTH or "\x00" in queue:
        raise ManifestError(
            f"{where}.queue: expected a queue name of 1 to {QUEUE_LENGTH} characters"
        )
    priority_weight = spec.get("priority_weight", 1)
    if (
        isinstance(priority_weight, bool)
        or not isinstance(priority_weight, int)
        or not PRIORITY_MIN <= priority_weight <= PRIORITY_MAX
    ):
        raise ManifestError(f"{where}.priority_weight: expected a whole number (32-bit)")
    return TaskDecl(
        task_id=_check_id(spec["task_id"], f"{where}.task_id"),
        pool=pool,
        pool_slots=_parse_cap(spec.get("pool_slots", 1), f"{where}.pool_slots"),
        priority_weight=priority_weight,
        weight_rule=str(weight_rule),
        owner=owner,
        queue=queue,
        start_trigger_args=_parse_start_trigger_args(
            spec.get("start_trigger_args"), f"{where}.start_trigger_args"
        ),
        max_active_tis_per_dag=_parse_optional_cap(
            spec.get("max_active_tis_per_dag"), f"{where}.max_active_tis_per_dag"
        ),
        max_active_tis_per_dagrun=_parse_optional_cap(
            spec.get("max_active_tis_per_dagrun"), f"{where}.max_active_tis_per_dagrun"
        ),
        mapped=_parse_mapped(spec.get("mapped"), f"{where}.mapped", upstream, code),
        has_on_failure_callback=_parse_callback_flag(
            spec, "has_on_failure_callback", where, "" if code else airflow_dag_file[0]
        ),
        has_on_retry_callback=_parse_callback_flag(
            spec, "has_on_retry_callback", where, "" if code else airflow_dag_file[0]
        ),
        outlets=_parse_leaves(spec.get("outlets"), f"{where}.outlets", declared),
        inlets=_parse_leaves(spec.get("inlets"), f"{where}.inlets", declared),
        retries=retries,
        retry_delay=float(retry_delay),
        callable=code,
        airflow_dag_file="" if code else airflow_dag_file[0],
        airflow_dags_folder="" if code else airflow_dag_file[1],
        upstream=tuple(
            dict.fromkeys(
                _check_id(up, f"{where}.upstream[{index}]") for index, up in enumerate(upstream)
            )
        ),
        trigger_rule=str(trigger_rule),
        retry_exponential_backoff=_parse_backoff(
            spec.get("retry_exponential_backoff", 0), f"{where}.retry_exponential_backoff"
        ),
        max_retry_delay=_parse_seconds(spec.get("max_retry_delay"), f"{where}.max_retry_delay"),
        depends_on_past=depends_on_past or wait_for_downstream,  # as Airflow sets it
        wait_for_downstream=wait_for_downstream,
        ignore_first_depends_on_past=_parse_bool(
            spec.get("ignore_first_depends_on_past", True), f"{where}.ignore_first_depends_on_past"
        ),
        email=_parse_email(spec.get("email"), f"{where}.email"),
        email_on_failure=_parse_bool(
            spec.get("email_on_failure", True), f"{where}.email_on_failure"
        ),
        email_on_retry=_parse_bool(spec.get("email_on_retry", True), f"{where}.email_on_retry"),
    )


def _parse_backoff(value: Any, where: str) -> float:
    """Airflow's ``retry_exponential_backoff``: a multiplier from 0; ``true`` is 2 and
    ``false`` 0, as Airflow reads a boolean."""
    if isinstance(value, bool):
        return 2.0 if value else 0.0
    if not isinstance(value, int | float) or not 0 <= value <= 1000:
        raise ManifestError(f"{where}: expected a multiplier from 0 to 1000, or true/false")
    return float(value)


def _parse_seconds(value: Any, where: str) -> float | None:
    """Optional seconds (a duration), from 0 to a year."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= 365 * 86400
    ):
        raise ManifestError(f"{where}: expected seconds from 0 to 31536000")
    return float(value)


def _parse_email(value: Any, where: str) -> tuple[str, ...]:
    """A task's ``email``: an address, a list of them, or a comma/semicolon-separated string
    (as Airflow's ``get_email_address_list`` reads it)."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = re.split(r"[,;]", value)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ManifestError(f"{where}: expected an address or a list of addresses")
    addresses = [item.strip() for item in value if item.strip()]
    for address in addresses:
        if "@" not in address:
            raise ManifestError(f"{where}: {address!r} is not an email address")
    return tuple(dict.fromkeys(addresses))


def _check_edges(tasks: tuple[TaskDecl, ...], where: str) -> None:
    """Every upstream id names a task of the DAG, and the edges have no cycle."""
    index = {task.task_id: i for i, task in enumerate(tasks)}
    for i, task in enumerate(tasks):
        for up in task.upstream:
            if up not in index:
                raise ManifestError(
                    f"{where}.tasks[{i}].upstream: task {task.task_id!r} depends on {up!r}, "
                    f"which the DAG does not declare (its tasks: {', '.join(index)})"
                )
            if up == task.task_id:
                raise ManifestError(
                    f"{where}.tasks[{i}].upstream: task {task.task_id!r} depends on itself"
                )
    upstream = {task.task_id: task.upstream for task in tasks}
    done: set[str] = set()
    for task in tasks:  # depth-first, iteratively: a cycle is a task met again on the path
        path: list[str] = []
        stack: list[tuple[str, int]] = [(task.task_id, 0)]
        while stack:
            task_id, next_child = stack.pop()
            if next_child == 0:
                if task_id in done:
                    continue
                path.append(task_id)
            children = upstream[task_id]
            if next_child < len(children):
                stack.append((task_id, next_child + 1))
                child = children[next_child]
                if child in path:
                    cycle = " -> ".join([*path[path.index(child) :], child])
                    raise ManifestError(
                        f"{where}.tasks[{index[child]}].upstream: task {child!r} is in a "
                        f"cycle: {cycle}"
                    )
                if child not in done:
                    stack.append((child, 0))
            else:
                path.pop()
                done.add(task_id)


def _parse_callable(value: Any, where: str, base: Path) -> str:
    """``file.py:function`` (made absolute) or ``package.module:function``."""
    if not isinstance(value, str) or value.count(":") != 1:
        raise ManifestError(
            f"{where}: expected 'path/to/file.py:function' or 'package.module:function', "
            f"got {value!r}"
        )
    target, function = value.split(":")
    if not function.isidentifier():
        raise ManifestError(f"{where}: {function!r} is not a function name")
    if target.endswith(".py"):
        return f"{(base / target).resolve()}:{function}"
    if not all(part.isidentifier() for part in target.split(".")):
        raise ManifestError(f"{where}: {target!r} is neither a .py file nor a module path")
    return value


def _parse_dags_folder(spec: dict[str, Any], where: str, base: Path, dag_file: str) -> str:
    """``airflow_dags_folder``: Airflow's ``dags_folder`` for the DAG file (the root its imports
    start from, as the loader's folder is when a file sits in a subfolder); the file must be
    in it."""
    folder = spec.get("airflow_dags_folder", "")
    if not folder:
        return ""
    if not isinstance(folder, str):
        raise ManifestError(f"{where}.airflow_dags_folder: expected the path of a folder")
    if not dag_file:
        raise ManifestError(f"{where}.airflow_dags_folder: needs an airflow_dag_file")
    resolved = (base / folder).resolve()
    if not Path(dag_file).is_relative_to(resolved):
        raise ManifestError(
            f"{where}.airflow_dags_folder: {dag_file} is not in the folder {resolved}"
        )
    return str(resolved)


def _parse_dag(value: Any, where: str, declared: list[Declaration], base: Path) -> DagDecl:
    spec = _check_keys(value, where, allowed=_DAG_KEYS, required={"dag_id"})
    dag_id = _check_id(spec["dag_id"], f"{where}.dag_id")
    is_paused = _parse_optional_bool(spec.get("is_paused"), f"{where}.is_paused")
    on_creation = _parse_optional_bool(
        spec.get("is_paused_upon_creation"), f"{where}.is_paused_upon_creation"
    )
    airflow_dag_file = spec.get("airflow_dag_file", "")
    if not isinstance(airflow_dag_file, str) or (
        airflow_dag_file and not airflow_dag_file.endswith(".py")
    ):
        raise ManifestError(f"{where}.airflow_dag_file: expected the path of a .py file")
    if airflow_dag_file:
        airflow_dag_file = str((base / airflow_dag_file).resolve())
    dags_folder = _parse_dags_folder(spec, where, base, airflow_dag_file)
    tasks_raw = spec.get("tasks") or []
    if not isinstance(tasks_raw, list):
        raise ManifestError(f"{where}.tasks: expected a list")
    task_declared: list[Declaration] = []
    tasks = tuple(
        _parse_task(
            task, f"{where}.tasks[{i}]", task_declared, base, (airflow_dag_file, dags_folder)
        )
        for i, task in enumerate(tasks_raw)
    )
    _check_unique([task.task_id for task in tasks], f"{where}: duplicate task_id(s)")
    _check_edges(tasks, where)
    timezone = spec.get("timezone", "UTC")
    if not isinstance(timezone, str):
        raise ManifestError(f"{where}.timezone: expected a timezone name such as Europe/Berlin")
    schedule, timetable, summary = _parse_schedule(
        spec.get("schedule"), f"{where}.schedule", declared, timezone=timezone
    )
    declared.extend(task_declared)  # a DAG's schedule first, then its tasks
    start_date = _parse_datetime(spec.get("start_date"), f"{where}.start_date")
    end_date = _parse_datetime(spec.get("end_date"), f"{where}.end_date")
    if start_date is not None and end_date is not None and end_date < start_date:
        raise ManifestError(f"{where}.end_date: {end_date} is before start_date {start_date}")
    tags = spec.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(tag, str) and tag for tag in tags):
        raise ManifestError(f"{where}.tags: expected a list of non-empty strings")
    return DagDecl(
        dag_id=dag_id,
        is_paused=is_paused,
        is_paused_upon_creation=on_creation,
        tasks=tasks,
        schedule=schedule,
        timetable=timetable,
        timetable_summary=summary,
        start_date=start_date,
        end_date=end_date,
        catchup=_parse_bool(spec.get("catchup", False), f"{where}.catchup"),
        max_active_runs=_parse_cap(
            spec.get("max_active_runs", DEFAULT_MAX_ACTIVE_RUNS), f"{where}.max_active_runs"
        ),
        max_active_tasks=_parse_cap(
            spec.get("max_active_tasks", DEFAULT_MAX_ACTIVE_TASKS), f"{where}.max_active_tasks"
        ),
        one_run_per_event=_parse_bool(
            spec.get("one_run_per_event", False), f"{where}.one_run_per_event"
        ),
        tags=tuple(dict.fromkeys(tags)),
        params=_parse_params(spec.get("params"), where, scheduled=bool(summary)),
        dagrun_timeout=_parse_seconds(spec.get("dagrun_timeout"), f"{where}.dagrun_timeout"),
        has_on_success_callback=_parse_callback_flag(
            spec, "has_on_success_callback", where, airflow_dag_file
        ),
        has_on_failure_callback=_parse_callback_flag(
            spec, "has_on_failure_callback", where, airflow_dag_file
        ),
        asset_watchers=_parse_asset_watchers(spec.get("asset_watchers"), where, airflow_dag_file),
    )


_WATCHER_KEYS = {"asset", "name", "classpath", "kwargs"}


def _parse_asset_watchers(value: Any, where: str, dag_file: str) -> tuple[dict[str, Any], ...]:
    """``asset_watchers``: the asset watchers (AIP-82) the DAG file declares, as the DAG-file
    loader writes them (``runtime/dag_parse.py``): each ``{"asset": {"name", "uri"}, "name",
    "classpath", "kwargs"}``, ``kwargs`` the JSON text of the trigger's serialized kwargs."""
    if value is None:
        return ()
    where = f"{where}.asset_watchers"
    if not dag_file:
        raise ManifestError(f"{where}: needs an airflow_dag_file, whose trigger classes they run")
    if not isinstance(value, list):
        raise ManifestError(f"{where}: expected a list")
    watchers: list[dict[str, Any]] = []
    for i, item in enumerate(value):
        here = f"{where}[{i}]"
        spec = _check_keys(item, here, allowed=_WATCHER_KEYS, required=_WATCHER_KEYS)
        asset = spec.get("asset")
        if not (
            isinstance(asset, dict)
            and set(asset) == {"name", "uri"}
            and all(isinstance(v, str) and v for v in asset.values())
        ):
            raise ManifestError(f"{here}.asset: expected {{name, uri}}")
        for key in ("name", "classpath", "kwargs"):
            if not isinstance(spec.get(key), str) or not spec[key]:
                raise ManifestError(f"{here}.{key}: expected a non-empty string")
        try:
            kwargs = json.loads(spec["kwargs"])
        except ValueError:
            kwargs = None
        if not isinstance(kwargs, dict):
            raise ManifestError(f"{here}.kwargs: expected the JSON text of an object")
        watchers.append(
            {
                "asset": {"name": asset["name"], "uri": asset["uri"]},
                "name": spec["name"],
                "classpath": spec["classpath"],
                "kwargs": spec["kwargs"],
            }
        )
    return tuple(watchers)


def _parse_callback_flag(spec: dict[str, Any], key: str, where: str, dag_file: str) -> bool:
    """``has_on_success_callback`` / ``has_on_failure_callback`` of a DAG,
    ``has_on_failure_callback`` / ``has_on_retry_callback`` of a task: the DAG file's DAG or task
    has that callback (the DAG-file loader sets them; the callback runs in the file's code)."""
    flag = _parse_bool(spec.get(key, False), f"{where}.{key}")
    if flag and not dag_file:
        raise ManifestError(f"{where}.{key}: needs an airflow_dag_file, whose code it runs")
    return flag


def _parse_params(value: Any, where: str, *, scheduled: bool) -> tuple[ParamSpec, ...]:
    """``params`` (``assets_app.params``); a time-scheduled DAG's must resolve from their
    defaults, as Airflow requires (its scheduled runs have no conf)."""
    try:
        params = params_parse(value, where)
        if scheduled:
            params_check_defaults(params, where)
    except ValueError as exc:
        raise ManifestError(str(exc)) from None
    return params


def _parse_bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ManifestError(f"{where}: expected true or false")
    return value


def _parse_optional_bool(value: Any, where: str) -> bool | None:
    """``None`` (omitted: the stored value stays) or :func:`_parse_bool`."""
    return None if value is None else _parse_bool(value, where)


def _parse_start_trigger_args(value: Any, where: str) -> dict[str, Any] | None:
    """A task's ``start_trigger_args`` (it starts in the triggerer, docs/triggerer.md):
    ``trigger_cls`` and ``next_method`` (names), ``trigger_kwargs`` and ``next_kwargs``
    (objects or null), ``timeout`` (seconds or null)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: expected a mapping")
    unknown = set(value) - {
        "trigger_cls",
        "trigger_kwargs",
        "next_method",
        "next_kwargs",
        "timeout",
    }
    if unknown:
        raise ManifestError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in ("trigger_cls", "next_method"):
        if not isinstance(value.get(key), str) or not 1 <= len(value[key]) <= 1000:
            raise ManifestError(f"{where}.{key}: expected a name of 1 to 1000 characters")
    for key in ("trigger_kwargs", "next_kwargs"):
        if value.get(key) is not None and not isinstance(value[key], dict):
            raise ManifestError(f"{where}.{key}: expected a mapping or null")
    timeout = value.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise ManifestError(f"{where}.timeout: expected a positive number of seconds or null")
    return {
        "trigger_cls": value["trigger_cls"],
        "trigger_kwargs": value.get("trigger_kwargs") or {},
        "next_method": value["next_method"],
        "next_kwargs": value.get("next_kwargs") or {},
        "timeout": timeout,
    }


def _parse_cap(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
        raise ManifestError(f"{where}: expected a whole number from 1 to 100000")
    return value


def _parse_optional_cap(value: Any, where: str) -> int | None:
    """``None`` (no limit) or :func:`_parse_cap`."""
    return None if value is None else _parse_cap(value, where)


def _parse_datetime(value: Any, where: str) -> datetime | None:
    """An ISO 8601 date-time (or date); naive means UTC, as Airflow reads a DAG's dates."""
    if value is None:
        return None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)  # noqa: DTZ001 - made UTC below
    elif isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ManifestError(
                f"{where}: {value!r} is not an ISO 8601 date-time (e.g. 2026-01-01T00:00:00Z)"
            ) from None
    if not isinstance(value, datetime):
        raise ManifestError(f"{where}: expected an ISO 8601 date-time")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _parse_time(node: Any, where: str, *, timezone: str) -> tuple[Timetable, str]:
    """A cron string or preset, or ``{timedelta: X}``: the timetable and its summary."""
    try:
        if isinstance(node, str):
            return timetable_parse(schedule=node, timezone=timezone), node.strip()
        if node_kind(node) == "timedelta":
            timetable = timetable_parse(delta=node["timedelta"], timezone=timezone)
            assert timetable.delta is not None  # noqa: S101 - a delta timetable has one
            return timetable, str(timetable.delta)
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"{where}: {exc}") from exc
    raise ManifestError(
        f"{where}: expected a cron string, a preset (@daily …) or {{timedelta: SECONDS}}"
    )


def _parse_schedule(
    node: Any, where: str, declared: list[Declaration], *, timezone: str
) -> tuple[Condition | None, Timetable | None, str]:
    """A DAG's ``schedule``: (asset condition, timetable, summary); ``None`` for each it
    lacks."""
    if node is None:
        return None, None, ""
    if isinstance(node, str) or node_kind(node) == "timedelta":
        timetable, summary = _parse_time(node, where, timezone=timezone)
        return None, timetable, summary
    if node_kind(node) == "asset_or_time":
        spec = _check_keys(
            node["asset_or_time"],
            f"{where}.asset_or_time",
            allowed={"assets", "time"},
            required={"assets", "time"},
        )
        timetable, summary = _parse_time(
            spec["time"], f"{where}.asset_or_time.time", timezone=timezone
        )
        condition = _parse_condition(spec["assets"], f"{where}.asset_or_time.assets", declared)
        return condition, timetable, summary
    try:
        return _parse_condition(node, where, declared), None, ""
    except ManifestError as exc:
        if isinstance(node, list) or node_kind(node) in (*OPERATORS, *LEAF_KINDS):
            raise
        # neither a condition nor a time schedule: say both
        raise ManifestError(
            f"{exc.message}; or a time schedule: a cron string or preset, {{timedelta: ...}} "
            "or {asset_or_time: {assets: ..., time: ...}}"
        ) from exc


# --- merging ---------------------------------------------------------------------------------

_T = TypeVar("_T")


def _merge_assets(declared: list[Declaration]) -> dict[AssetUniqueKey, AssetDecl]:
    """Every declared asset by key; group/extra from whichever declaration gives them."""
    merged: dict[AssetUniqueKey, AssetDecl] = {}
    for decl in declared:
        if not isinstance(decl, AssetDecl):
            continue
        seen = merged.get(decl.key)
        if seen is None:
            merged[decl.key] = decl
            continue
        merged[decl.key] = AssetDecl(
            key=decl.key,
            group=_merge_value(decl.key, "group", seen.group, decl.group),
            extra=_merge_value(decl.key, "extra", seen.extra, decl.extra),
        )
    return merged


def _merge_value(key: AssetUniqueKey, attr: str, theirs: _T | None, mine: _T | None) -> _T | None:
    if mine is not None and theirs is not None and mine != theirs:
        raise ManifestError(
            f"asset {asset_describe(key)} is declared with two different {attr} values: "
            f"{theirs!r} and {mine!r}"
        )
    return mine if mine is not None else theirs


def _merge_aliases(declared: list[Declaration]) -> dict[str, AliasDecl]:
    """Every declared alias by name; the last group given wins."""
    merged: dict[str, AliasDecl] = {}
    for decl in declared:
        if isinstance(decl, AliasDecl) and (decl.name not in merged or decl.group is not None):
            merged[decl.name] = decl
    return merged
