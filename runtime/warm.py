"""The warm parent: a process per worker that has imported Apache Airflow, its task SDK and its
supervisor once, and forks each DAG-file task's supervisor from there (as Airflow's
LocalExecutor forks its tasks from pre-started workers, and further: the DAG files it runs are
parsed once per modification, not once per task).

Without it every try of a DAG-file task starts a new ``python runtime/airflow_task.py``, which
imports Airflow (2 to 3 CPU-seconds) and parses the DAG file before it can mark its task instance
running. With it:

- **the worker's side** (:class:`WarmParent`, standard library only) starts the parent
  (``WORKER_WARM_PYTHON runtime/warm.py --fd N``, in a session of its own) the first time a
  DAG-file task is to run, talks to it over a Unix socket pair, and asks it for each task:
  the ``ExecuteTask`` workload, the task's environment and working directory, and the task's
  log file (its descriptor passed over the socket). The answer is the new supervisor's pid
  and a pidfd of it (passed back the same way, made before the parent could reap the child,
  so it never names another process): the worker waits for it, signals it and kills its
  process group as it does its own children (:class:`WarmProcess`), heartbeats, timeouts and
  retries being the supervisor's as before. The parent tells the exit status when it reaps
  the child;
- **the parent** (:func:`main`, imports only Airflow and this file's own script dir's
  ``airflow_task``) forks one child per request. The child is a fresh ``airflow_task.py`` in
  all that matters: a session of its own, stdin ``/dev/null``, stdout and stderr the log,
  exactly the given environment and working directory, default signal handlers, Airflow's
  logging configured anew; it runs Airflow's ``run_workload`` (whose supervisor forks the task
  process in turn, the pidfd fix of :mod:`runtime.airflow_task` applied) and ends with
  ``os._exit``. The parent itself never runs a task: whatever a task does to ``sys.modules``,
  ``os.environ``, the working directory or a module's globals happens in a forked copy and
  dies with it;
- **DAG files** are parsed in the parent before the fork (Airflow's ``BundleDagBag``, in the
  task's environment, the parent's environment, working directory and ``sys.path`` put back
  afterwards), kept per file with the modification times of the file and of every module
  from its DAG folder that was loaded, and given to the task runner in place of its own parse
  (``BundleDagBag`` replaced in the child by :class:`DagFileCache`); a file or module that
  changed is parsed again (its modules imported again), a file that fails to parse is not
  kept (the task runner parses it itself and reports the error as before).

The parent ends when its socket closes (the worker stopped or died); its running children
are unaffected. The worker starts a new parent after ``WORKER_WARM_MAX_TASKS`` forks or when
the parent's proportional set size exceeds ``WORKER_WARM_MAX_MEMORY_MB``, and when it died; a
task it could not hand to a parent runs the old way, as a new ``airflow_task.py`` process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger(__name__)

#: This file, run by its path under ``WORKER_WARM_PYTHON`` as the parent.
WARM_SCRIPT = __file__
#: Seconds the worker waits for a new parent to have imported Airflow.
READY_TIMEOUT = 120.0
#: Seconds the worker waits for the parent's answer to a request (it may parse a DAG file).
ANSWER_TIMEOUT = 120.0
#: Seconds after a parent failed to start before the worker tries to start one again.
RETRY_AFTER = 60.0
#: Largest message either side sends (a workload and an environment: a few KiB).
MAX_MESSAGE = 1 << 22


class WarmUnavailableError(Exception):
    """No warm parent can take the task now; the message says why."""


# --- the worker's side ---------------------------------------------------------------------


class WarmProcess:
    """A supervisor forked by the warm parent, driven like ``subprocess.Popen`` (``pid``,
    ``returncode``, ``poll()``, ``wait()``, ``send_signal()``) through a pidfd, although it is
    not the worker's child. Its exit status is the parent's report; 255 when the parent died
    before it could tell."""

    def __init__(self, pid: int, pidfd: int, parent: WarmParent, generation: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._parent = parent
        self._generation = generation  # which of the worker's warm parents forked it

    def _ended(self) -> int:
        self.returncode = self._parent.exit_status(self.pid, self._generation)
        os.close(self._pidfd)
        self._pidfd = -1
        return self.returncode

    def _exited(self, timeout_ms: int | None) -> bool:
        watch = select.poll()  # not select(): a pidfd may be above FD_SETSIZE
        watch.register(self._pidfd, select.POLLIN)
        return bool(watch.poll(timeout_ms))

    def poll(self) -> int | None:
        if self.returncode is None and self._exited(0):
            return self._ended()
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            if self._exited(None):
                self._ended()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)


def pss_kib(pid: int) -> int | None:
    """The process's proportional set size (shared pages divided among their sharers), KiB."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            for line in file:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


@dataclass(kw_only=True, eq=False)
class WarmParent:
    """The worker's handle on its warm parent (see the module docstring): started when first
    needed, restarted after ``max_tasks`` forks, above ``max_memory_mb`` of PSS, or after it
    died. ``env`` is the parent's environment (a DAG-file task's, without its DAG folder)."""

    python: str
    env: Mapping[str, str]
    max_tasks: int = 1000
    max_memory_mb: int = 1024
    report: Callable[[str], None] = logger.info
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    forks: int = field(default=0, init=False)
    _sock: socket.socket | None = field(default=None, init=False)
    _buffer: bytes = field(default=b"", init=False)
    _fds: list[int] = field(default_factory=list, init=False)
    _exits: dict[int, int] = field(default_factory=dict, init=False)
    _failed_at: float | None = field(default=None, init=False)
    _generation: int = field(default=0, init=False)  # parents started so far

    # -- starting and stopping ----------------------------------------------------------------

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(  # noqa: S603 - an argv list we build, no shell
                [self.python, WARM_SCRIPT, "--fd", str(theirs.fileno())],
                env=dict(self.env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # Airflow's log lines (its children: their log)
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        self._buffer, self._fds, self.forks = b"", [], 0
        self._generation += 1
        started = time.monotonic()
        try:
            ready = self._read_message(READY_TIMEOUT)
        except WarmUnavailableError:
            self.stop()
            raise
        self.report(
            f"warm parent started (pid {self.process.pid}, {ready.get('python', '?')}) in "
            f"{time.monotonic() - started:.1f}s"
        )

    def stop(self) -> None:
        """Close the socket (the parent then exits; its running children go on) and reap it."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        if self.process is not None:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def _alive(self) -> bool:
        return self.process is not None and self.process.poll() is None and self._sock is not None

    def _ensure(self) -> None:
        """A parent that can take a task, started (or restarted) when needed."""
        if self.process is not None and not self._alive():
            code = self.process.poll()
            self.report(f"warm parent (pid {self.process.pid}) ended ({code}); starting another")
            self.stop()
        elif self.process is not None and self._due_for_restart():
            self.stop()
        if self.process is None:
            if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_AFTER:
                raise WarmUnavailableError("the warm parent could not start a moment ago")
            try:
                self._start()
            except (OSError, WarmUnavailableError) as exc:
                self._failed_at = time.monotonic()
                self.report(
                    f"the warm parent could not start ({exc}); DAG-file tasks run in new "
                    f"processes, another try in {RETRY_AFTER:g}s"
                )
                raise WarmUnavailableError(f"the warm parent could not start: {exc}") from exc
            self._failed_at = None

    def _due_for_restart(self) -> bool:
        if self.forks >= self.max_tasks:
            self.report(f"warm parent ran {self.forks} tasks: starting a new one")
            return True
        pss = pss_kib(self.process.pid) if self.process is not None else None
        if pss is not None and pss > self.max_memory_mb * 1024:
            self.report(f"warm parent uses {pss // 1024} MB (PSS): starting a new one")
            return True
        return False

    # -- messages -------------------------------------------------------------------------------

    def _read_message(self, timeout: float) -> dict[str, Any]:
        """The next message that is not an exit report (those are kept for
        :meth:`exit_status`)."""
        deadline = time.monotonic() + timeout
        while True:
            message = self._next_message(max(deadline - time.monotonic(), 0))
            if message is None:
                raise WarmUnavailableError("the warm parent did not answer in time")
            if "exited" in message:
                self._exits[message["exited"]] = message["status"]
                continue
            if "error" in message and "pid" not in message and "python" not in message:
                raise WarmUnavailableError(f"the warm parent refused the task: {message['error']}")
            return message

    def _next_message(self, timeout: float) -> dict[str, Any] | None:
        """The next message (waiting up to ``timeout``), ``None`` when none came; raises
        ``WarmUnavailableError`` when the parent is gone."""
        sock = self._sock
        if sock is None:
            raise WarmUnavailableError("no warm parent")
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            readable, _, _ = select.select([sock], [], [], max(left, 0))
            if not readable:
                return None
            try:
                data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 4)
            except OSError as exc:
                raise WarmUnavailableError(f"the warm parent's socket failed: {exc}") from exc
            self._fds.extend(fds)
            if not data:
                raise WarmUnavailableError("the warm parent's socket closed (it exited)")
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def exit_status(self, pid: int, generation: int) -> int:
        """The exit status of a child that has exited (its pidfd said so): the parent's report,
        waited for a moment; 255 when it does not come (or its parent is gone)."""
        deadline = time.monotonic() + 1.0
        while (
            pid not in self._exits
            and generation == self._generation
            and self._sock is not None
            and time.monotonic() < deadline
        ):
            try:
                message = self._next_message(deadline - time.monotonic())
            except WarmUnavailableError:
                break
            if message is None:
                break
            if "exited" in message:
                self._exits[message["exited"]] = message["status"]
        return self._exits.pop(pid, 255)

    # -- running a task -------------------------------------------------------------------------

    def spawn(
        self, *, workload: str, env: Mapping[str, str], cwd: str, output: IO[bytes]
    ) -> WarmProcess:
        """Have the parent fork a supervisor for ``workload`` (``ExecuteTask`` as JSON) with
        ``env``, in ``cwd``, its output going to ``output``. Raises ``WarmUnavailableError`` when
        no parent can (the caller then starts ``airflow_task.py`` itself)."""
        self._ensure()
        if self._sock is None:  # _ensure made one or raised
            raise WarmUnavailableError("no warm parent")
        request = json.dumps({"workload": workload, "env": dict(env), "cwd": cwd}).encode()
        try:
            sent = socket.send_fds(self._sock, [request + b"\n"], [output.fileno()])
            if sent < len(request) + 1:
                self._sock.sendall((request + b"\n")[sent:])
            answer = self._read_message(ANSWER_TIMEOUT)
        except (OSError, WarmUnavailableError) as exc:
            self.report(f"warm parent failed ({exc}); the task runs in a new process")
            self._kill()
            raise WarmUnavailableError(str(exc)) from exc
        if not self._fds:
            self._kill()
            raise WarmUnavailableError("the warm parent sent no pidfd")
        pidfd = self._fds.pop(0)
        self.forks += 1
        return WarmProcess(int(answer["pid"]), pidfd, self, self._generation)

    def _kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        self.stop()


# --- the parent ------------------------------------------------------------------------------


@dataclass
class _CachedFile:
    bag: Any  # Airflow's BundleDagBag
    files: dict[str, tuple[int, int]]  # path -> (mtime_ns, size): the file and its modules
    modules: list[str]  # the modules its parse imported

    def fresh(self) -> bool:
        for path, seen in self.files.items():
            try:
                stat = os.stat(path)
            except OSError:
                return False
            if (stat.st_mtime_ns, stat.st_size) != seen:
                return False
        return True


class DagFileCache:
    """DAG files parsed in the parent, one ``BundleDagBag`` per file (see the module
    docstring). Called as ``BundleDagBag`` by the task runner in a forked child."""

    def __init__(self, bag_class: Any) -> None:
        self._bag_class = bag_class
        self._files: dict[str, _CachedFile] = {}
        self._modules: dict[str, tuple[str, tuple[int, int]]] = {}  # folder modules loaded

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        path = os.fspath(kwargs.get("dag_folder") or (args[0] if args else ""))
        cached = self._files.get(path)
        if cached is not None and cached.fresh():
            bundle_path = str(kwargs.get("bundle_path"))
            if bundle_path not in sys.path:  # as BundleDagBag does
                sys.path.append(bundle_path)
            return cached.bag
        return self._bag_class(*args, **kwargs)

    def refresh(
        self, path: str, *, bundle_path: str, bundle_name: str, env: Mapping[str, str]
    ) -> None:
        """In the parent, before forking: parse ``path`` unless it is kept and unchanged."""
        cached = self._files.get(path)
        if cached is not None:
            if cached.fresh():
                return
            del self._files[path]
            for name in cached.modules:
                sys.modules.pop(name, None)
        for name, (module_file, stamp) in list(self._modules.items()):  # changed: import again
            if _stamp(module_file) != stamp:
                sys.modules.pop(name, None)
                del self._modules[name]
        before = set(sys.modules)
        saved_env, saved_cwd, saved_path = dict(os.environ), os.getcwd(), list(sys.path)
        try:
            os.environ.clear()
            os.environ.update(env)
            bag = self._bag_class(
                dag_folder=path,
                safe_mode=False,
                load_op_links=False,
                bundle_path=Path(bundle_path),
                bundle_name=bundle_name,
            )
        except Exception as exc:  # the task runner parses it itself and says why
            sys.stderr.write(f"warm parent: {path} not kept: {type(exc).__name__}: {exc}\n")
            return
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            with contextlib.suppress(OSError):
                os.chdir(saved_cwd)
            sys.path[:] = saved_path
        new = sorted(  # the folder's own modules this parse imported: imported again when stale
            name
            for name in set(sys.modules) - before
            if (getattr(sys.modules[name], "__file__", None) or "").startswith(bundle_path + os.sep)
        )
        if bag.import_errors or not bag.dags:
            return
        files = {path: _stamp(path)}
        for name, module in list(sys.modules.items()):
            file: str | None = getattr(module, "__file__", None)
            if file and file.startswith(bundle_path + os.sep):
                files[file] = self._modules.setdefault(name, (file, _stamp(file)))[1]
        self._files[path] = _CachedFile(bag, files, new)


def _stamp(path: str) -> tuple[int, int]:
    try:
        stat = os.stat(path)
    except OSError:
        return (0, -1)
    return (stat.st_mtime_ns, stat.st_size)


def _preload() -> None:
    """What every task would do again: the modules a task's start imports lazily, and the
    pydantic ``TypeAdapter``s a task process builds (its decoder of the supervisor's messages,
    twice; one per rendered template field), made once and shared (they are immutable)."""
    import encodings.idna  # noqa: F401
    import functools

    import jinja2.ext  # noqa: F401
    from airflow.dag_processing.bundles import local  # noqa: F401
    from airflow.sdk.definitions import connection  # noqa: F401
    from airflow.sdk.definitions.asset import metadata  # noqa: F401
    from airflow.sdk.execution_time import comms, task_runner

    with contextlib.suppress(ImportError):
        import setproctitle  # noqa: F401

    real: Any = getattr(comms, "TypeAdapter")  # noqa: B009 - not in its __all__

    @functools.cache
    def shared(kind: Any) -> Any:
        return real(kind)

    def type_adapter(kind: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            return real(kind, *args, **kwargs)
        try:
            return shared(kind)
        except TypeError:  # not hashable
            return real(kind)

    # looked up when a CommsDecoder is made, and by the task runner for each rendered field
    for module in (comms, task_runner):
        setattr(module, "TypeAdapter", type_adapter)  # noqa: B010
    type_adapter(comms.ToTask)
    type_adapter(getattr(task_runner, "JsonValue"))  # noqa: B009 - pydantic's, imported there

    # The task process sets up Airflow's logging again (its own channel to the supervisor):
    # stdlib's dictConfig clears every logger's level cache at each level it sets, ~70 times
    # over the ~700 loggers Airflow's modules made here (~15 ms). Once at the end is the same.
    import logging.config

    dict_config = logging.config.dictConfig

    def dict_config_clearing_once(config: Any) -> None:
        manager: Any = logging.Logger.manager
        manager._clear_cache = lambda: None
        try:
            dict_config(config)
        finally:
            del manager._clear_cache
            manager._clear_cache()

    logging.config.dictConfig = dict_config_clearing_once


class _Parent:
    """The parent's loop: one request at a time from the worker's socket; exit reports as
    children end."""

    def __init__(self, sock: socket.socket) -> None:
        from airflow import settings
        from airflow.dag_processing import dagbag
        from airflow.executors import workloads
        from airflow.executors.base_executor import BaseExecutor
        from airflow.sdk.api.client import Client
        from airflow.sdk.execution_time import supervisor, task_runner  # noqa: F401
        from airflow.sdk.log import configure_logging
        from airflow.settings import dispose_orm
        from airflow_task import exit_watch_install  # type: ignore[import-not-found]

        self.sock = sock
        self.settings = settings
        self.workloads = workloads
        self.run_workload = BaseExecutor.run_workload
        self.configure_logging = configure_logging
        # Airflow's logging as airflow_task.py sets it up, once: JSON lines to file descriptor 1,
        # which is /dev/null here and the task's log in each child (dictConfig walks every
        # logger Airflow made: ~20 ms a time)
        configure_logging(output=os.fdopen(1, "wb", buffering=0, closefd=False), json_output=True)
        dispose_orm(do_log=False)
        _preload()
        exit_watch_install()
        # what every supervisor would build again: the HTTP client's SSL context and transports
        Client(base_url="http://127.0.0.1/", token="warm").close()  # noqa: S106 - not a secret
        self.cache = DagFileCache(dagbag.BundleDagBag)
        # the task runner's parse() looks it up when called
        setattr(dagbag, "BundleDagBag", self.cache)  # noqa: B010
        self.children: set[int] = set()
        self.wakeup_r, self.wakeup_w = os.pipe()
        os.set_blocking(self.wakeup_w, False)
        signal.set_wakeup_fd(self.wakeup_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the worker's
        self.buffer = b""

    def send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        data = json.dumps(message).encode() + b"\n"
        if fds:
            sent = socket.send_fds(self.sock, [data], fds)
            data = data[sent:]
        if data:
            self.sock.sendall(data)

    def serve(self) -> None:
        import gc

        gc.collect()
        gc.freeze()  # what is here now is shared with every child, never copied by a collection
        self.send({"ready": os.getpid(), "python": sys.version.split()[0]})
        selector = selectors.DefaultSelector()
        selector.register(self.sock, selectors.EVENT_READ, "request")
        selector.register(self.wakeup_r, selectors.EVENT_READ, "child")
        while True:
            for key, _ in selector.select():
                if key.data == "child":
                    with contextlib.suppress(BlockingIOError, InterruptedError):
                        os.read(self.wakeup_r, 512)
                    self.reap()
                    continue
                try:
                    data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 4)
                except InterruptedError:
                    continue
                if not data:  # the worker is gone: so are we (our children go on)
                    return
                self.buffer += data
                while b"\n" in self.buffer:
                    line, _, self.buffer = self.buffer.partition(b"\n")
                    self.handle(json.loads(line), fds)
                    fds = []
                for fd in fds:
                    os.close(fd)
            self.reap()

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return
            self.children.discard(pid)
            self.send({"exited": pid, "status": os.waitstatus_to_exitcode(status)})

    def handle(self, request: dict[str, Any], fds: list[int]) -> None:
        if not fds:
            self.send({"error": "no log file came with the request"})
            return
        log_fd = fds[0]
        try:
            workload = self.workloads.ExecuteTask.model_validate_json(request["workload"])
            env: dict[str, str] = request["env"]
            folder = env.get("AIRFLOW__CORE__DAGS_FOLDER")
            if folder:
                path = os.path.join(folder, workload.dag_rel_path)
                self.cache.refresh(
                    path, bundle_path=folder, bundle_name=workload.bundle_info.name, env=env
                )
            pid = os.fork()
        except Exception as exc:  # said to the worker, which runs it anew
            os.close(log_fd)
            self.send({"error": f"{type(exc).__name__}: {exc}"})
            return
        if pid == 0:
            self.child(workload, env, request.get("cwd") or "/", log_fd)
        os.close(log_fd)
        self.children.add(pid)
        pidfd = os.pidfd_open(pid)  # before any reaping: it names this child
        try:
            self.send({"pid": pid}, [pidfd])
        finally:
            os.close(pidfd)

    def child(self, workload: Any, env: dict[str, str], cwd: str, log_fd: int) -> None:
        """In the forked child: become what ``airflow_task.py`` would be, run the workload,
        never return."""
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.setsid()
            self.sock.close()
            os.close(self.wakeup_r)
            os.close(self.wakeup_w)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.close(log_fd)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0, closed with the process
            sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
            for stream in (sys.stdout, sys.stderr):
                stream.reconfigure(write_through=True)
            os.environ.clear()
            os.environ.update(env)
            os.chdir(cwd)
            if "AIRFLOW__CORE__DAGS_FOLDER" in env:  # read once, at import, by the bundle
                self.settings.DAGS_FOLDER = os.path.expanduser(env["AIRFLOW__CORE__DAGS_FOLDER"])
            code = self.run_workload(workload, subprocess_logs_to_stdout=False)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException:  # said in the log, the status says failed
            import traceback

            traceback.print_exc()
        finally:
            for out in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    out.flush()
            os._exit(code or 0)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="the worker's warm parent (runtime.warm)")
    parser.add_argument("--fd", type=int, required=True, help="the socket to the worker")
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    sock = socket.socket(fileno=args.fd)
    parent = _Parent(sock)  # imports airflow_task from this file's folder (sys.path[0])
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]  # the registry's runtime/ is not a folder for the tasks to import from
    parent.serve()


if __name__ == "__main__":
    main()
