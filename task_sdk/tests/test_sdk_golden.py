"""Golden tests: what our runner sends equals what the real Airflow task SDK 1.3.2 sends.

Each task below reproduces the task that produced a recorded wire sample. It runs in a real
child process under the real supervisor and HTTP client (over an in-memory transport), and the
``PATCH …/state`` body must equal the sample byte for byte once the end date is substituted.
"""

import json
import re

import pytest
from sdk_helpers import TI_ID, FakeExecutionAPI, make_client, sample, task_ref

from task_sdk.supervisor import Supervisor

END_DATE = re.compile(r'"end_date":"([^"]+)"')


def run_task(function: str, api: FakeExecutionAPI | None = None):
    api = api or FakeExecutionAPI()
    with make_client(api) as client:
        result = Supervisor(client, TI_ID, task_ref(function), heartbeat_interval=30).run()
    return result, api


def assert_same_body(sent: str, sample_name: str) -> None:
    expected = sample(sample_name)
    sent_date = END_DATE.search(sent).group(1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", sent_date)
    assert sent == END_DATE.sub(f'"end_date":"{sent_date}"', expected)
    assert list(json.loads(sent)) == list(json.loads(expected))  # key order too


@pytest.mark.parametrize(
    ("function", "sample_name"),
    [
        pytest.param("wire_asset", "success_asset.json", id="asset-extra"),
        pytest.param("wire_asset_plain", "success_asset_plain.json", id="asset-untouched"),
        pytest.param("wire_alias", "success_alias.json", id="alias"),
        pytest.param("wire_mixed", "success_mixed.json", id="mixed-asset-and-alias"),
        pytest.param("wire_name_ref", "success_name_ref.json", id="name-and-uri-refs"),
        pytest.param("wire_ref_plain", "success_ref_plain.json", id="refs-untouched"),
        pytest.param("wire_metadata", "success_metadata.json", id="yield-metadata"),
        pytest.param("wire_partitions", "success_partitions.json", id="partitions"),
        pytest.param("wire_no_outlets", "success_no_outlets.json", id="no-outlets"),
    ],
)
def test_success_body_matches_the_airflow_wire_sample(function, sample_name):
    result, api = run_task(function)
    assert result.succeeded, result
    [body] = api.bodies("PATCH /state")
    assert_same_body(body, sample_name)


def test_mixed_outlet_payload_key_for_key():
    result, api = run_task("wire_mixed")
    assert result.succeeded
    body = json.loads(api.bodies("PATCH /state")[0])
    assert body["state"] == "success"
    assert body["task_outlets"] == [
        {"name": "asset_two", "uri": "s3://bucket/two", "type": "Asset"},
        {"name": "my_alias", "uri": None, "type": "AssetAlias"},
    ]
    assert body["outlet_events"] == [
        {"dest_asset_key": {"name": "asset_two", "uri": "s3://bucket/two"}, "extra": {"k": "v2"}},
        {
            "source_alias_name": "my_alias",
            "dest_asset_key": {"name": "dyn_asset", "uri": "s3://bucket/dyn"},
            "dest_asset_extra": {"asset_level": "x"},
            "extra": {"from": "alias"},
        },
    ]
    assert body["rendered_map_index"] is None


def test_failed_body_matches_the_airflow_wire_sample():
    result, api = run_task("raises")
    assert result.state == "failed"
    [body] = api.bodies("PATCH /state")
    assert_same_body(body, "failed_state.json")


def test_run_and_heartbeat_bodies_have_the_airflow_keys():
    api = FakeExecutionAPI()
    with make_client(api) as client:
        Supervisor(client, TI_ID, task_ref("chatty"), heartbeat_interval=0.01).run()
    [run_body] = api.bodies("PATCH /run")
    run = json.loads(run_body)
    assert list(run) == list(json.loads(sample("run_start.json")))
    assert run["state"] == "running"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", run["start_date"])
    heartbeats = api.bodies("PUT /heartbeat")
    assert heartbeats  # the task process takes far longer than 0.01 s to start
    for body in heartbeats:
        assert list(json.loads(body)) == list(json.loads(sample("heartbeat.json")))


def test_request_headers_match_the_airflow_client():
    result, api = run_task("wire_asset")
    assert result.succeeded
    for request in api.requests:
        assert request.headers["authorization"] == "Bearer token-1"
        assert request.headers["airflow-api-version"] == "2026-06-30"
        assert request.headers["correlation-id"]
        if request.content:
            assert request.headers["content-type"] == "application/json"
    assert api.requests[0].url.path == f"/execution/task-instances/{TI_ID}/run"
