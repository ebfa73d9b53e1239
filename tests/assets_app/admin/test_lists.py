"""Lists that fit: one timestamp format, links wherever a DAG, task, run or asset appears,
and a date hierarchy on events that never scans the table."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assets_app.admin.common import when
from assets_app.formats import timestamp_human
from assets_app.models import DagRun, TaskInstance
from tests.assets_app.admin import change, changelist, listed, page_text
from tests.factories import AssetEventFactory, AssetFactory

pytestmark = pytest.mark.django_db

TIMESTAMP = re.compile(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC\b")


def test_one_timestamp_format_with_seconds_and_zone():
    assert timestamp_human(datetime(2026, 11, 30, 21, 32, 42, 540508, tzinfo=UTC)) == (
        "2026-11-30 21:32:42 UTC"
    )
    assert '2026-11-30</span> <span class="ar-idp">21:32:42 UTC</span></time>' in when(
        datetime(2026, 11, 30, 21, 32, 42, 540508, tzinfo=UTC)
    )
    assert when(None) == "-"


@pytest.mark.parametrize(
    ("model", "column"),
    [
        ("assetevent", "at"),
        ("asset", "latest_event"),
        ("dagrun", "after"),
        ("dag", "last_parsed"),
        ("taskinstance", "started"),
        ("assetdagrunqueue", "queued_at"),
    ],
)
def test_lists_show_timestamps_with_seconds_and_zone(admin_client, world, model, column):
    TaskInstance.objects.update(start_date=timezone.now())
    DagRun.objects.update(start_date=timezone.now())
    content = admin_client.get(changelist(model)).content.decode()
    cells = [
        re.sub(r"<[^>]+>", "", cell)
        for cell in re.findall(rf'<td class="field-{column}[^"]*">(.*?)</td>', content, re.S)
    ]
    assert cells, content
    assert any(TIMESTAMP.search(cell) for cell in cells), cells
    assert all(TIMESTAMP.search(cell) or cell == "-" for cell in cells), cells


def test_change_pages_show_timestamps_with_seconds_and_zone(admin_client, world):
    content = page_text(admin_client, change("assetevent", world["assetevent"].pk))
    assert timestamp_human(world["assetevent"].timestamp) in content
    assert "+00:00" not in re.sub(r'datetime="[^"]*"', "", content)  # no raw datetimes


def test_run_page_shows_the_one_timestamp_format(admin_client, world):
    # a run's page (its summary fields, its task instances and their earlier tries)
    run = world["dagrun"]
    content = page_text(admin_client, change("dagrun", run.pk))
    assert timestamp_human(run.run_after) in content
    assert "+00:00" not in re.sub(r'datetime="[^"]*"|value="[^"]*"', "", content)


def test_event_list_links_asset_dag_task_run_alias_and_consumers(admin_client, world):
    event = world["assetevent"]
    content = admin_client.get(changelist("assetevent")).content.decode()
    producer_run = world["taskinstance"].dag_run
    for url in (
        change("asset", event.asset_id),
        change("dag", event.source_dag_id),
        f"{changelist('taskinstance')}?dag_id={event.source_dag_id}&amp;task_id={event.source_task_id}",
        change("dagrun", producer_run.pk),
        change("assetalias", world["assetalias"].pk),
        change("dagrun", world["dagrun"].pk),
    ):
        assert f'href="{url}"' in content, url


def test_task_instance_list_links_dag_task_and_run(admin_client, world):
    ti = world["taskinstance"]
    content = admin_client.get(changelist("taskinstance")).content.decode()
    assert f'href="{change("dag", ti.dag_id)}"' in content
    assert f'href="{change("dagrun", ti.dag_run_id)}"' in content
    # the task opens the task instance's page
    assert f'href="{change("taskinstance", ti.pk)}"' in content
    # and a task's link elsewhere (an event's source) lists that task's instances only
    assert listed(admin_client, "taskinstance", {"dag_id": ti.dag_id, "task_id": ti.task_id}) == {
        ti.pk
    }


def test_asset_list_links_aliases_and_latest_event(admin_client, world):
    content = admin_client.get(changelist("asset")).content.decode()
    assert f'href="{change("assetalias", world["assetalias"].pk)}"' in content
    assert f'href="{change("assetevent", world["assetevent"].pk)}"' in content


def _events_on(days: list[datetime]) -> None:
    asset = AssetFactory()
    for day in days:
        AssetEventFactory(asset=asset, timestamp=day)


def test_event_date_hierarchy_drills_down_years_months_days(admin_client):
    # given events in two years
    _events_on(
        [
            datetime(2025, 12, 30, 10, tzinfo=UTC),
            datetime(2026, 1, 2, 10, tzinfo=UTC),
            datetime(2026, 3, 5, 10, tzinfo=UTC),
            datetime(2026, 3, 7, 23, 59, 59, tzinfo=UTC),
        ]
    )
    url = changelist("assetevent")

    # when / then: years, the months of a year, the days of a month, one day's events
    years = admin_client.get(url).content.decode()
    assert "?timestamp__year=2025" in years
    assert "?timestamp__year=2026" in years
    months = admin_client.get(url, {"timestamp__year": 2026}).content.decode()
    assert "timestamp__month=1" in months
    assert "timestamp__month=3" in months
    days = admin_client.get(url, {"timestamp__year": 2026, "timestamp__month": 3}).content.decode()
    assert "timestamp__day=5" in days
    assert "timestamp__day=7" in days
    one_day = {"timestamp__year": 2026, "timestamp__month": 3, "timestamp__day": 7}
    assert len(listed(admin_client, "assetevent", one_day)) == 1


def test_event_date_hierarchy_never_scans_distinct_dates(admin_client):
    _events_on([datetime(2025, 5, 1, tzinfo=UTC), datetime(2026, 5, 1, tzinfo=UTC)])
    for params in ({}, {"timestamp__year": 2026}, {"timestamp__year": 2026, "timestamp__month": 5}):
        with CaptureQueriesContext(connection) as queries:
            assert admin_client.get(changelist("assetevent"), params).status_code == 200
        assert not [q for q in queries if "DISTINCT" in q["sql"].upper()], params
