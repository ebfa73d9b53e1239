"""Bearer-JWT auth, token refresh and the API-version header."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import jwt
import pytest
from rest_framework.test import APIClient

from assets_app.tokens import ALGORITHM, token_decode, token_issue
from tests.executionapi.conftest import client_for, wire_sample

pytestmark = pytest.mark.django_db


def _heartbeat(client: APIClient, ti):
    return client.put(
        f"/execution/task-instances/{ti.pk}/heartbeat",
        {"hostname": ti.hostname, "pid": ti.pid},
        format="json",
    )


def _signed(settings, **claims) -> str:
    now = datetime.now(tz=UTC)
    base = {
        "aud": settings.EXECUTION_API["JWT_AUDIENCE"],
        "iat": int(now.timestamp()),
        "nbf": int(now.timestamp()),
        "exp": int((now + timedelta(minutes=10)).timestamp()),
        "jti": "x",
    }
    return jwt.encode({**base, **claims}, settings.EXECUTION_API["JWT_SECRET"], algorithm=ALGORITHM)


def test_missing_token_is_401(make_ti):
    ti = make_ti()

    response = _heartbeat(APIClient(), ti)

    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "not_authenticated"


@pytest.mark.parametrize(
    "token",
    [
        pytest.param("garbage", id="malformed"),
        pytest.param("expired", id="expired"),
        pytest.param("audience", id="wrong-audience"),
        pytest.param("secret", id="wrong-secret"),
    ],
)
def test_invalid_token_is_403(make_ti, settings, token):
    ti = make_ti()
    past = datetime.now(tz=UTC) - timedelta(hours=1)
    value = {
        "garbage": "not.a.jwt",
        "expired": _signed(
            settings,
            sub=str(ti.pk),
            iat=int(past.timestamp()),
            nbf=int(past.timestamp()),
            exp=int((past + timedelta(minutes=1)).timestamp()),
        ),
        "audience": _signed(settings, sub=str(ti.pk), aud="urn:someone-else"),
        "secret": jwt.encode(
            {
                "sub": str(ti.pk),
                "aud": settings.EXECUTION_API["JWT_AUDIENCE"],
                "iat": 1,
                "exp": 2**40,
            },
            "another-secret-" + "y" * 49,
            algorithm=ALGORITHM,
        ),
    }[token]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {value}")

    response = _heartbeat(client, ti)

    assert response.status_code == 403
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "invalid_token"


def test_token_of_another_task_instance_is_403(make_ti):
    ti, other = make_ti(task_id="a"), make_ti(task_id="b")

    response = _heartbeat(client_for(other), ti)

    assert response.status_code == 403
    assert response.json()["detail"]["reason"] == "access_denied"


def test_state_patch_with_another_tis_token_is_403_and_writes_nothing(make_ti):
    ti, other = make_ti(task_id="a"), make_ti(task_id="b")

    response = client_for(other).patch(
        f"/execution/task-instances/{ti.pk}/state", wire_sample("failed_state"), format="json"
    )

    assert response.status_code == 403
    ti.refresh_from_db()
    assert ti.state == "running"


def test_any_valid_token_reads_assets(make_ti):
    ti = make_ti()

    response = client_for(ti).get("/execution/assets/by-name", {"name": "nothing"})

    assert response.status_code == 404  # authenticated, then not found


def test_refreshed_token_header_when_little_lifetime_is_left(make_ti, settings):
    ti = make_ti()
    now = datetime.now(tz=UTC)
    old = _signed(
        settings,
        sub=str(ti.pk),
        iat=int((now - timedelta(minutes=9)).timestamp()),
        nbf=int((now - timedelta(minutes=9)).timestamp()),
        exp=int((now + timedelta(minutes=1)).timestamp()),
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {old}")

    response = _heartbeat(client, ti)

    assert response.status_code == 204
    fresh = token_decode(response["Refreshed-API-Token"])
    assert fresh.subject == str(ti.pk)
    assert fresh.expires_at > now + timedelta(minutes=5)


def test_no_refresh_for_a_fresh_token(make_ti):
    ti = make_ti()

    response = _heartbeat(client_for(ti), ti)

    assert response.status_code == 204
    assert "Refreshed-API-Token" not in response


def test_api_version_header_is_accepted_and_logged(make_ti, caplog):
    ti = make_ti()
    client = client_for(ti)

    with caplog.at_level(logging.DEBUG, logger="executionapi.views"):
        response = client.put(
            f"/execution/task-instances/{ti.pk}/heartbeat",
            {"hostname": ti.hostname, "pid": ti.pid},
            format="json",
            HTTP_AIRFLOW_API_VERSION="2026-06-30",
        )

    assert response.status_code == 204
    assert "2026-06-30" in caplog.text


def test_token_issue_round_trip():
    token = token_issue(task_instance_id="0195e0b8-0000-7000-8000-000000000001")

    assert token_decode(token).subject == "0195e0b8-0000-7000-8000-000000000001"
