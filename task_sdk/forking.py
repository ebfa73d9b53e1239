"""Run ``python -m task_sdk run …`` in a fork of a process that has imported ``task_sdk``.

A fresh interpreter spends ~0.25 s importing the supervisor's modules (``httpx`` above all)
and ~0.1 s building an SSL context and an HTTP client before it can mark its task instance
running. A worker that runs many task instances imports them once, calls :func:`preload`,
and starts each supervisor with :func:`start_cli`, which forks, as Airflow's supervisor forks
its task process: the child marks its task instance running within milliseconds. It then
behaves as the command would:

- a session and process group of its own (``start_new_session``), stdin ``/dev/null``,
  stdout and stderr the given file, unbuffered (``PYTHONUNBUFFERED``);
- exactly the given environment (``os.environ`` replaced, so the task process the supervisor
  starts inherits it) and the parent's working directory;
- default signal dispositions (a signal sent while it forks waits for them) and logging as a
  fresh interpreter has it (then set up by the command), whatever handlers, levels and
  filters the parent had; the parent's open files and connections (its database connection,
  say) are left alone, never used, closed nor finalized (its objects are frozen, ``gc``);
- its exit status is the command's (2 for bad usage, 1 for an unexpected error, whose
  traceback goes to the output). It never returns into the parent's code: it ends with
  ``os._exit`` whatever happens, so no ``atexit`` hook or finalizer of the parent runs twice.

The task's own code still runs in a fresh ``python -m task_sdk.runner`` process that the
supervisor starts, so a task that crashes, calls ``os._exit`` or hangs is isolated as before,
and sees a fresh interpreter. A process running several threads is not forked (a lock another
thread holds would stay held in the child): :func:`start_cli` then starts the command in a new
interpreter, as before.
"""

from __future__ import annotations

import contextlib
import gc
import getpass
import logging
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping
from typing import IO

import httpx

from task_sdk import cli
from task_sdk.client import hostname, ssl_context


def preload() -> None:
    """Do once what every forked supervisor would otherwise do again: look up the host name
    (may ask DNS) and the user, build the SSL context (loads the CA bundle) and import what an
    HTTP client imports on first use (``httpcore``'s transports: ~0.1 s)."""
    hostname()
    getpass.getuser()
    httpx.Client(verify=ssl_context()).close()


class ForkedProcess:
    """A forked child, driven like ``subprocess.Popen``: ``pid``, ``returncode``, ``poll()``,
    ``wait()``, ``send_signal()``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def _reaped(self, pid: int, status: int) -> int | None:
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                return self._reaped(*os.waitpid(self.pid, os.WNOHANG))
            except ChildProcessError:  # reaped elsewhere: its status is lost
                self.returncode = 255
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            try:
                self._reaped(*os.waitpid(self.pid, 0))
            except ChildProcessError:
                self.returncode = 255
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # once reaped, the pid may be someone else's
            os.kill(self.pid, sig)


#: Signals held back while forking: one sent to the new child before it has reset the
#: parent's handlers must reach it with the default action (the parent's handler would run in
#: the child and, say, swallow the SIGTERM meant to stop it).
_HELD_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


def start_cli(
    args: list[str], *, env: Mapping[str, str], output: IO[bytes]
) -> ForkedProcess | subprocess.Popen[bytes]:
    """Start ``python -m task_sdk <args>``, its stdout and stderr going to ``output``: as a
    fork of this process (see the module docstring) when it runs a single thread, else (a
    fork could inherit a lock another thread holds) as a new interpreter. Raises ``OSError``
    when it cannot be started."""
    if threading.active_count() > 1:
        return subprocess.Popen(  # noqa: S603 - an argv list we build, no shell
            [sys.executable, "-m", "task_sdk", *args],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return fork_cli(args, env=env, output=output)


def fork_cli(args: list[str], *, env: Mapping[str, str], output: IO[bytes]) -> ForkedProcess:
    """Start ``python -m task_sdk <args>`` as a fork of this process (see the module docstring),
    its stdout and stderr going to ``output``. Raises ``OSError`` when it cannot fork."""
    _flush_std_streams()  # else the child would write the parent's buffered output again
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return ForkedProcess(pid)
    code = 1
    try:
        _become_command(env, output.fileno())
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # what came meanwhile: default action
        code = cli.main(args)
    except SystemExit as exit_:  # argparse's usage errors, sys.exit() in the command
        if exit_.code is None or isinstance(exit_.code, int):
            code = exit_.code or 0
        else:
            sys.stderr.write(f"{exit_.code}\n")
    except BaseException:
        traceback.print_exc()
    finally:
        _flush_std_streams()
        os._exit(code)


def _flush_std_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):  # none, broken, closed
            stream.flush()


def _become_command(env: Mapping[str, str], output_fd: int) -> None:
    """In the forked child: what a fresh ``python -m task_sdk`` started as the worker starts it
    would have."""
    # the parent's objects are never collected here: a finalizer of one it dropped (say, a
    # database connection) must not run in the child, and a collection would copy every page
    gc.freeze()
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0, closed with the process
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(write_through=True)  # as PYTHONUNBUFFERED
    os.environ.clear()
    os.environ.update(env)
    for sig in signal.valid_signals():  # the handlers the parent installed, not Python's own
        disposition = signal.getsignal(sig)
        if callable(disposition) and disposition is not signal.default_int_handler:
            signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _reset_logging()


def _reset_logging() -> None:
    """Logging as in a fresh interpreter, for the command to set up: none of the parent's
    handlers (say, Django's console handler), levels (a quieted logger) or filters."""
    logging.disable(logging.NOTSET)
    root = logging.getLogger()
    for logger in [root, *logging.Logger.manager.loggerDict.values()]:
        if not isinstance(logger, logging.Logger):  # a placeholder for a dotted name's parent
            continue
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        for log_filter in list(logger.filters):
            logger.removeFilter(log_filter)
        logger.setLevel(logging.NOTSET)
        logger.propagate = True
        logger.disabled = False
    root.setLevel(logging.WARNING)
