"""The operator API's OpenAPI schema says what the server does: a schema-driven fuzz run.

Every operation of ``/api/v1/openapi.json``, through a real gunicorn on the test database,
with every check schemathesis has (no 5xx, status codes, content types, headers and bodies
conforming to the schema, invalid input rejected, valid input accepted …). The requests carry
the API token of a superuser, so that they reach the code behind authentication and
permissions, and there are rows for them to find: a DAG, a run of it with a failed task, an
asset with an alias and an event, a queue row.

Bounded: ``EXAMPLES`` examples per operation and phase (``SCHEMATHESIS_EXAMPLES`` in the
environment for a longer run), derandomized so that a failure is reproducible.
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
from rest_framework.authtoken.models import Token
from schemathesis.config import SchemathesisConfig

from assets_app.models import AssetDagRunQueue
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagFactory,
    DagRunFactory,
    TaskInstanceFactory,
)

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "25"))

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

#: The superuser's API token (40 hex digits, as DRF makes them).
TOKEN_KEY = "0123456789abcdef0123456789abcdef01234567"


def served_schema() -> dict:
    """``/api/v1/openapi.json`` as the app serves it (read at collection, in process)."""
    return Client(HTTP_HOST="127.0.0.1").get("/api/v1/openapi.json").json()


CONFIG = {
    "headers": {"Authorization": f"Token {TOKEN_KEY}"},
    "parameters": {"dag_id": "fuzzed"},
    # no NUL in generated strings: no database stores one, so every face refuses it with a 400
    # naming the field (tests/operatorapi/test_bad_input.py pins it), which OpenAPI cannot say
    # of a JSON value; /api/v2's run does the same
    "generation": {"allow-extra-parameters": False, "allow-x00": False},
    "operations": [
        {
            # a cursor is opaque: only a page's own links hold a good one, which OpenAPI cannot
            # say; any other string is answered with the declared 400 naming it
            "include-path-regex": "^/api/v1/[a-z-]+$",
            "include-method": "GET",
            # and an empty query parameter means "no filter" on every list (?before=), which
            # OpenAPI cannot say of a date-time or integer parameter: that "invalid" input is
            # accepted by design (the regression tests pin the refusals of bad values)
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "429"]
                },
                "negative_data_rejection": {"enabled": False},
            },
        }
    ],
}
# A date-time whose UTC time falls outside years 1 to 9999 ("0001-01-01T00:00:00+01:00") is
# refused with a 400, which OpenAPI cannot say: valid ones are drawn from 1900 to 2100.
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
def rows(server) -> None:
    user = User.objects.create_superuser("fuzzer", password="pw")
    Token.objects.create(user=user, key=TOKEN_KEY)
    dag = DagFactory(dag_id="fuzzed")
    run = DagRunFactory(dag=dag, state="failed")
    TaskInstanceFactory(dag_run=run, task_id="t", state="failed")
    asset = AssetFactory()
    AssetAliasFactory().assets.add(asset)
    AssetEventFactory(asset=asset)
    AssetDagRunQueue.objects.create(asset=asset, target_dag=dag)


@schema.parametrize()
@hypothesis.settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)
def test_the_server_does_what_its_schema_says(case, server, rows):
    case.call_and_validate(base_url=server.url)
