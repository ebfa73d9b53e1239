"""The log panel's script, run by Node.js against the admin's own answers: it asks for what
came after the last chunk it has, appends it, and stops once the log is complete. Skipped
without ``node``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from django.urls import reverse

from assets_app.models import TaskLog
from assets_app.services.runs.logs import task_log_append
from tests.assets_app.admin import change
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js"),
]

#: A page of one ``<pre>`` and one status line, a fetch answering from ``ANSWERS`` (by URL),
#: timers run at once; prints what happened when the script has nothing left to do.
HARNESS = r"""
const fs = require("fs");
const [script, answers, dataset] = JSON.parse(fs.readFileSync(0, "utf8"));
const pre = {dataset, scrollTop: 0, clientHeight: 0, scrollHeight: 0, appended: [],
             appendChild(node) { this.appended.push(node.text); }};
const status = {textContent: ""};
const requested = [], delays = [];
global.document = {
  getElementById: (id) => (id === "ar-log-text" ? pre : id === "ar-log-status" ? status : null),
  createTextNode: (text) => ({text}),
};
global.window = {
  fetch: (url) => {
    requested.push(url);
    if (!(url in answers)) { return Promise.resolve({ok: false, status: 404}); }
    return Promise.resolve({ok: true, status: 200, json: () => Promise.resolve(answers[url])});
  },
  setTimeout: (callback, delay) => {
    delays.push(delay);
    if (delays.length < 20) { setImmediate(callback); }
  },
};
eval(script);
process.on("exit", () => {
  const appended = pre.appended;
  console.log(JSON.stringify({requested, delays, appended, status: status.textContent}));
});
"""


def test_the_panel_script_appends_what_came_since_and_stops_at_the_end(admin_client):
    # given a running try with one chunk, and the page as the operator opens it
    ti = TaskInstanceFactory(
        dag_run=DagRunFactory(dag=DagFactory(dag_id="etl")), task_id="load", state="running"
    )
    task_log_append(task_instance_id=ti.pk, offset=0, content="one\n")
    html = admin_client.get(change("taskinstance", ti.pk)).content.decode()
    script = re.search(r"<script>(.*?)</script>", html, re.DOTALL).group(1)
    dataset = {
        "url": re.search(r'data-url="([^"]+)"', html).group(1),
        "next": re.search(r'data-next="([^"]+)"', html).group(1),
        "more": re.search(r'data-more="([^"]+)"', html).group(1),
        "complete": re.search(r'data-complete="([^"]+)"', html).group(1),
        "pollMs": re.search(r'data-poll-ms="([^"]+)"', html).group(1),
    }
    # and what the admin answers as the try goes on: a second chunk, then the last one
    url = reverse("admin:assets_app_taskinstance_log", args=[ti.pk, 1])
    task_log_append(task_instance_id=ti.pk, offset=4, content="two\n")
    answers = {f"{url}?after=1": admin_client.get(url, {"after": 1}).json()}
    task_log_append(task_instance_id=ti.pk, offset=8, content="three\n", final=True)
    ti.state = "success"
    ti.save()
    answers[f"{url}?after=2"] = admin_client.get(url, {"after": 2}).json()
    assert TaskLog.objects.get().chunk_count == 3

    # when the page's script runs
    result = subprocess.run(
        ["node", "-e", HARNESS],
        input=json.dumps([script, answers, dataset]),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    ran = json.loads(result.stdout)

    # then it asked for what came after each chunk it had, appended it, and stopped
    assert dataset == {
        "url": url,
        "next": "1",
        "more": "false",
        "complete": "false",
        "pollMs": "2000",
    }
    assert ran["requested"] == [f"{url}?after=1", f"{url}?after=2"]
    assert ran["appended"] == ["two\n", "three\n"]
    assert ran["delays"] == [2000, 2000]
    assert ran["status"] == "End of the log."
