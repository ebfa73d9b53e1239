"""Lineage pictures show ids whole (issue 40): a box's label wraps over as many lines as it
needs (up to ``LABEL_LINES``, enough for Airflow's 250-character DAG ids), broken after a
separator where one falls late enough in the line, and the box grows to hold it; only a label
longer than that (an asset URI may have 1,500 characters) is cut, and its tooltip is whole."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.core.management import call_command

from assets_app.admin.charts import (
    LABEL_CHARS,
    LABEL_LINES,
    NODE_HEIGHT,
    Lineage,
    Node,
    _wrap,
    lineage_svg,
)
from assets_app.models import Asset
from tests.assets_app.admin import change

#: a DAG id of Airflow's greatest length (250), made the way teams name them
LONG_DAG_ID = (
    "finance_emea_warehouse_orders_daily_export_and_customer_dimension_refresh_"
    "with_late_arriving_facts_reconciliation_for_the_quarterly_close_"
    "and_regulatory_reporting_to_the_central_bank_of_ireland_and_the_"
    "bundesbank_version_2"
)[:250]


def texts(svg: str) -> list[str]:
    return [unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def test_a_long_id_wraps_after_separators_into_whole_lines():
    lines = _wrap(LONG_DAG_ID, LABEL_CHARS)

    assert "".join(lines) == LONG_DAG_ID
    assert all(len(line) <= LABEL_CHARS for line in lines)
    assert len(lines) <= LABEL_LINES
    assert all(line.endswith("_") for line in lines[:-1])  # broken after a separator


def test_an_id_without_separators_wraps_at_the_width_and_a_huge_one_is_cut():
    plain = "x" * 70
    huge = "s3://bucket/" + "a" * 1500

    assert _wrap(plain, LABEL_CHARS) == ["x" * 33, "x" * 33, "x" * 4]
    cut = _wrap(huge, LABEL_CHARS)
    assert len(cut) == LABEL_LINES
    assert cut[-1].endswith("…")
    assert _wrap("short_id", LABEL_CHARS) == ["short_id"]


@pytest.mark.parametrize("direction", ["right", "down"])
def test_a_box_holds_its_whole_label_and_grows_with_it(direction):
    lineage = Lineage()
    dag = lineage.add(Node(key="d", label=LONG_DAG_ID, kind="dag", url="/d", note="paused"))
    asset = lineage.add(Node(key="a", label="s3://bucket/orders", kind="asset", url="/a"))
    lineage.link(asset, dag)

    svg = str(lineage_svg(lineage, title="t", direction=direction))

    shown = texts(svg)
    assert "".join(shown[:-2]) == LONG_DAG_ID  # the DAG's lines, then its note, the asset's
    assert shown[-2:] == ["paused", "s3://bucket/orders"]
    assert "…" not in svg
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([\d.]+)"', svg)]
    assert heights[0] > NODE_HEIGHT  # the DAG's box, grown
    assert heights[1] == NODE_HEIGHT  # the asset's, as before
    width, height = (float(v) for v in re.search(r'viewBox="0 0 (\S+) (\S+)"', svg).groups())
    tops = [float(y) for y in re.findall(r'<rect x="[\d.]+" y="([\d.]+)"', svg)]
    assert min(tops) >= 0
    assert all(top + h <= height for top, h in zip(tops, heights, strict=True))
    assert width > 0


@pytest.mark.django_db
def test_the_asset_page_names_a_long_dag_id_whole(admin_client, tmp_path):
    manifest = tmp_path / "dags.yaml"
    manifest.write_text(
        "dags:\n"
        f"  - dag_id: {LONG_DAG_ID}\n"
        "    schedule:\n"
        "      asset: {uri: 's3://warehouse/orders/daily'}\n"
        "    tasks:\n"
        "      - task_id: reconcile\n"
    )
    call_command("declare_dags", str(manifest), stdout=None)
    asset = Asset.objects.get(uri="s3://warehouse/orders/daily")

    content = admin_client.get(change("asset", asset.pk)).content.decode()

    start = content.index('<svg class="ar-lineage')
    svg = content[start : content.index("</svg>", start)]
    assert LONG_DAG_ID in "".join(texts(svg))
