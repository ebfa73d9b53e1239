"""The data model, mirroring Apache Airflow 3's metadata tables (docs/concepts.md, "The tables").

Association tables carry a surrogate ``id`` plus the unique constraint Airflow uses as its
composite key, because Django 5.2's admin cannot show composite-primary-key models.
"""

from __future__ import annotations

import uuid
from typing import Any, cast

from django.db import models
from django.db.models.functions import Upper
from django.utils import timezone

NAME_LENGTH = 1500  # asset/alias names, uris and groups
ID_LENGTH = 250  # dag, task and run ids
PARTITION_KEY_LENGTH = 250


def composite_key(*fields: str, name: str) -> list[models.BaseConstraint]:
    """The constraints of an association table: Airflow's composite key over ``fields``, kept
    unique beside the surrogate ``id`` (see the module's docstring)."""
    return [models.UniqueConstraint(fields=[*fields], name=name)]


class Asset(models.Model):
    """A piece of data a task produces or consumes, identified by (name, uri)."""

    name = models.CharField(max_length=NAME_LENGTH)
    uri = models.CharField(max_length=NAME_LENGTH)
    group = models.CharField(max_length=NAME_LENGTH, default="", blank=True)
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "asset"
        ordering = ["name", "uri"]
        constraints = [
            models.UniqueConstraint(fields=["name", "uri"], name="asset_name_uri_unique"),
        ]

    def __str__(self) -> str:
        if self.name == self.uri:
            return self.name
        return f"{self.name} ({self.uri})"


class AssetActive(models.Model):
    """Marks an asset as active: some declared, non-stale DAG produces or consumes it.

    Among active assets a name and a uri each identify exactly one asset.
    """

    asset = models.OneToOneField(
        Asset, on_delete=models.CASCADE, primary_key=True, related_name="active"
    )
    name = models.CharField(max_length=NAME_LENGTH)
    uri = models.CharField(max_length=NAME_LENGTH)

    class Meta:
        db_table = "asset_active"
        verbose_name_plural = "active assets"
        constraints = [
            models.UniqueConstraint(fields=["name"], name="asset_active_name_unique"),
            models.UniqueConstraint(fields=["uri"], name="asset_active_uri_unique"),
        ]

    def __str__(self) -> str:
        return f"active {self.name}"


class AssetAlias(models.Model):
    """A name through which a task emits events for assets chosen at run time."""

    name = models.CharField(max_length=NAME_LENGTH)
    group = models.CharField(max_length=NAME_LENGTH, default="", blank=True)
    assets = models.ManyToManyField(Asset, through="AssetAliasAsset", related_name="aliases")

    class Meta:
        db_table = "asset_alias"
        ordering = ["name"]
        verbose_name_plural = "asset aliases"
        constraints = [models.UniqueConstraint(fields=["name"], name="asset_alias_name_unique")]

    def __str__(self) -> str:
        return self.name


class AssetAliasAsset(models.Model):
    """An alias resolved to an asset (created when a task emits through the alias)."""

    alias = models.ForeignKey(
        AssetAlias,
        on_delete=models.CASCADE,
        related_name="asset_links",
        db_index=False,  # by alias: asset_alias_asset_unique's prefix
    )
    asset = models.ForeignKey(Asset, on_delete=models.CASCADE, related_name="alias_links")

    class Meta:
        db_table = "asset_alias_asset"
        verbose_name = "alias → asset mapping"
        constraints = composite_key("alias", "asset", name="asset_alias_asset_unique")

    def __str__(self) -> str:
        return f"{self.alias_id} → {self.asset_id}"


class AssetEvent(models.Model):
    """One recorded change to an asset. Append-only; survives deletion of its asset.

    ``asset`` has no database constraint (as in Airflow): deleting an asset keeps its events,
    whose ``asset_id`` then points nowhere and ``event.asset`` reads as ``None``.
    """

    asset = models.ForeignKey(
        Asset,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,  # only so that joins are LEFT JOINs once the asset is gone
        related_name="events",
        db_index=False,  # by asset: idx_asset_id_timestamp's prefix
    )
    extra = models.JSONField(default=dict, blank=True)
    source_task_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    source_dag_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    source_run_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    source_map_index = models.IntegerField(default=-1)
    timestamp = models.DateTimeField(default=timezone.now)
    partition_key = models.CharField(  # noqa: DJ001
        max_length=PARTITION_KEY_LENGTH, null=True, blank=True
    )
    source_aliases = models.ManyToManyField(
        AssetAlias, through="AssetAliasAssetEvent", related_name="events"
    )

    class Meta:
        db_table = "asset_event"
        ordering = ["-timestamp", "-id"]
        indexes = [
            models.Index(fields=["asset", "timestamp"], name="idx_asset_id_timestamp"),
            models.Index(fields=["timestamp"], name="idx_asset_event_timestamp"),
            models.Index(fields=["source_dag_id"], name="idx_asset_event_source_dag"),
            # the admin's case-insensitive search by exact source DAG id / run id
            models.Index(Upper("source_dag_id"), name="idx_asset_event_source_dag_up"),
            models.Index(Upper("source_run_id"), name="idx_asset_event_source_run_up"),
        ]

    def __str__(self) -> str:
        return f"event {self.pk} on asset {self.asset_id}"


class AssetAliasAssetEvent(models.Model):
    """Links an event to an alias it was emitted through (the event's ``source_aliases``)."""

    alias = models.ForeignKey(
        AssetAlias,
        on_delete=models.CASCADE,
        related_name="event_links",
        db_index=False,  # by alias: asset_alias_asset_event_unique's prefix
    )
    # No database constraint: the link is inserted in the statement that inserts its event,
    # and events are only deleted through the ORM (``asset_events_prune``), whose collector
    # deletes the links first. The constraint guarded nothing and cost a check per link at
    # commit (a thousand alias events: a thousand ``SELECT … FOR KEY SHARE``).
    event = models.ForeignKey(
        AssetEvent, on_delete=models.CASCADE, related_name="alias_links", db_constraint=False
    )

    class Meta:
        db_table = "asset_alias_asset_event"
        verbose_name = "alias → event mapping"
        constraints = composite_key("alias", "event", name="asset_alias_asset_event_unique")

    def __str__(self) -> str:
        return f"{self.alias_id} → event {self.event_id}"


#: Airflow's ``[core] max_active_runs_per_dag`` and ``max_active_tasks_per_dag`` defaults.
DEFAULT_MAX_ACTIVE_RUNS = 16
DEFAULT_MAX_ACTIVE_TASKS = 16


class Dag(models.Model):
    """A declared DAG. ``asset_expression`` is its asset schedule condition, if any;
    ``timetable`` its time schedule, if any (both: Airflow's ``AssetOrTimeSchedule``).

    The expression is JSON: ``{"asset": {"name", "uri"}}``, ``{"alias": {"name"}}``,
    ``{"asset_ref": {"name"}}`` / ``{"asset_ref": {"uri"}}``, ``{"all": [...]}`` and
    ``{"any": [...]}``. The timetable is ``assets_app.timetables.Timetable.as_json()``:
    ``{"cron": "0 0 * * *", "timezone": "UTC"}``, ``{"delta": 3600.0, ...}`` or
    ``{"once": true, ...}``; ``timetable_summary`` is the schedule as declared (``@daily``).
    """

    dag_id = models.CharField(max_length=ID_LENGTH, primary_key=True)
    is_paused = models.BooleanField(default=False)
    is_stale = models.BooleanField(default=False)
    asset_expression = models.JSONField(null=True, blank=True)
    timetable = models.JSONField(null=True, blank=True)
    timetable_summary = models.CharField(max_length=1000, default="", blank=True)
    start_date = models.DateTimeField(null=True, blank=True)
    end_date = models.DateTimeField(null=True, blank=True)
    catchup = models.BooleanField(default=False)
    max_active_runs = models.PositiveIntegerField(default=DEFAULT_MAX_ACTIVE_RUNS)
    max_active_tasks = models.PositiveIntegerField(default=DEFAULT_MAX_ACTIVE_TASKS)
    #: one asset-triggered run per event instead of one run for all the events queued
    one_run_per_event = models.BooleanField(default=False)
    tags = models.JSONField(default=list, blank=True)
    #: the next time-scheduled run (Airflow's ``next_dagrun`` / ``next_dagrun_create_after``):
    #: its logical date, and when it is due; ``None`` when there is none to create
    next_dagrun = models.DateTimeField(null=True, blank=True)
    next_dagrun_create_after = models.DateTimeField(null=True, blank=True)
    task_ids = models.JSONField(default=list, blank=True)  # the DAG's tasks, in declared order
    fileloc = models.CharField(max_length=2000, default="", blank=True)
    last_parsed_time = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "dag"
        ordering = ["dag_id"]
        verbose_name = "DAG"
        indexes = [
            # the scheduler looks for due time-scheduled DAGs on every pass
            models.Index(fields=["next_dagrun_create_after"], name="idx_dag_next_dagrun_due"),
        ]

    def __str__(self) -> str:
        return self.dag_id


class DagTask(models.Model):
    """A declared task of a DAG: its retry policy and where its code is.

    ``callable`` is ``/abs/path/file.py:function`` or ``package.module:function`` (run by
    ``task_sdk``); ``airflow_dag_file`` is the absolute path of a real Airflow DAG file (run by
    Airflow's own worker entry point). At most one of the two is set; neither → the worker
    fails the task instance with a message saying so.

    ``upstream`` lists the task ids it depends on directly (its edges) and ``trigger_rule``
    when it may run given their states (``assets_app.trigger_rules``); ``is_leaf`` says that
    no task of the DAG depends on it (the leaves decide a run's state, as in Airflow).
    """

    dag = models.ForeignKey(
        Dag,
        on_delete=models.CASCADE,
        related_name="tasks",
        db_index=False,  # by DAG: dag_task_unique's prefix
    )
    task_id = models.CharField(max_length=ID_LENGTH)
    retries = models.PositiveIntegerField(default=0)
    retry_delay = models.FloatField(default=300.0)  # seconds, as Airflow's default timedelta(300)
    callable = models.CharField(max_length=2000, default="", blank=True)
    airflow_dag_file = models.CharField(max_length=2000, default="", blank=True)
    #: Airflow's ``dags_folder`` for ``airflow_dag_file``: the root of its imports ("": the
    #: file's own folder)
    airflow_dags_folder = models.CharField(max_length=2000, default="", blank=True)
    upstream = models.JSONField(default=list, blank=True)
    trigger_rule = models.CharField(max_length=50, default="all_success")
    is_leaf = models.BooleanField(default=True)

    class Meta:
        db_table = "dag_task"
        ordering = ["dag_id", "task_id"]
        verbose_name = "DAG task"
        constraints = composite_key("dag", "task_id", name="dag_task_unique")

    def __str__(self) -> str:
        return f"{self.dag_id}.{self.task_id}"


class DagReference(models.Model):
    """A row tying a DAG, or one of its tasks, to what it is scheduled on or declares.

    One table per kind of target, as in Airflow; each subclass adds its target field and the
    composite key Airflow gives the table (``composite_key``).
    """

    dag = models.ForeignKey(Dag, on_delete=models.CASCADE)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True


class DagScheduleReference(DagReference):
    """A DAG scheduled on an asset, an alias, or a reference by name or by uri: the first
    field of the table's key (``composite_key(target, "dag", ...)``)."""

    class Meta:
        abstract = True

    def __str__(self) -> str:
        (key,) = self._meta.constraints
        target = cast(models.UniqueConstraint, key).fields[0]
        return f"{self.dag_id} on {target} {self.serializable_value(target)}"


class DagScheduleAssetReference(DagScheduleReference):
    """A DAG scheduled on an asset."""

    asset = models.ForeignKey(
        Asset,
        on_delete=models.CASCADE,
        related_name="scheduled_dags",
        db_index=False,  # by asset: dsar_asset_dag_unique's prefix
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "dag_schedule_asset_reference"
        constraints = composite_key("asset", "dag", name="dsar_asset_dag_unique")


class DagScheduleAssetAliasReference(DagScheduleReference):
    """A DAG scheduled on an asset alias."""

    alias = models.ForeignKey(
        AssetAlias,
        on_delete=models.CASCADE,
        related_name="scheduled_dags",
        db_index=False,  # by alias: dsaar_alias_dag_unique's prefix
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "dag_schedule_asset_alias_reference"
        constraints = composite_key("alias", "dag", name="dsaar_alias_dag_unique")


class DagScheduleAssetNameReference(DagScheduleReference):
    """A DAG scheduled on ``Asset.ref(name=...)``."""

    name = models.CharField(max_length=NAME_LENGTH)

    class Meta:
        db_table = "dag_schedule_asset_name_reference"
        constraints = composite_key("name", "dag", name="dsanr_name_dag_unique")


class DagScheduleAssetUriReference(DagScheduleReference):
    """A DAG scheduled on ``Asset.ref(uri=...)``."""

    uri = models.CharField(max_length=NAME_LENGTH)

    class Meta:
        db_table = "dag_schedule_asset_uri_reference"
        constraints = composite_key("uri", "dag", name="dsaur_uri_dag_unique")


class TaskAssetReference(DagReference):
    """A task declaring an asset as an outlet or an inlet."""

    task_id = models.CharField(max_length=ID_LENGTH)

    class Meta:
        abstract = True


class TaskOutletAssetReference(TaskAssetReference):
    """A task declaring an asset as an outlet."""

    asset = models.ForeignKey(
        Asset,
        on_delete=models.CASCADE,
        related_name="producing_tasks",
        db_index=False,  # by asset: toar_asset_dag_task_unique's prefix
    )

    class Meta:
        db_table = "task_outlet_asset_reference"
        constraints = composite_key("asset", "dag", "task_id", name="toar_asset_dag_task_unique")

    def __str__(self) -> str:
        return f"{self.dag_id}.{self.task_id} → asset {self.asset_id}"


class TaskInletAssetReference(TaskAssetReference):
    """A task declaring an asset as an inlet."""

    asset = models.ForeignKey(
        Asset,
        on_delete=models.CASCADE,
        related_name="consuming_tasks",
        db_index=False,  # by asset: tiar_asset_dag_task_unique's prefix
    )

    class Meta:
        db_table = "task_inlet_asset_reference"
        constraints = composite_key("asset", "dag", "task_id", name="tiar_asset_dag_task_unique")

    def __str__(self) -> str:
        return f"asset {self.asset_id} → {self.dag_id}.{self.task_id}"


class TaskLeafReference(TaskAssetReference):
    """A task declaring an inlet or an outlet that is no asset of its own: an alias (its assets
    chosen at run time) or an ``Asset.ref`` by name or uri (resolved at run time).

    Airflow keeps no table for these (they live in its serialized DAG); they are stored so
    that the DAG page can draw every inlet and outlet a task declared. Concrete assets are in
    ``TaskOutletAssetReference`` / ``TaskInletAssetReference``.
    """

    class Direction(models.TextChoices):
        INLET = "inlet"
        OUTLET = "outlet"

    class Kind(models.TextChoices):
        ALIAS = "alias"
        NAME_REF = "name_ref", "Asset.ref(name)"
        URI_REF = "uri_ref", "Asset.ref(uri)"

    # the base's ``dag``, without its own index: tlr_dag_task_leaf_unique begins with it
    dag = models.ForeignKey(Dag, on_delete=models.CASCADE, db_index=False)
    direction = models.CharField(max_length=6, choices=Direction.choices)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    value = models.CharField(max_length=NAME_LENGTH)  # the alias name, the name or the uri

    class Meta:
        db_table = "task_leaf_reference"
        constraints = composite_key(
            "dag", "task_id", "direction", "kind", "value", name="tlr_dag_task_leaf_unique"
        )

    def __str__(self) -> str:
        return f"{self.dag_id}.{self.task_id} {self.direction} {self.kind} {self.value}"


class AssetDagRunQueue(models.Model):
    """A consumer DAG waiting to run because one of its assets changed."""

    # The hottest table written (a row per consumer of each event, deleted when its run is
    # created): no index but the three its readers use. By asset: the unique key's prefix.
    asset = models.ForeignKey(
        Asset, on_delete=models.CASCADE, related_name="queued_dags", db_index=False
    )
    # No database constraint on the DAG: DAG rows are never deleted (a DAG no longer declared
    # goes stale; neither the admin nor an API deletes one), and the statement that queues a
    # row reads its DAG (live, not stale) in the same statement. The constraint guarded
    # nothing and cost a check per queue row at commit. An ORM delete still cascades.
    target_dag = models.ForeignKey(
        Dag,
        on_delete=models.CASCADE,
        related_name="queued_assets",
        db_column="target_dag_id",
        db_index=False,  # the index below, without the unused LIKE twin of a ForeignKey's
        db_constraint=False,
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "asset_dag_run_queue"
        ordering = ["created_at"]
        verbose_name = "asset DAG-run queue entry"
        verbose_name_plural = "asset DAG-run queue entries"
        constraints = composite_key("asset", "target_dag", name="adrq_asset_dag_unique")
        indexes = [models.Index(fields=["target_dag"], name="adrq_target_dag")]

    def __str__(self) -> str:
        return f"{self.target_dag_id} waits on asset {self.asset_id}"


class DagRunState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"


class DagRunType(models.TextChoices):
    MANUAL = "manual"
    SCHEDULED = "scheduled"
    ASSET_TRIGGERED = "asset_triggered"
    BACKFILL = "backfill"


class DagRun(models.Model):
    """One run of a DAG."""

    # by DAG: the prefix of the unique (dag_id, run_id)
    dag = models.ForeignKey(Dag, on_delete=models.CASCADE, related_name="runs", db_index=False)
    run_id = models.CharField(max_length=ID_LENGTH)
    logical_date = models.DateTimeField(null=True, blank=True)
    data_interval_start = models.DateTimeField(null=True, blank=True)
    data_interval_end = models.DateTimeField(null=True, blank=True)
    run_after = models.DateTimeField(default=timezone.now)
    start_date = models.DateTimeField(null=True, blank=True)
    end_date = models.DateTimeField(null=True, blank=True)
    run_type = models.CharField(
        max_length=50, choices=DagRunType.choices, default=DagRunType.MANUAL
    )
    state = models.CharField(max_length=50, choices=DagRunState.choices, default=DagRunState.QUEUED)
    conf = models.JSONField(default=dict, blank=True)
    partition_key = models.CharField(  # noqa: DJ001
        max_length=PARTITION_KEY_LENGTH, null=True, blank=True
    )
    created_at = models.DateTimeField(default=timezone.now)
    consumed_events = models.ManyToManyField(
        AssetEvent, through="DagRunAssetEvent", related_name="created_dagruns"
    )

    class Meta:
        db_table = "dag_run"
        ordering = ["-run_after", "-id"]
        verbose_name = "DAG run"
        constraints = [
            models.UniqueConstraint(fields=["dag", "run_id"], name="dag_run_dag_id_run_id_key"),
        ]
        indexes = [
            models.Index(fields=["dag", "run_type", "run_after"], name="idx_dag_run_type"),
            # every scheduler pass looks for running runs to settle; the admin counts by state
            models.Index(fields=["state"], name="dag_run_state"),
        ]

    def __str__(self) -> str:
        return f"{self.dag_id} / {self.run_id}"


#: Airflow's limit on a DAG run's (and a task instance's) note.
NOTE_LENGTH = 1000


class DagRunNote(models.Model):
    """A user's note on a DAG run (Airflow's ``dag_run_note``): one per run, set through the
    public API's ``PATCH`` of the run (``assets_app.services.marking``)."""

    dag_run = models.OneToOneField(
        DagRun, on_delete=models.CASCADE, primary_key=True, related_name="dag_run_note"
    )
    content = models.CharField(max_length=NOTE_LENGTH, null=True, blank=True)  # noqa: DJ001
    #: who wrote it last (the Django user's id; Airflow's ``user_id``)
    user_id = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "dag_run_note"
        verbose_name = "DAG run note"

    def __str__(self) -> str:
        return f"note on run {self.dag_run_id}"


#: What a DAG run shows an operator, after its DAG and before its conf: which run and what kind,
#: its state, and its dates from the logical date to the end. The admin's run page and the
#: operator API's DAG run list them in this order.
DAG_RUN_SUMMARY_FIELDS = (
    "run_id",
    "run_type",
    "state",
    "logical_date",
    "data_interval_start",
    "data_interval_end",
    "run_after",
    "start_date",
    "end_date",
)


class DagRunAssetEvent(models.Model):
    """An asset event consumed by (that triggered) a DAG run."""

    # by run: the prefix of the unique (dag_run_id, event_id)
    dag_run = models.ForeignKey(
        DagRun, on_delete=models.CASCADE, related_name="event_links", db_index=False
    )
    # by event: the prefix of dagrun_event_dag
    event = models.ForeignKey(
        AssetEvent, on_delete=models.CASCADE, related_name="dagrun_links", db_index=False
    )
    #: the run's DAG, copied (a run never changes DAG; set on save from ``dag_run``): "has a
    #: run of this DAG consumed the event" is one index probe, not a walk over every run that
    #: consumed it (the scheduler asks it of each candidate event of each run it creates)
    dag_id = models.CharField(max_length=ID_LENGTH, editable=False)

    class Meta:
        db_table = "dagrun_asset_event"
        verbose_name = "DAG run consumed event"
        constraints = [
            *composite_key("dag_run", "event", name="dagrun_asset_event_unique"),
            # a link written without its DAG (bulk_create skips save) would read as consumed
            # by no DAG, and the event be consumed again: refused instead
            models.CheckConstraint(condition=~models.Q(dag_id=""), name="dagrun_event_dag_set"),
        ]
        indexes = [models.Index(fields=["event", "dag_id"], name="dagrun_event_dag")]

    def __str__(self) -> str:
        return f"run {self.dag_run_id} consumed event {self.event_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.dag_id:
            self.dag_id = self.dag_run.dag_id
        super().save(*args, **kwargs)


class TaskInstanceState(models.TextChoices):
    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    RESTARTING = "restarting"
    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    REMOVED = "removed"
    UPSTREAM_FAILED = "upstream_failed"
    UP_FOR_RETRY = "up_for_retry"
    UP_FOR_RESCHEDULE = "up_for_reschedule"
    DEFERRED = "deferred"


#: Airflow's ``State.finished`` for task instances: nothing more will happen to them.
FINISHED_TI_STATES = frozenset(
    {
        TaskInstanceState.SUCCESS,
        TaskInstanceState.FAILED,
        TaskInstanceState.SKIPPED,
        TaskInstanceState.REMOVED,
        TaskInstanceState.UPSTREAM_FAILED,
    }
)
#: A run with a task instance in one of these states ends ``failed`` (Airflow's update_state).
FAILED_TI_STATES = frozenset({TaskInstanceState.FAILED, TaskInstanceState.UPSTREAM_FAILED})


class TaskKey(models.Model):
    """What addresses one task of one DAG run (Airflow's ``TaskInstanceKey`` without the
    try): shared by task instances, their earlier tries and their XComs."""

    dag_id = models.CharField(max_length=ID_LENGTH)
    run_id = models.CharField(max_length=ID_LENGTH)
    task_id = models.CharField(max_length=ID_LENGTH)
    map_index = models.IntegerField(default=-1)

    class Meta:
        abstract = True

    @property
    def task_label(self) -> str:
        """``dag.task[map] @ run`` (no ``[map]`` when not mapped)."""
        suffix = f"[{self.map_index}]" if self.map_index >= 0 else ""
        return f"{self.dag_id}.{self.task_id}{suffix} @ {self.run_id}"


class TaskTry(TaskKey):
    """One try of a task: the current one (``TaskInstance``) or an earlier one
    (``TaskInstanceHistory``). ``TRY_FIELDS`` are what a finished try keeps."""

    max_tries = models.IntegerField(default=0)
    state = models.CharField(  # noqa: DJ001
        max_length=20, choices=TaskInstanceState.choices, null=True, blank=True
    )
    start_date = models.DateTimeField(null=True, blank=True)
    end_date = models.DateTimeField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True)
    hostname = models.CharField(max_length=1000, default="", blank=True)
    unixname = models.CharField(max_length=1000, default="", blank=True)
    pid = models.IntegerField(null=True, blank=True)
    #: why the try failed, when the registry knows (e.g. the heartbeat timed out)
    failure_reason = models.TextField(default="", blank=True)

    class Meta:
        abstract = True


#: What a try's ``TaskInstanceHistory`` row copies from its task instance (attribute names:
#: the run by its id, no query).
TRY_FIELDS = (
    "dag_run_id",
    *(field.attname for field in TaskTry._meta.fields),
    "try_number",
)


class TaskInstance(TaskTry):
    """The current try of one task of one DAG run, addressed by UUID in the execution API.

    Each try has its own id (as in Airflow 3): when a try ends ``up_for_retry`` or the task
    instance is cleared, the finished try is copied to ``TaskInstanceHistory`` and the row
    gets a new id, so a late report from the old try's runner finds nothing (404).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    dag_run = models.ForeignKey(DagRun, on_delete=models.CASCADE, related_name="task_instances")
    try_number = models.IntegerField(default=1)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    rendered_map_index = models.CharField(max_length=250, null=True, blank=True)  # noqa: DJ001
    rendered_fields = models.JSONField(default=dict, blank=True)
    next_method = models.CharField(max_length=1000, null=True, blank=True)  # noqa: DJ001
    next_kwargs = models.JSONField(null=True, blank=True)
    trigger_classpath = models.CharField(max_length=1000, null=True, blank=True)  # noqa: DJ001
    trigger_kwargs = models.JSONField(null=True, blank=True)
    trigger_timeout = models.DateTimeField(null=True, blank=True)
    reschedule_date = models.DateTimeField(null=True, blank=True)
    task_reschedule_count = models.IntegerField(default=0)
    #: when an ``up_for_retry`` task instance becomes ``scheduled`` again (its next try)
    next_retry_at = models.DateTimeField(null=True, blank=True)
    #: some task of the DAG depends on this one (set when the run is created): its finish
    #: hands over to its downstreams (``task_flow.dag_run_progress``)
    has_downstream = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "task_instance"
        ordering = ["dag_id", "run_id", "task_id", "map_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["dag_id", "run_id", "task_id", "map_index"], name="ti_natural_key_unique"
            ),
        ]
        indexes = [models.Index(fields=["state"], name="ti_state")]

    def __str__(self) -> str:
        return self.task_label


class TaskInstanceHistory(TaskTry):
    """A finished earlier try of a task instance (Airflow's ``task_instance_history``).

    ``task_instance_id`` is the id that try had; the task instance itself now has another.
    """

    task_instance_id = models.UUIDField(unique=True)
    dag_run = models.ForeignKey(DagRun, on_delete=models.CASCADE, related_name="ti_history")
    try_number = models.IntegerField()
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "task_instance_history"
        ordering = ["dag_id", "run_id", "task_id", "map_index", "try_number"]
        verbose_name = "task instance try"
        verbose_name_plural = "task instance history"
        constraints = [
            models.UniqueConstraint(
                fields=["dag_id", "run_id", "task_id", "map_index", "try_number"],
                name="tih_natural_key_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_label} try {self.try_number}"


class XCom(TaskKey):
    """A value a task pushed (e.g. its ``return_value``)."""

    dag_run = models.ForeignKey(
        DagRun,
        on_delete=models.CASCADE,
        related_name="xcoms",
        db_index=False,  # by run: xcom_natural_key_unique's prefix
    )
    key = models.CharField(max_length=512)
    value = models.JSONField(null=True, blank=True)
    timestamp = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "xcom"
        verbose_name = "XCom"
        constraints = [
            models.UniqueConstraint(
                fields=["dag_run", "task_id", "map_index", "key"], name="xcom_natural_key_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dag_id}.{self.task_id} {self.key}"


class TaskReschedule(models.Model):
    """One poke of a reschedule-mode sensor that asked to run again later (Airflow's
    ``task_reschedule``): recorded when its runner reports ``up_for_reschedule``.

    ``ti_id`` is the id of the try that poked (no foreign key: a task instance's id changes
    with each try, and an earlier try's reschedules stay with the id it had); the rows go
    with their DAG run.
    """

    ti_id = models.UUIDField(db_index=True)
    dag_run = models.ForeignKey(DagRun, on_delete=models.CASCADE, related_name="reschedules")
    try_number = models.IntegerField()
    start_date = models.DateTimeField()
    end_date = models.DateTimeField()
    duration = models.FloatField()
    reschedule_date = models.DateTimeField()

    class Meta:
        db_table = "task_reschedule"
        ordering = ["ti_id", "id"]

    def __str__(self) -> str:
        return f"reschedule of {self.ti_id} at {self.reschedule_date:%Y-%m-%d %H:%M:%S}"


class DagImportError(models.Model):
    """A DAG file that failed to load (Airflow's ``import_error``): its DAGs keep their last
    good version until it loads again, when the row goes."""

    filename = models.CharField(max_length=2000, unique=True)
    timestamp = models.DateTimeField(default=timezone.now)
    stacktrace = models.TextField()

    class Meta:
        db_table = "import_error"
        ordering = ["filename"]
        verbose_name = "DAG import error"

    def __str__(self) -> str:
        return self.filename


# --- variables and connections (Airflow's ``variable`` and ``connection`` tables) -------------

#: Airflow's ``ID_LEN``: the longest variable key and connection id.
SECRET_ID_LENGTH = 250


class Variable(models.Model):
    """A key → value setting that tasks read (``Variable.get``) and write.

    The value is stored encrypted (``assets_app.crypto``); read it with
    ``assets_app.selectors_secrets.variable_value``, write it with
    ``assets_app.services.variables``.
    """

    key = models.CharField(max_length=SECRET_ID_LENGTH, unique=True)
    # Fernet token of the value (plain text only when ``is_encrypted`` is false: rows
    # written by Airflow without a key); Airflow's ``val`` column
    encrypted_val = models.TextField(db_column="val", null=True, blank=True, editable=False)  # noqa: DJ001
    description = models.TextField(null=True, blank=True)  # noqa: DJ001
    is_encrypted = models.BooleanField(default=False, editable=False)

    class Meta:
        db_table = "variable"
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key


class Connection(models.Model):
    """How tasks reach an outside system (``BaseHook.get_connection``).

    ``password`` and ``extra`` are stored encrypted (``assets_app.crypto``) and shown
    nowhere but in the execution-API read of a task; read them with
    ``assets_app.selectors_secrets.connection_secrets``.
    """

    conn_id = models.CharField(max_length=SECRET_ID_LENGTH, unique=True)
    conn_type = models.CharField(max_length=500)
    description = models.TextField(max_length=5000, null=True, blank=True)  # noqa: DJ001
    host = models.CharField(max_length=500, null=True, blank=True)  # noqa: DJ001
    schema = models.CharField(max_length=500, null=True, blank=True)  # noqa: DJ001
    login = models.TextField(null=True, blank=True)  # noqa: DJ001
    # Fernet tokens (plain text only when the flag is false); Airflow's columns
    encrypted_password = models.TextField(  # noqa: DJ001
        db_column="password", null=True, blank=True, editable=False
    )
    port = models.IntegerField(null=True, blank=True)
    encrypted_extra = models.TextField(db_column="extra", null=True, blank=True, editable=False)  # noqa: DJ001
    is_encrypted = models.BooleanField(default=False, editable=False)
    is_extra_encrypted = models.BooleanField(default=False, editable=False)

    class Meta:
        db_table = "connection"
        ordering = ["conn_id"]

    def __str__(self) -> str:
        return self.conn_id

    @property
    def has_password(self) -> bool:
        return bool(self.encrypted_password)

    @property
    def has_extra(self) -> bool:
        return bool(self.encrypted_extra)


# --- task and asset state stores (Airflow's ``task_state_store`` / ``asset_state_store``) -----

#: Airflow's longest state store key (``String(512)``).
STATE_KEY_LENGTH = 512


class TaskStateStore(models.Model):
    """One key of a task's state store (``context["task_state_store"]``, Airflow 3.3's
    ``task_state_store``).

    Scoped to (run, task, map index), not to a try: every try of a task instance reads what
    an earlier one wrote (the point of the store: a retry reattaches to the job its first try
    submitted). Clearing the task instance keeps the rows, as in Airflow; they go with their
    DAG run. ``value`` is the JSON text of the value, as Airflow keeps it; ``expires_at``
    (``None``: never) is when ``state_store_clean`` may delete the row.
    """

    dag_run = models.ForeignKey(
        DagRun,
        on_delete=models.CASCADE,
        related_name="task_state",
        db_index=False,  # by run: task_state_store_uq's prefix
    )
    dag_id = models.CharField(max_length=ID_LENGTH)
    run_id = models.CharField(max_length=ID_LENGTH)
    task_id = models.CharField(max_length=ID_LENGTH)
    map_index = models.IntegerField(default=-1)
    key = models.CharField(max_length=STATE_KEY_LENGTH)
    value = models.TextField()
    updated_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "task_state_store"
        ordering = ["dag_id", "run_id", "task_id", "map_index", "key"]
        verbose_name = "task state store key"
        constraints = [
            models.UniqueConstraint(
                fields=["dag_run", "task_id", "map_index", "key"], name="task_state_store_uq"
            ),
        ]
        indexes = [
            models.Index(
                fields=["dag_id", "run_id", "task_id", "map_index"],
                name="idx_task_state_store_lookup",
            ),
            models.Index(fields=["expires_at"], name="idx_task_state_store_expires"),
        ]

    def __str__(self) -> str:
        return f"{self.dag_id}.{self.task_id} @ {self.run_id}: {self.key}"


class AssetStateStore(models.Model):
    """One key of an asset's state store (``context["asset_state_store"][asset]``, Airflow
    3.3's ``asset_state_store``): a watermark written in one run is read by the next.

    The rows go with their asset, and when the asset stops being active (no DAG declares it
    any more), as Airflow's scheduler removes them. ``last_updated_by_*`` name the task that
    wrote last (no foreign key: the names outlive the run).
    """

    asset = models.ForeignKey(
        Asset,
        on_delete=models.CASCADE,
        related_name="state",
        db_index=False,  # by asset: asset_state_store_uq's prefix
    )
    key = models.CharField(max_length=STATE_KEY_LENGTH)
    value = models.TextField()
    updated_at = models.DateTimeField(default=timezone.now)
    last_updated_by_kind = models.CharField(max_length=16, null=True, blank=True)  # noqa: DJ001
    last_updated_by_dag_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    last_updated_by_run_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    last_updated_by_task_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    last_updated_by_map_index = models.IntegerField(null=True, blank=True)

    class Meta:
        db_table = "asset_state_store"
        ordering = ["asset", "key"]
        verbose_name = "asset state store key"
        constraints = composite_key("asset", "key", name="asset_state_store_uq")

    def __str__(self) -> str:
        return f"asset {self.asset_id}: {self.key}"
