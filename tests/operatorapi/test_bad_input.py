"""No input is a 5xx: times at the ends of the datetime range and NUL characters, in every
kind of parameter (query, cursor, path id, credentials), are refused with the 400 naming the
parameter (or the 404 of an id, the 401 of a credential), and nothing stored changes.

These ran into ``OverflowError`` (SQLite, converting to UTC) and ``psycopg.DataError``
(PostgreSQL, a NUL in a text) before; run them on both databases.
"""

from __future__ import annotations

import json
from base64 import urlsafe_b64encode
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from assets_app.models import Dag
from tests.factories import AssetEventFactory, DagFactory
from tests.operatorapi.conftest import OPERATOR_PERMISSIONS, make_user, token_client

API = "/api/v1"
INVALID_CURSOR = {
    "cursor": ["Invalid cursor: use the 'next' or 'previous' link of a page as it is."]
}
NUL_MESSAGE = ["Must not contain NUL characters (\\u0000)."]

pytestmark = pytest.mark.django_db


def cursor_of(body: object) -> str:
    return urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")


def out_of_range(value: str) -> list[str]:
    return [f"Out of range: the time must fall within years 1 to 9999 in UTC (got {value!r})."]


@pytest.fixture
def api():
    return token_client(make_user("operator", *OPERATOR_PERMISSIONS))


@pytest.fixture
def dag() -> Dag:
    """A DAG whose id a NUL-holding id resembles, to show it is left alone."""
    return DagFactory(dag_id="nfdag", is_paused=False)


# --- datetimes ---------------------------------------------------------------------------------

LATEST_LOCAL = "9999-12-31T23:59:59-05:00"  # 10000-01-01T04:59:59 in UTC
EARLIEST_LOCAL = "0001-01-01T00:00:00+05:00"  # year 0 in UTC


@pytest.mark.parametrize("parameter", ["after", "before"])
@pytest.mark.parametrize(
    "value", [LATEST_LOCAL, EARLIEST_LOCAL, "9999-12-31T23:59:59.999999-00:01"]
)
def test_a_time_outside_years_1_to_9999_in_utc_is_400_naming_the_parameter(api, parameter, value):
    AssetEventFactory()

    response = api.get(f"{API}/asset-events", {parameter: value})

    assert response.status_code == 400, response.content
    assert response.json() == {parameter: out_of_range(value)}


@pytest.mark.parametrize(
    ("parameter", "value", "matches"),
    [
        pytest.param("after", "0001-01-01T00:00:00-05:00", True, id="after-earliest"),
        pytest.param("after", "0001-01-01T00:00:00+00:00", True, id="after-year-1-utc"),
        pytest.param("before", "9999-12-31T23:59:59.999999+00:00", True, id="before-latest"),
        pytest.param("before", "9999-12-31T23:59:59+05:00", True, id="before-latest-local"),
        pytest.param("after", "9999-12-31T23:59:59+00:00", False, id="after-latest"),
        pytest.param("before", "0001-01-01T05:00:00+00:00", False, id="before-earliest"),
    ],
)
def test_the_ends_of_the_range_are_valid_bounds(api, parameter, value, matches):
    event = AssetEventFactory(timestamp=datetime(2026, 1, 1, tzinfo=UTC))

    response = api.get(f"{API}/asset-events", {parameter: value})

    assert response.status_code == 200, response.content
    assert [row["id"] for row in response.json()["results"]] == ([event.pk] if matches else [])


@pytest.mark.parametrize("parameter", ["after", "before"])
@pytest.mark.parametrize("offset", ["+20:00", "-23:59"])
def test_an_offset_beyond_what_postgresql_stores_is_the_same_time_in_utc(api, parameter, offset):
    """Python reads offsets up to ±23:59; PostgreSQL refuses those beyond ±15:59: the bound
    is used in UTC, never a 500."""
    event = AssetEventFactory(timestamp=datetime(2026, 1, 1, tzinfo=UTC))
    bound = datetime(2026, 1, 1, tzinfo=UTC) + (
        timedelta(minutes=-1) if parameter == "after" else timedelta(minutes=1)
    )
    value = bound.astimezone(datetime.fromisoformat(f"2026-01-01T00:00:00{offset}").tzinfo)

    response = api.get(f"{API}/asset-events", {parameter: value.isoformat()})

    assert response.status_code == 200, response.content
    assert [row["id"] for row in response.json()["results"]] == [event.pk]


@pytest.mark.parametrize("parameter", ["after", "before"])
@pytest.mark.parametrize(
    "value", ["yesterday", "2026-02-30T00:00:00Z", "2026-01-01T00:00:00+25:00"]
)
def test_a_malformed_time_is_400_naming_the_parameter(api, parameter, value):
    response = api.get(f"{API}/asset-events", {parameter: value})

    assert response.status_code == 400, response.content
    assert response.json() == {parameter: ["Enter a valid date/time."]}


@pytest.mark.parametrize("when", [LATEST_LOCAL, EARLIEST_LOCAL])
def test_a_cursor_holding_a_time_outside_the_range_is_400_naming_the_cursor(api, when):
    AssetEventFactory()

    response = api.get(f"{API}/asset-events", {"cursor": cursor_of({"k": [when, 1]})})

    assert response.status_code == 400, response.content
    assert response.json() == INVALID_CURSOR


def test_a_cursor_at_the_end_of_the_range_is_a_page(api):
    event = AssetEventFactory()

    response = api.get(
        f"{API}/asset-events", {"cursor": cursor_of({"k": ["9999-12-31T23:59:59+00:00", 1]})}
    )

    assert response.status_code == 200, response.content
    assert [row["id"] for row in response.json()["results"]] == [event.pk]


# --- NUL characters ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/dags", "is_paused"),
        ("/dag-runs", "dag_id"),
        ("/dag-runs", "run_id"),
        ("/dag-runs", "state"),
        ("/assets", "name"),
        ("/assets", "uri"),
        ("/asset-aliases", "group"),
        ("/asset-events", "alias"),
        ("/asset-events", "source_dag_id"),
        ("/asset-events", "after"),
        ("/asset-events", "asset_id"),
        ("/queue", "dag_id"),
        ("/assets", "page_size"),
        ("/assets", "cursor"),
    ],
)
def test_a_nul_in_a_query_parameter_is_400_naming_it(api, dag, path, parameter):
    response = api.get(f"{API}{path}", {parameter: "a\x00b"})

    assert response.status_code == 400, response.content
    assert response.json() == {parameter: NUL_MESSAGE}


def test_a_nul_in_a_query_parameter_name_is_400_naming_it(api):
    response = api.get(f"{API}/assets?na%00me=x")

    assert response.status_code == 400, response.content
    assert response.json() == {"na\x00me": NUL_MESSAGE}


def test_a_nul_in_a_query_parameter_of_a_single_object_is_400(api, dag):
    response = api.get(f"{API}/dags/nfdag?x=%00")

    assert response.status_code == 400, response.content
    assert response.json() == {"x": NUL_MESSAGE}


@pytest.mark.parametrize("key", [["x\x00"], ["\x00"]], ids=["trailing", "alone"])
def test_a_cursor_holding_a_nul_is_400_naming_the_cursor(api, dag, key):
    response = api.get(f"{API}/dags", {"cursor": cursor_of({"k": key})})

    assert response.status_code == 400, response.content
    assert response.json() == INVALID_CURSOR


@pytest.mark.parametrize("dag_id", ["%00", "nf%00dag", "nfdag%00"])
def test_a_nul_in_a_dag_id_is_404(api, dag, dag_id):
    response = api.get(f"{API}/dags/{dag_id}")

    assert response.status_code == 404, response.content
    assert response.json() == {"detail": "Not found.", "code": "not_found"}


@pytest.mark.parametrize("dag_id", ["%00", "nf%00dag"])
def test_patching_a_dag_id_holding_a_nul_is_404_and_pauses_nothing(api, dag, dag_id):
    response = api.patch(f"{API}/dags/{dag_id}", {"is_paused": True}, format="json")

    assert response.status_code == 404, response.content
    assert response.json() == {"detail": "Not found.", "code": "not_found"}
    assert Dag.objects.get(dag_id="nfdag").is_paused is False


@pytest.mark.parametrize("path", ["/dag-runs/%00", "/assets/1%00", "/dag-runs/1%00/clear"])
def test_a_nul_in_a_numeric_id_is_404(api, path):
    response = api.get(f"{API}{path}")

    assert response.status_code == 404, response.content


def test_without_credentials_a_nul_is_still_401(dag):
    response = Client().get(f"{API}/dags/%00")

    assert response.status_code == 401, response.content


# --- credentials holding NUL -------------------------------------------------------------------


def test_a_token_holding_a_nul_is_401():
    response = Client(HTTP_AUTHORIZATION="Token abc\x00def").get(f"{API}/dags")

    assert response.status_code == 401, response.content
    assert response.json() == {"detail": "Invalid token.", "code": "authentication_failed"}


def test_a_session_cookie_holding_a_nul_is_no_session():
    # a quoted cookie value's octal escape is decoded: "\000" is U+0000
    response = Client(HTTP_COOKIE='sessionid="abcdefghij\\000k"').get(f"{API}/dags")

    assert response.status_code == 401, response.content
    assert response.json()["code"] == "not_authenticated"


def test_a_valid_session_still_opens_the_api():
    user = make_user("viewer", *OPERATOR_PERMISSIONS)
    client = Client()
    client.force_login(user)

    assert client.get(f"{API}/dags").status_code == 200
