"""DAG runs and task instances: their states, tries, history, reschedules and notes."""

from __future__ import annotations

import secrets
import string
import uuid
from datetime import datetime
from typing import Any

from django.db import models
from django.utils import timezone

from .assets import AssetEvent
from .common import ID_LENGTH, PARTITION_KEY_LENGTH, composite_key
from .dags import DEFAULT_POOL, POOL_NAME_LENGTH, Dag
from .triggers import Trigger


class DagRunState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"


#: A run in one of these states has ended (Airflow's ``State.finished_dr_states``).
FINISHED_RUN_STATES = (DagRunState.SUCCESS, DagRunState.FAILED)


class DagRunType(models.TextChoices):
    """What made a run; its run id starts with it (``scheduled__2026-01-01T00:00:00+00:00``)."""

    MANUAL = "manual"
    SCHEDULED = "scheduled"
    ASSET_TRIGGERED = "asset_triggered"
    BACKFILL = "backfill"

    def generate_run_id(self, *, suffix: str) -> str:
        """``<type>__<suffix>`` (Airflow's ``DagRunType.generate_run_id``)."""
        return f"{self.value}{_RUN_ID_SEPARATOR}{suffix}"

    @classmethod
    def from_run_id(cls, run_id: str) -> DagRunType:
        """The type a run id starts with, before its first ``__`` (``scheduled__2026-…``:
        ``scheduled``); any other id is ``manual`` (Airflow's ``DagRunType.from_run_id``)."""
        prefix, separator, _ = run_id.partition(_RUN_ID_SEPARATOR)
        return cls(prefix) if separator and prefix in cls.values else cls.MANUAL


_RUN_ID_SEPARATOR = "__"
#: What the random part of a run id without a logical date is drawn from (Airflow's
#: ``get_random_string``: letters and digits, 8 of them).
_RUN_ID_ALPHABET = string.ascii_letters + string.digits
_RUN_ID_UNIQUE_LENGTH = 8


class DagRunTriggeredBy(models.TextChoices):
    """Who or what made a run (Airflow's ``DagRunTriggeredByType``)."""

    CLI = "cli", "CLI (manage.py trigger_dag)"
    OPERATOR = "operator", "a task's TriggerDagRunOperator"  # through the execution API
    REST_API = "rest_api", "REST API"
    UI = "ui", "the admin"
    TEST = "test", "test"
    TIMETABLE = "timetable", "its time schedule"
    ASSET = "asset", "asset events"
    BACKFILL = "backfill", "backfill"


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
    #: who or what made the run, and for a person's trigger their user name (Airflow 3's)
    triggered_by = models.CharField(  # noqa: DJ001
        max_length=20, choices=DagRunTriggeredBy.choices, null=True, blank=True
    )
    triggering_user_name = models.CharField(max_length=512, null=True, blank=True)  # noqa: DJ001
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
            # a run's previous run (depends_on_past, ``services.runs.past``)
            models.Index(fields=["dag", "logical_date"], name="dag_run_dag_logical_date"),
        ]

    def __str__(self) -> str:
        return f"{self.dag_id} / {self.run_id}"

    @staticmethod
    def generate_run_id(
        *,
        run_type: DagRunType,
        logical_date: datetime | None,
        run_after: datetime | None = None,
        unique: str | None = None,
    ) -> str:
        """The id a new run gets (Airflow's ``DagRun.generate_run_id``; parse it back with
        ``DagRunType.from_run_id``).

        With a logical date, ``<type>__<logical date ISO>``: a manual or a time-scheduled run
        (Airflow 3.3 takes ``run_after`` there, the same moment for a run triggered now and
        for a trigger timetable's run). Without one, ``<type>__<run_after ISO>_<unique>``: an
        asset-triggered run, whose 8 ``unique`` letters/digits keep two runs due at the same
        moment apart (default: one draw of the system's random source, not one per letter;
        fixed ones make an id that repeats, as the showcase's).
        """
        if logical_date is not None:
            return run_type.generate_run_id(suffix=logical_date.isoformat())
        if run_after is None:
            raise ValueError("a run id without a logical date needs run_after")
        if unique is None:
            n = secrets.randbelow(len(_RUN_ID_ALPHABET) ** _RUN_ID_UNIQUE_LENGTH)
            letters = []
            for _ in range(_RUN_ID_UNIQUE_LENGTH):
                n, k = divmod(n, len(_RUN_ID_ALPHABET))
                letters.append(_RUN_ID_ALPHABET[k])
            unique = "".join(letters)
        return run_type.generate_run_id(suffix=f"{run_after.isoformat()}_{unique}")


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


#: The states in which a task instance's runner may still call the execution API for it (it
#: was handed to a runner and has not ended): only there is its token refreshed. A finished or
#: superseded try's token dies at its own expiry (docs/secrets.md, "Token lifetimes").
TOKEN_REFRESH_TI_STATES = frozenset({TaskInstanceState.QUEUED, TaskInstanceState.RUNNING})

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
    #: the trigger a ``deferred`` task instance waits on (Airflow's ``trigger_id``)
    trigger = models.ForeignKey(
        Trigger, null=True, blank=True, on_delete=models.SET_NULL, related_name="task_instances"
    )
    reschedule_date = models.DateTimeField(null=True, blank=True)
    task_reschedule_count = models.IntegerField(default=0)
    #: when an ``up_for_retry`` task instance becomes ``scheduled`` again (its next try)
    next_retry_at = models.DateTimeField(null=True, blank=True)
    #: some task of the DAG depends on this one (set when the run is created): its finish
    #: hands over to its downstreams (``services.runs.advance.dag_run_progress``)
    has_downstream = models.BooleanField(default=False)
    #: the pool it takes ``pool_slots`` of while queued or running, and its priority (its
    #: task's weight rule applied over the DAG's graph, ``assets_app.weight_rules``), set when
    #: it is created from its declared task
    pool = models.CharField(max_length=POOL_NAME_LENGTH, default=DEFAULT_POOL)
    pool_slots = models.IntegerField(default=1)
    priority_weight = models.IntegerField(default=1)
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


class TaskMap(models.Model):
    """How many values a task instance pushed for a mapped downstream to expand over
    (Airflow's ``task_map``): written with its return value's XCom when the runner says the
    value maps a downstream (``mapped_length``); read when that downstream expands
    (``services.runs.mapping``). The rows go with their DAG run."""

    dag_run = models.ForeignKey(
        DagRun,
        on_delete=models.CASCADE,
        related_name="task_maps",
        db_index=False,  # by run: task_map_natural_key_unique's prefix
    )
    task_id = models.CharField(max_length=ID_LENGTH)
    map_index = models.IntegerField(default=-1)
    length = models.PositiveIntegerField()

    class Meta:
        db_table = "task_map"
        ordering = ["dag_run", "task_id", "map_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["dag_run", "task_id", "map_index"], name="task_map_natural_key_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.task_id}[{self.map_index}] maps {self.length}"


class DagCallbackRequest(models.Model):
    """A callback of an Airflow DAG file to run in the DAG processor (Airflow's
    ``callback_request``), run once in a process with the DAG file's code
    (``runtime.dag_callbacks``), which records how it went:

    - a DAG-level ``on_success_callback`` / ``on_failure_callback`` (``task_id`` empty),
      asked for by the end of a run whose DAG has such a callback (Airflow's
      ``DagCallbackRequest``);
    - a task's ``on_failure_callback`` / ``on_retry_callback`` (``task_id``, ``map_index``,
      ``try_number`` set), asked for when a try of a task that has one ends failed or up for
      retry outside its own process — its heartbeat timed out, it was never started, or its
      trigger ended it (Airflow's ``TaskCallbackRequest``): a try that ends in its process
      runs its callbacks there."""

    class Kind(models.TextChoices):
        SUCCESS = "success", "on_success_callback"
        FAILURE = "failure", "on_failure_callback"
        RETRY = "retry", "on_retry_callback"

    class State(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCESS = "success"
        FAILED = "failed"

    dag_run = models.ForeignKey(DagRun, on_delete=models.CASCADE, related_name="callbacks")
    dag_id = models.CharField(max_length=ID_LENGTH)
    #: a task's callback: its task instance (``""``: the DAG's)
    task_id = models.CharField(max_length=ID_LENGTH, default="", blank=True)
    map_index = models.IntegerField(default=-1)
    try_number = models.PositiveIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    #: Airflow's ``reason`` in a DAG callback's context (``success``, ``task_failure``,
    #: ``timed_out``); a task callback's: why its try failed (its ``failure_reason``)
    reason = models.CharField(max_length=1000, default="", blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    #: what the callback's process said when it failed (its traceback, the tail of its output)
    error = models.TextField(default="", blank=True)

    class Meta:
        db_table = "dag_callback_request"
        ordering = ["-created_at", "-id"]
        verbose_name = "DAG callback"
        indexes = [models.Index(fields=["state"], name="dag_callback_state")]

    def __str__(self) -> str:
        if self.task_id:
            index = f"[{self.map_index}]" if self.map_index >= 0 else ""
            return (
                f"{self.get_kind_display()} of {self.dag_id}.{self.task_id}{index} "
                f"run {self.dag_run_id} try {self.try_number}"
            )
        return f"{self.get_kind_display()} of {self.dag_id} run {self.dag_run_id}"


class Pool(models.Model):
    """A pool of slots task instances take while queued or running (Airflow's ``slot_pool``).

    ``slots`` -1 is unlimited; ``include_deferred``: deferred task instances take slots too.
    ``default_pool`` (128 slots) always exists: the migration creates it, a ``post_migrate``
    hook re-creates it, and no face deletes it (``services.runs.pools``).
    """

    pool = models.CharField(max_length=POOL_NAME_LENGTH, unique=True)
    slots = models.IntegerField(default=0)
    description = models.TextField(null=True, blank=True)  # noqa: DJ001 - Airflow's: null
    include_deferred = models.BooleanField(default=False)

    class Meta:
        db_table = "slot_pool"
        ordering = ["pool"]

    def __str__(self) -> str:
        return self.pool


#: ``default_pool``'s slots when it is created (Airflow's ``[core] default_pool_task_slot_count``).
DEFAULT_POOL_SLOTS = 128
#: ``default_pool``'s id: 0, below every id the sequence hands out, so that re-creating it
#: never takes an id the sequence will give again (a test's ``reset_sequences`` restarts the
#: sequence at 1 while ``default_pool``, made after every flush, is there)
DEFAULT_POOL_ID = 0
