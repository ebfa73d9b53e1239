"""Benchmark asset_changes_register: wall time and SQL statements per call.

Usage (from the repository root)::

    .venv/bin/python bench/bench_registration.py                       # SQLite scratch file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ar_bench \\
        .venv/bin/python bench/bench_registration.py --sizes 1,100,1000,10000

It creates a scratch database the way the test runner does (``test_<name>`` on PostgreSQL,
a temporary file on SQLite), migrates it, and drops it at the end. Each call runs in its own
committed transaction with the task instance row locked, as in the execution API. The
garbage collector runs before each timed call, so that no call pays for a full collection the
previous ones' objects set off (which one did depended on the scenarios before it: alias->existing
measured 101-185 ms for the same code and database until then).

Scenarios, for each size N:

* ``assets``          N declared active assets, each with an event; one consumer DAG on all.
* ``alias->new``      one declared alias, N alias events to N assets that do not exist yet;
                      one consumer DAG on the alias.
* ``alias->existing`` the same alias events again (targets, alias and links exist).

Printed per scenario and size: the statements per call, the events it created, the median and
minimum wall time of the registration itself (without its ``COMMIT``), and ``pg ms``: the
median CPU time of the PostgreSQL backend over the call's whole transaction, the ``COMMIT``
and its deferred foreign-key checks included (``/proc/<pid>/schedstat``, nanoseconds; ``-`` on
SQLite or with the server on another machine).

Measured on 2026-12-04, the host fast, 52a55eb (the commit before the run-lifecycle and
hardening work, this file copied into a worktree of it) against c98a080, four pairs alternated
on PostgreSQL, ``--sizes 1,1000 --repeat 3``, median ms of each run (statements)::

    scenario          N     52a55eb                     c98a080
    assets            1     4.5 5.7 4.6 5.2     (8)     2.6 2.8 3.4 2.5     (2)
    alias->new        1     4.6 5.6 5.7 5.2     (8)     3.3 3.6 4.6 3.3     (3)
    assets         1000     79 123 114 102      (8)     52 52 71 64         (2)
    alias->new     1000     103 169 161 145     (8)     67 69 107 88        (3)
    alias->existing 1000    98 121 133 136      (8)     64 76 107 85        (4)

On SQLite, one pair: 55 / 70 / 66 ms -> 29 / 42 / 37 ms for the three scenarios at 1,000 (8
statements -> 3 / 7 / 8). The ``pg ms`` column came after; see ``bench_http.py`` for the
PostgreSQL CPU of the same calls through the server.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

import django

django.setup()

from django.db import connection, transaction  # noqa: E402

from assets_app.models import (  # noqa: E402
    Asset,
    AssetActive,
    AssetAlias,
    Dag,
    DagScheduleAssetAliasReference,
    DagScheduleAssetReference,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.outlets import (  # noqa: E402
    AliasOutletEvent,
    AssetOutletEvent,
    OutletProfile,
    OutletType,
)
from assets_app.services.assets.registration import asset_changes_register  # noqa: E402
from assets_app.services.runs.dag_runs import task_instance_create  # noqa: E402
from bench.common import run_seconds  # noqa: E402
from task_sdk.definitions import AssetUniqueKey  # noqa: E402


class StatementCounter:
    """``connection.execute_wrapper`` that counts statements sent to the database."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


def timed_call(
    tag: str, outlets: list[OutletProfile], events: list
) -> tuple[float, int, int, float | None]:
    """(seconds, statements, events created, PostgreSQL backend CPU seconds) of one locked,
    committed registration. The backend's CPU covers the whole transaction, its ``COMMIT`` and
    deferred foreign-key checks included (None: SQLite, or a server on another machine)."""
    ti = task_instance_create(
        dag_id="bench_producer",
        task_id="produce",
        run_id=f"bench__{tag}",
        state=TaskInstanceState.RUNNING,
    ).task_instance
    counter = StatementCounter()
    gc.collect()
    backend = _backend_pid()
    backend_before = run_seconds(backend) if backend else None
    with transaction.atomic():
        locked = TaskInstance.objects.select_for_update().get(pk=ti.pk)
        with connection.execute_wrapper(counter):
            start = time.perf_counter()
            result = asset_changes_register(
                task_instance=locked, task_outlets=outlets, outlet_events=events
            )
            elapsed = time.perf_counter() - start
    backend_after = run_seconds(backend) if backend else None
    backend_cpu = (
        backend_after - backend_before
        if backend_before is not None and backend_after is not None
        else None
    )
    return elapsed, counter.count, len(result.events), backend_cpu


def _backend_pid() -> int | None:
    """The pid of this connection's PostgreSQL backend, if the server runs on this machine."""
    if connection.vendor != "postgresql":
        return None
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    return pid if run_seconds(pid) is not None else None


def declared_assets(prefix: str, size: int) -> tuple[list[OutletProfile], list]:
    assets = Asset.objects.bulk_create(
        [Asset(name=f"{prefix}_{n}", uri=f"s3://bench/{prefix}/{n}") for n in range(size)]
    )
    AssetActive.objects.bulk_create(
        [AssetActive(asset=a, name=a.name, uri=a.uri) for a in assets], batch_size=500
    )
    consumer = Dag.objects.create(dag_id=f"consumer_{prefix}")
    DagScheduleAssetReference.objects.bulk_create(
        [DagScheduleAssetReference(asset=a, dag=consumer) for a in assets], batch_size=500
    )
    outlets = [OutletProfile(type=OutletType.ASSET, name=a.name, uri=a.uri) for a in assets]
    events = [
        AssetOutletEvent(key=AssetUniqueKey(name=a.name, uri=a.uri), extra={"n": n, "run": prefix})
        for n, a in enumerate(assets)
    ]
    return outlets, events


def alias_events(prefix: str, size: int) -> tuple[list[OutletProfile], list]:
    alias = AssetAlias.objects.create(name=f"alias_{prefix}")
    consumer = Dag.objects.create(dag_id=f"consumer_{prefix}")
    DagScheduleAssetAliasReference.objects.create(alias=alias, dag=consumer)
    events = [
        AliasOutletEvent(
            source_alias_name=alias.name,
            dest_asset_key=AssetUniqueKey(name=f"{prefix}_{n}", uri=f"s3://bench/{prefix}/{n}"),
            extra={"n": n},
            dest_asset_extra={"created_by": prefix},
        )
        for n in range(size)
    ]
    return [OutletProfile(type=OutletType.ALIAS, name=alias.name)], events


def run(sizes: list[int], repeat: int) -> None:
    version = connection.pg_version if connection.vendor == "postgresql" else None
    version = version or connection.Database.sqlite_version
    print(f"database: {connection.vendor} {version}, repeat={repeat}")
    header = ("scenario", "N", "statements", "events", "median ms", "min ms", "pg ms")
    print("{:<16} {:>6} {:>10} {:>7} {:>10} {:>8} {:>7}".format(*header))
    for size in sizes:
        rows: dict[str, list[tuple[float, int, int, float | None]]] = {}
        for attempt in range(repeat):
            prefix = f"s{size}r{attempt}"
            outlets, events = declared_assets(f"{prefix}a", size)
            rows.setdefault("assets", []).append(timed_call(f"{prefix}a", outlets, events))
            outlets, events = alias_events(f"{prefix}b", size)
            rows.setdefault("alias->new", []).append(timed_call(f"{prefix}b1", outlets, events))
            rows.setdefault("alias->existing", []).append(
                timed_call(f"{prefix}b2", outlets, events)
            )
        for scenario, results in rows.items():
            times = [r[0] * 1000 for r in results]
            statements = sorted({r[1] for r in results})
            backend = [r[3] * 1000 for r in results if r[3] is not None]
            pg_ms = f"{statistics.median(backend):.1f}" if backend else "-"
            print(
                f"{scenario:<16} {size:>6} {'/'.join(map(str, statements)):>10}"
                f" {results[0][2]:>7} {statistics.median(times):>10.1f} {min(times):>8.1f}"
                f" {pg_ms:>7}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1,100,1000,10000", help="comma-separated N values")
    parser.add_argument("--repeat", type=int, default=3, help="calls per scenario and size")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        run(sizes, args.repeat)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)


if __name__ == "__main__":
    main()
