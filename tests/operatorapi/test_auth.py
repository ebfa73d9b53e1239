"""Who may do what: Django users by token or session, by model permission; runners' JWTs
open nothing here, and users' tokens open nothing in the execution API."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from rest_framework.test import APIClient

from assets_app.models import AssetDagRunQueue, AssetEvent, Dag
from assets_app.tokens import token_issue
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagFactory,
    DagRunFactory,
    TaskInstanceFactory,
)
from tests.operatorapi.conftest import VIEW_PERMISSIONS, make_user, token_client

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def rows() -> dict[str, int]:
    """One row of each resource, by name; returns their ids."""
    asset = AssetFactory(name="orders")
    event = AssetEventFactory(asset=asset)
    dag = DagFactory(dag_id="consumer")
    run = DagRunFactory(dag=dag)
    AssetDagRunQueue.objects.create(asset=asset, target_dag=dag)
    alias = AssetAliasFactory(name="exports")
    return {"asset": asset.pk, "alias": alias.pk, "event": event.pk, "run": run.pk}


#: (path, permission needed) of every read.
READS = [
    ("/assets", "view_asset"),
    ("/assets/{asset}", "view_asset"),
    ("/asset-aliases", "view_assetalias"),
    ("/asset-aliases/{alias}", "view_assetalias"),
    ("/asset-events", "view_assetevent"),
    ("/asset-events/{event}", "view_assetevent"),
    ("/dags", "view_dag"),
    ("/dags/consumer", "view_dag"),
    ("/dag-runs", "view_dagrun"),
    ("/dag-runs/{run}", "view_dagrun"),
    ("/queue", "view_assetdagrunqueue"),
]
#: (method, path, body, permission needed, success status) of every write.
WRITES = [
    ("post", "/asset-events", {"name": "orders"}, "add_assetevent", 201),
    ("patch", "/dags/consumer", {"is_paused": True}, "change_dag", 200),
]


def every_request(rows):
    for path, _ in READS:
        yield "get", API + path.format(**rows), None
    for method, path, body, _, _ in WRITES:
        yield method, API + path, body


def send(client: APIClient, method: str, url: str, body):
    return getattr(client, method)(url, body, format="json") if body else client.get(url)


def assert_nothing_written():
    assert AssetEvent.objects.count() == 1
    assert not Dag.objects.filter(is_paused=True).exists()


def test_anonymous_is_401_everywhere(rows):
    for method, url, body in every_request(rows):
        response = send(APIClient(), method, url, body)

        assert response.status_code == 401, url
        assert response["WWW-Authenticate"] == "Token"
        assert response.json() == {
            "detail": "Authentication credentials were not provided.",
            "code": "not_authenticated",
        }
    assert APIClient().get(f"{API}/").status_code == 401
    assert_nothing_written()


@pytest.mark.parametrize(
    ("header", "detail", "code"),
    [
        pytest.param("Token nope", "Invalid token.", "authentication_failed", id="unknown-token"),
        pytest.param(
            "Token",
            "Invalid token header. No credentials provided.",
            "authentication_failed",
            id="empty-token",
        ),
    ],
)
def test_a_bad_token_is_401(rows, header, detail, code):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)

    response = client.get(f"{API}/assets")

    assert response.status_code == 401
    assert response.json() == {"detail": detail, "code": code}


def test_a_runner_jwt_opens_nothing(rows):
    # given: a valid execution API token of a running task instance
    ti = TaskInstanceFactory(state="running")
    runner = APIClient()
    runner.credentials(HTTP_AUTHORIZATION=f"Bearer {token_issue(task_instance_id=ti.pk)}")
    assert (
        runner.get(f"/execution/task-instances/{ti.pk}/validate-inlets-and-outlets").status_code
        == 200
    )

    # then
    for method, url, body in [("get", f"{API}/", None), *every_request(rows)]:
        response = send(runner, method, url, body)

        assert response.status_code == 401, url
        assert response.json() == {
            "detail": "Bearer tokens (task runner JWTs) are for the execution API; send "
            "'Authorization: Token <key>' with a user's API token",
            "code": "bearer_not_accepted",
        }
    assert_nothing_written()


def test_a_user_token_opens_nothing_in_the_execution_api():
    client = token_client(make_user("root", is_superuser=True, is_staff=True))

    response = client.get("/execution/assets/by-name", {"name": "orders"})

    assert response.status_code == 401


def test_an_inactive_users_token_is_401(rows):
    client = token_client(make_user("gone", *VIEW_PERMISSIONS, is_active=False))

    response = client.get(f"{API}/assets")

    assert response.status_code == 401
    assert response.json()["detail"] == "User inactive or deleted."


def test_a_user_without_permissions_is_403_naming_the_permission(rows):
    # given: authenticated, no permission at all; the API root only needs a login
    client = token_client(make_user("nobody"))
    assert client.get(f"{API}/").status_code == 200

    # then
    for path, permission in READS:
        response = client.get(API + path.format(**rows))

        assert response.status_code == 403, path
        assert response.json() == {
            "detail": f"You need the permission assets_app.{permission} to GET this resource",
            "code": "permission_denied",
        }
    assert_nothing_written()


def test_staff_without_permissions_is_403(rows):
    client = token_client(make_user("staff", is_staff=True))

    for method, url, body in every_request(rows):
        assert send(client, method, url, body).status_code == 403, url


def test_view_permission_opens_exactly_its_reads(rows):
    # given: a user who may view assets only
    client = token_client(make_user("asset-viewer", "view_asset"))

    # then
    for path, permission in READS:
        response = client.get(API + path.format(**rows))
        assert response.status_code == (200 if permission == "view_asset" else 403), path


def test_viewer_reads_everything_and_writes_nothing(rows):
    # given
    client = token_client(make_user("viewer", *VIEW_PERMISSIONS))

    # then
    for path, _ in READS:
        assert client.get(API + path.format(**rows)).status_code == 200, path
    for method, path, body, permission, _ in WRITES:
        response = getattr(client, method)(API + path, body, format="json")

        assert response.status_code == 403, path
        assert response.json()["detail"] == (
            f"You need the permission assets_app.{permission} to {method.upper()} this resource"
        )
    assert_nothing_written()


@pytest.mark.parametrize(("method", "path", "body", "permission", "success"), WRITES)
def test_each_write_needs_its_permission(rows, method, path, body, permission, success):
    # given: view + exactly this write permission
    client = token_client(make_user("writer", *VIEW_PERMISSIONS, permission))

    response = getattr(client, method)(API + path, body, format="json")

    assert response.status_code == success, response.content


def test_permissions_granted_through_a_group_count(rows):
    # given
    group = Group.objects.create(name="operators")
    group.permissions.add(Permission.objects.get(codename="view_assetevent"))
    user = make_user("member")
    user.groups.add(group)

    assert token_client(user).get(f"{API}/asset-events").status_code == 200


def test_superuser_may_do_everything(rows):
    client = token_client(make_user("root", is_superuser=True))

    for method, url, body in every_request(rows):
        assert send(client, method, url, body).status_code in (200, 201), url
    assert AssetEvent.objects.count() == 2
    assert Dag.objects.get().is_paused is True


def test_session_auth_reads_and_needs_csrf_for_writes(rows):
    # given: the admin's session (a logged-in browser), CSRF checks on as in production
    user = make_user("browser", *VIEW_PERMISSIONS, "add_assetevent")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)

    # when / then: reads need no CSRF token
    assert client.get(f"{API}/asset-events").status_code == 200

    # a write without the CSRF token is refused
    refused = client.post(f"{API}/asset-events", {"name": "orders"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith("CSRF Failed")
    assert AssetEvent.objects.count() == 1

    # with it, accepted
    client.get("/admin/login/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    accepted = client.post(
        f"{API}/asset-events", {"name": "orders"}, format="json", HTTP_X_CSRFTOKEN=token
    )
    assert accepted.status_code == 201, accepted.content
