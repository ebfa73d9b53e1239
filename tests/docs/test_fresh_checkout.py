"""Every shell command of docs/getting-started.md, docs/dag-files.md and docs/api-v2.md, run as
written from a fresh checkout serving with ``make run`` (issue 40).

The repository's HEAD is cloned (``git clone --local``) into a scratch directory and given the
environment this test runs in as its ``.venv``, with ``pyproject.toml`` no newer than the install
stamps, so that ``make`` has nothing to install. ``make run PORT=…`` then migrates a SQLite
database of the clone's own, loads the examples and serves; the commands run in a clean
environment (none of this process's ``DATABASE_URL``, settings or paths): the ``PATH`` with the
environment's ``bin`` first, as in a shell with it activated, a ``HOME`` of the test's own, and
``EXECUTION_API_URL`` naming the port, as getting-started.md says for another port than 8000.

Each shell block runs in page order with ``bash -euo pipefail`` from the clone's top, changed
only where a reader has to: ``localhost:8000`` / ``127.0.0.1:8000`` become the server's port,
and ``the-printed-password`` the password ``make run`` printed. Besides, :data:`NOT_RUN` names
the commands not run and why, :data:`UNTIL_STOPPED` the ones that run until stopped (they get
SIGTERM once they show they work, and must then exit 0), and :func:`before_block` does what a
page's prose asks before a block (dag-files.md: put the page's DAG file in ``dags/``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devtools.processes import free_port
from tests.docs.examples import Block, page_blocks
from tests.live_server import REPO

# the clone serves a SQLite database of its own whatever the lane: run once
pytestmark = [pytest.mark.slow, pytest.mark.sqlite]

PAGES = ("getting-started.md", "dag-files.md", "api-v2.md")

#: Commands (a block's line, its comment left out) this test does not run, and why.
NOT_RUN = {
    "make run": "this test's server: it runs `make run PORT=…` before the blocks",
    "make test": "the suite this test is part of",
}

#: Commands that serve until stopped, and the output that shows they work: they get SIGTERM then.
UNTIL_STOPPED = {".venv/bin/python manage.py dag_processor": "pass: "}

#: The placeholder a page puts where the reader types the password ``make run`` printed.
PASSWORD_PLACEHOLDER = "the-printed-password"

#: How long ``make run`` may take to serve (migrations and Airflow's DAG parser come first).
SERVE_TIMEOUT = 120.0


@dataclass
class Checkout:
    root: Path
    url: str
    env: dict[str, str]
    password: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A reader's shell: the environment's ``bin`` first on the system's ``PATH``, nothing else
    of this process (no ``DATABASE_URL``, ``DJANGO_SETTINGS_MODULE``, ``PYTHONPATH``)."""
    system_path = os.environ.get("PATH", os.defpath)
    keep = [p for p in system_path.split(os.pathsep) if not p.startswith(sys.prefix)]
    return {
        "PATH": os.pathsep.join([str(Path(sys.prefix) / "bin"), *keep]),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        # airflowctl on a headless machine: no keyring (docs/public-api.md)
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
        **extra,
    }


def clone(tmp_path: Path) -> Path:
    """The repository's HEAD in ``tmp_path/checkout``, its ``.venv`` the environment in use,
    installed as far as ``make`` can tell."""
    root = tmp_path / "checkout"
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(
        ["git", "clone", "--quiet", "--local", "--no-checkout", str(REPO), str(root)], check=True
    )
    subprocess.run(["git", "-C", str(root), "checkout", "--quiet", head], check=True)
    venv = Path(sys.prefix)
    (root / ".venv").symlink_to(venv)
    stamps = [venv / ".installed", venv / ".installed-test"]
    missing = [str(s) for s in stamps if not s.exists()]
    assert not missing, f"the environment was not installed by make install-test: no {missing}"
    # the clone's pyproject.toml is as old as the oldest stamp: nothing to reinstall
    oldest = min(s.stat().st_mtime_ns for s in stamps)  # to the nanosecond, as make compares
    os.utime(root / "pyproject.toml", ns=(oldest, oldest))
    return root


def wait_serving(url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + SERVE_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"make run exited {process.returncode}:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=2) as answer:  # noqa: S310
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail(f"make run did not serve {url} in {SERVE_TIMEOUT:.0f} s:\n{log_path.read_text()}")


def stop_group(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM to the process's group (make, runserver and its reloaded child), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    # the group may outlive its leader (runserver's child): make sure none is left
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture
def checkout(tmp_path: Path) -> Iterator[Checkout]:
    root = clone(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_env(home, EXECUTION_API_URL=url)

    nothing_to_do = subprocess.run(
        ["make", "-q", "install"], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    assert nothing_to_do.returncode == 0, ("make would reinstall", nothing_to_do)

    log_path = tmp_path / "make-run.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            ["make", "run", f"PORT={port}"],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, stopped whole
        )
    try:
        wait_serving(url, process, log_path)
        printed = re.search(
            r"^Admin login: username=admin password=(\S+)", log_path.read_text(), re.M
        )
        assert printed, f"make run printed no password:\n{log_path.read_text()}"
        yield Checkout(root=root, url=url, env=env, password=printed.group(1), log_path=log_path)
    finally:
        stop_group(process)


def commands(block: Block) -> str:
    """The block's text, less the commands of :data:`NOT_RUN`."""
    kept = [
        line for line in block.body.splitlines() if line.split("#", 1)[0].strip() not in NOT_RUN
    ]
    return "\n".join(kept).strip()


def as_run(script: str, checkout: Checkout) -> str:
    """The script with the server's port and the printed password, as a reader types them."""
    port = checkout.url.rsplit(":", 1)[1]
    for host in ("localhost", "127.0.0.1"):
        script = script.replace(f"{host}:8000", f"127.0.0.1:{port}")
    return script.replace(PASSWORD_PLACEHOLDER, checkout.password)


def before_block(block: Block, checkout: Checkout) -> None:
    """What a page's prose asks for before its block."""
    if block.page.name == "dag-files.md" and "--dags-folder dags" in block.body:
        text = block.page.read_text()
        assert "Put a DAG file in a folder, say `dags/orders.py`" in text
        (source,) = [
            b.body for b in page_blocks(block.page, checkout.root) if b.language == "python"
        ]
        folder = checkout.root / "dags"
        folder.mkdir(exist_ok=True)
        (folder / "orders.py").write_text(source)


def run_block(block: Block, script: str, checkout: Checkout) -> tuple[int, str]:
    stop_when = next((shown for cmd, shown in UNTIL_STOPPED.items() if cmd in script), None)
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=checkout.root,
        env=checkout.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        if stop_when is None:
            out, _ = process.communicate(timeout=180)
            return process.returncode, out
        # serves until stopped: read until it shows it works, then stop it as a reader does
        # (Ctrl-C or SIGTERM), or after a minute without showing it
        assert process.stdout is not None
        seen = []
        timer = threading.Timer(60, os.killpg, (process.pid, signal.SIGTERM))
        timer.start()
        try:
            for line in process.stdout:
                seen.append(line)
                if stop_when in line:
                    break
        finally:
            timer.cancel()
        os.killpg(process.pid, signal.SIGTERM)
        rest, _ = process.communicate(timeout=60)
        return process.returncode, "".join(seen) + rest
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


#: What a block must print besides exiting 0, where a command exits 0 on a refusal too (curl).
MUST_SHOW = {
    "api-v2.md": ['"extra":{"rows":42}', "Login successful", '"dag_runs"'],
    "dag-files.md": ["declared ", "dag processor stopped after"],
    "getting-started.md": ["Created asset event 1 on s3://bucket/my-task", "The chain"],
}


def test_every_command_of_the_pages_runs_from_a_fresh_make_run(checkout):
    ran: list[str] = []
    not_run: list[str] = []
    outputs: dict[str, str] = {}
    for name in PAGES:
        page = checkout.root / "docs" / name
        shell = [b for b in page_blocks(page, checkout.root) if b.language in ("sh", "bash")]
        assert shell, f"{name} has no shell block"
        for block in shell:
            script = commands(block)
            if not script:
                not_run.append(str(block))
                continue
            before_block(block, checkout)
            status, out = run_block(block, as_run(script, checkout), checkout)
            assert status == 0, (
                f"{block} exits {status} from a fresh `make run`:\n{script}\n--- output:\n{out}"
                f"\n--- make run:\n{checkout.log()[-3000:]}"
            )
            ran.append(str(block))
            outputs[name] = outputs.get(name, "") + out
    for name, shown in MUST_SHOW.items():
        missing = [s for s in shown if s not in outputs.get(name, "")]
        assert not missing, f"{name}'s blocks did not print {missing}:\n{outputs.get(name)}"
    # every block ran but the set-up one of getting-started.md (make run, make test)
    assert not_run == ["docs/getting-started.md:7"], not_run
    assert len(ran) == 5, ran
