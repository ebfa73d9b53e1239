"""A token ends with its task instance (docs/secrets.md, "Token lifetimes"): near its expiry it
is refreshed only while its task instance may still call the API (queued or running, and
still this try), on every route family; a finished or superseded try's token is never renewed
and its writes stay refused. The matrix: every state, on every route family, reads and writes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import jwt
import pytest
from rest_framework.test import APIClient

from assets_app.models import AssetActive, TaskInstance, TaskInstanceState
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from assets_app.services.state.state_stores import task_state_set
from assets_app.services.state.xcoms import xcom_set
from assets_app.tokens import ALGORITHM, token_decode
from tests.factories import AssetFactory

pytestmark = pytest.mark.django_db

REFRESHED = "Refreshed-API-Token"

#: (state, renewed): the try's token is renewed only where its runner may still call
STATES = [
    (TaskInstanceState.QUEUED, True),
    (TaskInstanceState.RUNNING, True),
    (TaskInstanceState.SUCCESS, False),
    (TaskInstanceState.FAILED, False),
    (TaskInstanceState.SKIPPED, False),
    (TaskInstanceState.UP_FOR_RETRY, False),
    (TaskInstanceState.UPSTREAM_FAILED, False),
    ("superseded", False),  # a retry moved the task instance on under a new id
]


def _near_expiry(settings, subject: str) -> str:
    """A 10-minute token with 30 s left (less than a fifth of its lifetime: refresh time)."""
    now = datetime.now(tz=UTC)
    claims = {
        "sub": subject,
        "aud": settings.EXECUTION_API["JWT_AUDIENCE"],
        "iat": int((now - timedelta(seconds=570)).timestamp()),
        "nbf": int((now - timedelta(seconds=570)).timestamp()),
        "exp": int((now + timedelta(seconds=30)).timestamp()),
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, settings.EXECUTION_API["JWT_SECRET"], algorithm=ALGORITHM)


@pytest.fixture
def world(make_ti):
    """A variable, a connection with a password, an asset, and per state a task instance
    with an XCom and a task-state value of its own."""
    variable_set(key="api_settings", value="v")
    connection_create(
        conn_id="warehouse",
        values=ConnectionFields(conn_type="postgres", host="db", password="hunter2-secret"),
    )
    asset = AssetFactory(name="orders", uri="s3://bucket/orders")
    AssetActive.objects.create(asset=asset, name=asset.name, uri=asset.uri)

    def ti_in(state: str) -> tuple[str, TaskInstance]:
        ti = make_ti(
            dag_id="nightly_orders_export",
            task_id="export_orders",
            state=TaskInstanceState.RUNNING if state == "superseded" else state,
        )
        xcom_set(dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id, key="rows", value=1200)
        task_state_set(task_instance_id=ti.pk, key="cursor", value="2026-12-04")
        subject = str(ti.pk)
        if state == "superseded":
            TaskInstance.objects.filter(pk=ti.pk).update(id=uuid.uuid4())
        return subject, ti

    return ti_in, asset


def _reads(ti: TaskInstance, subject: str, asset) -> dict[str, tuple[str, dict]]:
    return {
        "variables": ("/execution/variables/api_settings", {}),
        "connections": ("/execution/connections/warehouse", {}),
        "xcoms": (f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/{ti.task_id}/rows", {}),
        "assets": ("/execution/assets/by-name", {"name": asset.name}),
        "state stores": (f"/execution/store/ti/{subject}/cursor", {}),
    }


@pytest.mark.parametrize(("state", "renewed"), STATES)
def test_reads_are_renewed_only_while_the_task_instance_may_call(settings, world, state, renewed):
    ti_in, asset = world
    subject, ti = ti_in(state)
    client = APIClient(headers={"Authorization": f"Bearer {_near_expiry(settings, subject)}"})

    answers = {
        family: client.get(url, params)
        for family, (url, params) in _reads(ti, subject, asset).items()
    }

    codes = {family: response.status_code for family, response in answers.items()}
    if state == "superseded":  # the try's own store went with its id
        codes.pop("state stores")
        answers.pop("state stores")
    assert set(codes.values()) == {200}, codes
    got = {family: REFRESHED in response for family, response in answers.items()}
    assert got == dict.fromkeys(answers, renewed)
    for response in answers.values():
        if renewed:
            fresh = token_decode(response[REFRESHED])
            assert fresh.subject == subject
            assert fresh.expires_at > datetime.now(tz=UTC) + timedelta(minutes=5)


@pytest.mark.parametrize(("state", "renewed"), STATES)
def test_writes_are_refused_once_the_try_ended_and_renew_nothing(settings, world, state, renewed):
    ti_in, _ = world
    subject, ti = ti_in(state)
    client = APIClient(headers={"Authorization": f"Bearer {_near_expiry(settings, subject)}"})

    writes = {
        "variables": client.put("/execution/variables/k", {"value": "x"}, format="json"),
        "xcoms": client.post(
            f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/{ti.task_id}/more", 1, format="json"
        ),
    }

    may_write = state == TaskInstanceState.RUNNING
    for family, response in writes.items():
        assert (response.status_code < 400) == may_write, (family, response.status_code)
        assert (REFRESHED in response) == (may_write and renewed), family
