"""A database outage during a request (assets_app.edge.outage): the execution API and /api/v2/
run the request again until the database answers, within DATABASE_OUTAGE_RETRY_SECONDS, then
answer 503 with Retry-After; never a 500, and a failed attempt writes nothing."""

from __future__ import annotations

import pytest
from django.db import OperationalError, connection

from assets_app.edge import outage
from assets_app.models import TaskInstance, TaskInstanceState
from assets_app.services.runs import claims
from tests.executionapi.conftest import client_for


@pytest.fixture
def no_sleep(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(outage.time, "sleep", waits.append)
    return waits


def _heartbeat(client, ti):
    return client.put(
        f"/execution/task-instances/{ti.pk}/heartbeat",
        {"hostname": ti.hostname, "pid": ti.pid},
        format="json",
    )


@pytest.mark.django_db
def test_a_request_is_run_again_after_a_broken_connection(make_ti, monkeypatch, no_sleep):
    ti = make_ti(hostname="worker-7", pid=4242)
    real = claims.task_instance_heartbeat
    calls = []

    def flaky(**kwargs):
        calls.append(kwargs)
        if len(calls) < 3:
            raise OperationalError("server closed the connection unexpectedly")
        return real(**kwargs)

    monkeypatch.setattr(claims, "task_instance_heartbeat", flaky)
    monkeypatch.setattr(connection, "close", lambda: None)  # the test's transaction stays

    response = _heartbeat(client_for(ti), ti)

    assert response.status_code == 204, response.content
    assert len(calls) == 3
    assert no_sleep == [0.25, 0.5]


@pytest.mark.django_db
def test_an_outage_longer_than_the_bound_is_a_503_with_retry_after(
    make_ti, monkeypatch, settings, no_sleep
):
    settings.DATABASE_OUTAGE_RETRY_SECONDS = 0.0
    ti = make_ti(hostname="worker-7", pid=4242)

    def down(**kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(claims, "task_instance_heartbeat", down)
    monkeypatch.setattr(connection, "close", lambda: None)

    response = _heartbeat(client_for(ti), ti)

    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert response.json()["detail"]["reason"] == "database_unavailable"
    assert no_sleep == []


@pytest.mark.django_db
def test_api_v2_answers_an_outage_503_in_airflows_shape(monkeypatch, settings, no_sleep):
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from publicapi import views
    from publicapi.auth import user_token_issue

    settings.DATABASE_OUTAGE_RETRY_SECONDS = 0.0
    client = APIClient()
    user = User.objects.create_superuser("ops", "ops@example.com", "pw")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {user_token_issue(user=user)}")

    def down(*args, **kwargs):
        raise OperationalError("the database system is starting up")

    monkeypatch.setattr(views.DagListView, "get", down)

    response = client.get("/api/v2/dags")

    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert "database is unavailable" in response.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_a_postgresql_connection_killed_mid_request_is_reopened_and_the_report_kept(
    make_ti, monkeypatch, no_sleep
):
    """The server's own backend is terminated inside the success report's transaction: the
    attempt fails with nothing written, the next one on a new connection stores it."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (set DATABASE_URL=postgres://...)")
    ti = make_ti()
    real = claims.task_instance_heartbeat
    killed = []

    def killed_once(**kwargs):
        if not killed:
            killed.append(True)
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return real(**kwargs)

    monkeypatch.setattr(claims, "task_instance_heartbeat", killed_once)

    response = _heartbeat(client_for(ti), ti)

    assert response.status_code == 204, response.content
    assert killed == [True]
    assert len(no_sleep) == 1
    assert TaskInstance.objects.get(pk=ti.pk).state == TaskInstanceState.RUNNING
