"""``/execution/task-instances/{id}/logs``: a try's worker appends its log chunk by chunk with
the try's own token; the server masks every secret it keeps, caps the log with a marker line,
acknowledges a chunk sent again without storing it twice, and refuses bad input with a 4xx
naming the field."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from django.db import connection

from assets_app.models import TaskInstanceHistory, TaskLog, TaskLogChunk
from assets_app.services.runs.logs import TRUNCATION_MARKER
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from tests.executionapi.conftest import client_for

pytestmark = pytest.mark.django_db


def logs_url(ti) -> str:
    return f"/execution/task-instances/{getattr(ti, 'pk', ti)}/logs"


def append(client, ti, offset: int, content: str, **extra):
    return client.post(logs_url(ti), {"offset": offset, "content": content, **extra}, format="json")


def stored(ti) -> str:
    chunks = TaskLogChunk.objects.filter(log__task_instance_id=ti.pk).order_by("seq")
    return "".join(chunks.values_list("content", flat=True))


def test_chunks_are_appended_in_order_and_the_position_says_where_the_next_starts(make_ti):
    # given a running task instance and its runner's token
    ti = make_ti()
    runner = client_for(ti)

    # when its worker asks where to start, then sends two chunks
    before = runner.get(logs_url(ti))
    first = append(runner, ti, 0, "hello\n")
    second = append(runner, ti, 6, "wörld\n")

    # then each answer says where the next chunk starts (UTF-8 bytes received)
    assert before.status_code == 200, before.content
    assert before.json() == {
        "next_offset": 0,
        "stored_bytes": 0,
        "truncated": False,
        "closed": False,
    }
    assert first.status_code == 200, first.content
    assert first.json()["next_offset"] == 6
    assert second.json() == {
        "next_offset": 13,
        "stored_bytes": 13,
        "truncated": False,
        "closed": False,
    }
    assert stored(ti) == "hello\nwörld\n"
    log = TaskLog.objects.get(task_instance_id=ti.pk)
    assert (log.dag_id, log.run_id, log.task_id, log.try_number) == (
        ti.dag_id,
        ti.run_id,
        ti.task_id,
        ti.try_number,
    )


def test_a_chunk_sent_again_is_acknowledged_and_not_stored_twice(make_ti):
    ti = make_ti()
    runner = client_for(ti)
    append(runner, ti, 0, "one\n")
    append(runner, ti, 4, "two\n")

    # when the worker sends the second chunk again (its answer was lost), then one that
    # overlaps what was received
    again = append(runner, ti, 4, "two\n")
    overlapping = append(runner, ti, 4, "two\nthree\n")

    assert again.status_code == 200
    assert again.json()["next_offset"] == 8
    assert overlapping.json()["next_offset"] == 14
    assert stored(ti) == "one\ntwo\nthree\n"
    assert TaskLogChunk.objects.filter(log__task_instance_id=ti.pk).count() == 3


def test_a_chunk_after_a_gap_is_409_with_the_offset_expected(make_ti):
    ti = make_ti()
    runner = client_for(ti)
    append(runner, ti, 0, "one\n")

    response = append(runner, ti, 10, "later\n")

    assert response.status_code == 409
    assert response.json() == {
        "detail": {
            "reason": "log_offset_gap",
            "message": "The chunk starts at byte 10 but 4 bytes of this try's log were "
            "received: a chunk before it is missing",
            "expected_offset": 4,
        }
    }
    assert stored(ti) == "one\n"


def test_final_closes_the_log_and_a_later_chunk_reopens_it(make_ti):
    ti = make_ti()
    runner = client_for(ti)

    closed = append(runner, ti, 0, "last line\n", final=True)
    retried = append(runner, ti, 0, "last line\n")
    reopened = append(runner, ti, 10, "a new attempt of the try\n")

    assert closed.json()["closed"] is True
    assert retried.json()["closed"] is True  # a retry of what was received changes nothing
    assert reopened.json()["closed"] is False


def test_secrets_the_server_keeps_are_masked_before_they_are_stored(make_ti):
    # given a connection with a password and a sensitive extra, and variables
    connection_create(
        conn_id="warehouse",
        values=ConnectionFields(
            conn_type="postgres",
            password="pg-pass-81Qz",
            extra=json.dumps({"api_key": "extra-key-7731", "region": "eu-west-1"}),
        ),
    )
    variable_set(key="service_token", value="var-token-5521")
    variable_set(key="settings", value=json.dumps({"password": "json-pass-3310", "rows": "30000"}))
    variable_set(key="greeting", value="hello world")  # not a secret
    variable_set(key="short_secret", value="abcd")  # too short to mask, as in Airflow
    ti = make_ti()

    # when a log chunk holds each of them
    content = (
        "conn pg-pass-81Qz key extra-key-7731 region eu-west-1\n"
        "token var-token-5521 json json-pass-3310 rows 30000\n"
        "greeting hello world; short abcd\n"
    )
    response = append(client_for(ti), ti, 0, content)

    # then what is stored holds none of the secrets; the answer counts the bytes received
    assert response.status_code == 200
    assert response.json()["next_offset"] == len(content.encode())
    assert stored(ti) == (
        "conn *** key *** region eu-west-1\n"
        "token *** json *** rows 30000\n"
        "greeting hello world; short abcd\n"
    )


def test_a_secret_set_after_the_first_chunk_is_masked_in_the_next(make_ti):
    ti = make_ti()
    runner = client_for(ti)
    append(runner, ti, 0, "nothing secret\n")

    variable_set(key="db_password", value="late-secret-9981")
    append(runner, ti, 15, "now late-secret-9981\n")

    assert stored(ti) == "nothing secret\nnow ***\n"


def test_the_log_is_capped_with_a_marker_line_and_later_chunks_are_counted_not_kept(
    make_ti, settings
):
    settings.TASK_LOG_MAX_BYTES = 1024
    ti = make_ti()
    runner = client_for(ti)
    line = "x" * 99 + "\n"  # 100 bytes

    # when the worker sends 15 lines, then 5 more
    first = append(runner, ti, 0, line * 15)
    later = append(runner, ti, 1500, line * 5)

    # then the first 10 lines are kept (1000 bytes, cut at a line end), then the marker
    marker = TRUNCATION_MARKER.format(limit=1024)
    assert "1024 bytes" in marker
    assert stored(ti) == line * 10 + marker
    assert first.json() == {
        "next_offset": 1500,
        "stored_bytes": 1000 + len(marker.encode()),
        "truncated": True,
        "closed": False,
    }
    assert later.status_code == 200
    assert later.json()["next_offset"] == 2000
    assert later.json()["truncated"] is True
    assert TaskLogChunk.objects.filter(log__task_instance_id=ti.pk).count() == 1


def test_a_line_longer_than_the_room_left_is_cut_between_characters_then_the_marker(
    make_ti, settings
):
    settings.TASK_LOG_MAX_BYTES = 1024
    ti = make_ti()

    append(client_for(ti), ti, 0, "é" * 600)  # 1200 bytes, no line end

    log = stored(ti)
    assert log == "é" * 512 + "\n" + TRUNCATION_MARKER.format(limit=1024)


def test_a_marker_after_a_chunk_that_ended_inside_a_line_starts_a_line(make_ti, settings):
    settings.TASK_LOG_MAX_BYTES = 1024
    ti = make_ti()
    runner = client_for(ti)
    append(runner, ti, 0, "y" * 1024)  # exactly the cap, no line end

    append(runner, ti, 1024, "more\n")

    assert stored(ti) == "y" * 1024 + "\n" + TRUNCATION_MARKER.format(limit=1024)


def test_an_earlier_try_takes_the_end_of_its_log(make_ti):
    # given a try that has become history (the task instance moved on to try 2)
    ti = make_ti(try_number=2)
    earlier = TaskInstanceHistory.objects.create(
        task_instance_id=uuid.uuid4(),
        dag_run=ti.dag_run,
        dag_id=ti.dag_id,
        run_id=ti.run_id,
        task_id=ti.task_id,
        try_number=1,
        state="failed",
    )

    response = append(
        client_for(str(earlier.task_instance_id)), earlier.task_instance_id, 0, "end\n"
    )

    assert response.status_code == 200, response.content
    log = TaskLog.objects.get(task_instance_id=earlier.task_instance_id)
    assert log.try_number == 1


def test_the_log_goes_with_its_run(make_ti):
    ti = make_ti()
    append(client_for(ti), ti, 0, "to be deleted\n")

    ti.dag_run.delete()

    assert not TaskLog.objects.exists()
    assert not TaskLogChunk.objects.exists()


@pytest.mark.parametrize(
    ("body", "loc", "kind"),
    [
        pytest.param({"content": "x"}, ["body", "offset"], "missing", id="no-offset"),
        pytest.param({"offset": 0}, ["body", "content"], "missing", id="no-content"),
        pytest.param(
            {"offset": -1, "content": "x"}, ["body", "offset"], "min_value", id="negative"
        ),
        pytest.param(
            {"offset": "0", "content": "x"}, ["body", "offset"], "int_type", id="text-offset"
        ),
        pytest.param({"offset": 0, "content": 5}, ["body", "content"], "string_type", id="number"),
        pytest.param({"offset": 0, "content": None}, ["body", "content"], "string_type", id="null"),
        pytest.param(
            {"offset": 0, "content": "a\x00b"},
            ["body", "content"],
            "null_characters_not_allowed",
            id="nul",
        ),
        pytest.param(
            {"offset": 0, "content": "x", "lines": 1},
            ["body", "lines"],
            "extra_forbidden",
            id="extra",
        ),
        pytest.param(
            {"offset": 2**63, "content": "x"}, ["body", "offset"], "max_value", id="beyond-bigint"
        ),
        pytest.param(
            {"offset": 0, "content": "", "final": 0}, ["body", "final"], "bool_type", id="final-0"
        ),
    ],
)
def test_bad_input_is_422_naming_the_field(make_ti, body, loc, kind):
    ti = make_ti()

    response = client_for(ti).post(logs_url(ti), body, format="json")

    assert response.status_code == 422, response.content
    errors = response.json()["detail"]
    assert [(e["loc"], e["type"]) for e in errors] == [(loc, kind)]
    assert not TaskLog.objects.exists()


def test_a_chunk_beyond_the_chunk_size_is_422_naming_content_and_its_size(make_ti, settings):
    settings.TASK_LOG_CHUNK_MAX_BYTES = 1024
    ti = make_ti()

    response = append(client_for(ti), ti, 0, "é" * 513)  # 1026 bytes

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "content"],
                "msg": "String should have at most 1024 bytes of UTF-8, got 1026",
                "type": "string_too_long",
            }
        ]
    }
    assert not TaskLog.objects.exists()


def test_a_body_that_is_not_json_is_422(make_ti):
    ti = make_ti()

    response = client_for(ti).post(logs_url(ti), b"hello", content_type="application/json")

    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "json_invalid"


def test_the_token_of_another_task_instance_is_403(make_ti):
    ti = make_ti()
    other = make_ti(dag_id="other", task_id="other")

    response = append(client_for(other), ti, 0, "not mine\n")
    position = client_for(other).get(logs_url(ti))

    assert response.status_code == 403
    assert response.json() == {
        "detail": {
            "reason": "access_denied",
            "message": "The token is not valid for this task instance",
        }
    }
    assert position.status_code == 403
    assert not TaskLog.objects.exists()


def test_no_token_is_401_and_an_unknown_try_is_404(make_ti):
    ti = make_ti()
    ghost = uuid.uuid4()

    anonymous = append(client_for(ti).__class__(), ti, 0, "x\n")
    unknown = append(client_for(str(ghost)), ghost, 0, "x\n")

    assert anonymous.status_code == 401
    assert unknown.status_code == 404
    assert unknown.json() == {
        "detail": {"reason": "not_found", "message": f"Task Instance not found: {ghost}"}
    }


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_of_one_try_are_each_applied_once(make_ti):
    # given a try and eight chunks, each sent twice at once (a retry racing the original)
    ti = make_ti()
    lines = [f"line {n}\n" for n in range(8)]
    offsets = [sum(len(line) for line in lines[:n]) for n in range(8)]
    barrier = threading.Barrier(2)
    failures: list[str] = []

    def send(n: int) -> None:
        try:
            barrier.wait(timeout=10)
            response = append(client_for(ti), ti, offsets[n], lines[n])
            if response.status_code != 200:
                failures.append(f"{n}: {response.status_code} {response.content!r}")
        finally:
            connection.close()

    # when each chunk goes out from two threads at once, chunk after chunk
    for n in range(8):
        threads = [threading.Thread(target=send, args=(n,)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    # then every chunk is stored exactly once, in order
    assert failures == []
    assert stored(ti) == "".join(lines)
    assert TaskLog.objects.get().chunk_count == 8
