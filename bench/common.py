"""What the benchmarks share: environment, scratch database, child processes, CPU, percentiles.

``bench_environment()`` must run before ``django.setup()``; the rest needs Django set up.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/ar_bench"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def bench_environment() -> None:
    """Production-like settings with statement counting (``bench.settings``).

    ``DATABASE_URL`` defaults to the local PostgreSQL; production's required secrets get
    random values unless set. Child processes inherit all of it.
    """
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    os.environ.setdefault("DATABASE_URL", DEFAULT_DATABASE_URL)
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-" + secrets.token_urlsafe(48))
    os.environ.setdefault("JWT_SECRET", "bench-" + secrets.token_urlsafe(48))
    pythonpath = os.environ.get("PYTHONPATH", "")
    if str(REPO) not in pythonpath.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), pythonpath) if p)


def stop_on_signals() -> None:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt, so that ``finally`` blocks clean up.

    (SIGINT too: a process started in the background by a shell begins with it ignored.)
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


@contextmanager
def scratch_database(tag: str) -> Iterator[str]:
    """Create and migrate ``ar_bench_<tag>_<pid>`` (a temporary file on SQLite), then drop it.

    Dropped even on Ctrl-C, and on PostgreSQL even if a child process is still connected
    (``WITH (FORCE)``).
    """
    from django.conf import settings
    from django.db import connection

    old_name = connection.settings_dict["NAME"]
    name = f"ar_bench_{tag}_{os.getpid()}"
    if connection.vendor == "sqlite":
        name = os.path.join(tempfile.gettempdir(), f"{name}.sqlite3")
    connection.settings_dict["TEST"]["NAME"] = name
    try:
        connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
        yield name
    finally:
        connection.close()
        settings.DATABASES[connection.alias]["NAME"] = old_name
        connection.settings_dict["NAME"] = old_name
        if connection.vendor == "postgresql":
            with connection._nodb_cursor() as cursor:
                cursor.execute(
                    f"DROP DATABASE IF EXISTS {connection.ops.quote_name(name)} WITH (FORCE)"
                )
        else:
            for suffix in ("", "-wal", "-shm"):
                with suppress(FileNotFoundError):
                    os.remove(name + suffix)


def process_stop(process: subprocess.Popen, *, grace: float = 30.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; a process already gone is fine."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- CPU time from /proc ---------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # "pid (comm) state ppid ...": comm may contain spaces, so split after the last ")"
    return text[text.rindex(")") + 2 :].split()


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (all its threads), or None when it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def run_seconds(pid: int) -> float | None:
    """CPU time of a process's main thread in nanosecond resolution (``/proc/<pid>/schedstat``;
    the 10 ms ticks of :func:`process_cpu_seconds` are too coarse for one short call), or None
    when it is gone. A PostgreSQL backend is single-threaded: this is all of its CPU time."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (FileNotFoundError, ProcessLookupError):
        return None


def child_pids(pid: int) -> list[int]:
    """Pids of the live children of ``pid``."""
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and int(fields[1]) == pid:
                children.append(int(entry))
    return sorted(children)


def cpu_seconds(pids: Sequence[int]) -> dict[int, float]:
    found = {pid: process_cpu_seconds(pid) for pid in pids}
    return {pid: cpu for pid, cpu in found.items() if cpu is not None}


def cpu_spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two ``cpu_seconds`` readings (a new process counts whole)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} CPUs)"


# --- statistics ------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of ``values`` (need not be sorted); NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def wait_until(deadline: float) -> None:
    delay = deadline - time.time()
    if delay > 0:
        time.sleep(delay)


def stop_children(*, grace: float = 10.0) -> None:
    """Stop the child processes this process still has (e.g. a server that was being started
    when Ctrl-C came): SIGTERM, SIGKILL after ``grace`` seconds, reaped."""
    pids = child_pids(os.getpid())
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for pid in pids:
        with suppress(ChildProcessError):
            while os.waitpid(pid, os.WNOHANG) == (0, 0):
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.1)


# --- checking the statement counter against PostgreSQL's log ---------------------------------

LOG_LINE = re.compile(r"\[(\d+)\] \S*@(\S+) LOG:  (?:statement|execute [^:]*): (.*)")


def log_every_statement(database: str) -> None:
    """``log_statement = all`` on ``database``, for the sessions opened from now on."""
    from django.db import connection

    if connection.vendor != "postgresql":
        raise SystemExit("--check-statements-log needs PostgreSQL")
    with connection.cursor() as cursor:
        cursor.execute(
            f"ALTER DATABASE {connection.ops.quote_name(database)} SET log_statement = 'all'"
        )


def check_statements_log(
    path: Path, *, offset: int, database: str, pids: set[int], counted: int
) -> None:
    """Print the statements PostgreSQL logged (from ``offset`` on) for the backends ``pids``
    of ``database``, next to the number the counting backend reported."""
    logged = 0
    kinds = {"BEGIN": 0, "COMMIT": 0, "ROLLBACK": 0, "SELECT 1": 0}
    with path.open("rb") as log:
        log.seek(offset)
        for raw in log:
            match = LOG_LINE.search(raw.decode("utf-8", "replace"))
            if match is None or match[2] != database or int(match[1]) not in pids:
                continue
            logged += 1
            statement = match[3].strip()
            if statement in kinds:
                kinds[statement] += 1
    verdict = "the same" if logged == counted else "DIFFERENT"
    print(
        f"\nstatement check: counted {counted:,}, PostgreSQL logged {logged:,} ({verdict}) "
        f"for backend pids {sorted(pids)}; of them "
        + ", ".join(f"{count:,} {kind}" for kind, count in kinds.items())
    )
