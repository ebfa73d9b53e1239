"""The OpenAPI schema says what the server does: a schema-driven fuzz run (schemathesis).

Every operation of ``/execution/openapi.json``, through a real gunicorn on the test database,
with every check schemathesis has (no 5xx, status codes, content types, headers and bodies
conforming to the schema, invalid input rejected, valid input accepted …). The requests carry
a valid token for one running task instance, whose id is the ``task_instance_id`` of every
``/task-instances/{id}/…`` request, so that they reach the code behind authentication; some
of them (a success, a failure) end that task instance's run, and the later ones are then
answered 409, which the schema declares as well.

Bounded: ``EXAMPLES`` examples per operation and phase (``SCHEMATHESIS_EXAMPLES`` in the
environment for a longer run; 300 passed too, in under 5 minutes), derandomized so that a
failure is reproducible.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone

import hypothesis
import pytest
import schemathesis
from django.test import Client
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig

from assets_app.tokens import token_issue
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "25"))

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


#: The task instance the fuzzed requests act for.
TI_ID = "0195e0b8-0000-7000-8000-00000000f022"


def served_schema() -> dict:
    """``/execution/openapi.json`` as the app serves it (read at collection, in process)."""
    return Client(HTTP_HOST="127.0.0.1").get("/execution/openapi.json").json()


#: Signed with the test settings' fixed secret, which the server processes share; valid long
#: after collection.
TOKEN = token_issue(task_instance_id=TI_ID, ttl_seconds=24 * 3600)

CONFIG = {
    "headers": {"Authorization": f"Bearer {TOKEN}"},
    "parameters": {"task_instance_id": TI_ID},
    # like Airflow's API the server ignores query parameters it does not know, which OpenAPI
    # allows: they are no invalid input
    # no string holds U+0000 (no column stores it; the schema's string fields say so with a
    # pattern, which OpenAPI 3.0 cannot put on the strings nested in free-form JSON values)
    "generation": {"allow-extra-parameters": False, "allow-x00": False},
    "checks": {
        # a request line longer than gunicorn takes is refused by it, 414 (declared)
        "negative_data_rejection": {
            "expected-statuses": [
                *("400", "401", "403", "404", "405", "406", "409", "414", "415", "422"),
                *("428", "429", "5xx"),
            ]
        }
    },
    "operations": [
        {
            # "name or uri, at least one" is beyond what OpenAPI parameters can say: the
            # description says it, and a request with neither is answered the declared 400
            "include-path": "/execution/asset-events/by-asset",
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "429"]
                }
            },
        },
        {
            # ``[task_id, map_index]`` is a tuple, which OpenAPI 3.0 cannot say (Airflow's
            # 3.1 document uses prefixItems): a pair in another order is the declared 422
            "include-path": "/execution/task-instances/{task_instance_id}/skip-downstream",
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", "401", "403", "404", "422", "429"]
                }
            },
        },
    ],
}
# A date-time whose UTC time falls outside years 1 to 9999 ("0001-01-01T00:00:00+01:00") is
# refused with a 422, which OpenAPI cannot say: valid ones are drawn from 1900 to 2100.
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
    served_schema(), config=SchemathesisConfig.from_dict(CONFIG)
)


@pytest.fixture
def server(shared_server):
    """One server process for all the operations (the rows are made again for each)."""
    return shared_server


@pytest.fixture
def running_ti(server) -> None:
    TaskInstanceFactory(
        id=TI_ID,
        dag_run=DagRunFactory(dag=DagFactory(dag_id="fuzzed")),
        task_id="t",
        state="running",
        hostname="h",
        unixname="u",
        pid=1,
    )


@schema.parametrize()
@hypothesis.settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)
def test_the_server_does_what_its_schema_says(case, server, running_ti):
    case.call_and_validate(base_url=server.url)
