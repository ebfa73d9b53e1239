"""The operator API through a real gunicorn process, with a user's token."""

from __future__ import annotations

import io

import httpx
import pytest
from django.core.management import call_command

from assets_app.models import AssetDagRunQueue, AssetEvent, Dag
from assets_app.tokens import token_issue
from tests.factories import TaskInstanceFactory
from tests.live_server import REPO
from tests.operatorapi.conftest import OPERATOR_PERMISSIONS, make_user

pytestmark = pytest.mark.slow

SEED_URI = "s3://bucket/my-task"


def test_operator_script_against_a_real_server(server):
    """An operator's script: token from drf_create_token, then HTTP only."""
    # given: the seed's DAGs, and an operator with a token (as drf_create_token makes it)
    call_command("declare_dags", str(REPO / "examples" / "dags.yaml"), stdout=io.StringIO())
    make_user("ops", *OPERATOR_PERMISSIONS)
    out = io.StringIO()
    call_command("drf_create_token", "ops", stdout=out)
    key = out.getvalue().split()[2]  # "Generated token <key> for user ops"
    auth = {"Authorization": f"Token {key}"}
    api = f"{server.url}/api/v1"

    with httpx.Client(headers=auth, timeout=30) as client:
        # when: the script emits an event by uri, then reads it back and pauses a consumer
        created = client.post(
            f"{api}/asset-events", json={"uri": SEED_URI, "extra": {"from": "script"}}
        )
        listed = client.get(f"{api}/asset-events", params={"asset_uri": SEED_URI})
        queue = client.get(f"{api}/queue", params={"dag_id": "asset_s3_bucket_consumer"})
        paused = client.patch(f"{api}/dags/asset_s3_bucket_consumer", json={"is_paused": True})
        bad = client.get(f"{api}/asset-events", params={"after": "not-a-date"})
    # and without the token: anonymous, or with a runner's valid execution API token
    anonymous = httpx.get(f"{api}/asset-events", timeout=30)
    ti = TaskInstanceFactory(state="running")
    bearer = {"Authorization": f"Bearer {token_issue(task_instance_id=ti.pk)}"}
    runner = httpx.get(f"{api}/asset-events", headers=bearer, timeout=30)

    # then
    assert created.status_code == 201, server.log()[-3000:]
    event_id = created.json()["id"]
    assert created.headers["Location"] == f"{api}/asset-events/{event_id}"
    assert [row["id"] for row in listed.json()["results"]] == [event_id]
    assert listed.json()["results"][0]["extra"] == {"from": "script"}
    assert queue.status_code == 200
    assert [row["asset"]["uri"] for row in queue.json()["results"]] == [SEED_URI]
    # the asset's consumer was queued (the alias consumer waits for events through its alias)
    assert list(AssetDagRunQueue.objects.values_list("target_dag_id", flat=True)) == [
        "asset_s3_bucket_consumer"
    ]
    assert paused.json()["is_paused"] is True
    assert Dag.objects.get(dag_id="asset_s3_bucket_consumer").is_paused
    assert bad.status_code == 400
    assert bad.json() == {"after": ["Enter a valid date/time."]}
    assert AssetEvent.objects.get().extra == {"from": "script"}
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"] == "Token"
    assert runner.status_code == 401
    assert runner.json()["code"] == "bearer_not_accepted"
