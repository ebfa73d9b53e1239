"""POST/GET/DELETE/HEAD /execution/xcoms/{dag_id}/{run_id}/{task_id}/{key}."""

from __future__ import annotations

import uuid

import pytest

from assets_app.models import TaskInstance, XCom
from tests.executionapi.conftest import client_for, wire_sample

pytestmark = pytest.mark.django_db


def test_xcom_set_and_get_with_unencoded_run_id(make_ti):
    ti = make_ti()
    ti.dag_run.run_id = ti.run_id = "manual__2026-01-01T00:00:00+00:00"
    ti.dag_run.save()
    ti.save()
    client = client_for(ti)
    url = (
        f"/execution/xcoms/{ti.dag_id}/manual__2026-01-01T00:00:00+00:00/{ti.task_id}/return_value"
    )

    posted = client.post(url, wire_sample("xcom_return_value"), format="json")
    again = client.post(url + "?map_index=-1", {"answer": 43}, format="json")
    read = client.get(url)

    assert (posted.status_code, again.status_code) == (201, 201)
    assert read.status_code == 200
    assert read.json() == {"key": "return_value", "value": {"answer": 43}}
    assert XCom.objects.get().run_id == "manual__2026-01-01T00:00:00+00:00"


def test_xcom_map_index_and_missing(make_ti):
    ti = make_ti(map_index=3)
    client = client_for(ti)
    url = f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/{ti.task_id}/k"

    assert client.post(url + "?map_index=3", 7, format="json").status_code == 201
    assert client.get(url, {"map_index": 3}).json() == {"key": "k", "value": 7}
    assert client.head(url)["Content-Range"] == "map_indexes 1"
    missing = client.get(url)
    assert missing.status_code == 404
    assert missing.json()["detail"]["reason"] == "not_found"
    assert client.delete(url + "?map_index=3").status_code == 200
    assert not XCom.objects.exists()


def test_xcom_of_another_run_is_refused(make_ti):
    response = client_for(make_ti()).post("/execution/xcoms/nodag/norun/t/k", 1, format="json")

    assert response.status_code == 403
    assert response.json()["detail"] == {
        "reason": "access_denied",
        "message": "A task instance may write only its own XComs",
    }


def test_a_task_cannot_overwrite_or_delete_another_tasks_xcom(make_ti):
    owner = make_ti()
    other = make_ti(task_id="other", dag_run=owner.dag_run)
    url = f"/execution/xcoms/{owner.dag_id}/{owner.run_id}/{owner.task_id}/return_value"
    assert client_for(owner).post(url, {"mine": 1}, format="json").status_code == 201

    overwrite = client_for(other).post(url, {"theirs": 2}, format="json")
    delete = client_for(other).delete(url)

    assert (overwrite.status_code, delete.status_code) == (403, 403)
    assert XCom.objects.get().value == {"mine": 1}
    assert client_for(other).get(url).json()["value"] == {"mine": 1}  # reads stay open


@pytest.mark.parametrize(
    ("token_for", "message"),
    [
        ("gone", "The token's task instance no longer exists"),
        ("finished", "The token's task instance is not running (state success)"),
    ],
)
def test_a_gone_or_finished_task_instance_writes_nothing(make_ti, token_for, message):
    ti = make_ti()
    url = f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/{ti.task_id}/k"
    if token_for == "gone":
        client = client_for(uuid.uuid4())
    else:
        TaskInstance.objects.filter(pk=ti.pk).update(state="success")
        client = client_for(ti)

    response = client.post(url, 1, format="json")

    assert response.status_code == 403
    assert response.json()["detail"] == {"reason": "access_denied", "message": message}
    assert not XCom.objects.exists()


@pytest.mark.parametrize(
    ("path", "loc"),
    [
        pytest.param("{dag}/{run}/{task}/" + "k" * 513, ["path", "key"], id="key-too-long"),
        pytest.param("{dag}/{run}/" + "t" * 251 + "/k", ["path", "task_id"], id="task-too-long"),
        pytest.param("{dag}/{run}/{task}/k?map_index=2147483648", ["query", "map_index"], id="map"),
        pytest.param("{dag}/{run}/{task}/k?map_index=-2", ["query", "map_index"], id="map-neg"),
    ],
)
def test_xcom_set_with_values_beyond_the_columns_is_422(make_ti, path, loc):
    ti = make_ti()
    url = "/execution/xcoms/" + path.format(dag=ti.dag_id, run=ti.run_id, task=ti.task_id)

    response = client_for(ti).post(url, 1, format="json")

    assert response.status_code == 422, response.content
    assert loc in [error["loc"] for error in response.json()["detail"]]
    assert not XCom.objects.exists()


def test_xcom_value_with_a_nul_character_is_422(make_ti):
    ti = make_ti()
    url = f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/{ti.task_id}/k"

    response = client_for(ti).post(url, {"v": "\x00"}, format="json")

    assert response.status_code == 422, response.content
    assert not XCom.objects.exists()
