"""A task instance's page shows the log of a try (escaped), a link per try, and while the try
may still write, a script that asks the admin's JSON endpoint for what came since; the JSON
endpoint and the download refuse bad input and users without ``view_tasklog``."""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from assets_app.admin import logs as admin_logs
from assets_app.models import TaskInstanceHistory, TaskLog
from assets_app.services.runs.logs import task_log_append
from tests.assets_app.admin import change
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def ti():
    run = DagRunFactory(dag=DagFactory(dag_id="etl"), run_id="manual__1")
    return TaskInstanceFactory(dag_run=run, task_id="load", state="running", try_number=2)


@pytest.fixture
def earlier(ti):
    return TaskInstanceHistory.objects.create(
        task_instance_id=uuid.uuid4(),
        dag_run=ti.dag_run,
        dag_id=ti.dag_id,
        run_id=ti.run_id,
        task_id=ti.task_id,
        try_number=1,
        state="failed",
    )


def ship(try_id, text: str, *, final: bool = False) -> None:
    log = TaskLog.objects.filter(task_instance_id=try_id).first()
    offset = log.received_bytes if log else 0
    task_log_append(task_instance_id=try_id, offset=offset, content=text, final=final)


def log_url(ti, try_number: int, *, download: bool = False) -> str:
    name = "admin:assets_app_taskinstance_log" + ("_download" if download else "")
    return reverse(name, args=[ti.pk, try_number])


def test_the_page_shows_the_running_try_escaped_with_a_link_per_try_and_a_poller(
    admin_client, ti, earlier
):
    ship(earlier.task_instance_id, "first try failed\n", final=True)
    ship(ti.pk, "<b>second</b> try & running\n")

    html = admin_client.get(change("taskinstance", ti.pk)).content.decode()

    assert 'id="ar-task-log"' in html
    assert "Log of try 2" in html
    assert "&lt;b&gt;second&lt;/b&gt; try &amp; running" in html
    assert "<b>second</b>" not in html
    assert "first try failed" not in html  # the selected try only
    assert re.search(r'href="[^"]+\?log_try=1#ar-task-log"', html)
    assert re.search(r'href="[^"]+\?log_try=2#ar-task-log"[^>]*aria-current="page"', html)
    assert f'data-url="{log_url(ti, 2)}"' in html
    assert 'data-complete="false"' in html
    assert "window.fetch" in html  # the poller, on the page itself
    assert "<script src" not in html.split('id="ar-task-log"')[1]


def test_the_try_selector_shows_an_earlier_try(admin_client, ti, earlier):
    ship(earlier.task_instance_id, "first try failed\n", final=True)

    html = admin_client.get(change("taskinstance", ti.pk), {"log_try": 1}).content.decode()

    assert "Log of try 1" in html
    assert "first try failed" in html
    assert 'data-complete="true"' in html
    assert "End of the log." in html


def test_an_unknown_try_in_the_selector_says_so_and_shows_the_latest(admin_client, ti):
    html = admin_client.get(change("taskinstance", ti.pk), {"log_try": 9}).content.decode()

    assert "There is no try 9 of this task instance; showing its latest try." in html
    assert "Log of try 2" in html


def test_a_try_not_started_shows_the_latest_try_with_a_log(admin_client, ti, earlier):
    ti.state = "scheduled"
    ti.save()
    ship(earlier.task_instance_id, "why the first try failed\n", final=True)

    html = admin_client.get(change("taskinstance", ti.pk)).content.decode()

    assert "Log of try 1" in html
    assert "why the first try failed" in html


def test_the_json_endpoint_answers_what_came_after_a_chunk(admin_client, ti):
    ship(ti.pk, "one\n")
    ship(ti.pk, "two\n")

    everything = admin_client.get(log_url(ti, 2)).json()
    since_first = admin_client.get(log_url(ti, 2), {"after": 1}).json()

    assert everything == {
        "try_number": 2,
        "text": "one\ntwo\n",
        "next": 2,
        "more": False,
        "complete": False,
        "truncated": False,
    }
    assert since_first["text"] == "two\n"


def test_a_long_log_comes_in_pieces(admin_client, ti, monkeypatch):
    monkeypatch.setattr(admin_logs, "PAGE_CHARS", 10)
    for n in range(3):
        ship(ti.pk, f"line {n} of 3\n")  # 12 characters each

    first = admin_client.get(log_url(ti, 2)).json()
    second = admin_client.get(log_url(ti, 2), {"after": first["next"]}).json()

    assert (first["text"], first["next"], first["more"]) == ("line 0 of 3\n", 1, True)
    assert (second["text"], second["next"], second["more"]) == ("line 1 of 3\n", 2, True)


@pytest.mark.parametrize("after", ["-1", "x", "1.5", "9999999999"])
def test_a_bad_after_is_400_naming_it(admin_client, ti, after):
    response = admin_client.get(log_url(ti, 2), {"after": after})

    assert response.status_code == 400
    assert response.json() == {
        "detail": "after must be a chunk number: a whole number from 0",
        "field": "after",
    }


def test_an_unknown_try_or_task_instance_is_404(admin_client, ti):
    unknown_try = admin_client.get(log_url(ti, 5))
    unknown_ti = admin_client.get(
        reverse("admin:assets_app_taskinstance_log", args=[uuid.uuid4(), 1])
    )

    assert unknown_try.status_code == 404
    assert unknown_try.json() == {"detail": "etl.load @ manual__1 has no try 5", "try_number": 5}
    assert unknown_ti.status_code == 404
    assert unknown_ti.json()["detail"].startswith("No task instance ")


def test_the_download_is_the_whole_log_as_a_file(admin_client, ti):
    ship(ti.pk, "one\n")
    ship(ti.pk, "two\n")

    response = admin_client.get(log_url(ti, 2, download=True))

    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == ('attachment; filename="etl.load.manual__1.try2.log"')
    assert b"".join(response.streaming_content) == b"one\ntwo\n"


def test_logs_need_the_log_permission(ti):
    ship(ti.pk, "secret-ish output\n")
    staff = User.objects.create_user("viewer", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_taskinstance"))
    client = Client()
    client.force_login(staff)

    page = client.get(change("taskinstance", ti.pk))
    endpoint = client.get(log_url(ti, 2))
    download = client.get(log_url(ti, 2, download=True))

    assert page.status_code == 200
    assert 'id="ar-task-log"' not in page.content.decode()
    assert "secret-ish output" not in page.content.decode()
    assert endpoint.status_code == 403
    assert endpoint.json() == {
        "detail": "Reading task logs needs the permission assets_app.view_tasklog"
    }
    assert download.status_code == 403
