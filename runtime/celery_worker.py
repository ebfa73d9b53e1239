"""The Celery worker of ``EXECUTOR=celery`` (``manage.py celery_worker``, or ``python -m
runtime.celery_worker``, which it runs): takes the ``ExecuteTask`` workloads the scheduler sends
(:mod:`runtime.celery_app`) and runs each with the same process model as ``manage.py worker``.

It needs only three settings, from its environment, and nothing of the registry's database:

- ``CELERY_BROKER_URL``: the broker (``amqp://…`` or ``redis://…``);
- ``EXECUTION_API_URL``: the server's root URL (the tasks talk to its ``/execution/`` API with
  the token that came with their workload; the worker mints none);
- ``AIRFLOW__CORE__DAGS_FOLDER``: the DAG files, laid out as on the server (a workload names
  its file relative to the folder).

It is a plain entry point, not a Django command: it never imports Django, reads no
``DATABASE_URL``, ``JWT_SECRET`` nor ``DJANGO_SECRET_KEY`` (it says so at start-up when they
are set, and keeps them out of its tasks' environment). ``manage.py celery_worker`` only
replaces itself with this module (``os.execv``), before settings are read.

Each workload runs as on ``manage.py worker``: its Airflow supervisor forked by a warm parent
(:class:`runtime.warm.WarmParent`, ``WORKER_WARM``: one per worker process, shared by its
Celery threads) else a new ``runtime/airflow_task.py`` process; its output goes to a log file
under ``WORKER_LOG_DIR``, which the log shipper (:class:`runtime.log_shipping.LogShipping`)
sends to the server with the workload's token. Celery's ``threads`` pool runs
``--concurrency`` workloads at once, each thread waiting for its task's process.

A workload delivered twice (the broker's redelivery after a worker was lost, or a duplicate)
starts a supervisor whose ``PATCH /run`` the server answers 409 (the task instance is not
``queued`` any more): that try does not run, and the duplicate is dropped (acknowledged). A
worker killed with SIGKILL leaves its tasks' supervisors running (they are in sessions of
their own): they finish and report as usual; on a machine that died with them, the
scheduler's heartbeat timeout (``TASK_INSTANCE_HEARTBEAT_TIMEOUT``) fails or retries the task
instance.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from runtime.celery_app import DEFAULT_QUEUE, DEFAULT_VISIBILITY_TIMEOUT, TASK_NAME, celery_app
from runtime.launch import AIRFLOW_TASK_SCRIPT, airflow_env
from runtime.log_shipping import LogShipping, log_size
from runtime.warm import WarmParent, WarmProcess, WarmUnavailableError

logger = logging.getLogger("runtime.celery_worker")

#: The settings the worker needs; every one must be set.
REQUIRED = ("CELERY_BROKER_URL", "EXECUTION_API_URL", "AIRFLOW__CORE__DAGS_FOLDER")
#: What a worker machine must not hold (the server's and the scheduler's): never read, and
#: kept out of the tasks' environment.
NOT_NEEDED = ("DATABASE_URL", "JWT_SECRET", "DJANGO_SECRET_KEY")
#: Seconds between two looks at a running task's process.
POLL = 0.2
#: The log line Airflow's supervisor writes when the server refuses ``/run`` as a duplicate.
_REFUSED = re.compile(r"""reason['"]?\s*:\s*['"]invalid_state""")


class ConfigError(Exception):
    """The worker's environment is incomplete or wrong; the message says what to set."""


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected a whole number, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"{name}: expected a whole number >= 0, got {value}")
    return value


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}: expected a number, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"{name}: expected a number >= 0, got {value}")
    return value


def _env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}: expected true or false, got {raw!r}")


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """What the worker reads from its environment (and nothing else)."""

    broker_url: str
    server: str
    dags_folder: Path
    log_dir: Path
    airflow_home: Path
    visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT
    warm: bool = True
    warm_python: str = sys.executable
    warm_max_tasks: int = 1000
    warm_max_memory_mb: int = 1024
    log_ship_interval: float = 1.0
    log_chunk_bytes: int = 256 * 1024
    log_flush_timeout: float = 30.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerConfig:
        """Raises ``ConfigError`` naming every missing setting, or the first bad one."""
        missing = [name for name in REQUIRED if not env.get(name, "").strip()]
        if missing:
            raise ConfigError(
                f"set {', '.join(missing)}: the Celery worker needs CELERY_BROKER_URL (the "
                "broker), EXECUTION_API_URL (the server's root URL) and "
                "AIRFLOW__CORE__DAGS_FOLDER (the DAG files) (docs/deployment.md)"
            )
        server = env["EXECUTION_API_URL"].strip().rstrip("/")
        server = server.removesuffix("/execution")
        if not server.startswith(("http://", "https://")):
            raise ConfigError(f"EXECUTION_API_URL: expected an http(s) URL, got {server!r}")
        if not env["CELERY_BROKER_URL"].startswith(
            ("amqp://", "pyamqp://", "redis://", "rediss://")
        ):
            raise ConfigError("CELERY_BROKER_URL: expected an amqp:// or redis:// URL")
        dags_folder = Path(env["AIRFLOW__CORE__DAGS_FOLDER"]).expanduser()
        if not dags_folder.is_dir():
            raise ConfigError(f"AIRFLOW__CORE__DAGS_FOLDER: not a folder: {dags_folder}")
        data_dir = Path(env.get("ASSET_REGISTRY_DATA_DIR") or Path.cwd() / "var")
        log_dir = Path(env.get("WORKER_LOG_DIR") or data_dir / "task_logs")
        return cls(
            broker_url=env["CELERY_BROKER_URL"],
            server=server,
            dags_folder=dags_folder.resolve(),
            log_dir=log_dir,
            airflow_home=Path(env.get("AIRFLOW_HOME") or log_dir / "airflow_home"),
            visibility_timeout=_env_int(
                env, "CELERY_VISIBILITY_TIMEOUT", DEFAULT_VISIBILITY_TIMEOUT
            ),
            warm=_env_bool(env, "WORKER_WARM", True),
            warm_python=env.get("WORKER_WARM_PYTHON") or sys.executable,
            warm_max_tasks=_env_int(env, "WORKER_WARM_MAX_TASKS", 1000),
            warm_max_memory_mb=_env_int(env, "WORKER_WARM_MAX_MEMORY_MB", 1024),
            log_ship_interval=_env_float(env, "TASK_LOG_SHIP_INTERVAL", 1.0),
            log_chunk_bytes=max(_env_int(env, "TASK_LOG_CHUNK_MAX_BYTES", 256 * 1024), 64),
            log_flush_timeout=_env_float(env, "TASK_LOG_FLUSH_TIMEOUT", 30.0),
        )


class WorkloadError(Exception):
    """A message that is not a workload this worker can run; the message says why."""


@dataclass(frozen=True)
class Workload:
    """The parts of an ``ExecuteTask`` workload the worker reads; ``text`` is all of it."""

    text: str
    token: str
    ti_id: str
    label: str
    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    map_index: int


def workload_parse(text: Any) -> Workload:
    """Check a message as an ``ExecuteTask`` workload; raises ``WorkloadError``."""
    if not isinstance(text, str):
        raise WorkloadError(f"expected the workload as a JSON string, got {type(text).__name__}")
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise WorkloadError(f"the workload is not JSON: {exc}") from None
    if not isinstance(body, dict) or body.get("type") != "ExecuteTask":
        raise WorkloadError("expected an ExecuteTask workload")
    ti, token, rel = body.get("ti"), body.get("token"), body.get("dag_rel_path")
    if not isinstance(ti, dict) or not isinstance(token, str) or not token:
        raise WorkloadError("the workload has no task instance or no token")
    if not isinstance(rel, str) or not rel or rel.startswith("/") or ".." in Path(rel).parts:
        raise WorkloadError(f"dag_rel_path must be a path inside the DAG folder, got {rel!r}")
    try:
        ids = {name: str(ti[name]) for name in ("id", "dag_id", "run_id", "task_id")}
        try_number, map_index = int(ti["try_number"]), int(ti.get("map_index", -1))
    except (KeyError, TypeError, ValueError) as exc:
        raise WorkloadError(f"the workload's task instance lacks {exc}") from None
    label = f"{ids['dag_id']}.{ids['task_id']} @ {ids['run_id']} try {try_number}"
    return Workload(
        text=text,
        token=token,
        ti_id=ids["id"],
        label=label,
        dag_id=ids["dag_id"],
        run_id=ids["run_id"],
        task_id=ids["task_id"],
        try_number=try_number,
        map_index=map_index,
    )


def _path_part(value: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.:+=-]", "_", value)
    return "_" + cleaned if cleaned.startswith(".") else cleaned


def _log_report(line: str) -> None:
    logger.info("%s", line)


@dataclass(kw_only=True, eq=False)
class WorkloadRunner:
    """Runs workloads, one per calling thread at a time, with one warm parent and one log
    shipper per process (their use is serialized by a lock: they talk over one socket and one
    pipe each)."""

    config: WorkerConfig
    base_env: Mapping[str, str]
    report: Callable[[str], None] = _log_report
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _warm: WarmParent | None = field(default=None, init=False)
    _running: set[str] = field(default_factory=set, init=False)  # task instance ids
    _shipping: LogShipping = field(init=False)

    def __post_init__(self) -> None:
        self._env = {k: v for k, v in self.base_env.items() if k not in NOT_NEEDED}
        self._task_env = airflow_env(
            server=self.config.server, airflow_home=self.config.airflow_home, base=self._env
        )
        self._task_env["AIRFLOW__CORE__DAGS_FOLDER"] = str(self.config.dags_folder)
        self._shipping = LogShipping(
            server=self.config.server,
            interval=self.config.log_ship_interval,
            chunk_bytes=self.config.log_chunk_bytes,
            flush_timeout=self.config.log_flush_timeout,
            report=self.report,
        )
        if self.config.warm:
            self._warm = WarmParent(
                python=self.config.warm_python,
                env=self._task_env,
                max_tasks=self.config.warm_max_tasks,
                max_memory_mb=self.config.warm_max_memory_mb,
                report=self.report,
            )

    def close(self) -> None:
        with self._lock:
            if self._warm is not None:
                self._warm.stop()
            self._shipping.close()

    def log_path(self, workload: Workload) -> Path:
        parts = (workload.dag_id, workload.run_id, workload.task_id)
        folder = self.config.log_dir.joinpath(*(_path_part(p) for p in parts))
        folder.mkdir(parents=True, exist_ok=True)
        suffix = f"map_index={workload.map_index}," if workload.map_index >= 0 else ""
        return folder / f"{suffix}attempt={workload.try_number}.log"

    def run(self, text: Any) -> str:
        """Run one message's workload to its end; one line saying what became of it."""
        try:
            workload = workload_parse(text)
        except WorkloadError as exc:
            line = f"dropped a message that is not a workload: {exc}"
            self.report(line)
            return line
        with self._lock:
            duplicate = workload.ti_id in self._running
            self._running.add(workload.ti_id)
        if duplicate:  # its log and its shipping are the running try's: leave them alone
            line = f"dropped {workload.label}: it is running in this worker already (a duplicate)"
            self.report(line)
            return line
        try:
            return self._run(workload)
        finally:
            with self._lock:
                self._running.discard(workload.ti_id)

    def _run(self, workload: Workload) -> str:
        try:
            log_path = self.log_path(workload)
            start = log_size(log_path)
            started = time.monotonic()
            process, scratch = self._spawn(workload, log_path)
        except OSError as exc:  # left queued: TASK_QUEUED_TIMEOUT fails (or retries) it
            line = f"could not start {workload.label}: {exc}"
            self.report(line)
            return line
        self.report(
            f"started {workload.label} (task instance {workload.ti_id}, pid {process.pid}, "
            f"log {log_path})"
        )
        with self._lock:
            self._shipping.follow(
                task_instance_id=workload.ti_id, path=log_path, start=start, token=workload.token
            )
        try:
            code = self._wait(process)
        finally:
            with self._lock:
                self._shipping.finish(task_instance_id=workload.ti_id)
            if scratch is not None:
                scratch.unlink(missing_ok=True)
        seconds = time.monotonic() - started
        if code != 0 and _refused(log_path, start):
            line = (
                f"dropped {workload.label}: the server refused to start it (409: it is not "
                "queued any more; a duplicate delivery)"
            )
        else:
            line = f"finished {workload.label}: exit code {code} in {seconds:.1f}s"
        self.report(line)
        return line

    def _spawn(self, workload: Workload, log_path: Path) -> tuple[Any, Path | None]:
        """The task's supervisor: forked by the warm parent, else a new process reading the
        workload from a private file (not the command line, where ``ps`` shows it)."""
        output: IO[bytes]
        with log_path.open("ab") as output:
            if self._warm is not None:
                with self._lock:
                    try:
                        return self._warm.spawn(
                            workload=workload.text,
                            env=self._task_env,
                            cwd=os.getcwd(),
                            output=output,
                        ), None
                    except WarmUnavailableError as exc:
                        logger.debug("no warm parent: %s", exc)
            fd, name = tempfile.mkstemp(prefix="workload-", suffix=".json")
            with os.fdopen(fd, "w") as file:
                file.write(workload.text)
            try:
                process = subprocess.Popen(  # noqa: S603 - an argv list we build, no shell
                    [sys.executable, AIRFLOW_TASK_SCRIPT, "--json-path", name],
                    env=self._task_env,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError:
                Path(name).unlink(missing_ok=True)
                raise
            return process, Path(name)

    def _wait(self, process: Any) -> int:
        """The exit status of the task's process (its supervisor enforces the task's own
        timeouts and heartbeats)."""
        while True:
            if isinstance(process, WarmProcess):
                with self._lock:  # its exit status comes over the warm parent's socket
                    code = process.poll()
            else:
                code = process.poll()
            if code is not None:
                return int(code)
            time.sleep(POLL)


def _refused(log_path: Path, start: int) -> bool:
    """Whether the try's log says the server refused to start it (409)."""
    try:
        with log_path.open("rb") as file:
            file.seek(start)
            text = file.read(1 << 20).decode(errors="replace")
    except OSError:
        return False
    return bool(_REFUSED.search(text))


# --- the Celery worker ---------------------------------------------------------------------------


def worker_app(config: WorkerConfig, runner: WorkloadRunner) -> Any:
    """The Celery app with ``execute_workload`` bound to ``runner``."""
    app = celery_app(broker_url=config.broker_url, visibility_timeout=config.visibility_timeout)

    @app.task(name=TASK_NAME)  # type: ignore[untyped-decorator]
    def execute_workload(input: Any) -> str:
        return runner.run(input)

    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="manage.py celery_worker",
        description="Run the ExecuteTask workloads EXECUTOR=celery sends (docs/deployment.md).",
    )
    parser.add_argument(
        "--queues",
        default=DEFAULT_QUEUE,
        help=f"the Celery queues to take, comma-separated (default {DEFAULT_QUEUE})",
    )
    parser.add_argument(
        "--concurrency", type=int, default=4, help="workloads run at once (default 4)"
    )
    parser.add_argument(
        "--hostname", default="", help="the worker's Celery node name (default registry-<pid>@host)"
    )
    parser.add_argument("--loglevel", default="INFO", help="Celery's log level (default INFO)")
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    if not queues:
        parser.error("--queues: name at least one queue")
    logging.basicConfig(
        level=args.loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = WorkerConfig.from_env(os.environ)
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    present = [name for name in NOT_NEEDED if os.environ.get(name)]
    if present:
        logger.warning(
            "%s set: the Celery worker does not need %s and does not read it; it is kept out of "
            "the tasks' environment (a worker machine should not hold it)",
            ", ".join(present),
            "them" if len(present) > 1 else "it",
        )
    config.log_dir.mkdir(parents=True, exist_ok=True)
    runner = WorkloadRunner(config=config, base_env=os.environ)
    app = worker_app(config, runner)
    hostname = args.hostname or f"registry-{os.getpid()}@%h"
    logger.info(
        "celery worker: queues %s, concurrency %d, server %s, DAG folder %s, logs %s",
        ",".join(queues),
        args.concurrency,
        config.server,
        config.dags_folder,
        config.log_dir,
    )
    try:
        app.worker_main(
            argv=[
                "worker",
                "--pool=threads",
                f"--concurrency={args.concurrency}",
                f"--queues={','.join(queues)}",
                f"--hostname={hostname}",
                f"--loglevel={args.loglevel.upper()}",
                "--without-mingle",
            ]
        )
    finally:
        runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
