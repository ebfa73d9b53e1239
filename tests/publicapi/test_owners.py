"""Owners as Airflow 3.3 answers them: each task's ``owner`` (Airflow's ``BaseOperator.owner``,
default ``airflow``), each DAG's ``owners`` (its tasks', sorted, each once) on every
``/api/v2`` DAG route, and joined by ``", "`` on the execution API's ``GET /dags/{dag_id}``."""

from __future__ import annotations

import pytest
import yaml

from assets_app.exceptions import ManifestError
from assets_app.models import Dag, DagTask
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from tests.executionapi.conftest import client_for
from tests.factories import DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

MANIFEST = """
dags:
  - dag_id: owned
    tasks:
      - {task_id: extract, owner: zoe}
      - {task_id: load, owner: data-eng, upstream: [extract]}
      - {task_id: report, owner: zoe, upstream: [load]}
  - dag_id: unowned
    tasks:
      - {task_id: only}
"""


def _declare(text: str = MANIFEST) -> None:
    manifest = manifest_parse(yaml.safe_load(text), base_dir=None)
    dags_declare(manifest=manifest, fileloc="/opt/dags/owners.yaml")


def test_tasks_keep_their_owner_and_dags_their_sorted_owners():
    _declare()

    owners = dict(DagTask.objects.filter(dag_id="owned").values_list("task_id", "owner"))
    assert owners == {"extract": "zoe", "load": "data-eng", "report": "zoe"}
    assert Dag.objects.get(dag_id="owned").owners == ["data-eng", "zoe"]
    assert DagTask.objects.get(dag_id="unowned").owner == "airflow"
    assert Dag.objects.get(dag_id="unowned").owners == ["airflow"]


def test_every_dag_route_answers_the_sorted_owners(admin_api):
    _declare()

    listed = admin_api.get("dags", {"order_by": "dag_id"}).json()["dags"]
    one = admin_api.get("dags/owned").json()
    details = admin_api.get("dags/owned/details").json()
    patched = admin_api.patch("dags/owned", {"is_paused": False}).json()
    many = admin_api.patch("dags?dag_id_pattern=owned", {"is_paused": True}).json()

    assert [(d["dag_id"], d["owners"]) for d in listed] == [
        ("owned", ["data-eng", "zoe"]),
        ("unowned", ["airflow"]),
    ]
    for body in (one, details, patched):
        assert body["owners"] == ["data-eng", "zoe"], body
    assert {d["dag_id"]: d["owners"] for d in many["dags"]} == {  # "owned" is in "unowned"
        "owned": ["data-eng", "zoe"],
        "unowned": ["airflow"],
    }


def test_task_routes_answer_the_tasks_owner(admin_api):
    _declare()

    tasks = admin_api.get("dags/owned/tasks").json()["tasks"]
    one = admin_api.get("dags/owned/tasks/load").json()

    assert {t["task_id"]: t["owner"] for t in tasks} == {
        "extract": "zoe",
        "load": "data-eng",
        "report": "zoe",
    }
    assert one["owner"] == "data-eng"


def test_the_execution_apis_dag_joins_the_owners():
    _declare()
    ti = TaskInstanceFactory(
        dag_run=DagRunFactory(dag=Dag.objects.get(dag_id="unowned")), task_id="only"
    )

    response = client_for(ti).get("/execution/dags/owned")

    assert response.status_code == 200, response.content
    assert response.json()["owners"] == "data-eng, zoe"


def test_redeclaring_changes_the_owners():
    _declare()
    _declare(MANIFEST.replace("owner: zoe", "owner: ann"))

    assert Dag.objects.get(dag_id="owned").owners == ["ann", "data-eng"]


@pytest.mark.parametrize("owner", ["", 3, "x" * 501, "a\x00b"])
def test_a_bad_owner_is_a_manifest_error(owner):
    text = yaml.safe_dump({"dags": [{"dag_id": "d", "tasks": [{"task_id": "t", "owner": owner}]}]})
    with pytest.raises(ManifestError, match="owner: expected a name"):
        _declare(text)
