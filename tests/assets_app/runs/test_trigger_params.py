"""A DAG's params (Airflow's ``Param``) checked at trigger on every face: the service, ``manage.py
trigger_dag --conf``, ``/api/v1``, ``/api/v2`` and the execution API's trigger route (Airflow's
``TriggerDagRunOperator``). A refused conf writes nothing and names the param."""

from __future__ import annotations

from io import StringIO

import pytest
import yaml
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from assets_app.exceptions import DagRunConfError, ManifestError
from assets_app.models import Dag, DagRun
from assets_app.params import params_resolve
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.dag_runs import dag_run_trigger
from publicapi.auth import user_token_issue
from tests.executionapi.conftest import client_for as runner_client_for
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory
from tests.operatorapi.conftest import make_user, token_client
from tests.publicapi.conftest import Api

pytestmark = pytest.mark.django_db

MANIFEST = """
dags:
  - dag_id: report
    tasks: [{task_id: build}]
    params:
      day: "2026-01-01"
      limit: {default: 10, description: rows, schema: {type: integer, minimum: 1}}
      region: {schema: {type: string, enum: [eu, us]}}
"""


def declare(text: str = MANIFEST) -> None:
    dags_declare(manifest=manifest_parse(yaml.safe_load(text)), fileloc="params.yaml")


def test_the_manifest_params_are_stored_in_airflows_serialized_order():
    declare()

    assert Dag.objects.get(dag_id="report").params == [
        ["day", {"default": "2026-01-01", "description": None, "schema": {}}],
        [
            "limit",
            {"default": 10, "description": "rows", "schema": {"type": "integer", "minimum": 1}},
        ],
        ["region", {"description": None, "schema": {"type": "string", "enum": ["eu", "us"]}}],
    ]


@pytest.mark.parametrize(
    ("conf", "param", "text"),
    [
        pytest.param(None, "region", "No value passed and Param has no default value", id="none"),
        pytest.param({"limit": 3}, "region", "No value passed", id="required-missing"),
        pytest.param({"region": "mars"}, "region", "'mars' is not one of", id="enum"),
        pytest.param({"region": "eu", "limit": 0}, "limit", "less than the minimum", id="min"),
        pytest.param(
            {"region": "eu", "limit": "5"}, "limit", "is not of type 'integer'", id="type"
        ),
    ],
)
def test_a_conf_the_params_refuse_is_refused_naming_the_param(conf, param, text):
    declare()

    with pytest.raises(DagRunConfError) as raised:
        dag_run_trigger(dag_id="report", conf=conf)

    assert raised.value.message.startswith(f"Invalid input for param {param}: ")
    assert text in raised.value.message
    assert raised.value.context == {"param": param}
    assert not DagRun.objects.exists()


def test_a_conf_overrides_the_defaults_and_keeps_keys_no_param_declares():
    declare()

    run = dag_run_trigger(dag_id="report", conf={"region": "us", "extra": [1]})

    assert run.conf == {"region": "us", "extra": [1]}  # stored as given, as Airflow does
    assert params_resolve(Dag.objects.get(dag_id="report").params, run.conf) == {
        "day": "2026-01-01",
        "limit": 10,
        "region": "us",
        "extra": [1],
    }


def test_a_dag_without_params_takes_any_conf():
    DagFactory(dag_id="free")
    assert dag_run_trigger(dag_id="free", conf={"x": 1}).conf == {"x": 1}


def test_trigger_dag_command_refuses_naming_the_param():
    declare()

    with pytest.raises(CommandError, match=r"Invalid input for param limit: .*minimum"):
        call_command(
            "trigger_dag", "report", "--conf", '{"region": "eu", "limit": -1}', stdout=StringIO()
        )
    call_command("trigger_dag", "report", "--conf", '{"region": "eu"}', stdout=StringIO())
    assert DagRun.objects.get().conf == {"region": "eu"}


def test_the_operator_api_answers_400_naming_the_param():
    declare()
    client = token_client(make_user("trigger", "view_dag", "view_dagrun", "add_dagrun"))

    refused = client.post("/api/v1/dags/report/runs", {"conf": {"limit": 2}}, format="json")

    assert refused.status_code == 400, refused.content
    body = refused.json()
    assert (body["code"], body["param"]) == ("invalid_params", "region")
    assert body["detail"].startswith("Invalid input for param region: ")
    assert not DagRun.objects.exists()


def test_the_public_api_answers_airflows_400():
    declare()
    api = Api(user_token_issue(user=User.objects.create_superuser("admin", "a@b.c", "pw")))

    refused = api.post("dags/report/dagRuns", {"logical_date": None, "conf": {"region": 1}})
    accepted = api.post("dags/report/dagRuns", {"logical_date": None, "conf": {"region": "eu"}})

    assert refused.status_code == 400, refused.content
    assert refused.json()["detail"].startswith("Invalid input for param region: 1 is not")
    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["conf"] == {"region": "eu"}
    assert DagRun.objects.count() == 1


def test_the_execution_apis_trigger_route_answers_airflows_400():
    # given a running task instance of another DAG (a TriggerDagRunOperator)
    declare()
    controller = DagFactory(dag_id="controller")
    ti = TaskInstanceFactory(
        dag_run=DagRunFactory(dag=controller), task_id="trigger", state="running"
    )

    # when it triggers the DAG with a conf the params refuse, then with one they accept
    refused = runner_client_for(ti).post(
        "/execution/dag-runs/report/r1", {"conf": {"region": "xx"}}, format="json"
    )
    accepted = runner_client_for(ti).post(
        "/execution/dag-runs/report/r1", {"conf": {"region": "eu"}}, format="json"
    )

    # then
    assert refused.status_code == 400, refused.content
    detail = refused.json()["detail"]
    assert detail["reason"] == "value_error"
    assert detail["message"].startswith("Invalid input for param region: 'xx' is not one of")
    assert accepted.status_code == 204, accepted.content
    assert DagRun.objects.get(dag_id="report").conf == {"region": "eu"}


@pytest.mark.parametrize(
    ("params", "schedule", "message"),
    [
        pytest.param(
            {"region": {"schema": {"type": "string"}}},
            "@daily",
            "manifest: DAG 'd', param 'region': a scheduled DAG's params need valid defaults",
            id="scheduled-required",
        ),
        pytest.param(
            {"limit": {"default": 0, "schema": {"type": "integer", "minimum": 1}}},
            "@daily",
            "param 'limit': a scheduled DAG's params need valid defaults (its scheduled runs "
            "have no conf): 0 is less than the minimum of 1",
            id="scheduled-bad-default",
        ),
        pytest.param(
            {"limit": {"schema": {"type": "integr"}}},
            None,
            "param 'limit': schema: not a valid JSON schema",
            id="bad-schema",
        ),
        pytest.param(
            {"limit": {"default": 1, "type": "integer"}},
            None,
            "param 'limit': unknown key(s) type",
            id="unknown-key",
        ),
        pytest.param(
            ["limit"], None, "manifest: DAG 'd', params: expected a mapping", id="not-a-mapping"
        ),
    ],
)
def test_the_manifest_refuses_params_airflow_refuses(params, schedule, message):
    dag = {"dag_id": "d", "tasks": [{"task_id": "t"}], "params": params}
    if schedule:
        dag["schedule"] = schedule

    with pytest.raises(ManifestError) as raised:
        manifest_parse({"dags": [dag]})

    assert message in raised.value.message


def test_an_unscheduled_dag_may_have_required_params():
    (dag,) = manifest_parse(
        {"dags": [{"dag_id": "d", "params": {"region": {"schema": {"type": "string"}}}}]}
    ).dags
    assert [p.name for p in dag.params] == ["region"]
    assert dag.params[0].required
