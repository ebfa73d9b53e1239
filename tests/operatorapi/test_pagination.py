"""Keyset pagination: every event committed before the first page exactly once, whatever is
inserted while a client pages (same connection, another thread, an open transaction)."""

from __future__ import annotations

import json
import threading
from base64 import urlsafe_b64encode
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection, transaction
from django.utils import timezone

from assets_app.models import AssetEvent
from tests.factories import AssetEventFactory, AssetFactory, DagFactory
from tests.operatorapi.conftest import OPERATOR_PERMISSIONS, make_user, token_client

API = "/api/v1"


def query(link: str) -> dict[str, str]:
    return {key: values[-1] for key, values in parse_qs(urlsplit(link).query).items()}


def walk(client, path: str, *, on_page=None, **params) -> list[int]:
    """Follow the ``next`` links from the first page; the ids in the order served."""
    seen: list[int] = []
    response = client.get(f"{API}{path}", params)
    while True:
        assert response.status_code == 200, response.content
        body = response.json()
        seen += [row.get("id", row.get("dag_id")) for row in body["results"]]
        if on_page is not None:
            on_page(len(seen))
        if body["next"] is None:
            return seen
        response = client.get(f"{API}{path}", query(body["next"]))


def cursor_of(body) -> str:
    """A cursor as the API encodes them: URL-safe base64 of JSON, unpadded."""
    return urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")


def results_of(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


@pytest.fixture
def api(db):
    return token_client(make_user("operator", *OPERATOR_PERMISSIONS))


@pytest.mark.django_db
def test_pages_are_disjoint_and_complete_newest_first(api):
    events = [AssetEventFactory().pk for _ in range(10)]

    assert walk(api, "/asset-events", page_size=3) == sorted(events, reverse=True)
    assert walk(api, "/asset-events", page_size=10) == sorted(events, reverse=True)
    assert walk(api, "/asset-events", page_size=1000) == sorted(events, reverse=True)


@pytest.mark.django_db
def test_event_pages_follow_timestamp_then_id_across_ties_and_late_stamps(api):
    # given: five events sharing one timestamp, and events whose timestamps do not follow
    # their ids (a producer stamping earlier than an event inserted before it)
    now = timezone.now()
    tied = [AssetEventFactory(timestamp=now).pk for _ in range(5)]
    late = AssetEventFactory(timestamp=now - timedelta(hours=1)).pk
    early = AssetEventFactory(timestamp=now + timedelta(seconds=1)).pk
    expected = [early, *sorted(tied, reverse=True), late]

    # then: page boundaries inside the tie neither repeat nor skip
    for size in (1, 2, 3, 7):
        assert walk(api, "/asset-events", page_size=size) == expected


@pytest.mark.django_db
def test_events_inserted_between_page_requests_neither_repeat_nor_hide_any(api):
    # given
    asset = AssetFactory()
    before = [AssetEventFactory(asset=asset).pk for _ in range(10)]

    def insert(served: int) -> None:
        AssetEventFactory.create_batch(4, asset=asset)  # after every page

    # when
    seen = walk(api, "/asset-events", on_page=insert, page_size=3, asset_id=asset.pk)

    # then: exactly the events that existed at the first request, once each
    assert seen == sorted(before, reverse=True)
    assert AssetEvent.objects.count() == 10 + 4 * 4


@pytest.mark.django_db
def test_events_deleted_between_page_requests_do_not_shift_the_pages(api):
    events = sorted((AssetEventFactory().pk for _ in range(9)), reverse=True)
    deleted: list[int] = []

    def prune_served(served: int) -> None:
        if served == 3:  # after the first page, delete the newest two events it served
            deleted.extend(events[:2])
            AssetEvent.objects.filter(pk__in=deleted).delete()

    assert walk(api, "/asset-events", on_page=prune_served, page_size=3) == events


@pytest.mark.django_db
def test_previous_links_lead_back_up_to_the_newest_events(api):
    # given: the second page read, then new events
    old = [AssetEventFactory().pk for _ in range(3)]
    first = api.get(f"{API}/asset-events", {"page_size": 2}).json()
    second = api.get(f"{API}/asset-events", query(first["next"])).json()
    assert [row["id"] for row in second["results"]] == [old[0]]
    new = [AssetEventFactory().pk for _ in range(3)]

    # when: following the previous links from the second page
    pages = []
    link = second["previous"]
    while link is not None:
        page = api.get(f"{API}/asset-events", query(link)).json()
        pages.append([row["id"] for row in page["results"]])
        link = page["previous"]

    # then: page after page of newer events, each page newest first, up to the newest
    assert pages == [[old[2], old[1]], [new[1], new[0]], [new[2]]]


@pytest.mark.django_db
def test_string_keys_page_too(api):
    for dag_id in ("b.2", "a-1", "c", "a.1", "b_2"):
        DagFactory(dag_id=dag_id)

    assert walk(api, "/dags", page_size=2) == ["a-1", "a.1", "b.2", "b_2", "c"]


GOOD_TIME = "2026-01-01T00:00:00+00:00"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param("/asset-events", "zzz", id="not-base64-json"),
        pytest.param("/asset-events", cursor_of([GOOD_TIME, 1]), id="not-an-object"),
        pytest.param("/asset-events", cursor_of({"r": True}), id="no-key"),
        pytest.param("/asset-events", cursor_of({"k": [5]}), id="key-too-short"),
        pytest.param("/asset-events", cursor_of({"k": ["yesterday", 5]}), id="bad-datetime"),
        pytest.param(
            "/asset-events", cursor_of({"k": ["2026-01-01T00:00:00", 5]}), id="naive-datetime"
        ),
        pytest.param("/asset-events", cursor_of({"k": [GOOD_TIME, "x"]}), id="id-not-integer"),
        pytest.param("/asset-events", cursor_of({"k": [GOOD_TIME, 1.5]}), id="id-float"),
        pytest.param("/asset-events", cursor_of({"k": [GOOD_TIME, True]}), id="id-bool"),
        pytest.param("/asset-events", cursor_of({"k": [GOOD_TIME, 2**70]}), id="id-overflow"),
        pytest.param(
            "/asset-events", cursor_of({"k": [GOOD_TIME, 1], "r": 1}), id="reverse-not-bool"
        ),
        pytest.param("/asset-events", cursor_of({"k": [GOOD_TIME, 1], "o": 5}), id="unknown-field"),
        pytest.param("/assets", cursor_of({"k": [None]}), id="null-id"),
        pytest.param("/dags", cursor_of({"k": ["d" * 251]}), id="dag-id-too-long"),
    ],
)
def test_a_bad_cursor_is_400_naming_it(api, path, value):
    AssetEventFactory()

    response = api.get(f"{API}{path}", {"cursor": value})

    assert response.status_code == 400
    assert response.json() == {
        "cursor": ["Invalid cursor: use the 'next' or 'previous' link of a page as it is."]
    }


@pytest.mark.django_db
def test_a_well_formed_cursor_continues_after_its_key(api):
    # given: events in a known order; the cursor names the second one's key
    events = [AssetEventFactory() for _ in range(4)]
    second = events[-2]
    key = [second.timestamp.isoformat(), second.pk]

    # when
    response = api.get(f"{API}/asset-events", {"cursor": cursor_of({"k": key})})

    # then: the older ones, newest first
    assert [row["id"] for row in results_of(response)] == [events[1].pk, events[0].pk]


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["0", "-1", "abc", "1001", "2.5", ""])
def test_a_bad_page_size_is_400_naming_it(api, value):
    response = api.get(f"{API}/assets", {"page_size": value})

    assert response.status_code == 400
    assert response.json() == {"page_size": ["Must be an integer from 1 to 1000."]}


@pytest.mark.django_db
def test_page_size_defaults_and_maximum_come_from_settings(api, settings):
    settings.OPERATOR_API = {**settings.OPERATOR_API, "PAGE_SIZE": 2, "MAX_PAGE_SIZE": 3}
    for _ in range(4):
        AssetFactory()

    assert len(api.get(f"{API}/assets").json()["results"]) == 2
    assert len(api.get(f"{API}/assets", {"page_size": 3}).json()["results"]) == 3
    assert api.get(f"{API}/assets", {"page_size": 4}).json() == {
        "page_size": ["Must be an integer from 1 to 3."]
    }


# --- PostgreSQL: other connections inserting --------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_events_committed_by_another_connection_while_paging_neither_repeat_nor_hide_any():
    # given: 60 committed events, and a writer thread committing more while the client pages
    api = token_client(make_user("operator", *OPERATOR_PERMISSIONS))
    asset = AssetFactory()
    before = [AssetEventFactory(asset=asset).pk for _ in range(60)]
    stop, written = threading.Event(), []
    page_served = threading.Event()

    def writer() -> None:
        try:
            while not stop.is_set():
                page_served.wait(timeout=5)
                page_served.clear()
                written.append(AssetEventFactory(asset=asset).pk)
                written.append(AssetEventFactory(asset=asset).pk)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()

    def after_page(served: int) -> None:
        page_served.set()
        deadline = len(written) + 2
        while len(written) < deadline and thread.is_alive():  # let the writer commit two
            threading.Event().wait(0.01)

    # when
    try:
        seen = walk(api, "/asset-events", on_page=after_page, page_size=7)
    finally:
        stop.set()
        page_served.set()
        thread.join(timeout=30)

    # then: the writer committed events between the pages; none of them, and every earlier
    # event exactly once, was served
    assert len(written) >= 2 * (60 // 7)
    assert seen == sorted(before, reverse=True)
    assert min(written) > max(before)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("commit_after", "served_in_walk"),
    [
        pytest.param(3, True, id="commits-before-the-walk-reaches-its-position"),
        pytest.param(6, False, id="commits-after-the-walk-passed-its-position"),
    ],
)
def test_an_event_committed_late_by_an_open_transaction_is_served_at_most_once(
    commit_after, served_in_walk
):
    # given: another connection has inserted an event (its id taken) but not committed it;
    # newer events commit; the client pages (3 per page) and the late one commits mid-walk
    api = token_client(make_user("operator", *OPERATOR_PERMISSIONS))
    asset = AssetFactory()
    before = [AssetEventFactory(asset=asset).pk for _ in range(5)]
    inserted, commit = threading.Event(), threading.Event()
    late: list[int] = []

    def slow_producer() -> None:
        try:
            with transaction.atomic():
                late.append(AssetEventFactory(asset=asset).pk)
                inserted.set()
                commit.wait(timeout=30)
        finally:
            connection.close()

    thread = threading.Thread(target=slow_producer)
    thread.start()
    assert inserted.wait(timeout=30)
    after = [AssetEventFactory(asset=asset).pk for _ in range(5)]  # committed, higher ids

    def commit_late_event(served: int) -> None:
        if served == commit_after:
            commit.set()
            thread.join(timeout=30)

    # when
    seen = walk(api, "/asset-events", on_page=commit_late_event, page_size=3)

    # then: every event committed before the first page exactly once, newest first; the late
    # one is served by this walk only if it committed before the walk went past its id
    assert after[0] > late[0] > before[-1]
    expected = before + after + (late if served_in_walk else [])
    assert seen == sorted(expected, reverse=True)
    assert walk(api, "/asset-events", page_size=3) == sorted(before + after + late, reverse=True)
