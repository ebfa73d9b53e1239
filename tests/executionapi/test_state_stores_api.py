"""``/execution/store/ti/…`` and ``/execution/store/asset/…``: Airflow 3.3.2's task and asset
state store routes, their codes and error bodies; reads and writes scoped as docs/execution-
api.md says; bad input a 4xx naming the field, never a 5xx."""

from __future__ import annotations

import json
import uuid

import pytest
from rest_framework.test import APIClient

from assets_app.models import AssetStateStore, TaskStateStore
from tests.executionapi.conftest import client_for

pytestmark = pytest.mark.django_db

MANIFEST = """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
        outlets: [{asset: {name: orders/daily, uri: "s3://warehouse/orders/daily"}}]
"""
BY_NAME = "/execution/store/asset/by-name"
BY_URI = "/execution/store/asset/by-uri"


def ti_url(ti, key: str | None = None) -> str:
    base = f"/execution/store/ti/{getattr(ti, 'pk', ti)}"
    return base if key is None else f"{base}/{key}"


def methods_of(url: str) -> list[str]:
    """What a route answers: ``…/clear`` only ``DELETE``."""
    return ["delete"] if "/clear" in url else ["get", "put", "delete"]


def with_methods(params: list) -> list:
    """Each ``pytest.param(url, …)`` once per method its route answers (method first)."""
    return [
        pytest.param(method, *param.values, id=f"{method}-{param.id}")
        for param in params
        for method in methods_of(param.values[0])
    ]


def call(client, method: str, url: str):
    """``method`` on ``url``; a PUT with a valid body (a GET's data would replace the query)."""
    if method == "put":
        return client.put(url, {"value": 1}, format="json")
    return getattr(client, method)(url)


def not_found(message: str) -> dict:
    return {"detail": {"reason": "not_found", "message": message}}


# --- the task state store -----------------------------------------------------------------


def test_task_state_put_get_delete_clear(make_ti):
    # given a running task's client
    ti = make_ti()
    client = client_for(ti)

    # when it stores, reads, deletes and clears keys (one holding a slash, sent as %2F)
    put = client.put(ti_url(ti, "job%2Fid"), {"value": {"id": "j-1", "n": [1, 2]}}, format="json")
    put_expiring = client.put(
        ti_url(ti, "status"),
        {"value": "running", "expires_at": "2030-01-01T00:00:00+02:00"},
        format="json",
    )
    got = client.get(ti_url(ti, "job%2Fid"))
    got_unencoded = client.get(ti_url(ti, "job/id"))
    deleted = client.delete(ti_url(ti, "job%2Fid"))
    deleted_again = client.delete(ti_url(ti, "job%2Fid"))
    missing = client.get(ti_url(ti, "job%2Fid"))
    row = TaskStateStore.objects.get()
    cleared = client.delete(ti_url(ti))

    # then Airflow's codes and bodies
    assert (put.status_code, put.content) == (204, b"")
    assert put_expiring.status_code == 204
    assert (got.status_code, got.json()) == (200, {"value": {"id": "j-1", "n": [1, 2]}})
    assert got["Airflow-API-Version"] == "2026-06-30"
    assert got_unencoded.json() == got.json()
    assert (deleted.status_code, deleted_again.status_code) == (204, 204)
    assert (missing.status_code, missing.json()) == (
        404,
        not_found("Task state store key 'job/id' not found"),
    )
    assert (row.key, row.expires_at.isoformat()) == ("status", "2029-12-31T22:00:00+00:00")
    assert cleared.status_code == 204
    assert not TaskStateStore.objects.exists()


def test_a_token_reads_and_writes_only_its_own_task_store(make_ti):
    # given two running task instances, one with a stored key
    ti = make_ti()
    other = make_ti(dag_id="other")
    client_for(ti).put(ti_url(ti, "k"), {"value": 1}, format="json")
    forged = client_for(other)

    # when the other's token reads, writes, deletes and clears it
    answers = [
        forged.get(ti_url(ti, "k")),
        forged.put(ti_url(ti, "k"), {"value": 2}, format="json"),
        forged.delete(ti_url(ti, "k")),
        forged.delete(ti_url(ti)),
    ]

    # then Airflow's ti:self refusal each time, and nothing changed
    for answer in answers:
        assert answer.status_code == 403, answer.content
        assert answer.json() == {
            "detail": {
                "reason": "access_denied",
                "message": "The token is not valid for this task instance",
            }
        }
    assert TaskStateStore.objects.get().value == "1"


@pytest.mark.parametrize("state", ["success", "failed", "up_for_retry", "queued"])
def test_a_task_instance_that_is_not_running_reads_but_writes_nothing(make_ti, state):
    # given a key stored while it ran
    ti = make_ti()
    client = client_for(ti)
    client.put(ti_url(ti, "k"), {"value": 1}, format="json")
    ti.state = state
    ti.save()

    # when it reads and tries to write
    got = client.get(ti_url(ti, "k"))
    writes = [
        client.put(ti_url(ti, "k"), {"value": 2}, format="json"),
        client.delete(ti_url(ti, "k")),
        client.delete(ti_url(ti)),
    ]

    # then the read is answered, every write refused
    assert got.json() == {"value": 1}
    for answer in writes:
        assert answer.status_code == 403, answer.content
        assert answer.json()["detail"]["reason"] == "access_denied"
        assert "not running" in answer.json()["detail"]["message"]
    assert TaskStateStore.objects.get().value == "1"


def test_a_task_instance_that_is_gone_has_no_store():
    gone = uuid.uuid4()
    client = client_for(gone)

    got = client.get(ti_url(gone, "k"))
    put = client.put(ti_url(gone, "k"), {"value": 1}, format="json")

    assert (got.status_code, got.json()) == (404, not_found(f"Task instance {gone} not found"))
    assert put.status_code == 403
    assert not TaskStateStore.objects.exists()


def test_no_token_is_401_and_a_non_uuid_id_the_json_404(make_ti):
    ti = make_ti()

    assert APIClient().get(ti_url(ti, "k")).status_code == 401
    answer = client_for(ti).get("/execution/store/ti/not-a-uuid/k")
    assert answer.status_code == 404
    assert answer.json()["detail"]["reason"] == "not_found"


@pytest.mark.parametrize(
    ("body", "loc", "type_"),
    [
        pytest.param({}, ["body", "value"], "missing", id="no-value"),
        pytest.param({"value": None}, ["body", "value"], "value_error", id="null"),
        pytest.param({"value": 1, "other": 1}, ["body", "other"], "extra_forbidden", id="extra"),
        pytest.param(
            {"value": 1, "expires_at": "2030-01-01T00:00:00"},
            ["body", "expires_at"],
            "naive",
            id="naive-expiry",
        ),
        pytest.param(
            {"value": 1, "expires_at": "soon"},
            ["body", "expires_at"],
            "value_error",
            id="bad-expiry",
        ),
        pytest.param('{"value": NaN}', ["body", "value"], "finite_number", id="nan"),
        pytest.param(
            '{"value": {"a": [Infinity]}}', ["body", "value", "a", 0], "finite_number", id="inf"
        ),
        pytest.param(
            {"value": {"a": "x\x00"}},
            ["body", "value", "a"],
            "null_characters_not_allowed",
            id="nul",
        ),
        pytest.param('{"value": "\\ud800"}', ["body", "value"], "string_unicode", id="surrogate"),
        pytest.param("[1]", ["body"], "dict_type", id="not-object"),
        pytest.param("{not json", ["body"], "json_invalid", id="not-json"),
        pytest.param("", ["body"], "missing", id="no-body"),
    ],
)
def test_a_bad_task_state_body_is_422_naming_the_field(make_ti, body, loc, type_):
    ti = make_ti()
    data = body if isinstance(body, str) else json.dumps(body)

    answer = client_for(ti).put(ti_url(ti, "k"), data, content_type="application/json")

    assert answer.status_code == 422, answer.content
    assert (loc, type_) in [(e["loc"], e["type"]) for e in answer.json()["detail"]]
    assert not TaskStateStore.objects.exists()


@pytest.mark.parametrize("method", ["get", "put", "delete"])
@pytest.mark.parametrize(
    "key", [pytest.param("k%00", id="nul"), pytest.param("k" * 513, id="too-long")]
)
def test_a_key_that_cannot_be_stored_is_422_naming_it(make_ti, method, key):
    ti = make_ti()

    answer = call(client_for(ti), method, ti_url(ti, key))

    assert answer.status_code == 422, answer.content
    assert ["path", "key"] in [e["loc"] for e in answer.json()["detail"]]
    assert not TaskStateStore.objects.exists()


def test_a_key_of_512_characters_is_stored(make_ti):
    ti = make_ti()
    client = client_for(ti)

    assert client.put(ti_url(ti, "k" * 512), {"value": 1}, format="json").status_code == 204
    assert client.get(ti_url(ti, "k" * 512)).json() == {"value": 1}


def test_a_large_value_is_stored_whole(make_ti):
    # as in Airflow, no size limit below the request body's (max_value_storage_bytes is
    # the SDK's warning)
    ti = make_ti()
    client = client_for(ti)
    value = {"rows": ["x" * 1000] * 3000, "text": "é" * 100_000}

    assert client.put(ti_url(ti, "big"), {"value": value}, format="json").status_code == 204
    assert client.get(ti_url(ti, "big")).json() == {"value": value}


def test_a_body_that_is_not_json_or_too_large_is_a_4xx(make_ti, settings):
    ti = make_ti()
    client = client_for(ti)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    form = client.put(ti_url(ti, "k"), "value=1", content_type="text/plain")
    huge = client.put(ti_url(ti, "k"), {"value": "x" * 2000}, format="json")

    assert form.status_code == 415
    assert huge.status_code == 413
    assert huge.json()["detail"]["reason"] == "payload_too_large"
    assert not TaskStateStore.objects.exists()


# --- the asset state store ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "param", "ident"),
    [
        pytest.param(BY_NAME, "name", "orders/daily", id="by-name"),
        pytest.param(BY_URI, "uri", "s3://warehouse/orders/daily", id="by-uri"),
    ],
)
def test_asset_state_put_get_delete_clear(declare, make_ti, base, param, ident):
    # given a declared asset and a running task
    declare(MANIFEST)
    ti = make_ti(dag_id="producer", task_id="produce")
    client = client_for(ti)
    value_url = f"{base}/value"

    # when it stores, reads, deletes and clears keys of the asset
    put = client.put(
        value_url + f"?{param}={ident}&key=watermark", {"value": "2026-01-01"}, format="json"
    )
    client.put(value_url + f"?{param}={ident}&key=runs", {"value": 3}, format="json")
    got = client.get(value_url, {param: ident, "key": "watermark"})
    deleted = client.delete(value_url + f"?{param}={ident}&key=watermark")
    missing = client.get(value_url, {param: ident, "key": "watermark"})
    runs = client.get(value_url, {param: ident, "key": "runs"})
    cleared = client.delete(f"{base}/clear?{param}={ident}")

    # then Airflow's codes and bodies; the writer is recorded
    assert (put.status_code, put.content) == (204, b"")
    assert (got.status_code, got.json()) == (200, {"value": "2026-01-01"})
    assert deleted.status_code == 204
    assert (missing.status_code, missing.json()) == (
        404,
        not_found("Asset state store key 'watermark' not found"),
    )
    assert runs.json() == {"value": 3}
    assert cleared.status_code == 204
    assert not AssetStateStore.objects.exists()


def test_asset_state_records_its_writer(declare, make_ti):
    declare(MANIFEST)
    ti = make_ti(dag_id="producer", task_id="produce")

    client_for(ti).put(f"{BY_NAME}/value?name=orders/daily&key=k", {"value": 1}, format="json")

    row = AssetStateStore.objects.get()
    assert (row.last_updated_by_kind, row.last_updated_by_dag_id) == ("task", "producer")
    assert (row.last_updated_by_run_id, row.last_updated_by_task_id) == (ti.run_id, "produce")
    assert row.last_updated_by_map_index == -1


@pytest.mark.parametrize(
    ("method", "url", "message"),
    with_methods(
        [
            pytest.param(
                f"{BY_NAME}/value?name=nope&key=k", "Asset with name='nope' not found", id="name"
            ),
            pytest.param(
                f"{BY_URI}/value?uri=s3://nope&key=k",
                "Asset with uri='s3://nope' not found",
                id="uri",
            ),
            pytest.param(
                f"{BY_NAME}/clear?name=nope", "Asset with name='nope' not found", id="clear"
            ),
        ]
    ),
)
def test_an_unknown_asset_is_airflows_404(declare, make_ti, method, url, message):
    declare(MANIFEST)
    client = client_for(make_ti())

    answer = call(client, method, url)

    assert (answer.status_code, answer.json()) == (404, not_found(message))
    assert not AssetStateStore.objects.exists()


def test_any_token_reads_an_asset_store_and_only_a_running_one_writes(declare, make_ti):
    # given a stored key
    declare(MANIFEST)
    running = make_ti()
    client_for(running).put(f"{BY_NAME}/value?name=orders/daily&key=k", {"value": 1}, format="json")
    finished = client_for(make_ti(dag_id="done", state="success"))
    gone = client_for(uuid.uuid4())

    # when a finished task's token and a gone one's read and write it
    reads = [
        c.get(f"{BY_URI}/value?uri=s3://warehouse/orders/daily&key=k") for c in (finished, gone)
    ]
    writes = [
        client.put(f"{BY_NAME}/value?name=orders/daily&key=k", {"value": 2}, format="json")
        for client in (finished, gone)
    ] + [
        finished.delete(f"{BY_NAME}/value?name=orders/daily&key=k"),
        finished.delete(f"{BY_URI}/clear?uri=s3://warehouse/orders/daily"),
    ]

    # then both read, neither writes
    assert [r.json() for r in reads] == [{"value": 1}, {"value": 1}]
    for answer in writes:
        assert answer.status_code == 403, answer.content
        assert answer.json()["detail"]["reason"] == "access_denied"
    assert AssetStateStore.objects.get().value == "1"


@pytest.mark.parametrize(
    ("method", "url", "loc", "type_"),
    with_methods(
        [
            pytest.param(f"{BY_NAME}/value?key=k", ["query", "name"], "missing", id="no-name"),
            pytest.param(
                f"{BY_NAME}/value?name=orders/daily", ["query", "key"], "missing", id="no-key"
            ),
            pytest.param(
                f"{BY_NAME}/value?name=orders/daily&key=",
                ["query", "key"],
                "string_too_short",
                id="empty-key",
            ),
            pytest.param(
                f"{BY_NAME}/value?name=a%00&key=k",
                ["query", "name"],
                "null_characters_not_allowed",
                id="nul-name",
            ),
            pytest.param(
                f"{BY_URI}/value?uri=s3://warehouse/orders/daily&key=k%00",
                ["query", "key"],
                "null_characters_not_allowed",
                id="nul-key",
            ),
            pytest.param(
                f"{BY_URI}/value?uri=s3://warehouse/orders/daily&key={'k' * 513}",
                ["query", "key"],
                "string_too_long",
                id="long-key",
            ),
            pytest.param(f"{BY_URI}/clear", ["query", "uri"], "missing", id="clear-no-uri"),
        ]
    ),
)
def test_bad_asset_state_parameters_are_422_naming_them(declare, make_ti, method, url, loc, type_):
    declare(MANIFEST)
    client = client_for(make_ti())

    answer = call(client, method, url)

    assert answer.status_code == 422, answer.content
    assert (loc, type_) in [(e["loc"], e["type"]) for e in answer.json()["detail"]]
    assert not AssetStateStore.objects.exists()


@pytest.mark.parametrize(
    ("body", "loc", "type_"),
    [
        pytest.param({}, ["body", "value"], "missing", id="no-value"),
        pytest.param({"value": None}, ["body", "value"], "value_error", id="null"),
        pytest.param(
            {"value": 1, "expires_at": None}, ["body", "expires_at"], "extra_forbidden", id="extra"
        ),
    ],
)
def test_a_bad_asset_state_body_is_422_naming_the_field(declare, make_ti, body, loc, type_):
    declare(MANIFEST)

    answer = client_for(make_ti()).put(
        f"{BY_NAME}/value?name=orders/daily&key=k", body, format="json"
    )

    assert answer.status_code == 422, answer.content
    assert (loc, type_) in [(e["loc"], e["type"]) for e in answer.json()["detail"]]
    assert not AssetStateStore.objects.exists()
