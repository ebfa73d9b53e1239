"""``docs/execution-api.md`` says what the server does.

- Its table of routes is Airflow 3.3.2's, read from the installed ``apache-airflow-core``'s
  router (``airflow_routes_script.py``, in a subprocess): every route once, no other.
- A row marked *yes* is served here (the URL resolves to a view answering that method), a
  row marked *no* is the JSON 404 of an unknown path.
- The "Try it" shell block, run as written against a live server, prints what the page says.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import resolve

from tests.executionapi.conftest import airflow_env
from tests.live_server import REPO, server_env

PAGE = REPO / "docs" / "execution-api.md"
ROUTES_SCRIPT = Path(__file__).with_name("airflow_routes_script.py")
ROW = re.compile(r"^\| (GET|POST|PUT|PATCH|DELETE|HEAD) \| `([^`]+)` \| (yes|no) \|", re.M)
#: A value for each path parameter, to make a concrete URL of a route.
SAMPLES = {"task_instance_id": "0195e0b8-0000-7000-8000-000000000001", "offset": "0"}


def table() -> list[tuple[str, str, bool]]:
    return [(m, path, served == "yes") for m, path, served in ROW.findall(PAGE.read_text())]


@pytest.fixture(scope="module")
def airflow_routes(tmp_path_factory) -> list[tuple[str, str]]:
    try:
        importlib.metadata.version("apache-airflow-core")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("apache-airflow-core is not installed (pip install -e '.[airflow]')")
    result = subprocess.run(
        [sys.executable, str(ROUTES_SCRIPT)],
        env=airflow_env(tmp_path_factory.mktemp("routes")),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return [tuple(pair) for pair in json.loads(result.stdout.strip().splitlines()[-1])]


def test_the_table_lists_every_route_of_airflow_once(airflow_routes):
    rows = [(method, path) for method, path, _ in table()]

    assert len(airflow_routes) == 55
    assert sorted(rows) == sorted(airflow_routes)
    assert len(set(rows)) == len(rows)


def concrete(path: str) -> str:
    """``/execution`` + the route's path with a sample value for each parameter."""
    return "/execution" + re.sub(
        r"\{(\w+)(?::path)?\}", lambda m: SAMPLES.get(m.group(1), f"x_{m.group(1)}"), path
    )


@pytest.mark.parametrize(("method", "path", "served"), table(), ids=lambda v: str(v))
def test_the_served_column_is_what_the_server_serves(method, path, served):
    match = resolve(concrete(path))
    view_class = getattr(match.func, "view_class", None)
    actions = getattr(match.func, "actions", None)  # a viewset's method → action
    if actions is not None:
        answers = method.lower() in actions
    elif method == "HEAD":
        answers = hasattr(view_class, "head")
    else:
        answers = view_class is not None and hasattr(view_class, method.lower())

    assert (match.url_name != "not-found" and answers) == served, (method, path, match.url_name)


def docs_block(language: str, first_line: str) -> str:
    pattern = rf"```{language}\n({re.escape(first_line)}.*?)```"
    found = re.search(pattern, PAGE.read_text(), re.DOTALL)
    assert found, f"no {language} block starting {first_line!r} in {PAGE}"
    return found.group(1)


@pytest.mark.slow
def test_the_try_it_block_prints_what_the_page_says(server):
    script = docs_block("bash", "REGISTRY=")
    expected = docs_block("text", "204")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=REPO,
        env=server_env(REGISTRY=f"{server.url}/execution", PATH=path),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert result.returncode == 0, result.stderr[-3000:] + server.log()[-3000:]
    assert result.stdout == expected, result.stderr[-3000:]
