"""What the overview (the admin index), the asset page and the DAG page show beyond their
forms: counts, charts, lineage and recent rows. Read-only; each panel runs a fixed number of
queries whatever the number of events (pinned by the tests)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.db.models import Count, Max, Min, Prefetch, Q, QuerySet
from django.db.models.functions import TruncDay, TruncHour
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from assets_app.admin.charts import (
    Bar,
    GanttBar,
    Lineage,
    Node,
    bar_chart,
    gantt_svg,
    lineage_svg,
)
from assets_app.admin.common import WaitingDag, change_url, changelist_url, source_run_pk
from assets_app.formats import duration_human, timestamp_human
from assets_app.models import (
    Asset,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunState,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
    DagTask,
    TaskInletAssetReference,
    TaskInstance,
    TaskInstanceState,
    TaskLeafReference,
    TaskOutletAssetReference,
)
from assets_app.selectors.dags import dag_code_get, import_error_list
from assets_app.selectors.runs import QueueDepth, task_instances_by_queue
from assets_app.services.assets.consumption import consumers_awaiting

LATEST_EVENTS = 10
RECENT_RUNS = 10
#: the runs the DAG page's grid shows, as Airflow's grid by default
GRID_RUNS = 25
HOURS = 48
DAYS = 30


def _timestamp_range(start: datetime, end: datetime) -> dict[str, str]:
    """Changelist parameters for events with ``start <= timestamp < end``."""
    return {"timestamp__gte": start.isoformat(), "timestamp__lt": end.isoformat()}


# --- latest events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EventRow:
    """An event with what produced it and what it triggered."""

    event: AssetEvent
    source_run_pk: int | None
    consumer_runs: list[DagRun]
    waiting_dags: list[WaitingDag]  # queued DAGs whose next run consumes it


def waiting_consumers(events: Iterable[AssetEvent]) -> dict[int, list[WaitingDag]]:
    """Per event id, the consumers it is waiting for: the queued DAGs whose next run consumes
    it, paused ones too (a paused DAG stays queued until it is unpaused). The scheduler's rule
    (:func:`assets_app.services.assets.consumption.consumers_awaiting`): no query without
    events, 1 without queued DAGs, else 3 (the queued DAGs, their assets' ids, the events asked
    about), whatever the number of events."""
    return {
        pk: [WaitingDag(dag.dag_id, dag.is_paused) for dag in dags]
        for pk, dags in consumers_awaiting(events).items()
    }


def latest_events(events: QuerySet[AssetEvent], *, limit: int) -> list[EventRow]:
    """The newest ``limit`` of ``events`` with their source run, aliases, consumer runs and the
    DAGs still waiting for them (4 queries, 6 when DAGs are queued: ``waiting_consumers``)."""
    rows = list(
        events.select_related("asset")
        .annotate(source_run_pk=source_run_pk())
        .prefetch_related(
            "source_aliases", Prefetch("created_dagruns", queryset=DagRun.objects.order_by("id"))
        )
        .order_by("-timestamp", "-id")[:limit]
    )
    waiting = waiting_consumers(rows)
    return [
        EventRow(
            event=event,
            source_run_pk=event.source_run_pk,
            consumer_runs=list(event.created_dagruns.all()),
            waiting_dags=waiting[event.pk],
        )
        for event in rows
    ]


# --- the overview ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Overview:
    now: datetime
    assets_active: int
    assets_inactive: int
    events_24h: int
    events_7d: int
    queue_entries: int
    queue_dags: int
    queue_oldest: datetime | None
    runs_by_state: dict[str, int]
    tis_failed: int
    tis_running: int
    import_errors: int  # DAG files that failed to load: a banner above the cards
    #: per task queue, the task instances queued (handed to the executor) and scheduled
    task_queues: list[QueueDepth]
    chart: SafeString
    latest: list[EventRow]

    @property
    def oldest_wait(self) -> timedelta | None:
        return self.now - self.queue_oldest if self.queue_oldest else None

    @property
    def task_queue_waits(self) -> list[tuple[QueueDepth, timedelta | None]]:
        """Each task queue with its oldest queued task instance's wait."""
        return [
            (q, self.now - q.oldest_queued_at if q.oldest_queued_at else None)
            for q in self.task_queues
        ]

    @property
    def since_24h(self) -> str:
        return (self.now - timedelta(hours=24)).isoformat()

    @property
    def since_7d(self) -> str:
        return (self.now - timedelta(days=7)).isoformat()


def overview() -> Overview:
    """The admin index's overview (12 queries, 14 when DAGs are queued)."""
    now = timezone.now()
    assets = Asset.objects.aggregate(total=Count("pk"), active=Count("active"))
    recent = AssetEvent.objects.filter(timestamp__gte=now - timedelta(days=7)).aggregate(
        week=Count("pk"), day=Count("pk", filter=Q(timestamp__gte=now - timedelta(hours=24)))
    )
    queue = AssetDagRunQueue.objects.aggregate(
        entries=Count("pk"), dags=Count("target_dag", distinct=True), oldest=Min("created_at")
    )
    runs = dict(
        DagRun.objects.order_by()
        .values_list("state")
        .annotate(n=Count("pk"))
        .values_list("state", "n")
    )
    tis = dict(
        TaskInstance.objects.filter(state__in=[TaskInstanceState.FAILED, TaskInstanceState.RUNNING])
        .order_by()
        .values_list("state")
        .annotate(n=Count("pk"))
        .values_list("state", "n")
    )
    return Overview(
        now=now,
        assets_active=assets["active"],
        assets_inactive=assets["total"] - assets["active"],
        events_24h=recent["day"],
        events_7d=recent["week"],
        queue_entries=queue["entries"],
        queue_dags=queue["dags"],
        queue_oldest=queue["oldest"],
        runs_by_state={state: runs.get(state, 0) for state in DagRunState.values},
        tis_failed=tis.get(TaskInstanceState.FAILED, 0),
        tis_running=tis.get(TaskInstanceState.RUNNING, 0),
        import_errors=import_error_list().count(),
        task_queues=task_instances_by_queue(),
        chart=events_per_hour_chart(now=now),
        latest=latest_events(AssetEvent.objects.all(), limit=LATEST_EVENTS),
    )


def _counts_per(
    trunc: type[TruncHour | TruncDay], events: QuerySet[AssetEvent]
) -> Counter[datetime]:
    """How many ``events`` fall in each hour (or day), by its local start (one GROUP BY)."""
    return Counter(
        {
            timezone.localtime(start): n
            for start, n in events.annotate(start=trunc("timestamp"))
            .order_by()
            .values_list("start")
            .annotate(n=Count("pk"))
            .values_list("start", "n")
        }
    )


def events_per_hour_chart(*, now: datetime) -> SafeString:
    """Events per hour over the last ``HOURS`` hours, every bar a link to its events."""
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = end - timedelta(hours=HOURS)
    counts = _counts_per(TruncHour, AssetEvent.objects.filter(timestamp__gte=start))
    bars = []
    for i in range(HOURS):
        hour = timezone.localtime(start + timedelta(hours=i))
        bars.append(
            Bar(
                label=hour.strftime("%d %H:00"),
                value=counts[hour],
                url=changelist_url(
                    "assetevent", **_timestamp_range(hour, hour + timedelta(hours=1))
                ),
                title=f"{counts[hour]} event(s) {timestamp_human(hour)} + 1 h",
            )
        )
    return bar_chart(bars, title=f"asset events per hour, last {HOURS} h", label_every=6)


# --- the asset page --------------------------------------------------------------------------


@dataclass(frozen=True)
class AssetPanel:
    chart: SafeString
    lineage: SafeString
    latest: list[EventRow]


def asset_panel(asset: Asset) -> AssetPanel:
    """The asset page's events-per-day chart, lineage and latest events (13 queries, 15 when
    DAGs are queued)."""
    return AssetPanel(
        chart=events_per_day_chart(asset),
        lineage=lineage_svg(asset_lineage(asset), title=f"lineage of {asset.name}"),
        latest=latest_events(AssetEvent.objects.filter(asset=asset), limit=LATEST_EVENTS),
    )


def events_per_day_chart(asset: Asset) -> SafeString:
    """The asset's events per day over the last ``DAYS`` days, every bar a link."""
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    start = today - timedelta(days=DAYS - 1)
    events = AssetEvent.objects.filter(asset=asset, timestamp__gte=start)
    counts = Counter({day.date(): n for day, n in _counts_per(TruncDay, events).items()})
    bars = []
    for i in range(DAYS):
        day = start + timedelta(days=i)
        n = counts[day.date()]
        url = changelist_url(
            "assetevent",
            asset__id__exact=asset.pk,
            **_timestamp_range(day, day + timedelta(days=1)),
        )
        bars.append(
            Bar(label=day.strftime("%m-%d"), value=n, url=url, title=f"{n} on {day:%Y-%m-%d}")
        )
    return bar_chart(bars, title=f"events per day, last {DAYS} days", label_every=5)


def _dag_node(key: str, dag_id: str, *, note: str = "", waiting: bool = False) -> Node:
    return Node(
        key=key, label=dag_id, kind="dag", url=change_url("dag", dag_id), note=note, waiting=waiting
    )


def _task_node(dag_id: str, task_id: str, *, role: str) -> Node:
    return Node(
        key=f"task:{dag_id}.{task_id}",
        label=task_id,
        kind="task",
        url=changelist_url("taskinstance", dag_id=dag_id, task_id=task_id),
        note=f"{role}, DAG {dag_id}",
    )


def _asset_node(key: str, asset: Asset, *, note: str = "", waiting: bool = False) -> Node:
    return Node(
        key=key,
        label=asset.name,
        kind="asset",
        url=change_url("asset", asset.pk),
        note=note,
        waiting=waiting,
    )


def asset_lineage(asset: Asset) -> Lineage:
    """Producing tasks and aliases → the asset → the DAGs scheduled on it (directly, by name
    or uri reference, or through an alias), each marked when it is queued on this asset
    (8 queries)."""
    lineage = Lineage()
    me = lineage.add(_asset_node("asset", asset))
    lineage.nodes[me] = Node(
        key=me, label=asset.name, kind="asset", url=change_url("asset", asset.pk), focus=True
    )
    for dag_id, task_id in TaskOutletAssetReference.objects.filter(asset=asset).values_list(
        "dag_id", "task_id"
    ):
        lineage.link(lineage.add(_task_node(dag_id, task_id, role="produces it")), me)
    aliases = {
        alias_id: lineage.add(
            Node(
                key=f"alias:{alias_id}",
                label=name,
                kind="alias",
                url=change_url("assetalias", alias_id),
            )
        )
        for alias_id, name in AssetAliasAsset.objects.filter(asset=asset)
        .order_by("alias__name")
        .values_list("alias_id", "alias__name")
    }
    for key in aliases.values():
        lineage.link(key, me)
    waiting = set(
        AssetDagRunQueue.objects.filter(asset=asset).values_list("target_dag_id", flat=True)
    )
    consumers: dict[str, str] = {}
    for dag_id in DagScheduleAssetReference.objects.filter(asset=asset).values_list(
        "dag_id", flat=True
    ):
        consumers.setdefault(dag_id, "scheduled on it")
    for dag_id in DagScheduleAssetNameReference.objects.filter(name=asset.name).values_list(
        "dag_id", flat=True
    ):
        consumers.setdefault(dag_id, "by name")
    for dag_id in DagScheduleAssetUriReference.objects.filter(uri=asset.uri).values_list(
        "dag_id", flat=True
    ):
        consumers.setdefault(dag_id, "by uri")
    for alias_name, dag_id in DagScheduleAssetAliasReference.objects.filter(
        alias_id__in=aliases
    ).values_list("alias__name", "dag_id"):
        consumers.setdefault(dag_id, f"through alias {alias_name}")
    for dag_id, how in sorted(consumers.items()):
        is_waiting = dag_id in waiting
        note = "waiting on this asset" if is_waiting else how
        node = _dag_node(f"dag:{dag_id}", dag_id, note=note, waiting=is_waiting)
        lineage.link(me, lineage.add(node))
    for dag_id, task_id in TaskInletAssetReference.objects.filter(asset=asset).values_list(
        "dag_id", "task_id"
    ):
        lineage.link(me, lineage.add(_task_node(dag_id, task_id, role="reads it")))
    return lineage


# --- the DAG page ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRow:
    run: DagRun

    @property
    def duration(self) -> timedelta | None:
        if self.run.start_date is None:
            return None
        return (self.run.end_date or timezone.now()) - self.run.start_date


@dataclass(frozen=True)
class GridCell:
    """One task instance in the grid: its state, its page (its log is there) and a tooltip."""

    state: str | None
    url: str | None
    title: str


@dataclass(frozen=True)
class GridRow:
    task_id: str
    cells: list[GridCell]


@dataclass(frozen=True)
class Grid:
    """Airflow's grid view: the DAG's last runs (oldest on the left) by its tasks (in graph
    order), each cell a task instance in its state's colour."""

    runs: list[RunRow]
    rows: list[GridRow]


@dataclass(frozen=True)
class CodePanel:
    """The file a DAG came from, highlighted (Pygments) and read-only."""

    fileloc: str
    lines: int
    last_updated: datetime
    html: SafeString


@dataclass(frozen=True)
class DagPanel:
    lineage: SafeString
    runs: list[RunRow]
    grid: Grid
    code: CodePanel | None


def dag_panel(dag: Dag) -> DagPanel:
    """The DAG page's grid, task graph, recent runs and code (17 queries)."""
    latest = list(DagRun.objects.filter(dag=dag).order_by("-run_after", "-id")[:GRID_RUNS])
    runs = latest[:RECENT_RUNS]
    graph = dag_lineage(dag, recent_run_ids=[run.run_id for run in runs])
    return DagPanel(
        lineage=lineage_svg(graph, title=f"task graph of {dag.dag_id}", direction="down"),
        runs=[RunRow(run) for run in runs],
        grid=dag_grid(dag, list(reversed(latest))),
        code=dag_code_panel(dag),
    )


def dag_code_panel(dag: Dag) -> CodePanel | None:
    """The DAG's file as kept at its last load (``dag_code``), highlighted by its name's
    language (Python, YAML, JSON; else plain), line numbers inline so that long lines wrap."""
    code = dag_code_get(dag)
    if code is None:
        return None
    try:
        lexer = get_lexer_for_filename(code.fileloc, stripnl=False)
    except ClassNotFound:
        lexer = TextLexer(stripnl=False)
    formatter = HtmlFormatter(linenos="inline", cssclass="ar-code", wrapcode=True)
    styles = formatter.get_style_defs(".ar-code")
    # Pygments escapes the text it highlights; its style rules are its own constants
    html = mark_safe(f"<style>{styles}</style>{highlight(code.source_code, lexer, formatter)}")  # noqa: S308
    return CodePanel(
        fileloc=code.fileloc,
        lines=code.source_code.count("\n") + (not code.source_code.endswith("\n")),
        last_updated=code.last_updated,
        html=html,
    )


def task_ids_in_graph_order(dag: Dag) -> list[str]:
    """The DAG's task ids, each after all its upstream tasks (Airflow's grid and graph
    order): a topological sort that keeps the declared order among tasks free to go (one
    query)."""
    upstream = dict(DagTask.objects.filter(dag=dag).values_list("task_id", "upstream"))
    declared = [task_id for task_id in dag.task_ids if task_id in upstream]
    declared += sorted(set(upstream) - set(declared))
    ordered: list[str] = []
    placed: set[str] = set()
    while len(ordered) < len(declared):
        ready = [
            task_id
            for task_id in declared
            if task_id not in placed
            and all(up in placed or up not in upstream for up in upstream[task_id])
        ]
        if not ready:  # a cycle cannot be declared; were one stored, keep the rest as declared
            ready = [task_id for task_id in declared if task_id not in placed]
        ordered.append(ready[0])
        placed.add(ready[0])
    return ordered


def dag_grid(dag: Dag, runs: list[DagRun]) -> Grid:
    """The grid of ``runs`` (oldest first) by the DAG's tasks (two queries): a task a run has
    no instance of (declared later, say) is an empty cell."""
    task_ids = task_ids_in_graph_order(dag)
    tis = {
        (ti.dag_run_id, ti.task_id): ti
        for ti in TaskInstance.objects.filter(dag_run__in=runs, map_index=-1).only(
            "pk", "dag_run_id", "task_id", "state", "try_number"
        )
    }
    rows = []
    for task_id in task_ids:
        cells = []
        for run in runs:
            ti = tis.get((run.pk, task_id))
            if ti is None:
                cells.append(GridCell(None, None, f"{task_id} @ {run.run_id}: no task instance"))
                continue
            title = f"{task_id} @ {run.run_id}: {ti.state or 'no state'}, try {ti.try_number}"
            cells.append(GridCell(ti.state, change_url("taskinstance", ti.pk), title))
        rows.append(GridRow(task_id, cells))
    return Grid(runs=[RunRow(run) for run in runs], rows=rows)


def dag_lineage(
    dag: Dag,
    *,
    recent_run_ids: Iterable[str] = (),
    task_instances: Iterable[TaskInstance] | None = None,
) -> Lineage:
    """The DAG's picture, drawn top to bottom: what it is scheduled on → the DAG → its tasks
    along their edges (``DagTask.upstream``), each task's declared inlets (assets, aliases,
    ``Asset.ref``) above it and its outlets below it, and the assets its events in
    ``recent_run_ids`` produced (through an alias or a reference, or directly). An input the
    DAG is queued on (an event arrived, the run not yet created) is marked.

    ``task_instances`` (a run's) colour each task by its state, with its duration: the run
    page's graph. A fixed number of queries (12) whatever the size of the DAG."""
    lineage = Lineage()
    me = lineage.add(
        Node(
            key="dag",
            label=dag.dag_id,
            kind="dag",
            url=change_url("dag", dag.dag_id),
            focus=task_instances is None,
            note="paused" if dag.is_paused else "",
        )
    )
    _schedule_inputs(lineage, dag, me)
    tis: dict[str, list[TaskInstance]] = defaultdict(list)
    for ti in task_instances or ():
        tis[ti.task_id].append(ti)
    tasks = {}
    for task in DagTask.objects.filter(dag=dag).order_by("task_id"):
        of_task = tis.get(task.task_id, [])
        if len(of_task) > 1 or any(ti.map_index >= 0 for ti in of_task):
            node = _graph_mapped_task_node(dag.dag_id, task, of_task)
        else:
            node = _graph_task_node(dag.dag_id, task, of_task[0] if of_task else None)
        tasks[task.task_id] = lineage.add(node)
    for task in DagTask.objects.filter(dag=dag).only("task_id", "upstream"):
        ups = [up for up in task.upstream if up in tasks]
        for up in ups:
            lineage.link(tasks[up], tasks[task.task_id])
        if not ups:
            lineage.link(me, tasks[task.task_id])
    for inlet in TaskInletAssetReference.objects.filter(dag=dag).select_related("asset"):
        node = _asset_node(f"in:{inlet.asset_id}", inlet.asset, note="inlet")
        lineage.link(lineage.add(node), tasks.get(inlet.task_id, me))
    outlets: dict[tuple[str, int], str] = {}
    for outlet in TaskOutletAssetReference.objects.filter(dag=dag).select_related("asset"):
        node = _asset_node(f"out:{outlet.asset_id}", outlet.asset, note="outlet")
        outlets[outlet.task_id, outlet.asset_id] = lineage.add(node)
        lineage.link(tasks.get(outlet.task_id, me), outlets[outlet.task_id, outlet.asset_id])
    leaves: dict[tuple[str, str, str], str] = {}  # (task, kind, value) -> node key
    for leaf in TaskLeafReference.objects.filter(dag=dag).order_by("task_id", "kind", "value"):
        is_outlet = leaf.direction == TaskLeafReference.Direction.OUTLET
        node = _leaf_node(leaf, is_outlet=is_outlet)
        key = lineage.add(node)
        task_key = tasks.get(leaf.task_id, me)
        if is_outlet:
            leaves[leaf.task_id, leaf.kind, leaf.value] = key
            lineage.link(task_key, key)
        else:
            lineage.link(key, task_key)
    _produced_assets(lineage, dag, recent_run_ids, tasks=tasks, outlets=outlets, leaves=leaves)
    return lineage


def _schedule_inputs(lineage: Lineage, dag: Dag, me: str) -> None:
    """What the DAG is scheduled on → the DAG (assets, aliases, references; 5 queries)."""
    queued = set(AssetDagRunQueue.objects.filter(target_dag=dag).values_list("asset_id", flat=True))
    for ref in DagScheduleAssetReference.objects.filter(dag=dag).select_related("asset"):
        is_queued = ref.asset_id in queued
        node = _asset_node(
            f"in:{ref.asset_id}",
            ref.asset,
            note="event queued" if is_queued else "schedule",
            waiting=is_queued,
        )
        lineage.link(lineage.add(node), me)
    for alias_ref in DagScheduleAssetAliasReference.objects.filter(dag=dag).select_related("alias"):
        alias: AssetAlias = alias_ref.alias
        node = Node(
            key=f"alias:{alias.pk}",
            label=alias.name,
            kind="alias",
            url=change_url("assetalias", alias.pk),
            note="schedule",
        )
        lineage.link(lineage.add(node), me)
    references = (("name", DagScheduleAssetNameReference), ("uri", DagScheduleAssetUriReference))
    for field, model in references:  # Asset.ref(name=...), Asset.ref(uri=...)
        for value in model.objects.filter(dag=dag).values_list(field, flat=True):
            node = Node(
                key=f"{field}:{value}",
                label=value,
                kind="reference",
                url=changelist_url("asset", **{field: value}),
                note=f"schedule: Asset.ref({field})",
            )
            lineage.link(lineage.add(node), me)


def _graph_task_node(dag_id: str, task: DagTask, ti: TaskInstance | None) -> Node:
    """A task of the graph: on the DAG page it lists its task instances; on a run's page it
    opens the run's task instance, coloured by its state, its duration the second line."""
    rule = "" if task.trigger_rule == "all_success" else f"trigger rule {task.trigger_rule}"
    if ti is None:
        return Node(
            key=f"task:{task.task_id}",
            label=task.task_id,
            kind="task",
            url=changelist_url("taskinstance", dag_id=dag_id, task_id=task.task_id),
            note=rule,
        )
    took = ti.duration if ti.duration is not None else None
    if took is None and ti.start_date is not None and ti.state == "running":
        took = (timezone.now() - ti.start_date).total_seconds()
    state = ti.state or "none"
    note = state.replace("_", " ") + (f" · {duration_human(took)}" if took is not None else "")
    return Node(
        key=f"task:{task.task_id}",
        label=task.task_id,
        kind="task",
        url=change_url("taskinstance", ti.pk),
        note=note,
        state=state,
    )


#: A mapped task's box takes the state that matters most among its map indexes (Airflow's
#: summary of a mapped task in its grid), then counts each state.
_SUMMARY_ORDER = (
    "running",
    "queued",
    "scheduled",
    "up_for_retry",
    "up_for_reschedule",
    "deferred",
    "restarting",
    "failed",
    "upstream_failed",
    "none",
    "skipped",
    "removed",
    "success",
)


def _graph_mapped_task_node(dag_id: str, task: DagTask, tis: list[TaskInstance]) -> Node:
    """A mapped task of a run's graph: one box for all its map indexes, with how many are in
    each state, opening the list of its map indexes in that run."""
    counts = Counter(ti.state or "none" for ti in tis)
    state = min(counts, key=lambda s: _SUMMARY_ORDER.index(s) if s in _SUMMARY_ORDER else 0)
    note = " · ".join(
        f"{counts[s]} {s.replace('_', ' ')}" for s in sorted(counts, key=lambda s: (-counts[s], s))
    )
    run_id = tis[0].run_id
    return Node(
        key=f"task:{task.task_id}",
        label=f"{task.task_id} [{len(tis)}]",
        kind="task",
        url=changelist_url("taskinstance", dag_id=dag_id, run_id=run_id, task_id=task.task_id),
        note=note,
        state=state,
    )


def _leaf_node(leaf: TaskLeafReference, *, is_outlet: bool) -> Node:
    """An alias or ``Asset.ref`` inlet/outlet of a task."""
    role = "outlet" if is_outlet else "inlet"
    key = f"{role}:{leaf.task_id}:{leaf.kind}:{leaf.value}"
    if leaf.kind == TaskLeafReference.Kind.ALIAS:
        return Node(
            key=key,
            label=leaf.value,
            kind="alias",
            url=changelist_url("assetalias", q=leaf.value),
            note=f"{role}: alias",
        )
    field = "name" if leaf.kind == TaskLeafReference.Kind.NAME_REF else "uri"
    return Node(
        key=key,
        label=leaf.value,
        kind="reference",
        url=changelist_url("asset", **{field: leaf.value}),
        note=f"{role}: Asset.ref({field})",
    )


#: At most this many produced assets are drawn (the most recent first).
PRODUCED_ASSETS = 12


def _produced_assets(
    lineage: Lineage,
    dag: Dag,
    run_ids: Iterable[str],
    *,
    tasks: dict[str, str],
    outlets: dict[tuple[str, int], str],
    leaves: dict[tuple[str, str, str], str],
) -> None:
    """The assets the DAG's recent runs (``run_ids``) produced, under the outlet they came
    through: a declared asset outlet says how many events, an alias or a reference points at
    the asset it resolved to, anything else hangs under its task (2 queries)."""
    run_ids = list(run_ids)
    if not run_ids:
        return
    produced = list(
        AssetEvent.objects.filter(source_dag_id=dag.dag_id, source_run_id__in=run_ids)
        .order_by()
        .values("source_task_id", "asset_id", "asset__name", "asset__uri")
        .annotate(events=Count("id"), last=Max("timestamp"))
        .order_by("-last")[:PRODUCED_ASSETS]
    )
    through = {
        (row["event__source_task_id"] or "", row["event__asset_id"]): row["alias__name"]
        for row in AssetAliasAssetEvent.objects.filter(
            event__source_dag_id=dag.dag_id, event__source_run_id__in=run_ids
        )
        .order_by()
        .values("event__source_task_id", "event__asset_id", "alias__name")
        .distinct()
    }
    for row in produced:
        task_id: str = row["source_task_id"] or ""
        asset_id: int = row["asset_id"]
        n = row["events"]
        said = f"produced · {n} event(s)"
        declared = outlets.get((task_id, asset_id))
        if declared is not None:
            node = lineage.nodes[declared]
            lineage.nodes[declared] = replace(node, note=f"outlet · {said}")
            continue
        parent = (
            leaves.get(
                (task_id, TaskLeafReference.Kind.ALIAS, through.get((task_id, asset_id), ""))
            )
            or leaves.get((task_id, TaskLeafReference.Kind.NAME_REF, row["asset__name"]))
            or leaves.get((task_id, TaskLeafReference.Kind.URI_REF, row["asset__uri"]))
            or tasks.get(task_id)
        )
        if parent is None:
            continue
        node = Node(
            key=f"produced:{asset_id}",
            label=row["asset__name"],
            kind="asset",
            url=change_url("asset", asset_id),
            note=said,
        )
        lineage.link(parent, lineage.add(node))


# --- a run's page ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunPanel:
    graph: SafeString
    gantt: SafeString


def run_panel(run: DagRun) -> RunPanel:
    """A run's page: its DAG's task graph coloured by the run's task instances, and their
    Gantt strip (14 queries)."""
    tis = sorted(  # started ones by start, the not-started last (as on both databases)
        TaskInstance.objects.filter(dag_run=run),
        key=lambda ti: (
            ti.start_date is None,
            ti.start_date or run.run_after,
            ti.task_id,
            ti.map_index,
        ),
    )
    graph = dag_lineage(run.dag, recent_run_ids=[run.run_id], task_instances=tis)
    end = run.end_date or timezone.now()
    bars = [
        GanttBar(
            label=ti.task_id if ti.map_index < 0 else f"{ti.task_id} [{ti.map_index}]",
            state=ti.state or "none",
            start=ti.start_date,
            end=ti.end_date or (end if ti.start_date is not None else None),
            url=change_url("taskinstance", ti.pk),
        )
        for ti in tis
    ]
    return RunPanel(
        graph=lineage_svg(graph, title=f"task graph of run {run.run_id}", direction="down"),
        gantt=gantt_svg(bars, start=run.start_date, title=f"task instances of {run.run_id}"),
    )
