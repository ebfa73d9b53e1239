"""The code blocks of the README and of every ``docs/*.md`` page, for the tests that run them.

Two ways to pick a block:

- ``doc_example(name)``: the block right after an ``<!-- example: NAME -->`` comment (invisible
  on the page). A named example must be run by a test: ``test_every_named_example_is_run``
  fails for a name no test file asks for.
- ``doc_block(language, first_line)``: the block of that language whose first line is
  ``first_line`` — for blocks that are files (``# tasks/orders.py``, ``# my_dags.yaml``).

Either fails unless exactly one page holds the block, so moving an example between pages keeps
its test, and a copy of it left behind is noticed.

``run_shell_example`` runs a shell example as written: ``bash -euo pipefail`` in a scratch
directory laid out as the repository (its top-level entries linked in, ``.venv`` linked to the
running interpreter's environment), on the test database, with ``EXECUTION_API_URL`` pointing
at a live server so ``manage.py worker`` reaches it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.live_server import REPO, server_env

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
MARKER = re.compile(r"<!--\s*example:\s*([\w.-]+)\s*-->\s*\n\s*$")
SKIP_IN_SANDBOX = {".git", ".venv", "var", "db.sqlite3", "site"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    body: str
    name: str | None
    root: Path = REPO  # the checkout the page is in

    def __str__(self) -> str:
        return f"{self.page.relative_to(self.root)}:{self.line}"


def doc_pages(root: Path = REPO) -> list[Path]:
    """The README and every page of the manual (of this checkout, or of ``root``)."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def page_blocks(page: Path, root: Path = REPO) -> list[Block]:
    """The code blocks of one page of the checkout at ``root``, in page order."""
    text = page.read_text()
    blocks = []
    for match in FENCE.finditer(text):
        before = text[: match.start()]
        marker = MARKER.search(before[-200:])
        blocks.append(
            Block(
                page=page,
                line=before.count("\n") + 1,
                language=match.group(1),
                body=match.group(2),
                name=marker.group(1) if marker else None,
                root=root,
            )
        )
    return blocks


def doc_blocks(root: Path = REPO) -> list[Block]:
    return [block for page in doc_pages(root) for block in page_blocks(page, root)]


def _one(found: list[Block], what: str) -> Block:
    assert found, f"no {what} in README.md or docs/*.md"
    assert len(found) == 1, f"{what} is in several places: {', '.join(map(str, found))}"
    return found[0]


def doc_example(name: str) -> str:
    """The body of the block marked ``<!-- example: NAME -->``."""
    return _one([b for b in doc_blocks() if b.name == name], f"example {name!r}").body


def doc_block(language: str, first_line: str) -> str:
    """The body of the ``language`` block whose first line is ``first_line``."""
    found = [
        b for b in doc_blocks() if b.language == language and b.body.split("\n", 1)[0] == first_line
    ]
    return _one(found, f"{language} block starting with {first_line!r}").body


def sandbox(tmp_path: Path) -> Path:
    """A directory laid out as the repository, whose writes (``var/``, files) stay in it."""
    root = tmp_path / "checkout"
    root.mkdir(parents=True)
    for entry in REPO.iterdir():
        if entry.name not in SKIP_IN_SANDBOX:
            (root / entry.name).symlink_to(entry)
    (root / ".venv").symlink_to(Path(sys.prefix))
    return root


def run_shell_example(
    name: str,
    tmp_path: Path,
    *,
    server_url: str | None = None,
    replace: dict[str, str] | None = None,
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    """Run the example; ``replace`` swaps a URL the page hard-codes for the live server's.

    The environment's ``bin`` comes first on ``PATH``, as in a shell with the virtualenv
    activated, so an example's plain ``python`` is the project's.
    """
    script = doc_example(name)
    for old, new in (replace or {}).items():
        assert old in script, f"example {name!r} has no {old!r}"
        script = script.replace(old, new)
    root = sandbox(tmp_path)
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=root,
        env=server_env(
            PATH=f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            WORKER_LOG_DIR=str(tmp_path / "task_logs"),
            ASSET_REGISTRY_DATA_DIR=str(tmp_path / "var"),
            **({"EXECUTION_API_URL": server_url} if server_url else {}),
        ),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def shown_output(example: str) -> list[str]:
    """The output a shell example shows: each ``# …`` comment right after a command line.

    A comment after a comment or a blank line describes the next command instead. ``…`` in a
    shown line stands for any text.
    """
    shown, previous = [], ""
    for line in example.splitlines():
        stripped = line.strip()
        if stripped.startswith("# ") and previous and not previous.startswith("#"):
            shown.append(stripped[2:])
        previous = stripped
    return shown


def assert_shows(example: str, output: str) -> None:
    """Every line ``example`` shows is a line of ``output``, in order."""
    lines = output.splitlines()
    position = 0
    for shown in shown_output(example):
        pattern = re.compile(".*".join(map(re.escape, shown.split("…"))) + r"\Z")
        for index in range(position, len(lines)):
            if pattern.match(lines[index]):
                position = index + 1
                break
        else:
            raise AssertionError(f"the docs show {shown!r}; the output was:\n{output}")


#: Shell blocks no test runs as written, by their first line, and why. Every other shell block
#: must be a named example (``test_every_shell_block_is_run_or_says_why``).
NOT_RUN_AS_WRITTEN = {
    "make run     # venv + install + migrate + load examples/dags.yaml and examples/dags/ + admin "
    "login, serves 127.0.0.1:8000": (
        "the set-up itself: CI runs `make test`; tests/config/test_makefile.py the targets; "
        "tests/docs/test_fresh_checkout.py runs `make run` from a fresh clone"
    ),
    "make test-fast                               # every test that starts no process or "
    "browser": "what CI runs (make test, of which this is a lane; tests/config/test_lanes.py)",
    "createdb -h 127.0.0.1 -U postgres asset_registry": "what CI runs (.ci/run)",
    "python3 -m venv .venv-sdk && .venv-sdk/bin/pip install ./task_sdk pytest": (
        "what CI runs (.ci/run, task_sdk without Django)"
    ),
    "python3 -m venv /opt/task-sdk": "installs on a worker host; .ci/run installs ./task_sdk",
    '.venv/bin/pip install -e ".[docs]"': "the set-up test_docs_site.py runs under",
    ".venv/bin/python bench/bench_http.py": "benchmarks are not tests",
    "make demo      # = manage.py migrate && manage.py demo": (
        "tests/docs/test_fresh_checkout.py runs it from a fresh `make run`"
    ),
    "make screenshots        # = .venv/bin/python manage.py screenshots --out docs/screenshots": (
        "tests/browser/test_screenshots.py runs `manage.py screenshots`"
    ),
    "$ .venv/bin/python manage.py clear_task_instances --dag-id orders --run-id manual__1 "
    "--dry-run": "tests/assets_app/runs/test_clearing.py runs it and compares its output",
    "# on the server": "tests/docs/test_task_sdk_examples.py runs these steps with its own ids",
    "# on the worker": "tests/docs/test_task_sdk_examples.py runs these steps with its own ids",
    ".venv/bin/python manage.py scheduler --once": (
        "tests/docs/test_task_sdk_examples.py runs these steps with its own ids"
    ),
    ".venv/bin/python manage.py scheduler              # runs until SIGTERM / Ctrl-C": (
        "runs until stopped; tests/assets_app/scheduling/test_scheduler.py runs passes, --once"
    ),
    ".venv/bin/python manage.py worker                   # until SIGTERM / Ctrl-C, 4 tasks at a "
    "time": "runs until stopped; tests/runtime/worker/ runs worker processes",
    ".venv/bin/python manage.py triggerer                 # until SIGTERM / Ctrl-C": (
        "runs until stopped; tests/runtime/worker/test_worker_deferred.py runs triggerers"
    ),
    'M=".venv/bin/python manage.py"\n'
    "DAG=registry_worker_producer TASK=produce RUN=manual__$(date +%s)": (
        "needs a registry host; tests/executionapi/test_real_worker.py runs the same workload"
    ),
    "TOKEN=$(curl -s -X POST localhost:8000/auth/token -H 'Content-Type: application/json' \\": (
        "tests/docs/test_fresh_checkout.py runs it from a fresh `make run`, with its password"
    ),
    "export DATABASE_URL=postgres://registry:secret@db.internal:5432/asset_registry": (
        "production hosts and secrets"
    ),
    "export EXECUTOR=celery": (
        "production hosts; tests/runtime/celery/test_celery_worker.py runs a server and a "
        "scheduler with EXECUTOR=celery"
    ),
}


#: Pages whose every block one test module of their own runs (it reads the page itself).
PAGES_RUN_BY = {
    "dag-files.md": "tests/runtime/test_dag_files.py",
    "mapping.md": "tests/runtime/worker/test_worker_mapping.py",
    "pipelines.md": "tests/runtime/worker/test_docs_pipelines.py",
    "public-api.md": "tests/publicapi/test_docs_examples.py",
    "schedules.md": "tests/assets_app/scheduling/test_docs_schedules.py",
    "execution-api.md": "tests/executionapi/test_execution_api_docs.py",
    "operator-pages.md": "tests/assets_app/admin/test_graph.py",
}


def not_run_reason(block: Block) -> str | None:
    if block.page.name in PAGES_RUN_BY and block.page.parent.name == "docs":
        return f"run by {PAGES_RUN_BY[block.page.name]}"
    lines = block.body.splitlines()
    for first_lines, reason in NOT_RUN_AS_WRITTEN.items():
        if lines[: first_lines.count("\n") + 1] == first_lines.splitlines():
            return reason
    return None
