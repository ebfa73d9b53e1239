"""The worker behind ``manage.py worker``: runs runnable task instances, like Airflow's
LocalExecutor.

A loop claims up to the free slots (``task_instances_claim``: ``scheduled`` → ``queued`` with
``FOR UPDATE SKIP LOCKED``, so two workers never get one task instance), issues each a token
and starts one child process per task instance (:mod:`runtime.launch` says how), which talks
to the execution API over HTTP:

- a task with a ``callable`` runs under the ``task_sdk`` supervisor
  (``python -m task_sdk run``), started as a fork of the worker (:mod:`task_sdk.forking`:
  the worker has imported the supervisor's modules already, so the child marks its task
  instance running within milliseconds instead of after a fresh interpreter's ~0.3 s of
  imports). The task's own code still runs in a fresh process the supervisor starts;
- a task of a DAG with an ``airflow_dag_file`` runs under Airflow's own supervisor with the
  DAG file's folder as the ``dags-folder`` bundle (the ``airflow`` extra): forked by the
  worker's warm parent (:mod:`runtime.warm`, ``WORKER_WARM``), a process of its own that has
  imported Airflow once (Airflow's modules and settings are not the worker's to import) and
  keeps the DAG files parsed; the worker holds a pidfd of each such supervisor and drives it
  as a child of its own. Without a warm parent (off, or it cannot start or died) the task
  runs as a new ``runtime/airflow_task.py`` process, as before.

Each try's output goes to its log file, which :mod:`runtime.log_shipping` (a process the worker
starts) sends to the server while the try runs, so that the admin and ``/api/v2`` show it.

The child reports the outcome (``/run``, heartbeats, ``/state``); the worker reaps it, reads
the task instance's state and reports one line per task instance. A task whose code cannot be
found is failed with that message: the worker reports it through the API itself when nothing
names the code (or the DAG file is missing); a missing ``callable`` file or an import error
is reported by the child. Neither stops the worker. A claimed task instance whose child exited
before ``/run`` (say, the server was unreachable) is given back (``queued`` → ``scheduled``).

The loop is :class:`runtime.daemon.Daemon`'s, each of its passes one round of reaping,
claiming and starting. ``request_stop()`` (SIGTERM or SIGINT while :meth:`Worker.run` runs)
stops claiming and gives back what was claimed but not started; running tasks get
``grace_period`` seconds to finish, then SIGTERM (their supervisor stops the task and reports
``failed`` / ``up_for_retry``), then SIGKILL ``kill_grace`` seconds later. A second
``request_stop()`` skips the grace period.

Waiting for work is the daemon's (:func:`runtime.daemon.wait_for_work`): on PostgreSQL it
wakes up when a scheduler commits new runs (``LISTEN``, :mod:`assets_app.notify`), at the
latest after the poll interval, and claims at once; a task's process exiting wakes it too.
With ``DEBUG`` logging it logs, per task instance, when it woke up, claimed it and started its
process (``timing …`` lines, read by ``bench/bench_e2e.py``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

import httpx
from django.conf import settings
from django.db import DatabaseError

from assets_app.models import DagTask, TaskInstance, TaskInstanceHistory, TaskInstanceState
from assets_app.notify import RUNS_CHANNEL
from assets_app.services.runs.claims import task_instances_claim, task_instances_unclaim
from assets_app.services.runs.state import task_instance_failure_reason_record
from assets_app.tokens import token_issue
from runtime.daemon import STOP_SIGNALS, WAIT_SLICE, Daemon, connection_close
from runtime.launch import TaskCodeError, TaskLaunch, airflow_env, task_launch
from runtime.log_shipping import LogShipping, log_size
from runtime.warm import WarmParent, WarmUnavailableError
from task_sdk.client import Client, ServerResponseError
from task_sdk.forking import preload, start_cli
from task_sdk.timestamps import now

logger = logging.getLogger(__name__)

#: Seconds between SIGTERM and SIGKILL once the grace period is over.
DEFAULT_KILL_GRACE = 10.0


# --- the worker ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskOutcome:
    """What became of one task instance the worker took."""

    task_instance_id: str
    label: str  # dag.task @ run, try N
    state: str | None  # the task instance's state after its child exited
    detail: str  # one line: why it failed, or what the worker did
    log_path: Path | None
    seconds: float


@dataclass
class WorkerSummary:
    outcomes: list[TaskOutcome] = field(default_factory=list)
    given_back: int = 0  # claimed, never started, back to scheduled

    def count(self, state: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.state == state)


class TaskProcess(Protocol):
    """A task instance's child: a ``subprocess.Popen`` or a ``task_sdk.forking.ForkedProcess``."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...

    def send_signal(self, sig: int) -> None: ...


@dataclass
class _Child:
    ti: TaskInstance
    label: str
    process: TaskProcess
    log_path: Path
    started: float
    scratch: Path | None


def _path_part(value: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.:+=-]", "_", value)
    return "_" + cleaned if cleaned.startswith(".") else cleaned


def _last_error_line(log_path: Path) -> str:
    """The line of a child's log that best says why it failed."""
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    for line in reversed(lines):
        if line.startswith("error:"):
            return line
    for line in reversed(lines):
        if '"level":"error"' in line:
            return _json_error_line(line)[:500]
        if " ERROR " in line:
            return line[:500]
    return lines[-1][:500] if lines else ""


def _json_error_line(line: str) -> str:
    """An error of Airflow's JSON task log said in one line: the exception (its type and
    message, from ``error_detail``) else the event, else the line as written."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict):
        return line
    details = record.get("error_detail")
    if isinstance(details, list) and details and isinstance(details[0], dict):
        raised = details[0]  # the exception raised; its causes follow
        if raised.get("exc_type"):
            return f"{raised['exc_type']}: {raised.get('exc_value', '')}".rstrip(": ")
    return str(record.get("event") or line)


def _log_report(line: str) -> None:
    logger.info("%s", line)


def _nothing() -> None:
    """No ``started`` hook."""


@dataclass(kw_only=True, eq=False)
class Worker:
    """Claims and runs task instances until stopped (see the module docstring).

    ``airflow_home`` defaults to ``log_dir / "airflow_home"``; ``report`` gets one line per
    event (default: the log); ``started`` is called once stop signals are handled, before
    the first claim."""

    server: str
    log_dir: Path
    concurrency: int = 4
    once: bool = False
    max_tasks: int | None = None
    poll_interval: float = 1.0
    grace_period: float = 30.0
    kill_grace: float = DEFAULT_KILL_GRACE
    airflow_home: Path | None = None
    warm: bool = False
    report: Callable[[str], None] = _log_report
    started: Callable[[], None] = _nothing
    summary: WorkerSummary = field(default_factory=WorkerSummary, init=False)
    _children: list[_Child] = field(default_factory=list, init=False)
    _taken: int = field(default=0, init=False)  # started, or failed for missing code
    _daemon: Daemon = field(init=False, repr=False)
    # wall clock, for the timing lines: the last wake-up and the last claim
    _woken_at: float = field(default=0.0, init=False)
    _claimed_at: float = field(default=0.0, init=False)
    _log_shipping: LogShipping = field(default_factory=LogShipping.disabled, init=False)
    _warm_parent: WarmParent | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.max_tasks is not None and self.max_tasks < 1:
            raise ValueError("max_tasks must be at least 1")
        self._daemon = Daemon(
            name="worker",
            run_pass=self._pass,
            interval=self.poll_interval,
            max_passes=1 if self.once else None,  # one claim
            channel=RUNS_CHANNEL,  # wakes on the schedulers' commits (PostgreSQL)
            stop_signals=STOP_SIGNALS,  # Ctrl-C too: the running tasks get their grace period
            check_every=WAIT_SLICE,
            started=self._start_up,
            woken=self._any_exited,
            finish=self._drain,
            close=self._close,
        )

    # -- control ---------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop claiming; end after the running tasks (a second call: without grace).
        Only counts, so it is safe in a signal handler."""
        self._daemon.request_stop()

    @property
    def _stop_requested(self) -> bool:
        return self._daemon.stopping

    @property
    def _hurry(self) -> bool:
        """A second stop request: no grace period."""
        return self._daemon.stop_requests > 1

    def _done_claiming(self) -> bool:
        if self._stop_requested:
            return True
        return self.max_tasks is not None and self._taken >= self.max_tasks

    def _free_slots(self) -> int:
        free = self.concurrency - len(self._children)
        if self.max_tasks is not None:
            free = min(free, self.max_tasks - self._taken)
        return max(free, 0)

    def _any_exited(self) -> bool:
        return any(child.process.poll() is not None for child in self._children)

    # -- main loop -------------------------------------------------------------------------

    def run(self) -> WorkerSummary:
        """Claim and run task instances until stopped, ``once`` or ``max_tasks`` done; then
        wait for the running tasks."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._daemon.run()
        return self.summary

    def _start_up(self) -> None:
        self.started()
        preload()  # once here, not in every forked supervisor
        self._log_shipping = LogShipping.from_settings(server=self.server, report=self.report)
        if self.warm:  # started when the first DAG-file task comes
            self._warm_parent = WarmParent(
                python=settings.WORKER_WARM_PYTHON,
                env=airflow_env(
                    server=self.server, airflow_home=self._airflow_home(), base=dict(os.environ)
                ),
                max_tasks=settings.WORKER_WARM_MAX_TASKS,
                max_memory_mb=settings.WORKER_WARM_MAX_MEMORY_MB,
                report=self.report,
            )

    def _airflow_home(self) -> Path:
        return self.airflow_home or self.log_dir / "airflow_home"

    def _close(self) -> None:
        """On the way out, error or not: the children ended, then the ends of their logs sent
        (up to the flush timeout)."""
        try:
            self._end_children()
        finally:
            if self._warm_parent is not None:
                self._warm_parent.stop()
            self._log_shipping.close()

    def _pass(self) -> bool:
        """One round: reap the exited children, claim up to the free slots, start what was
        claimed. ``False`` once stopping or ``max_tasks`` are taken."""
        self._woken_at = time.time()
        self._reap()
        if self._done_claiming():
            return False
        free = self._free_slots()
        self._start_all(self._claim(free) if free else [])
        return not self._done_claiming()

    def _claim(self, limit: int) -> list[tuple[TaskInstance, DagTask | None]]:
        """Claim up to ``limit`` task instances, each with its declared task (where its code
        is). A database error is reported and the claim tried again on the next round: the
        running tasks do not need the worker's database connection."""
        claimed: list[TaskInstance] = []
        try:
            claimed = task_instances_claim(limit=limit)
            if not claimed:
                return []
            dag_tasks = {
                (task.dag_id, task.task_id): task
                for task in DagTask.objects.filter(
                    dag_id__in={ti.dag_id for ti in claimed},
                    task_id__in={ti.task_id for ti in claimed},
                )
            }
            self._claimed_at = time.time()
        except DatabaseError as exc:
            self.report(f"claiming failed, trying again: {exc}")
            connection_close()
            if claimed:
                self._give_back(claimed, "the worker could not read where their code is")
            return []
        return [(ti, dag_tasks.get((ti.dag_id, ti.task_id))) for ti in claimed]

    def _start_all(self, claimed: list[tuple[TaskInstance, DagTask | None]]) -> None:
        for index, (ti, dag_task) in enumerate(claimed):
            if self._stop_requested:
                self._give_back([ti for ti, _ in claimed[index:]], "the worker is stopping")
                return
            try:
                self._start(ti, dag_task)
            except OSError as exc:
                self.report(f"could not start {self._label(ti)}: {exc}")
                self._give_back([ti], "its process could not be started")

    @staticmethod
    def _label(ti: TaskInstance) -> str:
        return f"{ti.dag_id}.{ti.task_id} @ {ti.run_id} try {ti.try_number}"

    def _log_path(self, ti: TaskInstance) -> Path:
        folder = self.log_dir.joinpath(*(_path_part(p) for p in (ti.dag_id, ti.run_id, ti.task_id)))
        folder.mkdir(parents=True, exist_ok=True)
        suffix = f"map_index={ti.map_index}," if ti.map_index >= 0 else ""
        return folder / f"{suffix}attempt={ti.try_number}.log"

    def _start(self, ti: TaskInstance, dag_task: DagTask | None) -> None:
        label = self._label(ti)
        token = token_issue(task_instance_id=ti.pk)
        try:
            launch = task_launch(
                ti=ti,
                dag_task=dag_task,
                server=self.server,
                token=token,
                airflow_home=self._airflow_home(),
            )
        except TaskCodeError as exc:
            self._taken += 1
            self._fail_without_code(ti, label, token, str(exc))
            return
        log_path = self._log_path(ti)
        log_start = log_size(log_path)  # an earlier attempt of this try may have written to it
        try:
            process = self._spawn(launch, log_path)
        except OSError:
            if launch.scratch is not None:
                launch.scratch.unlink(missing_ok=True)
            raise
        self._log_shipping.follow(
            task_instance_id=ti.pk, path=log_path, start=log_start, token=token
        )
        logger.debug(
            "timing %s woken=%.6f claimed=%.6f forked=%.6f",
            ti.pk,
            self._woken_at,
            self._claimed_at,
            time.time(),
        )
        self._taken += 1
        self._children.append(
            _Child(ti, label, process, log_path, time.monotonic(), launch.scratch)
        )
        self.report(f"started {label} (task instance {ti.pk}, pid {process.pid}, log {log_path})")

    def _spawn(self, launch: TaskLaunch, log_path: Path) -> TaskProcess:
        """Start the task's child, in a session of its own (so a terminal's Ctrl-C reaches the
        worker only, which lets the task finish within the grace period): a DAG file's task
        forked by the warm parent when there is one that can, else a new process."""
        log_file: IO[bytes]
        with log_path.open("ab") as log_file:
            if launch.forked:
                return start_cli(launch.argv, env=launch.env, output=log_file)
            if launch.workload is not None and self._warm_parent is not None:
                try:
                    return self._warm_parent.spawn(
                        workload=launch.workload, env=launch.env, cwd=os.getcwd(), output=log_file
                    )
                except WarmUnavailableError as exc:
                    logger.debug("no warm parent: %s", exc)
            return subprocess.Popen(  # noqa: S603 - an argv list we build, no shell
                launch.argv,
                env=launch.env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _fail_without_code(self, ti: TaskInstance, label: str, token: str, reason: str) -> None:
        """Report the task instance failed through the execution API, as its runner would,
        and keep the reason as its ``failure_reason`` (shown in the admin)."""
        state: str | None = TaskInstanceState.FAILED
        detail = reason
        try:
            with Client(self.server, token, retries=2, backoff_max=2.0) as client:
                client.start(str(ti.pk), pid=os.getpid())
                client.finish(str(ti.pk), TaskInstanceState.FAILED, now())
        except (ServerResponseError, httpx.HTTPError) as exc:
            state = None
            detail = f"{reason}; reporting failed did not work: {exc}"
            self._give_back([ti], "its failure could not be reported")
        else:
            try:
                task_instance_failure_reason_record(task_instance_id=ti.pk, reason=reason)
            except DatabaseError as exc:  # the failure is reported; only its reason is lost
                self.report(f"could not keep the failure reason of {label}: {exc}")
                connection_close()
        self._record(TaskOutcome(str(ti.pk), label, state, detail, None, 0.0))

    def _give_back(self, tis: list[TaskInstance], why: str) -> None:
        try:
            given = task_instances_unclaim(task_instance_ids=[ti.pk for ti in tis])
        except DatabaseError as exc:
            self.report(f"could not give back {len(tis)} task instance(s) ({why}): {exc}")
            connection_close()
            return
        self.summary.given_back += given
        if given:
            self.report(f"gave back {given} task instance(s) (back to scheduled): {why}")

    def _record(self, outcome: TaskOutcome) -> None:
        self.summary.outcomes.append(outcome)
        state = outcome.state or "no state"
        detail = f": {outcome.detail}" if outcome.detail else ""
        took = f" in {outcome.seconds:.1f}s" if outcome.seconds else ""
        self.report(f"finished {outcome.label}: {state}{took}{detail}")

    # -- children --------------------------------------------------------------------------

    def _reap(self) -> None:
        for child in [c for c in self._children if c.process.poll() is not None]:
            self._children.remove(child)
            self._finish(child)

    def _finish(self, child: _Child) -> None:
        if child.scratch is not None:
            child.scratch.unlink(missing_ok=True)
        self._log_shipping.finish(task_instance_id=child.ti.pk)
        seconds = time.monotonic() - child.started
        code = child.process.returncode
        try:
            state, detail = self._try_outcome(child.ti)
        except DatabaseError as exc:
            connection_close()
            state, detail = None, f"exit code {code}; its state could not be read: {exc}"
        if state == TaskInstanceState.QUEUED:
            detail = f"its process exited ({code}) before starting the task"
            self._give_back([child.ti], detail)
            state = TaskInstanceState.SCHEDULED
        elif state == TaskInstanceState.RUNNING:
            detail = (
                f"its process exited ({code}) leaving it running; the scheduler's heartbeat "
                f"timeout will reap it. Log: {child.log_path}"
            )
        elif state == TaskInstanceState.DEFERRED:
            detail = "waiting on its trigger, without a slot: a triggerer resumes it"
        elif state is not None and state != TaskInstanceState.SUCCESS:
            why = detail or _last_error_line(child.log_path) or f"exit code {code}"
            if not detail and state in (TaskInstanceState.FAILED, TaskInstanceState.UP_FOR_RETRY):
                self._keep_failure_reason(child, why)
            detail = f"{why} (log {child.log_path})"
        self._record(
            TaskOutcome(str(child.ti.pk), child.label, state, detail, child.log_path, seconds)
        )

    def _keep_failure_reason(self, child: _Child, reason: str) -> None:
        """The runner reported the try failed without saying why: keep the log's error line
        as the try's ``failure_reason`` (the task instance's, or its history row's)."""
        try:
            task_instance_failure_reason_record(task_instance_id=child.ti.pk, reason=reason)
        except DatabaseError as exc:  # the failure is recorded; only its reason is lost
            self.report(f"could not keep the failure reason of {child.label}: {exc}")
            connection_close()

    @staticmethod
    def _try_outcome(ti: TaskInstance) -> tuple[str | None, str]:
        """The state this try ended in, and the server's failure reason (if any).

        A try that failed with tries left is kept in ``TaskInstanceHistory`` and the task
        instance moves on under a new id, ``up_for_retry`` (then ``scheduled`` as the next
        try): that try's outcome is ``up_for_retry``.
        """
        live = (
            TaskInstance.objects.filter(
                dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id, map_index=ti.map_index
            )
            .values_list("pk", "state", "try_number", "failure_reason")
            .first()
        )
        if live is None:
            return None, "the task instance no longer exists"
        pk, state, try_number, reason = live
        if pk == ti.pk:
            return state, reason
        earlier = (
            TaskInstanceHistory.objects.filter(task_instance_id=ti.pk)
            .values_list("state", "failure_reason")
            .first()
        )
        if earlier is None:
            return None, f"the task instance moved on to try {try_number} ({state})"
        earlier_state, earlier_reason = earlier
        if earlier_state == TaskInstanceState.FAILED and (
            state == TaskInstanceState.UP_FOR_RETRY or try_number > ti.try_number
        ):
            earlier_state = TaskInstanceState.UP_FOR_RETRY
        return earlier_state, earlier_reason

    def _drain(self) -> None:
        """Wait for the running tasks: all of them after ``--once`` / ``--max-tasks``; after a
        stop (also one that comes while waiting), at most the grace period."""
        self._reap()
        deadline: float | None = None
        while self._children and not self._hurry:
            if self._stop_requested and deadline is None:
                self.report(
                    f"stopping: waiting up to {self.grace_period:g}s for "
                    f"{len(self._children)} running task(s)"
                )
                deadline = time.monotonic() + self.grace_period
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(WAIT_SLICE)
            self._reap()

    def _end_children(self) -> None:
        """SIGTERM the children still running (their supervisors stop the task and report it
        ``failed`` / ``up_for_retry``), SIGKILL their process groups ``kill_grace`` later."""
        if not self._children:
            return
        self.report(f"terminating {len(self._children)} running task(s)")
        for child in self._children:
            self._signal(child, signal.SIGTERM, group=False)
        deadline = time.monotonic() + self.kill_grace
        while self._children and time.monotonic() < deadline:
            time.sleep(WAIT_SLICE)
            self._reap()
        for child in self._children:
            self._signal(child, signal.SIGKILL, group=True)
        for child in self._children:
            child.process.wait()
        self._reap()

    @staticmethod
    def _signal(child: _Child, sig: signal.Signals, *, group: bool) -> None:
        try:
            if group:
                os.killpg(child.process.pid, sig)
            else:
                child.process.send_signal(sig)
        except ProcessLookupError:
            pass
