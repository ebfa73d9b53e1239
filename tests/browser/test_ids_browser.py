"""Issue 40: the longest ids the product makes read in two lines at most at 1400 px, and a run
id is never broken inside its timestamp, in the event rows of the overview and of an asset's
page (producer → asset → consumers): the producer stacked ``DAG`` / ``.task`` / ``@ run``, each
consumer run ``DAG`` / ``@ run``. Lines are counted as a line's height over its line height."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User

from assets_app.models import DagRun, DagRunAssetEvent
from assets_app.models.runs import DagRunType
from devtools.browser import log_in
from tests.browser.test_pages_browser import _css, _no_sideways_scroll
from tests.factories import AssetEventFactory, AssetFactory, DagFactory, DagRunFactory

# what a browser shows and does; the pages' queries run on both databases in tests/assets_app/admin
pytestmark = [pytest.mark.slow, pytest.mark.sqlite]

#: Real-length ids: 60-character DAG and task ids (as the showcase's graph DAG), and the run ids
#: the product names its runs with (``DagRun.generate_run_id``), microseconds and suffix and all.
PRODUCER = "warehouse_orders_daily_export_and_customer_dimension_refresh"
CONSUMER = "customer_dimension_refresh_after_the_warehouse_orders_export"
TASK = "export_orders_to_the_warehouse_and_refresh_the_customer_dims"
AT = datetime(2026, 12, 4, 10, 15, 30, 123456, tzinfo=UTC)


def _run_ids() -> list[tuple[DagRunType, str]]:
    return [
        (
            DagRunType.ASSET_TRIGGERED,
            DagRun.generate_run_id(
                run_type=DagRunType.ASSET_TRIGGERED, logical_date=None, run_after=AT
            ),
        ),
        (
            DagRunType.SCHEDULED,
            DagRun.generate_run_id(run_type=DagRunType.SCHEDULED, logical_date=AT, run_after=AT),
        ),
        (
            DagRunType.MANUAL,
            DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=AT, run_after=AT),
        ),
    ]


@pytest.fixture
def long_ids(server, browser):
    """Events produced by runs of each kind, each consumed by an asset-triggered run, all with
    real-length ids; the browser logged in."""
    assert len(PRODUCER) == len(CONSUMER) == 60
    assert len(TASK) == 60
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    producer, consumer = DagFactory(dag_id=PRODUCER), DagFactory(dag_id=CONSUMER)
    asset = AssetFactory(name="orders", uri="s3://warehouse/orders")
    run_ids = []
    for n, (run_type, run_id) in enumerate(_run_ids()):
        run = DagRunFactory(dag=producer, run_id=run_id, run_type=run_type, state="success")
        event = AssetEventFactory(
            asset=asset,
            source_dag_id=PRODUCER,
            source_task_id=TASK,
            source_run_id=run.run_id,
            timestamp=AT + timedelta(minutes=n),
        )
        consumed_by = DagRunFactory(
            dag=consumer,
            run_id=DagRun.generate_run_id(
                run_type=DagRunType.ASSET_TRIGGERED, logical_date=None, run_after=event.timestamp
            ),
            run_type=DagRunType.ASSET_TRIGGERED,
            state="success",
        )
        DagRunAssetEvent.objects.create(dag_run=consumed_by, event=event)
        run_ids += [run.run_id, consumed_by.run_id]
    log_in(browser, server.url, "ops", "s3cret")
    return asset, run_ids


def _lines(browser, selector: str) -> list[tuple[str, float]]:
    """Each element's text and its lines: its height over its line height."""
    return browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(e => [e.textContent,"
        " e.getBoundingClientRect().height / parseFloat(getComputedStyle(e).lineHeight)]);",
        selector,
    )


def _timestamps_whole(browser, run_ids: list[str]) -> None:
    """Every run id's timestamp is inside one unbreakable part, and no part is broken."""
    parts = browser.execute_script(
        "return Array.from(document.querySelectorAll('table.ar-events .ar-idp'))"
        ".map(p => [p.textContent, p.getClientRects().length]);"
    )
    assert all(rects == 1 for _, rects in parts), [p for p in parts if p[1] != 1]
    texts = [text for text, _ in parts]
    for run_id in run_ids:
        stamp = run_id.split("__", 1)[1][:26]  # 2026-12-04T10:15:30.123456 (or a prefix of it)
        assert any(stamp in text for text in texts), (run_id, texts)


@pytest.mark.parametrize("page", ["overview", "asset"])
def test_long_ids_take_two_lines_at_most_and_keep_their_timestamps_whole(
    long_ids, server, browser, page
):
    # given
    asset, run_ids = long_ids
    url = "/admin/" if page == "overview" else f"/admin/assets_app/asset/{asset.pk}/change/"

    # when
    browser.get(f"{server.url}{url}")

    # then every event row is there, its producer and consumer stacked a line per id
    rows = _css(browser, "table.ar-events tbody tr")
    assert len(rows) == 3
    text = rows[0].text
    assert PRODUCER in text.replace("\n", "")
    lines = _lines(browser, "table.ar-events .ar-line")
    assert len(lines) == 3 * 3 + 3 * 2  # DAG / .task / @ run, and DAG / @ run, per event
    assert all(0.9 < n < 2.1 for _, n in lines), [(t, round(n, 2)) for t, n in lines if n >= 2.1]
    if page == "overview":  # its seven columns: the long ids need their second line there
        assert any(n > 1.9 for _, n in lines), lines
    _timestamps_whole(browser, run_ids)
    _no_sideways_scroll(browser)  # at 1400 px, and every .ar-id in two lines at most
