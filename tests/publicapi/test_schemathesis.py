"""``/api/v2/openapi.json`` (Airflow's own document for the routes served) says what the server
does: a schema-driven fuzz run (schemathesis) through a real gunicorn on the test database,
every check on (no 5xx, status codes, content types and bodies conforming to Airflow's schemas,
invalid input rejected …), as a superuser so that requests reach the code behind the login.

Bounded: ``EXAMPLES`` examples per operation and phase (``SCHEMATHESIS_EXAMPLES`` for a longer
run), derandomized so that a failure is reproducible.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone

import hypothesis
import pytest
import schemathesis
from django.contrib.auth.models import User
from django.test import Client
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig

from assets_app.models import AssetDagRunQueue, TaskOutletAssetReference, XCom
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from publicapi.auth import user_token_issue
from tests.factories import AssetFactory, DagFactory, DagRunFactory, TaskInstanceFactory

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "20"))
USER_ID = 4242

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

#: valid long after collection; the user is created by the ``fuzzed_rows`` fixture
TOKEN = user_token_issue(user=User(pk=USER_ID), ttl_seconds=24 * 3600)

CONFIG = {
    "headers": {"Authorization": f"Bearer {TOKEN}"},
    "parameters": {
        "dag_id": "fuzzed",
        "dag_run_id": "r",
        "task_id": "t",
        "xcom_key": "k",
        "variable_key": "v",
        "connection_id": "c",
    },
    "generation": {"allow-extra-parameters": False, "allow-x00": False},
    "checks": {
        "negative_data_rejection": {
            "expected-statuses": [
                *("400", "401", "403", "404", "405", "406", "409", "414", "415", "422"),
                *("428", "429", "5xx"),
            ]
        },
        # Airflow's document cannot say which order_by names, ids or rows exist: a valid
        # request may be answered with the declared 400 (order_by), 404 (no such row) or
        # 409 (clearing a running task instance)
        "positive_data_acceptance": {
            "expected-statuses": ["2xx", "400", "401", "403", "404", "409"]
        },
    },
    "operations": [
        {
            # Airflow's TriggerDAGRunPostBody refuses one end of a data interval without the
            # other (its check_data_intervals, a 422), which its document cannot say: a
            # schema-valid body may be answered with that 422 (materialize's body is the same)
            "include-path-regex": (
                r"^/api/v2/(dags/\{dag_id\}/dagRuns|assets/\{asset_id\}/materialize)$"
            ),
            "include-method": "POST",
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "422"]
                }
            },
        },
        {
            # Airflow's PatchTaskInstanceBody takes any TaskInstanceState in its document but
            # its validator refuses all but success, failed and skipped with a 422 (as ours)
            "include-path-regex": r"/taskInstances/\{task_id\}(/\{map_index\})?$",
            "include-method": "PATCH",
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "422"]
                },
                "negative_data_rejection": {
                    "expected-statuses": [
                        *("2xx", "400", "401", "403", "404", "405", "406", "409", "414"),
                        *("415", "422", "428", "429", "5xx"),
                    ]
                },
            },
        },
        {
            # a query value is text: a "negative" update_mask such as false arrives as the
            # string "false", a valid mask entry, which Airflow's route (as ours) ignores
            # when it names no field of the body
            "include-path": "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}",
            "include-method": "PATCH",
            "checks": {
                "negative_data_rejection": {
                    "expected-statuses": [
                        *("2xx", "400", "401", "403", "404", "405", "406", "409", "414"),
                        *("415", "422", "428", "429", "5xx"),
                    ]
                }
            },
        },
        {
            # the same for the event log's excluded_events and included_events: a "negative"
            # true arrives as the string "true", a valid event name, as it does in Airflow's
            "include-path": "/api/v2/eventLogs",
            "include-method": "GET",
            "checks": {
                "negative_data_rejection": {
                    "expected-statuses": [
                        *("2xx", "400", "401", "403", "404", "405", "406", "409", "414"),
                        *("415", "422", "428", "429", "5xx"),
                    ]
                }
            },
        },
        {
            # the log route declares a header parameter (Accept), and schemathesis then counts
            # the configured Authorization header among the generated ones and calls a 200
            # "generated auth likely invalid"; that this route answers 401 without a token or
            # with a forged one is tested in test_task_logs.py
            "include-path": (
                "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/logs/"
                "{try_number}"
            ),
            "checks": {"ignored_auth": {"enabled": False}},
        },
    ],
}
# A date-time whose UTC time falls outside years 1 to 9999 is refused with a 422, which
# OpenAPI cannot say: valid ones are drawn from 1900 to 2100.
schemathesis.openapi.format(
    "date-time",
    st.datetimes(
        min_value=datetime(1900, 1, 1),  # noqa: DTZ001 - hypothesis takes naive bounds
        max_value=datetime(2100, 1, 1),  # noqa: DTZ001
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=-5)), timezone(timedelta(hours=5, minutes=30))]
        ),
    ).map(lambda value: value.isoformat()),
)

schema = schemathesis.openapi.from_dict(
    Client(HTTP_HOST="127.0.0.1").get("/api/v2/openapi.json").json(),
    config=SchemathesisConfig.from_dict(CONFIG),
)


@pytest.fixture
def server(shared_server):
    """One server process for all the operations (the rows are made again for each)."""
    return shared_server


@pytest.fixture
def fuzzed_rows(server) -> None:
    User.objects.create_superuser("fuzzer", "f@example.com", "pw", pk=USER_ID)
    dag = DagFactory(dag_id="fuzzed")
    run = DagRunFactory(dag=dag, run_id="r", state="failed")
    TaskInstanceFactory(dag_run=run, task_id="t", state="failed")
    XCom.objects.create(dag_run=run, dag_id="fuzzed", run_id="r", task_id="t", key="k", value=[1])
    asset = AssetFactory(pk=1)
    AssetDagRunQueue.objects.create(asset=asset, target_dag=dag)
    TaskOutletAssetReference.objects.create(asset=asset, dag=dag, task_id="t")
    variable_set(key="v", value='{"password": "p"}')
    connection_create(conn_id="c", values=ConnectionFields(conn_type="http", password="p"))


@schema.parametrize()
@hypothesis.settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)
def test_the_server_does_what_airflows_schema_says(case, server, fuzzed_rows):
    case.call_and_validate(base_url=server.url)
