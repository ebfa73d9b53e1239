"""Query counts of the ``/api/v2/`` reads, pinned; a list's count stays flat from 5 to 50 rows.

Every request pays the user of its bearer token (1 query; the users here are superusers, whose
permission checks read nothing). A list then pays its page and its ``total_entries`` count
(2), plus one query per prefetched relation; a detail pays its row.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from assets_app.models import (
    AssetActive,
    AssetAliasAsset,
    AssetDagRunQueue,
    Connection,
    DagImportError,
    DagRun,
    DagRunAssetEvent,
    DagScheduleAssetReference,
    EventLog,
    TaskInletAssetReference,
    TaskOutletAssetReference,
    Variable,
    XCom,
)
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagFactory,
    DagRunFactory,
    TaskInstanceFactory,
)

pytestmark = pytest.mark.django_db

#: the bearer token's user
AUTH = 1
#: a page and its ``total_entries``
PAGE = 2


def add_assets(n: int) -> None:
    for _ in range(n):
        asset = AssetFactory()
        dag = DagFactory()
        AssetActive.objects.create(asset=asset, name=asset.name, uri=asset.uri)
        AssetAliasAsset.objects.create(alias=AssetAliasFactory(), asset=asset)
        DagScheduleAssetReference.objects.create(asset=asset, dag=dag)
        TaskOutletAssetReference.objects.create(asset=asset, dag=dag, task_id="out")
        TaskInletAssetReference.objects.create(asset=asset, dag=dag, task_id="in")
        AssetEventFactory(asset=asset)


def add_aliases(n: int) -> None:
    AssetAliasFactory.create_batch(n)


def add_events(n: int) -> None:
    for _ in range(n):
        DagRunAssetEvent.objects.create(dag_run=DagRunFactory(), event=AssetEventFactory())


def add_dags(n: int) -> None:
    for _ in range(n):
        DagFactory(asset_expression={"asset": {"name": "a", "uri": "a"}}, tags=["t"])


def add_runs(n: int) -> None:
    dag = DagFactory(dag_id="d")
    for _ in range(n):
        DagRunFactory(dag=dag)


def add_task_instances(n: int) -> None:
    run = DagRun.objects.filter(run_id="r").first() or DagRunFactory(
        dag=DagFactory(dag_id="d"), run_id="r"
    )
    TaskInstanceFactory.create_batch(n, dag_run=run)


def add_import_errors(n: int) -> None:
    start = DagImportError.objects.count()
    for i in range(start, start + n):
        DagImportError.objects.create(filename=f"dags/f{i}.py", stacktrace="boom")


def add_queue_rows(n: int) -> None:
    asset = AssetFactory(name="queued")
    start = AssetDagRunQueue.objects.count()
    for i in range(start, start + n):
        AssetDagRunQueue.objects.create(asset=asset, target_dag=DagFactory(dag_id=f"q{i}"))


def add_variables(n: int) -> None:
    start = Variable.objects.count()
    for i in range(start, start + n):
        variable_set(key=f"v{i}", value='{"password": "p", "n": 1}')


def add_connections(n: int) -> None:
    start = Connection.objects.count()
    for i in range(start, start + n):
        connection_create(
            conn_id=f"c{i}", values=ConnectionFields(conn_type="http", extra='{"token": "t"}')
        )


def add_event_logs(n: int) -> None:
    EventLog.objects.bulk_create(
        EventLog(event="patch_dag", dag_id="d", owner="admin", extra="{}") for _ in range(n)
    )


LISTS = [
    # scheduled DAGs, producing tasks, consuming tasks, aliases, watchers: five prefetches
    pytest.param("assets?only_active=false", add_assets, AUTH + PAGE + 5, id="assets"),
    pytest.param("assets/aliases", add_aliases, AUTH + PAGE, id="aliases"),
    # the runs each event created: one prefetch
    pytest.param("assets/events", add_events, AUTH + PAGE + 1, id="events"),
    pytest.param("dags?exclude_stale=false", add_dags, AUTH + PAGE, id="dags"),
    # the DAG's existence (1)
    pytest.param("dags/d/dagRuns", add_runs, AUTH + 1 + PAGE, id="runs-of-a-dag"),
    pytest.param("dags/~/dagRuns", add_runs, AUTH + PAGE, id="runs"),
    # the run (1)
    pytest.param("dags/d/dagRuns/r/taskInstances", add_task_instances, AUTH + 1 + PAGE, id="tis"),
    pytest.param("importErrors", add_import_errors, AUTH + PAGE, id="import-errors"),
    # the queue rows (no count: the page is every row)
    pytest.param("assets/1/queuedEvents", add_queue_rows, AUTH + 1, id="queued-events"),
    pytest.param("variables", add_variables, AUTH + PAGE, id="variables"),
    pytest.param("connections", add_connections, AUTH + PAGE, id="connections"),
    pytest.param("eventLogs?dag_id=d", add_event_logs, AUTH + PAGE, id="event-logs"),
]


@pytest.mark.parametrize(("path", "add", "queries"), LISTS)
def test_list_query_count_is_pinned_and_flat(
    admin_api, path: str, add: Callable[[int], None], queries: int
):
    # given
    add(5)
    if path.startswith("assets/1/"):
        path = path.replace("1", str(AssetDagRunQueue.objects.first().asset_id), 1)
    # when
    with CaptureQueriesContext(connection) as few:
        small = admin_api.get(path)
    add(45)
    with CaptureQueriesContext(connection) as many:
        large = admin_api.get(path)
    # then
    assert small.status_code == large.status_code == 200, large.json()
    assert len(few) == len(many) == queries, [q["sql"] for q in many]


def _details() -> dict[str, str]:
    """One row of each kind, and the path of its detail route."""
    add_assets(1)
    run = DagRunFactory(dag=DagFactory(dag_id="d"), run_id="r")
    TaskInstanceFactory(dag_run=run, task_id="t")
    XCom.objects.create(dag_run=run, dag_id="d", run_id="r", task_id="t", key="k", value=1)
    AssetDagRunQueue.objects.create(asset=AssetFactory(name="q"), target_dag=run.dag)
    add_import_errors(1)
    add_variables(1)
    add_connections(1)
    add_event_logs(1)
    asset = AssetActive.objects.get().asset_id
    queued = AssetDagRunQueue.objects.get().asset_id
    return {
        "asset": f"assets/{asset}",
        "alias": f"assets/aliases/{AssetAliasAsset.objects.get().alias_id}",
        "dag": "dags/d",
        "run": "dags/d/dagRuns/r",
        "ti": "dags/d/dagRuns/r/taskInstances/t",
        "xcom": "dags/d/dagRuns/r/taskInstances/t/xcomEntries/k",
        "import-error": f"importErrors/{DagImportError.objects.get().pk}",
        "queued-of-dag": "dags/d/assets/queuedEvents",
        "queued-of-pair": f"dags/d/assets/{queued}/queuedEvents",
        "variable": "variables/v0",
        "connection": "connections/c0",
        "event-log": f"eventLogs/{EventLog.objects.get().pk}",
    }


DETAILS = [
    # the asset (1) and its five prefetches
    pytest.param("asset", AUTH + 1 + 5, id="asset"),
    pytest.param("alias", AUTH + 1, id="alias"),
    pytest.param("dag", AUTH + 1, id="dag"),
    pytest.param("run", AUTH + 1, id="run"),
    # the run, then its task instance
    pytest.param("ti", AUTH + 2, id="ti"),
    pytest.param("xcom", AUTH + 1, id="xcom"),
    pytest.param("import-error", AUTH + 1, id="import-error"),
    pytest.param("queued-of-dag", AUTH + 1, id="queued-of-dag"),
    pytest.param("queued-of-pair", AUTH + 1, id="queued-of-pair"),
    pytest.param("variable", AUTH + 1, id="variable"),
    pytest.param("connection", AUTH + 1, id="connection"),
    pytest.param("event-log", AUTH + 1, id="event-log"),
]


@pytest.mark.parametrize(("name", "queries"), DETAILS)
def test_detail_query_count_is_pinned(admin_api, name: str, queries: int):
    path = _details()[name]
    with CaptureQueriesContext(connection) as captured:
        response = admin_api.get(path)
    assert response.status_code == 200, response.json()
    assert len(captured) == queries, [q["sql"] for q in captured]
