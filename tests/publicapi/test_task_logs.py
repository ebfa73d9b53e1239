"""``GET /api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/logs/{try_number}``:
a try's log in Airflow 3.3's shapes (JSON with ``content`` and ``continuation_token``, NDJSON,
plain text), followed with the token while the try runs; bad input answered as Airflow does."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from assets_app.models import TaskInstanceHistory
from assets_app.services.runs.logs import task_log_append
from publicapi.auth import user_token_issue
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory
from tests.publicapi.conftest import Api

pytestmark = pytest.mark.django_db

HEADER = [
    {"event": "::group::Log message source details"},
    {"event": "asset registry database (task_log), shipped by the worker on worker-7"},
    {"event": "::endgroup::"},
]
AIRFLOW_LINE = {
    "timestamp": "2026-01-01T10:00:00.123456Z",
    "level": "info",
    "event": "Task started",
    "logger": "airflow.task",
}


@pytest.fixture
def ti():
    run = DagRunFactory(dag=DagFactory(dag_id="etl"), run_id="manual__1")
    return TaskInstanceFactory(
        dag_run=run, task_id="load", state="running", hostname="worker-7", try_number=1
    )


def url(ti, try_number=1, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"dags/{ti.dag_id}/dagRuns/{ti.run_id}/taskInstances/{ti.task_id}/logs/{try_number}" + (
        f"?{query}" if query else ""
    )


def ship(ti, text: str, *, final: bool = False, try_id=None) -> None:
    """Append ``text`` to the try's log as its worker would."""
    from assets_app.models import TaskLog

    ti_id = try_id or ti.pk
    log = TaskLog.objects.filter(task_instance_id=ti_id).first()
    offset = log.received_bytes if log else 0
    task_log_append(task_instance_id=ti_id, offset=offset, content=text, final=final)


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def get(api: Api, path: str, accept: str | None = None):
    headers = dict(api.headers)
    if accept is not None:
        headers["HTTP_ACCEPT"] = accept
    return api.client.get(f"/api/v2/{path}", **headers)


def test_a_running_try_answers_its_lines_and_a_token_that_returns_only_what_came_since(
    admin_api, ti
):
    # given a running try that printed a plain line and one of Airflow's JSON lines
    ship(ti, "hello from the task\n" + json.dumps(AIRFLOW_LINE) + "\n")

    # when an operator reads it, the task prints more, and they read on with the token
    first = get(admin_api, url(ti))
    ship(ti, "second part\n")
    first_json = json.loads(body(first))
    second = get(admin_api, url(ti, token=first_json["continuation_token"]))

    # then the first read has Airflow's source group, each line a StructuredLogMessage
    assert first.status_code == 200
    assert first["Content-Type"] == "application/json"
    assert first_json["content"] == [*HEADER, {"event": "hello from the task"}, AIRFLOW_LINE]
    assert isinstance(first_json["continuation_token"], str)
    # and the next only what came since, without the group
    second_json = json.loads(body(second))
    assert second_json["content"] == [{"event": "second part"}]
    assert isinstance(second_json["continuation_token"], str)


def test_a_finished_try_whose_log_is_closed_has_no_token(admin_api, ti):
    ship(ti, "done\n", final=True)
    ti.state = "success"
    ti.end_date = timezone.now()
    ti.save()

    response = json.loads(body(get(admin_api, url(ti))))

    assert response == {"content": [*HEADER, {"event": "done"}], "continuation_token": None}


def test_a_finished_try_whose_worker_never_closed_the_log_ends_after_the_flush_timeout(
    admin_api, ti, settings
):
    settings.TASK_LOG_FLUSH_TIMEOUT = 30
    settings.TASK_LOG_SHIP_INTERVAL = 1
    ship(ti, "cut short\n")
    ti.state = "failed"
    ti.end_date = timezone.now()
    ti.save()

    soon = json.loads(body(get(admin_api, url(ti))))
    ti.end_date = timezone.now() - timedelta(minutes=5)
    ti.save()
    from assets_app.models import TaskLog

    TaskLog.objects.update(updated_at=timezone.now() - timedelta(minutes=5))
    later = json.loads(body(get(admin_api, url(ti))))

    assert soon["continuation_token"] is not None  # its worker may still send the end
    assert later["continuation_token"] is None


def test_an_earlier_try_is_read_from_the_history(admin_api, ti):
    earlier = TaskInstanceHistory.objects.create(
        task_instance_id=uuid.uuid4(),
        dag_run=ti.dag_run,
        dag_id=ti.dag_id,
        run_id=ti.run_id,
        task_id=ti.task_id,
        try_number=1,
        state="failed",
        hostname="worker-7",
    )
    ti.try_number = 2
    ti.save()
    ship(ti, "first try failed\n", final=True, try_id=earlier.task_instance_id)
    ship(ti, "second try runs\n")

    one = json.loads(body(get(admin_api, url(ti, 1))))
    two = json.loads(body(get(admin_api, url(ti, 2))))

    assert one == {"content": [*HEADER, {"event": "first try failed"}], "continuation_token": None}
    assert two["content"] == [*HEADER, {"event": "second try runs"}]
    assert two["continuation_token"] is not None


def test_text_plain_and_ndjson_answer_the_same_log(admin_api, ti):
    ship(ti, "line one\nline two\n")

    text = get(admin_api, url(ti), accept="text/plain")
    ndjson = get(admin_api, url(ti), accept="application/x-ndjson")

    assert text.status_code == 200
    assert text["Content-Type"] == "text/plain; charset=utf-8"
    assert body(text) == b"line one\nline two\n"
    assert "Airflow-Continuation-Token" in text
    assert ndjson["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in body(ndjson).splitlines()]
    assert lines == [*HEADER, {"event": "line one"}, {"event": "line two"}]


def test_full_content_reads_from_the_start_whatever_the_token(admin_api, ti):
    ship(ti, "a\n")
    token = json.loads(body(get(admin_api, url(ti))))["continuation_token"]
    ship(ti, "b\n")

    full = json.loads(body(get(admin_api, url(ti, token=token, full_content="true"))))

    assert full["content"] == [*HEADER, {"event": "a"}, {"event": "b"}]


def test_a_mapped_try_is_found_by_its_map_index(admin_api, ti):
    mapped = TaskInstanceFactory(
        dag_run=ti.dag_run, task_id=ti.task_id, map_index=3, state="running", hostname="worker-7"
    )
    ship(mapped, "mapped three\n")

    response = json.loads(body(get(admin_api, url(ti, map_index=3))))
    unmapped = json.loads(body(get(admin_api, url(ti))))

    assert response["content"][-1] == {"event": "mapped three"}
    assert unmapped["content"] == HEADER


def test_lines_that_are_not_airflows_json_are_events_as_they_are(admin_api, ti):
    lines = [
        '{"no_event": 1}',
        '{"event": "x", "timestamp": "not a time"}',
        '{"event": NaN}',
        "{broken",
    ]
    ship(ti, "\n".join(lines) + "\n")

    response = json.loads(body(get(admin_api, url(ti))))

    assert response["content"][3:] == [{"event": line} for line in lines]


@pytest.mark.parametrize(
    ("path_try", "params", "detail"),
    [
        pytest.param(
            "x",
            {},
            [
                {
                    "type": "int_parsing",
                    "loc": ["path", "try_number"],
                    "msg": "Input should be a valid integer, unable to parse string as an integer",
                    "input": "x",
                }
            ],
            id="try-not-a-number",
        ),
        pytest.param(
            "-1",
            {},
            [
                {
                    "type": "greater_than_equal",
                    "loc": ["path", "try_number"],
                    "msg": "Input should be greater than or equal to 0",
                    "input": "-1",
                    "ctx": {"ge": 0},
                }
            ],
            id="negative-try",
        ),
        pytest.param(
            "1",
            {"map_index": "one"},
            [
                {
                    "type": "int_parsing",
                    "loc": ["query", "map_index"],
                    "msg": "Input should be a valid integer, unable to parse string as an integer",
                    "input": "one",
                }
            ],
            id="map-index",
        ),
        pytest.param(
            "1",
            {"full_content": "maybe"},
            [
                {
                    "type": "bool_parsing",
                    "loc": ["query", "full_content"],
                    "msg": "Input should be a valid boolean, unable to interpret input",
                    "input": "maybe",
                }
            ],
            id="full-content",
        ),
    ],
)
def test_bad_parameters_are_airflows_422(admin_api, ti, path_try, params, detail):
    response = get(admin_api, url(ti, path_try, **params))

    assert response.status_code == 422
    assert response.json() == {"detail": detail}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("dags/etl/dagRuns/manual__1/taskInstances/load/logs/2", id="unknown-try"),
        pytest.param("dags/etl/dagRuns/manual__1/taskInstances/nope/logs/1", id="wrong-task"),
        pytest.param("dags/etl/dagRuns/nope/taskInstances/load/logs/1", id="wrong-run"),
        pytest.param("dags/etl/dagRuns/manual__1/taskInstances/load/logs/1?map_index=0", id="map"),
        pytest.param(
            "dags/etl/dagRuns/manual__1/taskInstances/load/logs/99999999999", id="huge-try"
        ),
        pytest.param(
            "dags/etl/dagRuns/manual__1/taskInstances/load/logs/1?map_index=99999999999",
            id="huge-map-index",
        ),
    ],
)
def test_no_such_try_is_airflows_404(admin_api, ti, path):
    response = get(admin_api, path)

    assert response.status_code == 404
    assert response.json() == {"detail": "TaskInstance not found"}


def test_a_token_the_server_did_not_sign_is_airflows_400(admin_api, ti):
    response = get(admin_api, url(ti, token="forged"))

    assert response.status_code == 400
    assert response.json() == {
        "detail": "Bad Signature. Please use only the tokens provided by the API."
    }


def test_an_accept_header_of_another_type_is_406(admin_api, ti):
    response = get(admin_api, url(ti), accept="text/html")

    assert response.status_code == 406
    assert response.json() == {
        "detail": "Only application/json, application/x-ndjson or text/plain is supported"
    }


def test_reading_logs_needs_the_log_permission(reader_api, anonymous_api, ti):
    ship(ti, "not for everyone\n")
    reader = User.objects.get(username="reader")

    refused = get(reader_api, url(ti))
    reader.user_permissions.add(Permission.objects.get(codename="view_tasklog"))
    allowed = get(Api(user_token_issue(user=User.objects.get(pk=reader.pk))), url(ti))
    anonymous = get(anonymous_api, url(ti))
    forged = get(Api("not-a-token"), url(ti))

    assert refused.status_code == 403
    assert refused.json() == {"detail": "Forbidden: needs the permission assets_app.view_tasklog"}
    assert allowed.status_code == 200
    assert anonymous.status_code == 401
    assert forged.status_code == 401


def test_a_capped_log_is_streamed_with_its_marker(admin_api, ti, settings):
    settings.TASK_LOG_MAX_BYTES = 4096
    ship(ti, ("z" * 99 + "\n") * 50)

    text = body(get(admin_api, url(ti), accept="text/plain")).decode()

    assert text.startswith("z" * 99 + "\n")
    assert text.endswith(
        "*** Log truncated: this try's log reached TASK_LOG_MAX_BYTES (4096 bytes); "
        "the rest of its output was not kept ***\n"
    )
