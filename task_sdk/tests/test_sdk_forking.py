"""``task_sdk.forking``: the CLI started as a fork of a process that imported it behaves as
``python -m task_sdk`` would: its environment, working directory, output and exit status."""

import json
import os
import subprocess
import sys
from pathlib import Path

from sdk_helpers import TI_ID, task_ref
from sdk_http_server import serve_fake_api

HELPER = Path(__file__).with_name("fork_helper.py")
PACKAGE_ROOT = str(Path(__import__("task_sdk").__file__).parent.parent)


def start(tmp_path, args, *, env, threads=False):
    """Run ``fork_helper.py`` in ``tmp_path``: (its one result line, the child's output)."""
    output = tmp_path / "out.log"
    spec = {"args": args, "env": env, "output": str(output), "threads": threads}
    done = subprocess.run(
        [sys.executable, str(HELPER), json.dumps(spec)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": PACKAGE_ROOT, "PARENT_ONLY": "yes"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout  # the child never went on in the helper's code
    return json.loads(lines[0]), output.read_text()


def child_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TASK_SDK_")}
    return {**env, "PYTHONPATH": PACKAGE_ROOT, **extra}


def run_args(url, function):
    return ["run", "--server", url, "--ti-id", TI_ID, "--token", "tok", task_ref(function)]


def test_a_forked_supervisor_runs_the_task_with_the_given_environment_and_cwd(tmp_path):
    with serve_fake_api() as (url, received):
        result, output = start(
            tmp_path, run_args(url, "prints_where_it_runs"), env=child_env(SDK_TEST_CASE="forked")
        )

    assert result == {"kind": "ForkedProcess", "returncode": 0}, output
    # the task saw exactly the environment given (not the forking process's own) and its cwd
    assert f"SDK_TEST_CASE=forked PARENT_ONLY=None cwd={tmp_path}" in output
    # its output was logged as the command logs it, whatever logging the parent had set up
    assert " INFO task_sdk.task: [stdout] SDK_TEST_CASE=forked" in output
    assert "PARENT'S FORMAT" not in output
    assert f"task instance {TI_ID} succeeded" in output
    assert [path.rpartition("/")[2] for path, _ in received] == ["run", "state"]
    assert json.loads(received[-1][1])["state"] == "success"


def test_a_forked_supervisor_exits_as_the_command_does(tmp_path):
    with serve_fake_api() as (url, received):
        failed, failed_output = start(tmp_path, run_args(url, "exits_hard"), env=child_env())
        usage, usage_output = start(tmp_path, ["run", "x.py:f"], env=child_env())

    # a task process that calls os._exit: reported failed, the supervisor exits 1
    assert failed == {"kind": "ForkedProcess", "returncode": 1}
    assert "error: task process exit code 3 without reporting a state" in failed_output
    assert json.loads(received[-1][1])["state"] == "failed"
    # bad usage: 2, with the command's message
    assert usage == {"kind": "ForkedProcess", "returncode": 2}
    assert "--server, --ti-id, --token" in usage_output


def test_a_process_running_threads_starts_a_new_interpreter_instead(tmp_path):
    with serve_fake_api() as (url, received):
        result, output = start(
            tmp_path,
            run_args(url, "prints_where_it_runs"),
            env=child_env(SDK_TEST_CASE="spawned"),
            threads=True,
        )

    assert result == {"kind": "Popen", "returncode": 0}, output
    assert f"SDK_TEST_CASE=spawned PARENT_ONLY=None cwd={tmp_path}" in output
    assert json.loads(received[-1][1])["state"] == "success"
