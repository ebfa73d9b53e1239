"""Run by test_execution_api_docs.py in a subprocess (Airflow's configuration stays out of
the test process): the routes of the installed ``apache-airflow-core``'s execution API, as
its router declares them for the newest version, one JSON line of ``[method, path]`` pairs
(``/xcoms/{dag_id}/…/{key:path}`` as Airflow writes it). A route Cadwyn keeps only for
older versions (``only_exists_in_older_versions``) is left out."""

from __future__ import annotations

import json
import sys

from airflow.api_fastapi.execution_api.routes import execution_api_router
from cadwyn.route_generation import _DELETED_ROUTE_TAG


def main() -> None:
    routes = [
        [method, route.path]
        for route in execution_api_router.routes
        if _DELETED_ROUTE_TAG not in getattr(route, "tags", ())
        for method in sorted(route.methods)
    ]
    sys.stdout.write(json.dumps(routes) + "\n")


if __name__ == "__main__":
    main()
