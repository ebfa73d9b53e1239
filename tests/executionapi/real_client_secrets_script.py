"""Run by test_real_client_secrets.py in a subprocess: the real ``apache-airflow-task-sdk``
client's variable and connection operations against the live server, one JSON line out."""

from __future__ import annotations

import json
import sys

from airflow.sdk.api.client import Client, ServerResponseError
from airflow.sdk.api.datamodels._generated import ConnectionResponse, VariableResponse
from airflow.sdk.execution_time.comms import ErrorResponse


def main() -> None:
    base_url, token, finished_token = sys.argv[1:4]
    out: dict = {}
    with Client(base_url=base_url, token=token) as client:
        client.variables.set("team/config", "v1", description="set by the SDK")
        got = client.variables.get("team/config")
        assert isinstance(got, VariableResponse)
        out["variable"] = got.model_dump()
        missing = client.variables.get("nope")
        assert isinstance(missing, ErrorResponse)
        out["missing_variable"] = missing.error.value
        keys = client.variables.keys(prefix="team/")
        out["keys"] = keys.model_dump()
        client.variables.delete("team/config")
        out["after_delete"] = client.variables.get("team/config").error.value
        client.variables.delete("team/config")  # already gone: Airflow answers 204 too
        connection = client.connections.get("warehouse")
        assert isinstance(connection, ConnectionResponse)
        out["connection"] = connection.model_dump(by_alias=True)
        out["missing_connection"] = client.connections.get("nope").error.value
        try:
            client.variables.set("bad", "x" * 0 + "\x00")
        except ServerResponseError as exc:
            out["bad_put"] = exc.response.status_code
    with Client(base_url=base_url, token=finished_token) as finished:
        try:
            finished.variables.set("team/config", "from a finished task")
        except ServerResponseError as exc:
            out["finished_put"] = exc.response.status_code
        out["finished_read"] = finished.connections.get("warehouse").conn_id
    with Client(base_url=base_url, token="not-a-token") as forged:
        out["forged_read"] = forged.connections.get("warehouse").error.value
    sys.stdout.write(json.dumps(out, default=str) + "\n")


if __name__ == "__main__":
    main()
