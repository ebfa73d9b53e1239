"""The asset page's "create asset event": validated extra and partition key, the same service
as create_asset_event (consumers queued), the admin history names the user."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from assets_app.models import PARTITION_KEY_LENGTH, AssetDagRunQueue, AssetEvent
from tests.assets_app.admin import change

pytestmark = pytest.mark.django_db


def emit_url(asset) -> str:
    return reverse("admin:assets_app_asset_emit", args=[asset.pk])


def test_asset_page_links_the_form(admin_client, world):
    content = admin_client.get(change("asset", world["asset"].pk)).content.decode()
    assert f'href="{emit_url(world["asset"])}"' in content


def test_emit_creates_the_event_queues_consumers_and_logs_the_user(admin_client, admin_user, world):
    # given: nobody waits on the asset yet
    asset = world["asset"]
    AssetDagRunQueue.objects.all().delete()

    # when
    response = admin_client.post(
        emit_url(asset), {"extra": '{"rows": 42, "by": "hand"}', "partition_key": ""}
    )

    # then: back on the asset page with the event, its consumer queued
    assert response.status_code == 302
    assert response["Location"] == change("asset", asset.pk)
    event = AssetEvent.objects.filter(asset=asset).order_by("-id").first()
    assert event.extra == {"rows": 42, "by": "hand"}
    assert event.partition_key is None
    assert event.source_dag_id is None
    assert event.source_task_id is None
    assert set(AssetDagRunQueue.objects.values_list("target_dag_id", flat=True)) == {
        "asset_s3_bucket_consumer"
    }
    entry = LogEntry.objects.get()
    assert entry.user == admin_user
    assert entry.object_id == str(asset.pk)
    assert entry.get_change_message() == f"Added asset event “{event}”."
    page = admin_client.get(response["Location"])
    assert f"Created asset event {event.pk}" in page.content.decode()
    # naming the DAGs waiting for it, as its page will
    assert "DAGs waiting for it: asset_s3_bucket_consumer." in page.content.decode()
    history = admin_client.get(reverse("admin:assets_app_asset_history", args=[asset.pk]))
    assert admin_user.username in history.content.decode()
    assert f"Added asset event “{event}”." in history.content.decode()


def test_emit_with_partition_key_queues_nothing(admin_client, world):
    AssetDagRunQueue.objects.all().delete()
    response = admin_client.post(emit_url(world["asset"]), {"extra": "", "partition_key": "p1"})
    assert response.status_code == 302
    event = AssetEvent.objects.order_by("-id").first()
    assert (event.extra, event.partition_key) == ({}, "p1")
    assert not AssetDagRunQueue.objects.exists()


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"extra": "{not json"}, "extra", "Enter a valid JSON."),
        ({"extra": "[1, 2]"}, "extra", "Enter a JSON object ({...}), not a JSON array."),
        ({"extra": '"text"'}, "extra", "Enter a JSON object ({...}), not a JSON string."),
        ({"extra": "3"}, "extra", "Enter a JSON object ({...}), not a JSON number."),
        ({"extra": '{"ratio": NaN}'}, "extra", "extra['ratio']: "),
        ({"extra": '{"big": 1e400}'}, "extra", "extra['big']: "),
        ({"extra": '{"s": "\\ud800"}'}, "extra", "extra['s']: "),
        (
            {"extra": "{}", "partition_key": "k" * (PARTITION_KEY_LENGTH + 1)},
            "partition_key",
            f"Ensure this value has at most {PARTITION_KEY_LENGTH} characters",
        ),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(admin_client, world, data, field, message):
    before = AssetEvent.objects.count()
    response = admin_client.post(emit_url(world["asset"]), data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == [field]
    assert message in errors[field][0]
    assert AssetEvent.objects.count() == before
    assert not LogEntry.objects.exists()


def test_form_keeps_what_was_typed(admin_client, world):
    typed = json.dumps({"rows": [1, 2]})
    response = admin_client.post(emit_url(world["asset"]), {"extra": "[", "partition_key": "p"})
    assert response.status_code == 200
    assert 'value="p"' in response.content.decode()
    assert typed not in response.content.decode()  # sanity: only what was posted comes back
    assert "[</textarea>" in response.content.decode()


@pytest.fixture
def viewer(client, world):
    """A staff user who may view assets but not add asset events."""
    user = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_asset"))
    client.force_login(user)
    return user


def test_user_without_the_add_event_permission_is_refused(client, viewer, world):
    asset = world["asset"]
    assert client.get(emit_url(asset)).status_code == 403
    assert client.post(emit_url(asset), {"extra": "{}"}).status_code == 403
    assert "ar-emit-link" not in client.get(change("asset", asset.pk)).content.decode()
    # with it, the same user may
    viewer.user_permissions.add(Permission.objects.get(codename="add_assetevent"))
    assert client.post(emit_url(asset), {"extra": "{}"}).status_code == 302


def test_anonymous_is_sent_to_the_login(client, world):
    response = client.post(emit_url(world["asset"]), {"extra": "{}"})
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
    assert AssetEvent.objects.count() == 2  # the world's two


def test_unknown_asset_redirects_with_a_message(admin_client):
    response = admin_client.get(reverse("admin:assets_app_asset_emit", args=[999999]))
    assert response.status_code == 302
