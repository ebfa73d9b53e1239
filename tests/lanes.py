"""The two lanes of the suite: ``make test`` runs every test, ``make test-fast`` leaves out the
tests marked ``slow``: those that start a real process (a gunicorn server, a scheduler, worker,
task or DAG-parser process, any Python or Airflow child) or a browser.

``slow`` is put on a test by :func:`mark_slow` at collection, so that a new test does not have
to remember it, when the test uses a fixture that starts such a process
(:data:`PROCESS_FIXTURES`, directly or through another fixture) or is in
:data:`PROCESS_PATHS`; a test that starts one itself (``subprocess.run([sys.executable, ...])``)
carries the mark in its module. :class:`ProcessGuard` holds every other test to it, in every
lane: a test not marked ``slow`` that starts such a process fails at once, saying so. So no test
of the fast lane starts one: CI's full runs would have failed it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import pytest

#: Fixtures that start a real process: a gunicorn server (``server``, ``shared_server``,
#: ``one_worker_server``), ``manage.py worker`` processes (``start_worker``), headless Chromium
#: (``browser``), a Python importing Airflow's task SDK (``airflow_sdk``) or router
#: (``airflow_routes``).
PROCESS_FIXTURES = frozenset(
    {
        *("server", "shared_server", "module_server", "one_worker_server", "start_worker"),
        *("browser", "airflow_sdk", "airflow_routes"),
    }
)
#: Tests that start real processes themselves, by where they are: a node id starting with one of
#: these (a directory, a module, or a module's test). tests/browser drives Chromium; task_sdk/tests
#: (run without Django, too, where tests/ is unknown) supervises real task processes.
PROCESS_PATHS = (
    "tests/browser/",
    "task_sdk/tests/test_sdk_forking.py::",
    "task_sdk/tests/test_sdk_golden.py::",
    "task_sdk/tests/test_sdk_process_group.py::",
    "task_sdk/tests/test_sdk_supervisor.py::",
    "task_sdk/tests/test_sdk_definitions.py::test_the_package_never_imports_django",
    "task_sdk/tests/test_sdk_definitions.py::test_the_task_process_does_not_import_an_http_stack",
    "task_sdk/tests/test_sdk_inlets.py::test_a_consumer_task_reads_both_through_the_supervisor",
    "task_sdk/tests/test_sdk_inlets.py::test_reading_an_undeclared_inlet_fails_the_task",
    "task_sdk/tests/test_sdk_inlets.py::test_a_failing_events_request_fails_the_task_with_",
    "task_sdk/tests/test_sdk_jsonvalues.py::test_task_fails_at_once_and_sends_nothing_it_cannot_",
    "task_sdk/tests/test_sdk_jsonvalues.py::test_with_tries_left_the_task_is_up_for_retry",
    "task_sdk/tests/test_sdk_jsonvalues.py::test_refused_success_is_reported_as_a_failure",
    "task_sdk/tests/test_sdk_jsonvalues.py::test_success_answered_409_is_not_turned_into_a_fail",
)

#: A program that is one of the project's processes or costs as much: a Python interpreter
#: (this one or another: a settings probe, ``manage.py``, a task, a DAG parser), gunicorn,
#: Airflow's CLI, Chromium and its driver.
_PROGRAM = re.compile(r"(python[0-9.]*|gunicorn|airflow|chromium|chromedriver|manage\.py)")


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "env"})


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def mark_slow(items: Sequence[pytest.Item]) -> None:
    """Mark ``slow`` the tests that use a process-starting fixture or are in PROCESS_PATHS."""
    slow = pytest.mark.slow
    for item in items:
        if item.get_closest_marker("slow"):
            continue
        if item.nodeid.startswith(PROCESS_PATHS) or PROCESS_FIXTURES.intersection(
            getattr(item, "fixturenames", ())
        ):
            item.add_marker(slow)


def process_program(argv: Any, executable: Any = None, shell: bool = False) -> str | None:
    """The program of a ``Popen(argv, executable=..., shell=...)`` if it is one of
    :data:`_PROGRAM`'s (for a shell, any word of its command line), else None."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        words = [os.fsdecode(argv)]
    else:
        words = [os.fsdecode(word) for word in argv]
    if shell or len(words) == 1 or os.path.basename(words[0]) in _SHELLS:
        # a command line (or a shell's): every word of it may start a program
        candidates = [w for line in words for w in _split(line)]
    else:
        candidates = words[:2]  # the program, or what it runs: `env python`, `python manage.py`
    if executable is not None:
        candidates = [os.fsdecode(executable), *candidates]
    for word in candidates:
        name = os.path.basename(word)
        if word == sys.executable or _PROGRAM.fullmatch(name):
            return word
    return None


class ProcessStartedError(AssertionError):
    """A test not marked ``slow`` started a real process."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"this test starts a process ({what}) but is not marked slow, so `make test-fast` "
            "would run it: mark it @pytest.mark.slow (or the module: pytestmark), start the "
            "process through a fixture of PROCESS_FIXTURES, or (task_sdk/tests) name it in "
            "PROCESS_PATHS (tests/lanes.py)"
        )


class ProcessGuard:
    """While active, starting a Python, gunicorn, Airflow or Chromium process, or forking this
    one, raises :class:`ProcessStartedError`; every attempt is also kept in ``started``."""

    def __init__(self) -> None:
        self.started: list[str] = []

    @contextmanager
    def active(self) -> Iterator[None]:
        popen_init = subprocess.Popen.__init__
        saved: dict[str, Callable[..., Any]] = {}
        guard = self

        def guarded_init(self: subprocess.Popen[Any], args: Any, *a: Any, **kw: Any) -> None:
            program = process_program(args, kw.get("executable"), bool(kw.get("shell")))
            if program is not None:
                guard.refuse(f"{program}: {args!r}"[:300])
            popen_init(self, args, *a, **kw)

        def refusing(name: str) -> Callable[..., Any]:
            def refuse(*args: Any, **kwargs: Any) -> Any:
                guard.refuse(f"os.{name}")

            return refuse

        subprocess.Popen.__init__ = guarded_init  # type: ignore[method-assign]
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            if hasattr(os, name):
                saved[name] = getattr(os, name)
                setattr(os, name, refusing(name))
        try:
            yield
        finally:
            subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
            for name, function in saved.items():
                setattr(os, name, function)

    def refuse(self, what: str) -> None:
        self.started.append(what)
        raise ProcessStartedError(what)


class Lanes:
    """The plugin (tests/conftest.py registers it, so that it holds task_sdk/tests too): marks
    ``slow`` at collection; guards every test not marked ``slow``, from set-up to tear-down."""

    def __init__(self) -> None:
        self.guard = ProcessGuard()

    def _guarded(self, item: pytest.Item) -> Any:
        return nullcontext() if item.get_closest_marker("slow") else self.guard.active()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        mark_slow(items)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        with self._guarded(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        with self._guarded(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        with self._guarded(item):
            return (yield)
