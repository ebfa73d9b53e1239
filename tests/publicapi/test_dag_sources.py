"""The text of a DAG's file (``dag_code``), kept when the file loads, served by Airflow's
``/api/v2/dagSources/{dag_id}`` and shown on the admin's DAG page (issue 40)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assets_app.models import DagCode
from assets_app.services.dags.dag_files import FileOutcome, ParsedFile, dag_file_store
from assets_app.services.dags.declare import dags_declare_from_file
from tests.assets_app.admin import change

pytestmark = pytest.mark.django_db

FOLDER = Path("/srv/airflow/dags")
DAG_ID = "warehouse_orders_daily_rollup_v2"
SOURCE = '''"""Roll the day's orders up into the warehouse."""
import pendulum
from airflow.sdk import DAG, task

with DAG("warehouse_orders_daily_rollup_v2", schedule="@daily", tags=["orders"],
         start_date=pendulum.datetime(2026, 1, 1)):
    @task
    def rollup():
        return {"rows": 3}  # <b>not markup</b>

    rollup()
'''


def _parsed(source: str) -> ParsedFile:
    path = FOLDER / "orders" / "rollup.py"
    entry = {
        "dag_id": DAG_ID,
        "schedule": "@daily",
        "tags": ["orders"],
        "airflow_dag_file": str(path),
        "tasks": [{"task_id": "rollup"}],
    }
    return ParsedFile(path=path, entries=[entry], source=source)


@pytest.fixture
def loaded() -> DagCode:
    assert dag_file_store(parsed=_parsed(SOURCE), folder=FOLDER).outcome == FileOutcome.DECLARED
    return DagCode.objects.get()


def test_a_load_keeps_the_files_text_and_an_unchanged_text_writes_nothing(loaded):
    assert loaded.fileloc == str(FOLDER / "orders" / "rollup.py")
    assert loaded.source_code == SOURCE

    # the same file again: nothing written
    assert dag_file_store(parsed=_parsed(SOURCE), folder=FOLDER).outcome == FileOutcome.UNCHANGED
    assert DagCode.objects.get().last_updated == loaded.last_updated

    # a comment edited: the DAGs are unchanged, the text is kept anew
    edited = SOURCE.replace("Roll the day's", "Roll each day's")
    assert dag_file_store(parsed=_parsed(edited), folder=FOLDER).outcome == FileOutcome.UNCHANGED
    assert DagCode.objects.get().source_code == edited


def test_a_manifest_load_keeps_the_manifests_text(tmp_path):
    manifest = tmp_path / "dags.yaml"
    manifest.write_text("dags:\n  - dag_id: nightly_export\n    tasks:\n      - task_id: export\n")

    dags_declare_from_file(path=manifest)

    assert DagCode.objects.get(fileloc=str(manifest.resolve())).source_code == (
        manifest.read_text()
    )


def test_the_public_api_serves_the_source_as_json_or_text(loaded, admin_api):
    as_json = admin_api.get(f"dagSources/{DAG_ID}")
    assert as_json.status_code == 200
    assert as_json.json() == {
        "content": SOURCE,
        "dag_id": DAG_ID,
        "version_number": 1,
        "dag_display_name": DAG_ID,
    }
    assert admin_api.get(f"dagSources/{DAG_ID}", {"version_number": 1}).json() == as_json.json()

    as_text = admin_api.client.get(
        f"/api/v2/dagSources/{DAG_ID}", HTTP_ACCEPT="text/plain", **admin_api.headers
    )
    assert as_text.status_code == 200
    assert as_text["Content-Type"].startswith("text/plain")
    assert as_text.content.decode() == SOURCE


def test_the_public_api_says_what_it_cannot_serve(loaded, admin_api, reader_api, anonymous_api):
    assert admin_api.get("dagSources/no_such_dag").status_code == 404
    assert admin_api.get(f"dagSources/{DAG_ID}", {"version_number": 2}).json() == {
        "detail": f"The source code of the DAG {DAG_ID}, version_number 2 was not found"
    }
    assert admin_api.get(f"dagSources/{DAG_ID}", {"version_number": "x"}).status_code == 422
    html = admin_api.client.get(
        f"/api/v2/dagSources/{DAG_ID}", HTTP_ACCEPT="text/html", **admin_api.headers
    )
    assert html.status_code == 406
    assert html.json() == {"detail": "Only application/json or text/plain is supported"}
    assert reader_api.get(f"dagSources/{DAG_ID}").status_code == 200
    assert anonymous_api.get(f"dagSources/{DAG_ID}").status_code == 401


def test_the_dag_page_shows_the_code_highlighted_and_escaped(loaded, admin_client):
    html = admin_client.get(change("dag", DAG_ID)).content.decode()

    code = html[html.index('id="ar-dag-code"') :]
    code = code[: code.index("</details>")]
    assert "11 lines" in code
    assert '<span class="kn">from</span>' in code  # Python, highlighted
    assert "&lt;b&gt;not markup&lt;/b&gt;" in code  # the text is escaped
    assert "<b>not markup</b>" not in code
