"""docs/pipelines.md, run as written: its manifest is ``examples/pipeline.yaml``, its commands
declare and trigger the DAG, its ``curl`` triggers another run, and a real worker (with the
scheduler's pass admitting the queued second run) runs both, task after task, in order."""

from __future__ import annotations

import itertools
import json
import re
import shlex
from io import StringIO

import httpx
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from assets_app.models import DagRun, TaskInstance
from assets_app.services.runs.admit import dag_runs_admit
from tests.live_server import REPO
from tests.runtime.worker.conftest import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PAGE = (REPO / "docs" / "pipelines.md").read_text()
ORDER = ["extract", "transform", "load", "notify"]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE, flags=re.DOTALL)


def test_the_pages_manifest_is_the_example_file():
    assert blocks("yaml")[0] == (REPO / "examples" / "pipeline.yaml").read_text()


@pytest.mark.django_db
def test_the_pages_params_example_refuses_the_conf_as_it_says(tmp_path):
    # given the page's second manifest (its params) declared
    _, manifest = blocks("yaml")
    path = tmp_path / "report.yaml"
    path.write_text(manifest)
    call_command("declare_dags", str(path), stdout=StringIO())

    # when the page's command runs, then it fails with the message the page shows
    _, _, trigger = blocks("sh")
    command, shown = trigger.strip().splitlines()
    argv = shlex.split(command)
    assert argv[:2] == [".venv/bin/python", "manage.py"]
    with pytest.raises(CommandError) as raised:
        call_command(*argv[2:], stdout=StringIO())
    assert shown == f"# CommandError: {raised.value}"
    assert not DagRun.objects.exists()


def test_the_pages_commands_and_curl_run_and_the_worker_runs_the_tasks_in_order(
    server, start_worker
):
    # the sh block: two manage.py commands (each followed by its output as a comment), a curl
    commands, curl, _ = blocks("sh")
    outputs: dict[str, str] = {}
    command = ""
    for line in filter(None, commands.splitlines()):
        if line.startswith("# "):
            assert outputs[command] == line[2:], command  # the output the page shows
            continue
        command = line
        argv = shlex.split(command)
        assert argv[:2] == [".venv/bin/python", "manage.py"]
        if argv[2] == "declare_dags":  # the path as the page gives it, from the repository
            argv[3] = str(REPO / argv[3])
        out = StringIO()
        call_command(*argv[2:], stdout=out)
        outputs[command] = out.getvalue().strip()
    first = DagRun.objects.get(run_id="manual__docs")
    assert first.conf == {"day": "2026-12-01"}

    # the curl, against the live server with a token as the operator API docs make one
    admin = User.objects.create_superuser("admin", password="x")
    token = Token.objects.create(user=admin).key
    body = json.loads(re.search(r"-d '(\{.*?\})'", curl).group(1))
    path = re.search(r"http://127\.0\.0\.1:8000(/\S+)", curl).group(1)
    response = httpx.post(
        f"{server.url}{path}", json=body, headers={"Authorization": f"Token {token}"}
    )
    assert response.status_code == 201, response.text
    second = DagRun.objects.get(run_id="manual__api")
    assert second.state == "queued"  # max_active_runs: 1 — it waits for the first

    # when a worker runs what becomes runnable (and the scheduler's admission runs)
    worker = start_worker()
    try:
        wait_until(
            lambda: DagRun.objects.get(pk=first.pk).state == "success",
            timeout=180,
            what=f"the first run\n{worker.output()}",
        )
        assert dag_runs_admit() == [second.pk]
        wait_until(
            lambda: DagRun.objects.get(pk=second.pk).state == "success",
            timeout=180,
            what=f"the second run\n{worker.output()}",
        )
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)

    # then each run's tasks ran one after another, in the DAG's order
    for run in (first, second):
        tis = {ti.task_id: ti for ti in TaskInstance.objects.filter(dag_run=run)}
        assert {ti.state for ti in tis.values()} == {"success"}
        for up, down in itertools.pairwise(ORDER):
            assert tis[up].end_date <= tis[down].start_date, (run.run_id, up, down)
    assert DagRun.objects.get(pk=second.pk).start_date >= DagRun.objects.get(pk=first.pk).end_date
