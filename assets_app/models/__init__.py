"""The data model, mirroring Apache Airflow 3's metadata tables (docs/concepts.md, "The tables"),
one module per subdomain, side by side with ``services/<subdomain>/`` and ``selectors/``:

- ``assets``: assets, aliases, asset events and their links;
- ``dags``: DAGs and their tasks as declared, the reference tables, the queue of consumers
  waiting on changed assets, import errors;
- ``runs``: DAG runs, task instances, their tries, history, reschedules and notes;
- ``state``: XComs and the task and asset state stores;
- ``logs``: what each try of a task printed, as its worker shipped it;
- ``secrets``: variables and connections;
- ``audit``: the event log (who triggered, paused, cleared, marked or changed a secret);
- ``common``: the id lengths and the composite-key constraint they share.

Association tables carry a surrogate ``id`` plus the unique constraint Airflow uses as its
composite key, because Django 5.2's admin cannot show composite-primary-key models. Django finds
the models through this module, which imports them all.
"""

from .accounts import LoginFailures
from .assets import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetEvent,
)
from .audit import EventLog
from .common import (
    ID_LENGTH,
    NAME_LENGTH,
    PARTITION_KEY_LENGTH,
    composite_key,
)
from .dags import (
    DEFAULT_MAX_ACTIVE_RUNS,
    DEFAULT_MAX_ACTIVE_TASKS,
    DEFAULT_OWNER,
    DEFAULT_POOL,
    DEFAULT_QUEUE,
    DEFAULT_WEIGHT_RULE,
    OWNER_LENGTH,
    POOL_NAME_LENGTH,
    QUEUE_LENGTH,
    AssetDagRunQueue,
    Dag,
    DagCode,
    DagImportError,
    DagReference,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
    DagScheduleReference,
    DagTask,
    TaskAssetReference,
    TaskInletAssetReference,
    TaskLeafReference,
    TaskOutletAssetReference,
)
from .logs import TaskLog, TaskLogChunk
from .runs import (
    DAG_RUN_SUMMARY_FIELDS,
    DEFAULT_POOL_ID,
    DEFAULT_POOL_SLOTS,
    FAILED_TI_STATES,
    FINISHED_RUN_STATES,
    FINISHED_TI_STATES,
    NOTE_LENGTH,
    TOKEN_REFRESH_TI_STATES,
    TRY_FIELDS,
    DagCallbackRequest,
    DagRun,
    DagRunAssetEvent,
    DagRunNote,
    DagRunState,
    DagRunTriggeredBy,
    DagRunType,
    Pool,
    TaskInstance,
    TaskInstanceHistory,
    TaskInstanceState,
    TaskKey,
    TaskMap,
    TaskReschedule,
    TaskTry,
)
from .secrets import (
    SECRET_ID_LENGTH,
    Connection,
    Variable,
)
from .state import (
    STATE_KEY_LENGTH,
    AssetStateStore,
    TaskStateStore,
    XCom,
)
from .triggers import AssetWatcher, Trigger, Triggerer, TriggerFiring

__all__ = [
    "DAG_RUN_SUMMARY_FIELDS",
    "DEFAULT_MAX_ACTIVE_RUNS",
    "DEFAULT_MAX_ACTIVE_TASKS",
    "DEFAULT_OWNER",
    "DEFAULT_POOL",
    "DEFAULT_POOL_ID",
    "DEFAULT_POOL_SLOTS",
    "DEFAULT_QUEUE",
    "DEFAULT_WEIGHT_RULE",
    "FAILED_TI_STATES",
    "FINISHED_RUN_STATES",
    "FINISHED_TI_STATES",
    "ID_LENGTH",
    "NAME_LENGTH",
    "NOTE_LENGTH",
    "OWNER_LENGTH",
    "PARTITION_KEY_LENGTH",
    "POOL_NAME_LENGTH",
    "QUEUE_LENGTH",
    "SECRET_ID_LENGTH",
    "STATE_KEY_LENGTH",
    "TOKEN_REFRESH_TI_STATES",
    "TRY_FIELDS",
    "Asset",
    "AssetActive",
    "AssetAlias",
    "AssetAliasAsset",
    "AssetAliasAssetEvent",
    "AssetDagRunQueue",
    "AssetEvent",
    "AssetStateStore",
    "AssetWatcher",
    "Connection",
    "Dag",
    "DagCallbackRequest",
    "DagCode",
    "DagImportError",
    "DagReference",
    "DagRun",
    "DagRunAssetEvent",
    "DagRunNote",
    "DagRunState",
    "DagRunTriggeredBy",
    "DagRunType",
    "DagScheduleAssetAliasReference",
    "DagScheduleAssetNameReference",
    "DagScheduleAssetReference",
    "DagScheduleAssetUriReference",
    "DagScheduleReference",
    "DagTask",
    "EventLog",
    "LoginFailures",
    "Pool",
    "TaskAssetReference",
    "TaskInletAssetReference",
    "TaskInstance",
    "TaskInstanceHistory",
    "TaskInstanceState",
    "TaskKey",
    "TaskLeafReference",
    "TaskLog",
    "TaskLogChunk",
    "TaskMap",
    "TaskOutletAssetReference",
    "TaskReschedule",
    "TaskStateStore",
    "TaskTry",
    "Trigger",
    "TriggerFiring",
    "Triggerer",
    "Variable",
    "XCom",
    "composite_key",
]
