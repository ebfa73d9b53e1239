"""The overview, the asset page, the DAG page and the emit-event form in headless Chromium at
1400 px, against a live gunicorn server and a month of seeded history (devtools.showcase):
the charts and the lineage render, their links resolve, nothing scrolls sideways."""

from __future__ import annotations

import json
import re
from urllib.parse import urljoin

import httpx
import pytest
from django.contrib.admin.models import LogEntry

from assets_app.formats import duration_human
from assets_app.models import Asset, AssetDagRunQueue, AssetEvent, Dag, DagRun
from devtools.browser import full_page_png, log_in
from devtools.showcase import (
    GRAPH_DAG,
    GRAPH_STATES,
    GRAPH_TASKS,
    PASSWORD,
    USERNAME,
    showcase_seed,
)
from tests.assets_app.admin import ADMIN_MODELS

# what a browser shows and does; the pages' queries run on both databases in tests/assets_app/admin
pytestmark = [pytest.mark.slow, pytest.mark.sqlite]


@pytest.fixture
def site(server, browser):
    """The seeded registry, and the browser logged in as the operator."""
    showcase = showcase_seed()
    log_in(browser, server.url, USERNAME, PASSWORD)
    return showcase


def _css(browser, selector: str) -> list:
    from selenium.webdriver.common.by import By

    return browser.find_elements(By.CSS_SELECTOR, selector)


def _no_sideways_scroll(browser) -> None:
    """Neither the page nor a scrollable part of it (the admin's result table box, a lineage
    box) is wider than what the 1400 px window shows."""
    page = browser.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert page[0] <= page[1], f"page {page[0]} px wide in a {page[1]} px window"
    assert browser.execute_script("return window.innerWidth") == 1400
    overflowing = browser.execute_script(
        "return Array.from(document.querySelectorAll('#content *'))"
        ".filter(e => e.scrollWidth > e.clientWidth + 1"
        "  && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))"
        ".map(e => e.id || e.className)"
    )
    assert overflowing == [], overflowing
    _ids_read_whole(browser)


def _list_has_room(browser, model: str) -> None:
    """The list's table at its narrowest (every cell at its widest unbreakable part) leaves
    60 px of its box free: a run id's random suffix of wide letters, an event id with a digit
    more or a longer duration than the seed's must not make it scroll."""
    narrowest, box = browser.execute_script(
        "const t = document.querySelector('#result_list');"
        "const box = t.parentElement.clientWidth;"
        "t.style.width = 'min-content';"
        "const narrowest = t.getBoundingClientRect().width;"
        "t.style.width = '';"
        "return [narrowest, box];"
    )
    assert narrowest <= box - 60, f"{model}: the table needs {narrowest:.0f} of {box} px"


def _ids_read_whole(browser) -> None:
    """Every id on the page (``.ar-id``) takes two lines at most (but in the narrow filter
    sidebar, ``.ar-id-any``) and no part of it (``.ar-idp``: a word, a timestamp) is broken
    over two lines; the same for a timestamp."""
    bad = browser.execute_script(
        "const out = [];"
        "for (const id of document.querySelectorAll('#content .ar-id, #content .ar-when')) {"
        "  const parts = Array.from(id.querySelectorAll('.ar-idp'));"
        "  const broken = parts.filter(p => p.getClientRects().length > 1);"
        "  const tops = new Set(parts.map(p => Math.round(p.getBoundingClientRect().top)));"
        "  const two = id.classList.contains('ar-id') && !id.classList.contains('ar-id-any');"
        "  if (broken.length || (two && tops.size > 2))"
        "    out.push([id.textContent, tops.size, broken.map(p => p.textContent)]);"
        "}"
        "return out;"
    )
    assert bad == [], bad[:5]


def _links_resolve(browser, server, selector: str) -> int:
    """GET every link under ``selector`` with the browser's session; all answer 200."""
    cookies = {c["name"]: c["value"] for c in browser.get_cookies()}
    hrefs = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(a => a.getAttribute('href') || a.getAttribute('xlink:href'))",
        f"{selector} a",
    )
    assert hrefs, selector
    with httpx.Client(cookies=cookies, timeout=30) as client:
        for href in sorted(set(hrefs)):
            url = urljoin(browser.current_url, href)
            response = client.get(url)
            assert response.status_code == 200, (href, response.status_code)
            assert "/admin/login/" not in str(response.url), href
    return len(set(hrefs))


def _rendered_size(element) -> tuple[int, int]:
    size = element.size
    return size["width"], size["height"]


def test_overview(site, server, browser, tmp_path):
    browser.get(f"{server.url}/admin/")
    overview = _css(browser, "#ar-overview")[0]
    assert "Overview" in overview.text
    cards = _css(browser, "#ar-card-queue")[0].text
    assert "1 DAG(s) waiting" in cards
    assert "oldest wait" in cards
    # the chart is drawn: 48 bars with a size, the x axis labelled
    chart = _css(browser, "#ar-overview figure.ar-chart svg")[0]
    width, height = _rendered_size(chart)
    assert width > 800, (width, height)
    assert height > 150, (width, height)
    bars = _css(browser, "#ar-overview figure.ar-chart svg .bar rect")
    assert len(bars) == 48
    assert sum(1 for bar in bars if bar.size["height"] > 0) >= 30
    # the latest events: producer → asset → consumers
    rows = _css(browser, "#ar-overview table.ar-events tbody tr")
    assert len(rows) == 10
    assert "waiting:" in rows[0].text
    assert site.waiting_dag_id in rows[0].text
    assert _links_resolve(browser, server, "#ar-overview") > 40
    _no_sideways_scroll(browser)
    full_page_png(browser, tmp_path / "overview.png")


def test_asset_page(site, server, browser, tmp_path):
    browser.get(f"{server.url}/admin/assets_app/asset/{site.asset.pk}/change/")
    lineage = _css(browser, "#ar-asset-lineage svg.ar-lineage")[0]
    assert _rendered_size(lineage)[0] > 600
    nodes = _css(browser, "#ar-asset-lineage svg a.ar-node")
    labels = {node.text for node in nodes}
    assert {"s3://bucket/my-task", "example-alias", "produce_asset_events"} <= {
        label.split("\n")[0] for label in labels
    }, labels
    waiting = _css(browser, "#ar-asset-lineage svg a.ar-waiting")
    assert len(waiting) == 1
    assert site.waiting_dag_id in waiting[0].text

    # boxes are laid out left to right: producers, the asset, consumers
    def x(node):
        return node.location["x"]

    focus = _css(browser, "#ar-asset-lineage svg a.ar-focus")[0]
    assert x(waiting[0]) > x(focus) > x(_css(browser, "#ar-asset-lineage svg a.ar-alias")[0])
    assert len(_css(browser, "#ar-asset-chart svg .bar rect")) == 30
    assert len(_css(browser, "#ar-asset-events table.ar-events tbody tr")) == 10
    _links_resolve(browser, server, "#ar-asset-lineage")
    _links_resolve(browser, server, "#ar-asset-chart")
    _links_resolve(browser, server, "#ar-asset-events")
    _no_sideways_scroll(browser)
    full_page_png(browser, tmp_path / "asset.png")


def test_dag_page(site, server, browser, tmp_path):
    browser.get(f"{server.url}/admin/assets_app/dag/{site.waiting_dag_id}/change/")
    nodes = _css(browser, "#ar-dag-lineage svg a.ar-node")
    assert len(nodes) == 3  # its input asset (queued) → the DAG → its task (reads the asset)
    queued = _css(browser, "#ar-dag-lineage svg a.ar-waiting")[0]
    assert "s3://bucket/my-task" in queued.text
    assert "event queued" in queued.text
    runs = _css(browser, "#ar-dag-runs tbody tr")
    assert len(runs) == 10
    assert "success" in runs[0].text  # state
    newest = DagRun.objects.filter(dag_id=site.waiting_dag_id).order_by("-run_after").first()
    took = duration_human(newest.end_date - newest.start_date)
    assert re.search(r"^\d+ s$|^\d+ m \d+ s$", took), took
    assert runs[0].text.endswith(f" {took}"), runs[0].text  # the duration, human
    _links_resolve(browser, server, "#ar-dag-lineage")
    _links_resolve(browser, server, "#ar-dag-runs")
    _no_sideways_scroll(browser)

    browser.get(f"{server.url}/admin/assets_app/dag/asset_s3_bucket_producer/change/")
    kinds = [n.get_attribute("class") for n in _css(browser, "#ar-dag-lineage svg a.ar-node")]
    assert len(kinds) == 3, kinds  # DAG → task → asset
    assert any("ar-task" in k for k in kinds), kinds
    _links_resolve(browser, server, "#ar-dag-lineage")
    full_page_png(browser, tmp_path / "dag.png")


def test_dag_page_draws_the_task_graph_top_to_bottom(site, server, browser, tmp_path):
    browser.get(f"{server.url}/admin/assets_app/dag/{GRAPH_DAG}/change/")
    graph = _css(browser, "#ar-dag-lineage svg.ar-flow-down")[0]
    assert _rendered_size(graph)[0] <= 1400

    def box(label: str):
        (node,) = [n for n in _css(graph, "a.ar-node") if n.text.split("\n")[0] == label]
        return node.rect

    # the tasks one row after the other along their edges, the two branches side by side
    tops = {task: box(task)["y"] for task, _ in GRAPH_TASKS}
    assert tops["extract_orders"] < tops["transform_orders"] < tops["export_orders"]
    assert tops["export_orders"] == tops["refresh_customers"] < tops["publish_report"]
    # the alias and the Asset.ref outlets below their tasks, what they resolved to below them
    assert box("daily-exports")["y"] > tops["export_orders"]
    refs = [n for n in _css(graph, "a.ar-reference") if "Asset.ref(name)" in n.text]
    assert len(refs) == 1
    produced = [n for n in _css(graph, "a.ar-asset") if "produced" in n.text]
    assert len(produced) >= 3, [n.text for n in produced]
    # the labels are readable: drawn at (nearly) the size they are written
    assert _rendered_size(graph)[0] >= int(graph.get_attribute("width")) * 0.9
    _links_resolve(browser, server, "#ar-dag-lineage")
    _no_sideways_scroll(browser)
    full_page_png(browser, tmp_path / "dag-graph.png")


def test_dag_page_grid_shows_runs_by_tasks_in_their_colours(site, server, browser, tmp_path):
    browser.get(f"{server.url}/admin/assets_app/dag/{GRAPH_DAG}/change/")
    runs = DagRun.objects.filter(dag_id=GRAPH_DAG).count()
    shown = min(runs, 25)
    columns = _css(browser, "#ar-dag-grid thead a.ar-grid-run")
    assert len(columns) == shown
    rows = _css(browser, "#ar-dag-grid tbody tr")
    # the tasks in graph order: each after its upstream tasks
    order = [row.find_element("css selector", "th").text.replace("\n", "") for row in rows]
    assert order.index("extract_orders") < order.index("transform_orders")
    assert order.index("transform_orders") < order.index("export_orders")
    assert order[-1] == "publish_report", order
    cells = _css(browser, "#ar-dag-grid tbody .ar-grid-cell")
    assert len(cells) == shown * len(rows)
    # each cell is a square in its state's colour, big enough to click
    colours = {c.value_of_css_property("background-color") for c in cells}
    assert len(colours) >= 2, colours
    assert all(_rendered_size(c) == (16, 16) for c in cells[:5])
    _links_resolve(browser, server, "#ar-dag-grid tbody")
    _no_sideways_scroll(browser)
    full_page_png(browser, tmp_path / "dag-grid.png")


def test_run_page_draws_its_graph_by_state_and_a_gantt_strip(site, server, browser, tmp_path):
    run = DagRun.objects.get(dag_id=GRAPH_DAG, state="running")
    browser.get(f"{server.url}/admin/assets_app/dagrun/{run.pk}/change/")
    tasks = {
        n.text.split("\n")[0]: n.get_attribute("class")
        for n in _css(browser, "#ar-run-graph svg a.ar-task")
    }
    expected = dict(zip((t for t, _ in GRAPH_TASKS), GRAPH_STATES[2][1], strict=True))
    assert {t: c.split("ar-ti-")[-1] for t, c in tasks.items()} == expected
    # a success box is green, a running one blue (the stylesheet colours by state)
    colours = browser.execute_script(
        "return ['success', 'running'].map(s => getComputedStyle("
        "document.querySelector('#ar-run-graph a.ar-ti-' + s + ' rect')).fill)"
    )
    assert colours[0] != colours[1], colours
    bars = _css(browser, "#ar-run-gantt svg rect")
    assert len(bars) == 4  # the four started task instances
    assert all(bar.size["width"] >= 2 for bar in bars)
    assert "not started" in _css(browser, "#ar-run-gantt")[0].text
    buttons = [b.text.lower() for b in _css(browser, ".object-tools button")]
    assert any("clear" in b for b in buttons), buttons
    _links_resolve(browser, server, "#ar-run-graph")
    _links_resolve(browser, server, "#ar-run-gantt")
    _no_sideways_scroll(browser)
    full_page_png(browser, tmp_path / "run.png")


def test_emit_event_form(site, server, browser, tmp_path):
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    asset = site.asset
    AssetDagRunQueue.objects.all().delete()
    before = AssetEvent.objects.filter(asset=asset).count()
    browser.get(f"{server.url}/admin/assets_app/asset/{asset.pk}/change/")
    old = _css(browser, "html")[0]
    _css(browser, "#ar-emit-link")[0].click()
    WebDriverWait(browser, 15).until(ec.staleness_of(old))
    assert "Create asset event on s3://bucket/my-task" in browser.page_source
    _no_sideways_scroll(browser)

    # a JSON array is refused, naming the field; nothing is written
    extra = _css(browser, "#id_extra")[0]
    extra.clear()
    extra.send_keys("[1, 2]")
    old = _css(browser, "html")[0]
    _css(browser, "#ar-emit-form [type=submit]")[0].click()
    WebDriverWait(browser, 15).until(ec.staleness_of(old))
    error = _css(browser, ".field-extra .errorlist")[0].text
    assert error == "Enter a JSON object ({...}), not a JSON array.", error
    assert AssetEvent.objects.filter(asset=asset).count() == before
    full_page_png(browser, tmp_path / "emit-error.png")

    # a valid object and a partition key: created, back on the asset page
    extra = _css(browser, "#id_extra")[0]
    extra.clear()
    extra.send_keys(json.dumps({"rows": 7, "by": "operator"}))
    old = _css(browser, "html")[0]
    _css(browser, "#ar-emit-form [type=submit]")[0].click()
    WebDriverWait(browser, 15).until(ec.staleness_of(old))
    assert browser.current_url.endswith(f"/admin/assets_app/asset/{asset.pk}/change/")
    message = _css(browser, ".messagelist")[0].text
    event = AssetEvent.objects.filter(asset=asset).order_by("-id").first()
    assert f"Created asset event {event.pk}" in message
    assert site.waiting_dag_id in message  # the consumer was queued
    assert event.extra == {"rows": 7, "by": "operator"}
    assert AssetDagRunQueue.objects.filter(asset=asset, target_dag_id=site.waiting_dag_id).exists()
    entry = LogEntry.objects.get(object_id=str(asset.pk))
    assert entry.user.username == USERNAME
    # the new event heads the asset's latest events
    first = _css(browser, "#ar-asset-events tbody tr")[0].text
    assert "manual" in first
    assert "waiting:" in first
    browser.get(f"{server.url}/admin/assets_app/asset/{asset.pk}/history/")
    assert USERNAME in _css(browser, "#change-history")[0].text


def test_lists_fit_1400_px(site, server, browser):
    # the example DAGs and the showcase's graph DAG (a 60-character id)
    assert Asset.objects.filter(active__isnull=False).count() == 3
    assert Dag.objects.count() == 5
    assert max(len(dag_id) for dag_id in Dag.objects.values_list("dag_id", flat=True)) == 60
    for model in ADMIN_MODELS:
        browser.get(f"{server.url}/admin/assets_app/{model}/")
        assert _css(browser, "#result_list tbody tr"), model
        _no_sideways_scroll(browser)
        _list_has_room(browser, model)
