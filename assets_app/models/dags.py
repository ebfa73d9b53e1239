"""DAGs as declared (``dag``, ``dag_task``), what they schedule on and produce (the reference
tables), the queue of consumers waiting on changed assets, and DAG files' import errors."""

from __future__ import annotations

from typing import cast

from django.db import models
from django.utils import timezone

from .assets import Asset, AssetAlias
from .common import ID_LENGTH, NAME_LENGTH, composite_key

#: Airflow's ``[core] max_active_runs_per_dag`` and ``max_active_tasks_per_dag`` defaults.
DEFAULT_MAX_ACTIVE_RUNS = 16
DEFAULT_MAX_ACTIVE_TASKS = 16

#: The pool a task runs in unless it names another (Airflow's ``default_pool``), its length,
#: and the weight rule a task's priority is computed with by default (``assets_app.weight_rules``).
DEFAULT_POOL = "default_pool"
POOL_NAME_LENGTH = 256
DEFAULT_WEIGHT_RULE = "downstream"

#: Airflow's default task owner (``[operators] default_owner``) and the longest one kept.
DEFAULT_OWNER = "airflow"
OWNER_LENGTH = 500

#: The Celery queue a task is sent to unless it names another (Airflow's ``[operators]
#: default_queue``) and the longest name kept.
DEFAULT_QUEUE = "default"
QUEUE_LENGTH = 256


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
    #: its tasks' owners, sorted, each once (Airflow's ``DagModel.owners``)
    owners = models.JSONField(default=list, blank=True)
    #: the DAG's params (Airflow's ``Param``s) as ``[[name, {default, description, schema}]]``,
    #: which a run's conf is checked against when it is triggered (``assets_app.params``)
    params = models.JSONField(default=list, blank=True)
    #: the next time-scheduled run (Airflow's ``next_dagrun`` / ``next_dagrun_create_after``):
    #: its logical date, and when it is due; ``None`` when there is none to create
    next_dagrun = models.DateTimeField(null=True, blank=True)
    next_dagrun_create_after = models.DateTimeField(null=True, blank=True)
    task_ids = models.JSONField(default=list, blank=True)  # the DAG's tasks, in declared order
    #: seconds a run may stay running before the scheduler fails it (Airflow's
    #: ``dagrun_timeout``); ``None``: no limit
    dagrun_timeout = models.FloatField(null=True, blank=True)
    #: the DAG file gives a DAG-level ``on_success_callback`` / ``on_failure_callback``
    #: (Airflow's ``DagModel`` flags): only then does a run's end ask for one to be run
    has_on_success_callback = models.BooleanField(default=False)
    has_on_failure_callback = models.BooleanField(default=False)
    #: the asset watchers its DAG file declares on the assets it uses (AIP-82), each
    #: ``{"asset": {"name", "uri"}, "name", "classpath", "kwargs"}`` (``kwargs``: the JSON
    #: text of the SDK's serde form, as a deferral's); their triggers run while an unpaused
    #: DAG schedules on the asset (``services.runs.watchers``)
    asset_watchers = models.JSONField(default=list, blank=True)
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
    ``pool``, ``pool_slots``, ``priority_weight``, ``weight_rule``, ``max_active_tis_per_dag``
    and ``max_active_tis_per_dagrun`` are Airflow's, honoured where task instances are claimed
    (``services.runs.claims``).
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
    #: Airflow's ``retry_exponential_backoff`` multiplier (0: a constant ``retry_delay``) and
    #: ``max_retry_delay`` cap (seconds; ``None``: none but Airflow's 24 h)
    retry_exponential_backoff = models.FloatField(default=0.0)
    max_retry_delay = models.FloatField(null=True, blank=True)
    #: a task instance runs only once the same task of the DAG's previous run succeeded or was
    #: skipped (``services.runs.past``); ``wait_for_downstream``: and that one's direct
    #: downstreams too
    depends_on_past = models.BooleanField(default=False)
    wait_for_downstream = models.BooleanField(default=False)
    ignore_first_depends_on_past = models.BooleanField(default=True)
    #: who is mailed when a try fails or is retried (Airflow's ``email``, ``email_on_failure``,
    #: ``email_on_retry``; ``services.runs.emails``)
    email = models.JSONField(default=list, blank=True)
    email_on_failure = models.BooleanField(default=True)
    email_on_retry = models.BooleanField(default=True)
    #: the pool it runs in and how many of its slots it takes (docs/pools.md)
    pool = models.CharField(max_length=POOL_NAME_LENGTH, default=DEFAULT_POOL)
    pool_slots = models.PositiveIntegerField(default=1)
    #: its own weight; its task instances' priority applies ``weight_rule`` over the DAG's graph
    priority_weight = models.IntegerField(default=1)
    weight_rule = models.CharField(max_length=20, default=DEFAULT_WEIGHT_RULE)
    #: who owns it (Airflow's ``BaseOperator.owner``, default ``airflow``)
    owner = models.CharField(max_length=OWNER_LENGTH, default=DEFAULT_OWNER)
    #: the Celery queue its task instances are sent to with ``EXECUTOR=celery`` (Airflow's
    #: ``BaseOperator.queue``); the local worker takes every queue
    queue = models.CharField(max_length=QUEUE_LENGTH, default=DEFAULT_QUEUE)
    #: how many of its task instances may be queued or running at once, over all runs and in
    #: one run (``None``: no limit)
    max_active_tis_per_dag = models.PositiveIntegerField(null=True, blank=True)
    max_active_tis_per_dagrun = models.PositiveIntegerField(null=True, blank=True)
    #: how a mapped task expands (``None``: it is not mapped; ``services.runs.mapping``):
    #: ``{"length": <how many map indexes>, "group": <its closest mapped task group or None>}``
    mapped = models.JSONField(null=True, blank=True)
    #: a task that starts in the triggerer (Airflow's ``start_from_trigger`` with its
    #: ``start_trigger_args``: ``trigger_cls``, ``trigger_kwargs``, ``next_method``,
    #: ``next_kwargs``, ``timeout`` seconds); ``None`` for every other task
    start_trigger_args = models.JSONField(null=True, blank=True)
    #: the DAG file's task has an ``on_failure_callback`` / ``on_retry_callback``: a try that
    #: fails outside its process asks the DAG processor to run it (``DagCallbackRequest``)
    has_on_failure_callback = models.BooleanField(default=False)
    has_on_retry_callback = models.BooleanField(default=False)

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


class DagCode(models.Model):
    """The text of the file a DAG came from, a DAG file or a manifest (Airflow's ``dag_code``),
    as it was when it last loaded: the admin shows it and ``/api/v2/dagSources`` serves it
    without the server reading the DAG folder (which may live on another machine)."""

    fileloc = models.CharField(max_length=2000, unique=True)
    source_code = models.TextField()
    #: SHA-256 of the text: a load of an unchanged file writes nothing
    source_code_hash = models.CharField(max_length=64)
    last_updated = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "dag_code"
        ordering = ["fileloc"]
        verbose_name = "DAG code"

    def __str__(self) -> str:
        return self.fileloc
