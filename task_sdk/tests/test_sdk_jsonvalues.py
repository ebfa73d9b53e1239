"""Values the server cannot store as JSON are refused before any request is sent.

NaN, ±Infinity, lone surrogates, U+0000, non-string keys, values that are not JSON and nesting
deeper than MAX_JSON_DEPTH: the task fails at once (``failed``, or ``up_for_retry`` while tries
remain) with a message naming the event and the key, and no success or XCom request is made.
"""

import json
import math
from collections import OrderedDict
from datetime import UTC, datetime

import httpx
import pytest
from sdk_helpers import TI_ID, FakeExecutionAPI, make_client, task_ref

from task_sdk import MAX_JSON_DEPTH, Asset, AssetAlias, Metadata
from task_sdk.client import Client
from task_sdk.jsonvalues import check_json_value, dumps, json_problem
from task_sdk.outlets import OutletEventAccessors, serialize_outlet_events
from task_sdk.supervisor import Supervisor

ONE = "outlet_events[Asset(name='asset_one', uri='s3://bucket/one')]"
ALIAS_ADD = (
    "outlet_events[AssetAlias(name='my_alias')].add(Asset(name='dyn_asset', uri='s3://bucket/dyn'))"
)


def nested_lists(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def nested_dicts(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


# -- the check itself ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param({"r": float("nan")}, "x['r']: NaN is not valid JSON", id="nan"),
        pytest.param({"r": math.inf}, "x['r']: Infinity is not valid JSON", id="inf"),
        pytest.param({"r": -math.inf}, "x['r']: -Infinity is not valid JSON", id="-inf"),
        pytest.param(
            {"a": [0, {"b": (1, float("nan"))}]},
            "x['a'][1]['b'][1]: NaN is not valid JSON",
            id="nested-in-lists-dicts-tuples",
        ),
        pytest.param(
            {"r": "ok \ud800"},
            "x['r']: contains the lone surrogate U+D800, which is not valid Unicode",
            id="lone-surrogate",
        ),
        pytest.param(
            {"r": "\udfff"},
            "x['r']: contains the lone surrogate U+DFFF, which is not valid Unicode",
            id="low-surrogate",
        ),
        pytest.param(
            {"r": "a\x00b"},
            "x['r']: contains U+0000 (NUL), which PostgreSQL cannot store",
            id="nul",
        ),
        pytest.param(
            {"k\x00": 1},
            "x['k\\x00']: the key contains U+0000 (NUL), which PostgreSQL cannot store",
            id="nul-in-key",
        ),
        pytest.param(
            {"\ud83d": 1},
            "x['\\ud83d']: the key contains the lone surrogate U+D83D, which is not valid Unicode",
            id="surrogate-in-key",
        ),
        pytest.param(
            {"a": {1: "x"}},
            "x['a']: object key 1 is int, not str (JSON object keys are strings)",
            id="int-key",
        ),
        pytest.param(
            {"a": {None: "x"}},
            "x['a']: object key None is NoneType, not str (JSON object keys are strings)",
            id="none-key",
        ),
        pytest.param(
            {"a": {(1, 2): "x"}},
            "x['a']: object key (1, 2) is tuple, not str (JSON object keys are strings)",
            id="tuple-key",
        ),
        pytest.param(
            {"s": {1, 2}},
            "x['s']: set is not a JSON value (use dict, list, str, int, float, bool or None)",
            id="set",
        ),
        pytest.param(
            {"b": b"bytes"},
            "x['b']: bytes is not a JSON value (use dict, list, str, int, float, bool or None)",
            id="bytes",
        ),
    ],
)
def test_unstorable_values_are_named_by_path(value, message):
    with pytest.raises(ValueError) as raised:  # noqa: PT011 - the whole message is asserted below
        check_json_value(value, where="x")
    assert str(raised.value) == message


def test_the_first_problem_in_document_order_is_reported():
    value = {"a": 1, "b": [float("nan"), "\x00"], "c": math.inf}
    assert json_problem(value).path == ("b", 0)


def test_storable_values_pass():
    value = {
        "s": "text ü 😀",
        "i": 10**30,
        "f": 1.5,
        "neg": -0.0,
        "b": True,
        "n": None,
        "l": [1, "2", [3.0]],
        "t": (1, 2),
        "o": OrderedDict(a=1),
    }
    assert json_problem(value) is None
    check_json_value(value, where="x")


@pytest.mark.parametrize("build", [nested_lists, nested_dicts])
def test_nesting_is_allowed_to_the_limit_and_refused_beyond(build):
    assert MAX_JSON_DEPTH == 64
    assert json_problem(build(64)) is None
    assert json_problem({"leaf": build(63)}) is None  # the outer object is level 1
    problem = json_problem({"deep": build(64)})
    assert problem is not None
    assert problem.message == "nested deeper than 64 levels"
    assert problem.path[0] == "deep"
    assert len(problem.path) == 64  # the key of the 65th level's container, and 63 below it
    # scalars do not count as a level: 64 containers holding a number are fine
    assert json_problem(build(64) if build is nested_lists else {"k": nested_dicts(63)}) is None


def test_a_long_path_is_shortened_in_the_message():
    with pytest.raises(ValueError) as raised:  # noqa: PT011 - the whole message is asserted below
        check_json_value({"deep": nested_lists(64)}, where="x")
    assert str(raised.value) == "x['deep'][0][0][0][…][0]: nested deeper than 64 levels"


def test_a_self_containing_list_terminates():
    loop: list = []
    loop.append(loop)
    assert json_problem(loop).message == "nested deeper than 64 levels"


def test_an_integer_too_long_to_write_is_refused():
    problem = json_problem({"big": 10**5000})
    assert problem is not None
    assert problem.path == ("big",)
    assert "cannot be written as JSON" in problem.message


def test_dumps_never_writes_nan():
    assert dumps({"a": [1, 2.5, None]}) == '{"a":[1,2.5,null]}'
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        dumps({"a": float("nan")})


# -- definitions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(
            lambda: Asset("a\x00b"),
            "Asset name contains U+0000 (NUL), which PostgreSQL cannot store",
            id="asset-name-nul",
        ),
        pytest.param(
            lambda: Asset("ok", group="g\ud800"),
            "Asset group contains the lone surrogate U+D800, which is not valid Unicode",
            id="asset-group-surrogate",
        ),
        pytest.param(
            lambda: AssetAlias("al\x00"),
            "AssetAlias name contains U+0000 (NUL), which PostgreSQL cannot store",
            id="alias-name-nul",
        ),
        pytest.param(
            lambda: Asset.ref(name="\ud800"),
            "AssetNameRef name contains the lone surrogate U+D800, which is not valid Unicode",
            id="ref-name-surrogate",
        ),
        pytest.param(
            lambda: Asset("x", extra={"r": [float("nan")]}),
            "Asset(name='x', uri='x').extra['r'][0]: NaN is not valid JSON",
            id="asset-extra-nan",
        ),
    ],
)
def test_definitions_refuse_unstorable_text_and_extra(build, message):
    with pytest.raises(ValueError) as raised:  # noqa: PT011 - the whole message is asserted below
        build()
    assert str(raised.value) == message


def test_partition_keys_refuse_unstorable_text():
    events = OutletEventAccessors()
    with pytest.raises(ValueError, match="contains U\\+0000"):
        events[Asset("a")].add_partitions("2025\x00")
    assert events[Asset("a")].partition_keys == {}


# -- serializing outlet events (in the task process) -----------------------------------------


def test_asset_extra_message_names_the_event_and_key():
    events = OutletEventAccessors()
    events[Asset("x")].extra["r"] = float("nan")
    with pytest.raises(ValueError) as raised:  # noqa: PT011 - the whole message is asserted below
        serialize_outlet_events(events)
    assert (
        str(raised.value)
        == "outlet_events[Asset(name='x', uri='x')].extra['r']: NaN is not valid JSON"
    )


def test_alias_event_extras_are_checked():
    events = OutletEventAccessors()
    target = Asset("t", "s3://b/t", extra={"ok": 1})
    events[AssetAlias("al")].add(target, extra={"r": [math.inf]})
    with pytest.raises(ValueError) as raised:  # noqa: PT011 - the whole message is asserted below
        serialize_outlet_events(events)
    assert str(raised.value) == (
        "outlet_events[AssetAlias(name='al')].add(Asset(name='t', uri='s3://b/t')).extra['r'][0]: "
        "Infinity is not valid JSON"
    )
    # the target asset's extra may be changed after the Asset was made: checked too
    events = OutletEventAccessors()
    events[AssetAlias("al")].add(target)
    events[AssetAlias("al")].asset_alias_events[0].dest_asset_extra["bad"] = "\ud800"
    with pytest.raises(ValueError, match=r"\.dest_asset_extra\['bad'\]: contains the lone"):
        serialize_outlet_events(events)


def test_yielded_metadata_is_checked_as_the_event_it_becomes():
    events = OutletEventAccessors()
    events.record_metadata(Metadata(Asset("x"), {"r": -math.inf}, alias=AssetAlias("al")))
    with pytest.raises(ValueError) as raised:  # noqa: PT011 - the whole message is asserted below
        serialize_outlet_events(events)
    assert str(raised.value) == (
        "outlet_events[Asset(name='x', uri='x')].extra['r']: -Infinity is not valid JSON"
    )


def test_an_extra_replaced_by_a_non_dict_is_refused():
    events = OutletEventAccessors()
    events[Asset("x")].extra = ["not", "a", "dict"]
    with pytest.raises(ValueError, match=r"\.extra must be a dict, not list"):
        serialize_outlet_events(events)


# -- the whole path: no request is sent ------------------------------------------------------


def supervise(case, monkeypatch, api=None):
    monkeypatch.setenv("SDK_TEST_CASE", case)
    api = api or FakeExecutionAPI()
    with make_client(api) as client:
        result = Supervisor(
            client, TI_ID, task_ref("writes_unstorable_json"), heartbeat_interval=30
        ).run()
    return result, api


def routes(api):
    return [f"{r.method} {r.url.path.rsplit('/', 1)[-1]}" for r in api.requests]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        pytest.param("nan", f"{ONE}.extra['r']: NaN is not valid JSON", id="nan"),
        pytest.param(
            "infinity-nested", f"{ONE}.extra['r'][1]['x']: Infinity is not valid JSON", id="inf"
        ),
        pytest.param(
            "alias-minus-infinity",
            f"{ALIAS_ADD}.extra['r']: -Infinity is not valid JSON",
            id="alias-event",
        ),
        pytest.param(
            "metadata", f"{ONE}.extra['r']['deep'][0]: NaN is not valid JSON", id="metadata"
        ),
        pytest.param(
            "surrogate",
            f"{ONE}.extra['r']: contains the lone surrogate U+D800, which is not valid Unicode",
            id="surrogate",
        ),
        pytest.param(
            "nul",
            f"{ONE}.extra['r']: contains U+0000 (NUL), which PostgreSQL cannot store",
            id="nul",
        ),
        pytest.param(
            "int-key",
            f"{ONE}.extra: object key 1 is int, not str (JSON object keys are strings)",
            id="int-key",
        ),
        pytest.param(
            "too-deep", f"{ONE}.extra['r'][0][0][0][…][0]: nested deeper than 64 levels", id="deep"
        ),
        pytest.param("return-nan", "return value['ratio']: NaN is not valid JSON", id="xcom"),
    ],
)
def test_task_fails_at_once_and_sends_nothing_it_cannot_store(case, message, monkeypatch):
    result, api = supervise(case, monkeypatch)

    assert result.state == "failed"
    assert result.reason == f"task failed: ValueError: {message}"
    # /run, then the failure: no success call, no XCom, no retries
    assert routes(api) == ["PATCH run", "PATCH state"]
    [body] = api.bodies("PATCH /state")
    assert json.loads(body)["state"] == "failed"


def test_with_tries_left_the_task_is_up_for_retry(monkeypatch):
    api = FakeExecutionAPI()
    api.run_context["should_retry"] = True
    result, _ = supervise("nan", monkeypatch, api)
    assert result.state == "up_for_retry"
    assert routes(api) == ["PATCH run", "PATCH state"]
    assert json.loads(api.bodies("PATCH /state")[0])["state"] == "up_for_retry"


# -- the HTTP client never writes NaN --------------------------------------------------------


def test_client_refuses_to_send_nan_or_infinity():
    api = FakeExecutionAPI()
    events = [{"dest_asset_key": {"name": "x", "uri": "x"}, "extra": {"r": float("nan")}}]
    with make_client(api) as client:
        with pytest.raises(ValueError, match=r"PATCH /task-instances/.*/state: the request body"):
            client.succeed(TI_ID, datetime.now(tz=UTC), [], events)
        with pytest.raises(ValueError, match="not valid JSON"):
            client.xcom_set("d", "r", "t", "return_value", [math.inf])
    assert api.requests == []


def test_refused_success_is_reported_as_a_failure():
    """A success the server refuses with a 4xx (e.g. an extra over its size limit) cannot be
    recorded by sending it again: the task instance is reported failed, not left running."""
    api = FakeExecutionAPI(faults={"PATCH /state": [422]})
    with make_client(api) as client:
        result = Supervisor(client, TI_ID, task_ref("wire_asset"), heartbeat_interval=30).run()
    states = [json.loads(body)["state"] for body in api.bodies("PATCH /state")]
    assert states == ["success", "failed"]
    assert result.state == "failed"
    assert result.reason.startswith("task failed: the server refused the task's success: PATCH")
    assert "422: fault: injected" in result.reason


def test_success_answered_409_is_not_turned_into_a_failure():
    # 409: the server no longer wants this task instance's state (e.g. it was reaped)
    api = FakeExecutionAPI(faults={"PATCH /state": [409, 409]})
    with make_client(api) as client:
        result = Supervisor(client, TI_ID, task_ref("wire_asset"), heartbeat_interval=30).run()
    states = [json.loads(body)["state"] for body in api.bodies("PATCH /state")]
    assert states == ["success", "success"]  # sent once more after the task exited, as before
    assert result.state is None
    assert "could not report" in result.reason


def test_response_that_is_not_a_json_object_is_an_http_error():
    def handler(request):
        return httpx.Response(200, text="<html>proxy</html>")

    client = Client("http://x", "t", transport=httpx.MockTransport(handler))
    with client, pytest.raises(httpx.DecodingError, match="expected a JSON object"):
        client.start(TI_ID, pid=1)
