"""The "State stores" example of docs/execution-api.md, run as written against a live server
(``tests/docs/examples.py``), from the state ``make run`` leaves: the example DAGs declared."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from assets_app.models import AssetStateStore, TaskStateStore
from tests.docs.examples import assert_shows, doc_example, run_shell_example
from tests.live_server import REPO

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_state_stores_example_prints_what_the_page_shows(server, tmp_path):
    # given the example DAGs declared
    call_command("declare_dags", str(REPO / "examples" / "dags.yaml"), stdout=io.StringIO())

    # when the example runs
    result = run_shell_example("state-stores", tmp_path, server_url=server.url)

    # then it printed what the page shows, cleared the task's store and kept the asset's
    assert result.returncode == 0, result.stdout + result.stderr + server.log()[-3000:]
    assert_shows(doc_example("state-stores"), result.stdout)
    assert not TaskStateStore.objects.exists()
    row = AssetStateStore.objects.select_related("asset").get()
    assert (row.asset.uri, row.key) == ("s3://bucket/my-task", "watermark")
    assert json.loads(row.value) == {"until": "2026-01-01", "rows": 42}
    assert row.last_updated_by_task_id == "produce_asset_events"
