"""Query counts of every list, pinned and flat from 10 to 100 rows per page."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from assets_app.models import (
    AssetActive,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    DagRunAssetEvent,
)
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagFactory,
    DagRunFactory,
)
from tests.operatorapi.conftest import OPERATOR_PERMISSIONS, make_user, token_client

pytestmark = pytest.mark.django_db

API = "/api/v1"


def add_assets(n: int) -> None:
    for _ in range(n):
        asset = AssetFactory()
        AssetActive.objects.create(asset=asset, name=asset.name, uri=asset.uri)
        AssetAliasAsset.objects.create(alias=AssetAliasFactory(), asset=asset)


def add_aliases(n: int) -> None:
    for _ in range(n):
        AssetAliasAsset.objects.create(alias=AssetAliasFactory(), asset=AssetFactory())


def add_events(n: int) -> None:
    for _ in range(n):
        event = AssetEventFactory()
        AssetAliasAssetEvent.objects.create(alias=AssetAliasFactory(), event=event)
        DagRunAssetEvent.objects.create(dag_run=DagRunFactory(), event=event)


def add_dags(n: int) -> None:
    for _ in range(n):
        DagFactory(asset_expression={"asset": {"name": "a", "uri": "a"}})


def add_runs(n: int) -> None:
    for _ in range(n):
        DagRunFactory()


def add_queue_rows(n: int) -> None:
    for _ in range(n):
        AssetDagRunQueue.objects.create(asset=AssetFactory(), target_dag=DagFactory())


# Every list: the token (1), the user's permissions (2: direct, through groups), the page (1),
# then one query per prefetched relation.
CASES = [
    pytest.param("/assets", add_assets, 4 + 1, id="assets+aliases"),
    pytest.param("/asset-aliases", add_aliases, 4 + 1, id="aliases+assets"),
    pytest.param("/asset-events", add_events, 4 + 2, id="events+aliases+runs"),
    pytest.param("/dags", add_dags, 4, id="dags"),
    pytest.param("/dag-runs", add_runs, 4, id="runs"),
    pytest.param("/queue", add_queue_rows, 4, id="queue+asset-joined"),
]


@pytest.mark.parametrize(("path", "add", "queries"), CASES)
def test_list_query_count_is_pinned_and_flat(path: str, add: Callable[[int], None], queries: int):
    client = token_client(make_user("operator", *OPERATOR_PERMISSIONS))

    def count(rows: int) -> int:
        add(rows)
        with CaptureQueriesContext(connection) as captured:
            response = client.get(f"{API}{path}", {"page_size": 1000})
        assert response.status_code == 200
        assert len(response.json()["results"]) >= rows
        return len(captured)

    assert count(10) == count(90) == queries


def test_filtered_event_page_with_a_cursor_costs_the_same():
    client = token_client(make_user("operator", *OPERATOR_PERMISSIONS))
    add_events(30)
    first = client.get(f"{API}/asset-events", {"page_size": 10, "source_dag_id": "dag"}).json()

    with CaptureQueriesContext(connection) as captured:
        response = client.get(first["next"])

    assert response.status_code == 200
    assert len(response.json()["results"]) == 10
    assert len(captured) == 4 + 2
