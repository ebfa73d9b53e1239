"""The admin in a real browser, as an operator uses it, against a live gunicorn server.

One walk through the admin pages of docs/admin.md: log in, find an asset by uri, read its page,
filter the events by source DAG, read one event, pause a DAG with the list action, read the
DAG's page, look at the queue.
Screenshots of every step are saved under the test's tmp_path.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from assets_app.models import AssetDagRunQueue, AssetEvent, Dag, TaskInstance, TaskInstanceState
from assets_app.tokens import token_issue
from tests.factories import DagRunFactory, TaskInstanceFactory

# what a browser shows and does; the pages' queries run on both databases in tests/assets_app/admin
pytestmark = [pytest.mark.slow, pytest.mark.sqlite]

REPO = Path(__file__).resolve().parents[2]
USERNAME = "operator"
PASSWORD = "correct-horse-battery-staple"
ASSET_URI = "s3://bucket/my-task"
OTHER_URI = "s3://bucket/other-output"
ASSET_PRODUCER = ("asset_s3_bucket_producer", "produce_asset_events")
ALIAS_PRODUCER = ("asset_alias_example_alias_producer", "produce_asset_events_through_asset_alias")
ASSET_EXTRA = {"rows": 42, "source": {"table": "orders", "partitions": ["2026-11-29"]}}
ALIAS_EXTRA = {"via": "example-alias", "checksum": "abc123"}
END = "2026-11-30T04:50:58.540508Z"


# --- data: DAGs declared from the examples, events registered through the HTTP API -----------


def _running_ti(dag_id: str, task_id: str) -> TaskInstance:
    run = DagRunFactory(dag=Dag.objects.get(pk=dag_id))
    return TaskInstanceFactory(
        dag_run=run,
        task_id=task_id,
        state=TaskInstanceState.RUNNING,
        start_date=timezone.now() - timedelta(seconds=30),
        hostname="worker-1",
        unixname="airflow",
        pid=4242,
    )


def _succeed(server, ti: TaskInstance, body: dict) -> None:
    response = httpx.patch(
        f"{server.url}/execution/task-instances/{ti.pk}/state",
        json={"state": "success", "end_date": END, "rendered_map_index": None, **body},
        headers={
            "Authorization": f"Bearer {token_issue(task_instance_id=str(ti.pk))}",
            "Airflow-API-Version": "2026-06-30",
        },
        timeout=30,
    )
    assert response.status_code == 204, (response.text, server.log()[-3000:])


@pytest.fixture
def registry(server) -> dict[str, object]:
    """Example DAGs, an operator account, one asset event and two alias events."""
    get_user_model().objects.create_superuser(USERNAME, "operator@example.com", PASSWORD)
    call_command("declare_dags", str(REPO / "examples" / "dags.yaml"), stdout=None)

    asset_ti = _running_ti(*ASSET_PRODUCER)
    _succeed(
        server,
        asset_ti,
        {
            "task_outlets": [{"name": ASSET_URI, "uri": ASSET_URI, "type": "Asset"}],
            "outlet_events": [
                {"key": {"name": ASSET_URI, "uri": ASSET_URI}, "extra": ASSET_EXTRA},
            ],
        },
    )
    alias_ti = _running_ti(*ALIAS_PRODUCER)
    _succeed(
        server,
        alias_ti,
        {
            "task_outlets": [{"name": "example-alias", "uri": None, "type": "AssetAlias"}],
            "outlet_events": [
                {
                    "source_alias_name": "example-alias",
                    "dest_asset_key": {"name": ASSET_URI, "uri": ASSET_URI},
                    "extra": ALIAS_EXTRA,
                },
                {
                    "source_alias_name": "example-alias",
                    "dest_asset_key": {"name": "other-output", "uri": OTHER_URI},
                    "extra": {},
                },
            ],
        },
    )
    alias_event = AssetEvent.objects.get(source_dag_id=ALIAS_PRODUCER[0], asset__uri=ASSET_URI)
    assert AssetDagRunQueue.objects.exists()
    return {"asset_ti": asset_ti, "alias_ti": alias_ti, "alias_event": alias_event}


# --- browser helpers --------------------------------------------------------------------------


class Operator:
    """The browser, with the few gestures the walk needs and a screenshot after each."""

    def __init__(self, driver, base_url: str, shots: Path) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver = driver
        self.base_url = base_url
        self.shots = shots
        self.by = By
        self.wait = WebDriverWait(driver, 15)
        self.step = 0

    def open(self, path: str) -> None:
        self.driver.get(f"{self.base_url}{path}")

    def find(self, css: str):
        return self.driver.find_element(self.by.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list:
        return self.driver.find_elements(self.by.CSS_SELECTOR, css)

    def text(self, css: str = "body") -> str:
        return self.find(css).text

    def click_and_load(self, element) -> None:
        """Click something that navigates, and wait until the new page has loaded."""
        from selenium.webdriver.support import expected_conditions as ec

        old_html = self.find("html")
        element.click()
        self.wait.until(ec.staleness_of(old_html))
        self.wait.until(lambda d: d.execute_script("return document.readyState") == "complete")

    def link(self, text: str):
        return self.driver.find_element(self.by.LINK_TEXT, text)

    def shot(self, name: str) -> Path:
        """Save a screenshot of the whole page (not only the window) as NN-name.png."""
        self.step += 1
        path = self.shots / f"{self.step:02d}-{name}.png"
        size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"]}
                | {"scale": 1},
            },
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def assert_styled(self) -> None:
        """The admin's stylesheet loaded and applies: base.css parsed, header coloured."""
        sheets = self.driver.execute_script(
            "return Array.from(document.styleSheets).map("
            "  s => [s.href || '', s.cssRules ? s.cssRules.length : 0])"
        )
        base = [rules for href, rules in sheets if href.endswith("/static/admin/css/base.css")]
        assert base, sheets
        assert base[0] > 50, sheets
        header = self.find("#header")
        background = header.value_of_css_property("background-color")
        assert background not in ("", "transparent", "rgba(0, 0, 0, 0)"), background
        assert self.find("body").value_of_css_property("font-family") != "Times New Roman"


def _row_texts(operator: Operator) -> list[str]:
    return [row.text for row in operator.find_all("#result_list tbody tr")]


# --- the walk ---------------------------------------------------------------------------------


def test_operator_walks_through_the_admin(browser, server, registry, tmp_path):
    operator = Operator(browser, server.url, tmp_path)
    base_css = httpx.get(f"{server.url}/static/admin/css/base.css", timeout=10)
    assert base_css.status_code == 200
    assert "text/css" in base_css.headers["content-type"]

    # log in through the login form
    operator.open("/admin/")
    assert "/admin/login/" in browser.current_url
    operator.find("#id_username").send_keys(USERNAME)
    operator.find("#id_password").send_keys(PASSWORD)
    operator.shot("login")
    operator.assert_styled()
    operator.click_and_load(operator.find("#login-form [type=submit]"))
    assert browser.current_url.rstrip("/").endswith("/admin")
    home = operator.text()
    assert "Site administration" in home
    for section in ("Assets", "Asset events", "DAGs", "Asset DAG-run queue"):
        assert section.lower() in home.lower(), section
    operator.assert_styled()
    operator.shot("home")

    # the asset list, searched by uri
    operator.click_and_load(operator.link("Assets"))
    rows = _row_texts(operator)
    assert any(OTHER_URI in row for row in rows), rows
    search = operator.find("#searchbar")
    search.send_keys("bucket/my-task")
    operator.click_and_load(operator.find("#changelist-search [type=submit]"))
    rows = _row_texts(operator)
    assert len(rows) == 1, rows
    assert ASSET_URI in rows[0], rows
    assert "example-alias" in rows[0]
    operator.assert_styled()
    operator.shot("asset-list-search")

    # the asset page: its alias, its lineage and its latest events
    operator.click_and_load(operator.find("#result_list tbody tr th a"))
    page = operator.text("#content")
    assert ASSET_URI in page
    assert "example-alias" in operator.text(".inline-group")
    latest = operator.text("#ar-asset-events")
    assert ASSET_PRODUCER[0] in latest, latest
    assert ALIAS_PRODUCER[0] in latest, latest
    assert "all events of this asset" in latest
    lineage = operator.text("#ar-asset-lineage svg")
    assert "asset_s3_bucket_consumer" in lineage, lineage
    assert ASSET_PRODUCER[1] in lineage, lineage
    operator.shot("asset-page")

    # the event list, filtered by source DAG
    operator.click_and_load(operator.link("all events of this asset"))
    assert len(_row_texts(operator)) == 2
    filters = operator.text("#changelist-filter")
    assert "By source DAG" in filters, filters
    operator.click_and_load(
        operator.find(f"#changelist-filter a[href*='source_dag={ALIAS_PRODUCER[0]}']")
    )
    assert f"source_dag={ALIAS_PRODUCER[0]}" in browser.current_url
    rows = _row_texts(operator)
    assert len(rows) == 1, rows
    assert ALIAS_PRODUCER[0] in rows[0], rows
    assert "example-alias" in rows[0]
    operator.assert_styled()
    operator.shot("event-list-by-source-dag")

    # the event page: extra pretty-printed, its source alias
    event = registry["alias_event"]
    operator.click_and_load(operator.link(str(event.pk)))
    extra = operator.text(".field-extra_pretty pre")
    assert extra == json.dumps(ALIAS_EXTRA, indent=2, sort_keys=True), extra
    assert "example-alias" in operator.text(".field-source_alias_names")
    assert ALIAS_PRODUCER[0] in operator.text(".field-source_dag")
    assert ASSET_URI in operator.text(".field-asset_uri")
    operator.shot("event-page")

    # the DAG list: pause one DAG with the list action
    operator.open("/admin/assets_app/dag/")
    consumer = "asset_s3_bucket_consumer"
    assert not Dag.objects.get(pk=consumer).is_paused
    checkbox = operator.find(f"#result_list input[name=_selected_action][value='{consumer}']")
    checkbox.click()
    from selenium.webdriver.support.ui import Select

    Select(operator.find("select[name=action]")).select_by_visible_text("Pause selected DAGs")
    operator.shot("dag-list-action")
    operator.click_and_load(operator.find("#changelist-form button[name=index]"))
    assert "Paused 1 DAG(s)." in operator.text(".messagelist")
    assert Dag.objects.get(pk=consumer).is_paused
    assert Dag.objects.filter(is_paused=True).count() == 1
    operator.assert_styled()
    operator.shot("dag-list-paused")

    # the DAG page: its schedule summary and the references its manifest declared
    operator.click_and_load(operator.link(consumer))
    assert operator.text(".field-schedule .readonly") == ASSET_URI
    references = operator.text("#content").upper()
    for heading in ("SCHEDULE: ASSETS", "TASK INLETS (ASSETS)"):
        assert heading in references, references
    assert "CONSUME_ASSET_EVENTS" in references
    assert operator.find("#id_is_paused").is_selected()
    operator.shot("dag-page")

    # the queue: consumers waiting on the registered assets, and for how long
    operator.open("/admin/assets_app/assetdagrunqueue/")
    rows = _row_texts(operator)
    assert rows, operator.text()
    queued = {row.split()[0] for row in rows}
    assert queued == set(AssetDagRunQueue.objects.values_list("target_dag_id", flat=True))
    for row in rows:
        # a human duration: "0.4 s", "42 s", "2 m 40 s", "1 h 01 m", "2 d 4 h"
        assert re.search(r"\b\d+(\.\d)? s\b|\b\d+ [mhd] \d+ [smh]\b", row), row
    assert "waiting for" in operator.text("#result_list thead").lower()
    operator.assert_styled()
    operator.shot("queue")
