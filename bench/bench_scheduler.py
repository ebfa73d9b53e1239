"""Benchmark the asset scheduler: thousands of consumer DAGs, a backlog, a steady event stream.

Usage (from the repository root)::

    .venv/bin/python bench/bench_scheduler.py                   # the full run, half an hour
    .venv/bin/python bench/bench_scheduler.py --dags 300 --assets 60 --rate 30 --seconds 4
    .venv/bin/python bench/bench_scheduler.py --phases steady1 --seconds 30
    .venv/bin/python bench/bench_scheduler.py --phases steady1 --seconds 30 --keep-logs

PostgreSQL only (``DATABASE_URL`` names the server, default
``postgres://postgres@127.0.0.1:5432/ar_bench``). It creates the scratch database
``ar_bench_scheduler_<pid>``, migrates it and drops it at the end, also on Ctrl-C (it stops
its producer and scheduler processes first).

The workload (``--seed`` makes it reproducible)
----------------------------------------------
``--assets`` assets (default 2,000) and ``--assets``/40 aliases; alias ``k`` emits to the
assets ``i`` with ``i % aliases == k``. One producer DAG per asset (task ``produce``, outlet
the asset) and one per alias (outlet the alias), and ``--dags`` consumer DAGs (default
10,000), each with one task, scheduled on:

=========================  =====  ==================================================
schedule                   share  leaves
=========================  =====  ==================================================
one asset                   34 %  ``{asset}``
one alias                    2 %  ``{alias}``
one name ref / one uri ref  2+2 %  ``{asset_ref: {name}}`` / ``{asset_ref: {uri}}``
all of 5 assets             30 %  ``{all: [5 assets]}``
any of 3 assets             20 %  ``{any: [3 assets]}``
nested                      10 %  ``{any: [{all: [a, b]}, {all: [c, {any: [d, e]}]}]}``
=========================  =====  ==================================================

(``MEASUREMENTS.md``'s 40/30/20/10 split, its single-asset 40 % now including the alias and
ref schedules.) Everything is declared through the manifest service (``dags_declare``),
then ``VACUUM ANALYZE`` (what autovacuum would have done on a live system).

Producers
---------
An event is what a real producer makes: a task instance that succeeds. Each event is one
``task_instance_state_update`` call with a success payload, the execution API's service for
``PATCH …/state`` minus HTTP: it locks the running task instance, marks it successful and
registers its outlet (one asset event, consumers queued) in one transaction. 95 % of the
events are a producer DAG's task emitting on its asset, 5 % an alias producer's task
emitting through its alias to one of the alias's assets. The running task instances are
created beforehand in bulk. Producers run in ``--producers`` processes (default 4) of 4
threads each (16 calls in flight: enough for 200 events/s when the cores are there), paced
open-loop: event ``n`` is due ``n / rate`` seconds after the start and
sent as soon as a thread is free after that. Each producer records the wall clock right
after its call returned (the transaction has committed): the event's commit time, to < 1 ms.

Schedulers
----------
``manage.py scheduler`` (default ``--interval`` 1 s) run as separate processes against the
same database (``bench/bench_scheduler.py`` re-executed in scheduler mode, which runs the
command with ``call_command``, the same code as ``manage.py scheduler``), with
``bench.settings`` (production settings plus statement counting, see
``bench.counting_backend``). The command's ``scheduler_pass`` is wrapped to record each pass:
wall-clock start and end, CPU time, statements sent (BEGIN, COMMIT and health checks
included) and the longest transaction.

Phases (``--phases``, default the first four, in this order; a phase may be listed more
than once, e.g. ``backlog,backlog2,backlog2,backlog`` to compare one and two schedulers)
-----------------------------------------------------------------------------------------
* ``backlog`` / ``backlog2``: producers make one event on each asset and one through each
  alias, with no scheduler running; then one / two schedulers drain the queue. Every consumer
  DAG becomes ready: the schedulers' throughput.
* ``steady1`` / ``steady2``: one / two schedulers running, producers make ``--rate`` events
  a second (default 200) for ``--seconds`` (default 60) on random assets and aliases; then
  the schedulers drain what is left.
* ``mapping`` (issue 38; not in the default list): a mapped task of ``--map-width`` map
  indexes (default 1,000) over an upstream's pushed length expands in one pass (its time,
  statements and CPU printed), then every map index is claimed and started as
  ``manage.py worker`` does, 32 at a time, each ending at once to free its pool slot; printed:
  when each started after the expansion (p50, p99) and the rate. On this 2-core machine
  (load 4.5-6.5, other work running), ``--dags 20 --assets 10 --history 100 --phases
  mapping,mapping``: 1,000 map indexes in 244 ms / 117 ms, 11 statements each time (the same
  as for 10 map indexes, ``tests/assets_app/runs/test_mapping.py``), 130 / 45 ms scheduler
  CPU; claim → start 97 / 127 map indexes a second (p50 5.0 / 4.0 s, p99 10.2 / 7.8 s after
  the expansion: the claims of one process, one after another).

"Drained": every scheduler has completed a pass that started after the newest run had been
created (producers done), and still no newer run exists. Then they are stopped (SIGTERM).
``--drain-timeout`` bounds the wait.

Printed per phase
-----------------
* producers: events committed, the rate achieved, the lag of commits behind their due time,
  CPU per event of the producer processes and of their PostgreSQL backends (``/proc``: a
  backend serves one producer thread's connection) and, in the steady phases, how many cores
  the asked rate costs at that CPU per event (more than the machine has: the rate cannot be
  reached, whatever the scheduler does);
* runs created, and per second over the time the schedulers worked (from the first pass
  start, or the first due event, to the newest run's ``created_at``);
* scheduler passes: count (and, with two schedulers, the runs each created), p50 and max
  duration; per created run, statements, scheduler CPU
  and the CPU of the schedulers' PostgreSQL backends (all passes of the phase, idle ones
  included; ``/proc``, read at the start and end of each pass); the longest transaction.
  The CPU figures depend little on what else runs on the machine; the rates and latencies
  do, so the load average is printed at the start of each phase;
* latency (steady phases), as a lower bound: a run's ``dag_run.created_at`` (set inside the
  transaction that creates it) minus the commit time its producer recorded. The run commits
  after its ``created_at`` by at most the phase's longest scheduler transaction (printed), so
  the true commit-to-commit latency lies between the figure and the figure plus that bound.

  - ``ready → run``, for every run: from the moment the committed events the run consumed
    first satisfied its DAG's condition (evaluated here, leaf by leaf, over those events in
    commit order) to the run. For a one-leaf schedule, from its oldest consumed event.
  - ``event → run``, for every event consumed by a one-leaf or any-of DAG (where each event
    alone makes the DAG ready): from the event to the run that consumed it.

* drain: from the producers' last commit to the newest run;
* consistency, over the whole database after the phase: (event, DAG) pairs consumed more
  than once (must be 0); "lost" pairs: an event on an asset (or through an alias) a live DAG
  schedules on, that no run of the DAG consumed and for which no queue row (asset, DAG) is
  waiting (must be 0); runs without events; runs whose consumed events alone do not satisfy
  the condition (triggered by a queue row whose event an earlier run had already taken).

``--keep-logs`` keeps the work directory (its path is printed at the end): each scheduler's
passes, one JSON line per pass (``*-scheduler-N.jsonl``: start and end, CPU, PostgreSQL CPU,
statements, runs created), to see a phase pass by pass.

The statement counts were checked against PostgreSQL's log with
``--check-statements-log FILE`` (as in ``bench_http.py``: ``log_statement = all`` on the
scratch database, the lines of the schedulers' backend pids counted): on f80a410 with
``--dags 300 --assets 60 --rate 30 --seconds 4``, 14,634 counted, 14,634 logged (6d9d746:
14,758 and 14,758; b74d3cf, ``--phases backlog,steady2``: 7,520 and 7,520).

Measured on b74d3cf (main)
--------------------------
The defaults, PostgreSQL 15, on the 2-core machine shared with other sessions' test suites
(load average 3 to 10 all along; the run took 34 minutes; declaring the 12,050 DAGs took
27 s). The CPU figures are inflated by that load (``bench_http.py``'s by ~1.5x against
``MEASUREMENTS.md``), the rates and latencies far more::

    phase     events/s  runs    runs/s  stmts/run  CPU ms/run        ready -> run      drain
                                                   sched + postgres  p50 / p99
    backlog       -     10,000   52.1     11.0     10.8 + 3.7        -                  -
    backlog2      -     10,000   33.7     14.2     14.3 + 4.3        -                  -
    steady1     43.9    11,054   17.6     11.0     13.8 + 4.9        365 s / 517 s      355 s
    steady2     43.7    11,758   17.0     14.2     16.3 + 5.5        396 s / 518 s      417 s

* The producers cost 7.6 to 9.0 ms CPU + 10.3 to 11.2 ms PostgreSQL CPU per event (the
  consumer-queue upsert scans the 12,050-row ``dag`` table), ~19 ms in all: 200 events/s
  would need four cores. They reached 44 events/s, so the 12,000 events took 274 s instead
  of 60 s.
* One pass handles every DAG ready when it starts, one transaction each (11 statements per
  run): the backlog was one pass of 192 s; in the steady phases passes of 370 s and 459 s,
  while the events that arrived meanwhile waited for the next pass. Two schedulers were
  slower, on a machine with no spare core, and spent ~3 more statements per run: both walk
  the same ready list in the same order, and one keeps reaching DAGs the other has locked
  (3 statements) or already served (4).
* Consistency held in every phase: 0 lost, 0 consumed twice, 0 runs without events.

Measured on the perf branch (a875ee6: ``QueueWatch``, batches of 100 DAGs per transaction,
LISTEN/NOTIFY, the queue upsert's DAG check by index)
--------------------------------------------------------------------------------------------
``--phases backlog,backlog2,steady1,steady2 --seconds 20``, the same machine, load average 5
to 13 (the before-run of the backlog, on caba777 with ``--phases backlog --seconds 20``:
19.0 runs/s, 12.0 statements and 10.2 + 3.5 ms CPU per run, at load 5 to 15)::

    phase     events/s  runs    runs/s  stmts/run  CPU ms/run        event -> run
                                                   sched + postgres  p50 / p99
    backlog       -     10,000  633.5      0.1      0.5 + 0.2        -
    backlog2      -     10,000  783.6      0.2      0.6 + 0.3        -
    steady1     73.4    12,475  198.1      0.2      0.6 + 0.3        14.5 s / 26.1 s
    steady2     43.0    15,738  146.3      0.2      0.9 + 0.5        17.4 s / 40.4 s

* A backlog of 10,000 ready DAGs is one pass of 100 transactions (0.1 statements per run).
  At 0.7 ms CPU per run a core makes ~1,400 runs/s; on this shared machine the scheduler
  got a fraction of one.
* The producers cost 4.2 ms + 4.3 ms PostgreSQL CPU per event (7.8 ms before: the queue
  upsert no longer reads the whole ``dag`` table). At 200 events/s they still need more
  than the two cores, so the steady phases are CPU-bound on this machine: ~3 runs per event
  at 73 events/s and the producers' own CPU leave the scheduler behind, and the latency is
  the backlog that builds up.
* At a rate this machine sustains, ``--phases steady1,steady2 --rate 30 --seconds 20``
  (3444bea, load 9): one scheduler 159 runs/s, event → run p50 129 ms, p99 841 ms,
  1.3 + 0.6 ms CPU per run; two schedulers p50 600 ms, p99 1.42 s (they compete for the
  same two cores). On caba777, ``--phases steady1 --rate 30 --seconds 20`` (load 8): p50
  38.7 s, p99 60.6 s, 30.6 runs/s, 12.0 statements and 9.3 + 3.0 ms CPU per run.

Measured on the sched branch (claimed batches, a grouped lock-free scan, set-based inserts)
-----------------------------------------------------------------------------------------
Why two schedulers did not scale (py-spy on both, ``pg_stat_activity`` sampled): no lock
waits, no hot row, PostgreSQL mostly idle in transaction (the schedulers' Python was the
work). Each scheduler first evaluated every queued DAG without locks, ~35 % of a backlog
pass's samples (reading 30,740 queue rows through the ORM with their datetimes, then every
DAG's expression as parsed JSON), and both did all of it; then both walked the same ready
list in the same order, batch by batch, so a batch one had just served cost the other a
transaction of DAG-row locks finding no queue rows. Two schedulers spent 25-30 % more CPU in
all than one (on ecd97a1, in a harness draining a restored backlog: 5.7-6.4 s of
scheduler CPU for the 10,000 runs with two, 4.3-5.3 s with one).

Now a pass reads one row per queued DAG (expression as stored text, asset ids, no
datetime), and each transaction claims its batch: ``ORDER BY <ready order> LIMIT 100 FOR NO
KEY UPDATE SKIP LOCKED`` over the ready DAGs that still have queue rows, so schedulers split
the ready list into disjoint full batches (the two created 4,400 to 5,600 runs each below).
Runs and task instances are inserted as JSON row sets instead of ``bulk_create``. Scheduler
CPU per backlog run: 0.5 → 0.2-0.3 ms; the claim is one statement, as the lock was.

``--phases backlog,backlog2,backlog2,backlog,backlog,backlog2`` (the defaults otherwise), back
to back on the shared 2-core machine; load average at each phase's start::

    phase     load   runs/s   stmts/run  CPU ms/run (sched + postgres)  runs by scheduler
    backlog   2.9    1,183.9     0.1      0.2 + 0.3
    backlog2  5.5    2,507.3     0.1      0.3 + 0.3                     4,816 / 5,184
    backlog2  7.8    1,927.8     0.1      0.3 + 0.4                     5,600 / 4,400
    backlog   8.7    1,404.9     0.1      0.3 + 0.4
    backlog   8.4      895.7     0.1      0.3 + 0.5
    backlog2  8.8      992.4     0.1      0.4 + 0.6                     4,920 / 5,080

Medians: one scheduler 1,184 runs/s, two 1,928 runs/s: 1.63x (main, the same day, load 1 to
4: one 1,391 and 1,319, two 1,196 and 2,419). The ratio swings with what else the two
cores run (load 3 to 11 during this session: other sessions' suites and benchmarks); the
CPU per run does not, and is the same for one and two schedulers.

Steady phases, ``--phases steady1,steady2 --seconds 30`` at three rates (4 producer
processes)::

    rate  phase    load  events/s  runs/s  CPU ms/run      event -> run p50 / p99
    200   steady1   3.3    98.1    198.1   0.4 + 0.9       16.6 s / 37.0 s
    200   steady2  10.5   134.5    423.2   0.5 + 0.6        7.13 s / 17.1 s
    100   steady1   1.5    97.6    394.6   0.3 + 0.4        2.87 s / 7.79 s
    100   steady2   5.4    85.5    341.9   0.5 + 0.5        7.30 s / 15.1 s
     50   steady1   9.5    50.0    277.9   1.7 + 1.6          30 ms / 127 ms
     50   steady2   6.7    49.9    309.9   2.0 + 2.3          28 ms / 86 ms

* 200 events/s is not reachable on this machine through the service: the producers cost
  6.2-6.4 ms CPU + 5.2-5.4 ms PostgreSQL CPU per event, 2.3-2.4 cores at 200 events/s
  (printed), before any scheduler work. More producer processes (4 x 4 threads) do not
  help; the rates reached were 98-135 events/s, and the scheduler then works on what CPU is
  left, so the latency is the backlog that builds up.
* At 50 events/s (0.6-0.7 cores of producers) one scheduler keeps up: event → run p50 30 ms,
  p99 127 ms (the previous figure, at 30 events/s: p50 129 ms, p99 841 ms), two p50 28 ms,
  p99 86 ms; no pass over 330 ms. At 100 events/s (1.0-1.1 cores of producers), with the
  load average reaching 10 meanwhile, both fell behind (p99 8-15 s).
* Consistency held in every phase: 0 lost, 0 consumed twice, 0 runs without events.

Measured for issue 23 (prepared hot statements, no redundant indexes, the consumption check
by ``dagrun_asset_event.dag_id``), ``--phases steady1 --seconds 20``, this file on both
commits (``--history`` 20,000; 3e2b92e holds that work), alternated on the 2-core
machine, nothing else running::

    commit     rate  producers ms/event  runs/s    CPU ms/run       event -> run p99
    3db188f    200   2.5-3.5 + 3.4-4.9   354-997   0.4-0.5+0.3-0.6  1.43-17.7 s, median 9.2 s (7)
    3e2b92e    200   2.5-3.3 + 2.1-2.7   830-1097  0.4 + 0.3-0.4    1.01-4.30 s, median 1.9 s (6)
    3db188f    100   3.7 + 5.2           554       0.7 + 0.5        465 ms (p50 125 ms)
    3e2b92e    100   3.1 + 2.9           567       0.7 + 0.5        285 ms (p50 57 ms)

* The producers' PostgreSQL CPU per event fell by 40 % (planning was 1.7 ms of it), so
  200 events/s costs 0.9-1.2 cores of producers instead of 1.2-1.7.
* At 200 events/s the one scheduler is still at its capacity: ~1,000 runs/s (about 5 per
  event) at 0.7 ms of scheduler and PostgreSQL CPU each, done one after the other, is
  0.8-1.0 s of work per second (busy 80-100 % of each 2 s window, per the pass records).
  Whether a phase stays ahead (p99 ~1 s) or falls behind and passes grow to 1-3 s (p99
  2-4 s) varies from run to run. The issue's target, p99 < 1 s, needs the scheduler's cost
  per run cut by another third or more.
* Without the history, ``asset_event`` is empty when the scheduler connects, PostgreSQL
  plans its foreign-key check from ``dagrun_asset_event`` as a sequential scan and the
  connection keeps that plan until autovacuum analyses the table: 0.15 ms per consumed
  event (33 buffers), half of the scheduler's PostgreSQL time, an artifact of the benchmark.

Then (80bcf4c: a batch's queue delete and task plans by hand, each DAG's previous run read
with its lock, references remembered per DAG, orjson for the row sets), ``--seconds 30``,
against 0a70c69, six pairs alternated, PostgreSQL without ``pg_stat_statements`` for the
last three::

    commit     rate  producers ms/event  CPU ms/run (sch + PG)  event -> run p99
    0a70c69    200   2.5-3.3 + 2.1-2.6   0.4-0.5 + 0.3-0.5      1.08-7.20 s, median 6.0 s (6)
    80bcf4c    200   2.8-3.5 + 2.3-2.8   0.3-0.4 + 0.4          1.35-5.95 s, median 3.2 s (6)

* The scheduler's own CPU per run fell by about a quarter (0.4-0.5 → 0.3 ms); its
  PostgreSQL CPU per run did not move. The p99 is still set by whether a phase stays ahead
  (``--keep-logs``: passes of 0.2-0.5 s) or a disturbance (autovacuum, a checkpoint) makes
  passes grow to 1-2 s, after which the backlog drains slowly: the machine is ~90 % busy
  (producers 1.0-1.2 cores, scheduler and its backend 0.6-0.7).

Then (a903820 and its two reviews: the four statements that read the queue planned at every
call, its rows locked by one index probe per DAG), against 1ea60de, 200
events/s, ``--seconds 30``, alternated in three sittings (the first two with a903820's
registration probes, since reverted, and the first with the delete still an ``ANY`` filter,
planned per call). This machine's PostgreSQL runs
without autovacuum (``conf.d/90-ci.conf``), and the host's speed drifted: the producers' CPU
per event, identical code, was 1.8-3.0 ms. Event -> run p99 per pair, before / after::

    sitting 1 (delete by ANY, per call)   376/382  177/185  646/293  708/480  922/1490 ms
    sitting 2 (delete by join)            455/678  561/545  583/516 ms
    sitting 3 (9b3b984)                   1140/869  936/1090  731/1680 ms

* No difference in the usual run: both trees kept p99 under 1 s when the host was fast and
  went over it when it was slow. Scheduler and PostgreSQL CPU per run: 0.3 + 0.3 ms in
  every run of both.
* What changed is the bad run. A prepared statement keeps the plan of its sixth execution:
  on 1ea60de's scheduler, with ``auto_explain``, the queue delete prepared on an almost
  empty queue filtered all 11,000 rows by a 418-id array, up to 104 ms per batch, 2.45 s of
  a 20 s phase, and the rows' lock read the whole queue (a hash semi-join) for every batch.
* ``pg_stat_statements``, one pair each (ms per call, before -> after): the rows' lock
  2.42 -> 0.57 and 1.94 -> 0.70; the claim 3.15 -> 1.89 and 2.14 -> 2.36; the pass's read
  10.97 -> 3.84 and 4.34 -> 4.94; the delete 0.40 -> 1.30 (ANY) and 0.34 -> 1.76 (join).
  Planned per call, the delete is slower here, because the statistics are those of the
  empty queue (no autovacuum). With current statistics (20,000 rows, 117 ids) the ``ANY``
  filter is an index scan, 0.16 ms, and the join a hash join, 3.7 ms: the delete stays an
  ``ANY`` filter.

Then (issue 35: one grammar of conditions), ``--dags 300 --assets 60 --phases
backlog,backlog,backlog,backlog --keep-logs``, the scheduler's CPU in its one creating pass
(300 runs, 38 statements in every pass of every tree), three alternated pairs against
38e471f (before the restructuring) in its own venv, load 3-5::

    38e471f                                   31.4-37.2 ms, median 34.9
    0594a07 (the one grammar, as landed)      39.2-44.6 ms, median 42   (two pairs before)
    the asset's key remembered                34.5-41.7 ms, median 37.1

* A new scheduler parses every ready DAG's stored condition once. The one grammar checks
  every leaf by Airflow's rules (an ``Asset`` built, its uri normalized): 300 conditions took
  10.5 ms where the old stored-form reader took 2.6. An asset's key is now remembered per
  (name, uri, group) (a pure function; a refusal is not remembered), and a node's kind and
  keys are checked with a dict's fast path: 4.0 ms. What is left (about 2 ms a pass) is the
  grammar's checks and the priority weights the runs now carry (issue 37).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    REPO,
    bench_environment,
    check_statements_log,
    load_average,
    log_every_statement,
    percentile,
    process_cpu_seconds,
    process_stop,
    scratch_database,
    stop_children,
    stop_on_signals,
    wait_until,
)

bench_environment()

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.db.models import Max  # noqa: E402
from django.utils import timezone  # noqa: E402

from assets_app.models import (  # noqa: E402
    Asset,
    AssetAlias,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    DagRunState,
    DagRunType,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.outlets import (  # noqa: E402
    AliasOutletEvent,
    AssetOutletEvent,
    OutletProfile,
    OutletType,
)
from assets_app.services.dags.declare import dags_declare  # noqa: E402
from assets_app.services.dags.manifest import manifest_parse  # noqa: E402
from devtools.processes import current_database_url  # noqa: E402
from task_sdk.definitions import AssetUniqueKey  # noqa: E402

THIS = Path(__file__).resolve()
PRODUCER_THREADS = 4
ALIAS_EVENT_SHARE = 0.05
#: (kind, share of the consumer DAGs); the last kind takes the rounding remainder
KINDS = (
    ("asset", 0.34),
    ("alias", 0.02),
    ("name_ref", 0.02),
    ("uri_ref", 0.02),
    ("all5", 0.30),
    ("any3", 0.20),
    ("nested", 0.10),
)
#: schedules that any single consumed event makes ready
ONE_EVENT_KINDS = {"asset", "alias", "name_ref", "uri_ref", "any3"}


# --- the workload ---------------------------------------------------------------------------


def asset_name(i: int) -> str:
    return f"asset_{i:05d}"


def asset_uri(i: int) -> str:
    return f"s3://bench/asset/{i:05d}"


def alias_name(k: int) -> str:
    return f"alias_{k:03d}"


def asset_dag(i: int) -> str:
    return f"producer_{i:05d}"


def alias_dag(k: int) -> str:
    return f"alias_producer_{k:03d}"


# A condition tree: ("asset" | "name_ref" | "uri_ref", asset index), ("alias", alias index),
# ("all" | "any", [trees]).
Tree = tuple[str, Any]


def tree_document(tree: Tree) -> dict:
    """The manifest's form of a condition tree."""
    kind, value = tree
    if kind == "asset":
        return {"asset": {"name": asset_name(value), "uri": asset_uri(value)}}
    if kind == "alias":
        return {"alias": alias_name(value)}
    if kind == "name_ref":
        return {"asset_ref": {"name": asset_name(value)}}
    if kind == "uri_ref":
        return {"asset_ref": {"uri": asset_uri(value)}}
    return {kind: [tree_document(child) for child in value]}


def tree_met(tree: Tree, assets: set[int], aliases: set[int]) -> bool:
    """Whether events on ``assets`` and through ``aliases`` satisfy the condition."""
    kind, value = tree
    if kind == "alias":
        return value in aliases
    if kind == "all":
        return all(tree_met(child, assets, aliases) for child in value)
    if kind == "any":
        return any(tree_met(child, assets, aliases) for child in value)
    return value in assets  # an asset or a ref to it (alias-emitted events count too)


@dataclass(frozen=True)
class Consumer:
    dag_id: str
    kind: str
    tree: Tree


@dataclass(frozen=True)
class Workload:
    assets: int
    aliases: int
    consumers: tuple[Consumer, ...]

    @classmethod
    def generate(cls, *, dags: int, assets: int, rng: random.Random) -> Workload:
        aliases = max(1, assets // 40)
        counts = [round(dags * share) for _, share in KINDS]
        counts[-1] = dags - sum(counts[:-1])
        kinds = [kind for (kind, _), count in zip(KINDS, counts, strict=True) for _ in range(count)]
        rng.shuffle(kinds)

        def leaves(n: int) -> list[Tree]:
            return [("asset", i) for i in rng.sample(range(assets), min(n, assets))]

        consumers = []
        for d, kind in enumerate(kinds):
            if kind == "alias":
                tree: Tree = ("alias", rng.randrange(aliases))
            elif kind in ("asset", "name_ref", "uri_ref"):
                tree = (kind, rng.randrange(assets))
            elif kind == "all5":
                tree = ("all", leaves(5))
            elif kind == "any3":
                tree = ("any", leaves(3))
            else:
                a, b, c, d_, e = leaves(5)
                tree = ("any", [("all", [a, b]), ("all", [c, ("any", [d_, e])])])
            consumers.append(Consumer(dag_id=f"consumer_{d:05d}", kind=kind, tree=tree))
        return cls(assets=assets, aliases=aliases, consumers=tuple(consumers))

    def manifest(self) -> dict:
        producers = [
            {
                "dag_id": asset_dag(i),
                "tasks": [
                    {
                        "task_id": "produce",
                        "outlets": [{"asset": {"name": asset_name(i), "uri": asset_uri(i)}}],
                    }
                ],
            }
            for i in range(self.assets)
        ]
        producers += [
            {
                "dag_id": alias_dag(k),
                "tasks": [{"task_id": "produce", "outlets": [{"alias": alias_name(k)}]}],
            }
            for k in range(self.aliases)
        ]
        consumers = [
            {
                "dag_id": c.dag_id,
                "schedule": tree_document(c.tree),
                # no worker ends the runs here: uncapped, so that every run is created
                # (Airflow's default of 16 would stop each consumer after 16 runs)
                "max_active_runs": 100_000,
                "tasks": [{"task_id": "consume"}],
            }
            for c in self.consumers
        ]
        return {"dags": producers + consumers}

    def alias_targets(self, k: int) -> range:
        return range(k, self.assets, self.aliases)


# An event to produce: [n, due seconds after the start, task instance id, dag_id, run_id,
# alias index or -1, asset index]
PlanItem = list


def plan_events(
    workload: Workload, *, phase: str, count: int, rate: float | None, rng: random.Random
) -> list[PlanItem]:
    """Events of a phase, due ``n / rate`` seconds after its start.

    Without a rate (a backlog), all due at once: one on each asset, then one through each
    alias. With a rate, ``count`` events on random assets,
    ``ALIAS_EVENT_SHARE`` of them through a random alias to a random asset of it.
    """
    items: list[PlanItem] = []
    if rate is None:
        targets = [(-1, i) for i in range(workload.assets)]
        targets += [(k, rng.choice(workload.alias_targets(k))) for k in range(workload.aliases)]
    else:
        targets = []
        for _ in range(count):
            if rng.random() < ALIAS_EVENT_SHARE:
                k = rng.randrange(workload.aliases)
                targets.append((k, rng.choice(workload.alias_targets(k))))
            else:
                targets.append((-1, rng.randrange(workload.assets)))
    for n, (k, i) in enumerate(targets):
        dag_id = alias_dag(k) if k >= 0 else asset_dag(i)
        due = n / rate if rate else 0.0
        items.append([n, due, "", dag_id, f"{phase}_{n:06d}", k, i])
    return items


def running_task_instances(items: list[PlanItem]) -> None:
    """Create a running task instance (and its DAG run) for each item; fill in its id."""
    now = timezone.now()
    for start in range(0, len(items), 2000):
        chunk = items[start : start + 2000]
        with transaction.atomic():
            runs = DagRun.objects.bulk_create(
                [
                    DagRun(
                        dag_id=item[3],
                        run_id=item[4],
                        run_type=DagRunType.MANUAL,
                        state=DagRunState.RUNNING,
                        run_after=now,
                        logical_date=now,
                        start_date=now,
                    )
                    for item in chunk
                ]
            )
            tis = TaskInstance.objects.bulk_create(
                [
                    TaskInstance(
                        dag_run=run,
                        dag_id=item[3],
                        run_id=item[4],
                        task_id="produce",
                        state=TaskInstanceState.RUNNING,
                        start_date=now,
                    )
                    for run, item in zip(runs, chunk, strict=True)
                ]
            )
        for ti, item in zip(tis, chunk, strict=True):
            item[2] = str(ti.pk)


def history(count: int, *, dag_ids: list[str]) -> None:
    """What a live registry already holds: ``count`` past events, 20 on each of ``count / 20``
    assets no DAG schedules on, each asset's consumed by one past run of one of ``dag_ids``.

    So the tables the phases grow are not empty when they start, and their statistics (taken
    by the ``VACUUM ANALYZE`` after this) are those of a registry in use: with an empty
    ``asset_event``, PostgreSQL plans the foreign-key check of each consumed event
    (``dagrun_asset_event`` → ``asset_event``) as a sequential scan, and the scheduler's
    connection keeps that plan until autovacuum analyses the table, which a phase of a minute
    may never see.
    """
    now = timezone.now()
    per_asset = 20
    assets = Asset.objects.bulk_create(
        [
            Asset(name=f"bench_history_{n}", uri=f"bench://history/{n}")
            for n in range(max(1, count // per_asset))
        ]
    )
    with transaction.atomic():
        runs = DagRun.objects.bulk_create(
            [
                DagRun(
                    dag_id=dag_ids[n % len(dag_ids)],
                    run_id=f"bench_history_{n}",
                    run_type=DagRunType.MANUAL,
                    state=DagRunState.SUCCESS,
                    run_after=now,
                    logical_date=now,
                    start_date=now,
                    end_date=now,
                )
                for n in range(len(assets))
            ]
        )
        events = AssetEvent.objects.bulk_create(
            [AssetEvent(asset=asset, timestamp=now) for asset in assets for _ in range(per_asset)]
        )
        links = [
            DagRunAssetEvent(dag_run=runs[n // per_asset], event=event)
            for n, event in enumerate(events)
        ]
        for link in links:  # an attribute, not a keyword: also runs on commits before the field
            link.dag_id = link.dag_run.dag_id
        DagRunAssetEvent.objects.bulk_create(links)


# --- child processes ------------------------------------------------------------------------


def producer_main(plan_path: Path, out_path: Path) -> None:
    """Producer mode: send the planned successes, write [run_id, due, committed, error] rows.

    Set up, it creates ``<plan>.ready`` and waits for ``<plan>.go``, which holds the start time.
    """
    from assets_app.services.runs.state import SuccessPayload, task_instance_state_update

    items = json.loads(plan_path.read_text())
    plan_path.with_suffix(".ready").touch()
    go = plan_path.with_suffix(".go")
    while not go.exists():
        time.sleep(0.005)
    start_at = float(go.read_text())
    pending = iter(items)
    lock = threading.Lock()
    results: list[list] = []
    backend_cpu: list[float] = []

    def payload(item: PlanItem) -> SuccessPayload:
        n, _, _, _, _, k, i = item
        key = AssetUniqueKey(name=asset_name(i), uri=asset_uri(i))
        if k >= 0:
            return SuccessPayload(
                end_date=timezone.now(),
                task_outlets=[OutletProfile(type=OutletType.ALIAS, name=alias_name(k))],
                outlet_events=[
                    AliasOutletEvent(
                        source_alias_name=alias_name(k), dest_asset_key=key, extra={"n": n}
                    )
                ],
            )
        return SuccessPayload(
            end_date=timezone.now(),
            task_outlets=[OutletProfile(type=OutletType.ASSET, name=key.name, uri=key.uri)],
            outlet_events=[AssetOutletEvent(key=key, extra={"n": n})],
        )

    def work() -> None:
        try:
            while True:
                with lock:
                    item = next(pending, None)
                if item is None:
                    return
                due = start_at + item[1]
                wait_until(due)
                error = None
                try:
                    task_instance_state_update(task_instance_id=item[2], payload=payload(item))
                except Exception as exc:  # reported, not fatal: the benchmark counts them
                    error = f"{type(exc).__name__}: {exc}"
                results.append([item[4], due, time.time(), error])
        finally:
            # this thread's PostgreSQL backend served only its connection: all its CPU time
            pid = backend_pid()
            if pid is not None:
                backend_cpu.append(process_cpu_seconds(pid) or 0.0)
            connection.close()

    cpu = time.process_time()
    threads = [threading.Thread(target=work, daemon=True) for _ in range(PRODUCER_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out_path.write_text(
        json.dumps(
            {"cpu": time.process_time() - cpu, "pg_cpu": sum(backend_cpu), "events": results}
        )
    )


def backend_pid() -> int | None:
    """The PostgreSQL backend pid of this thread's connection, if it is open."""
    return connection.connection.info.backend_pid if connection.connection else None


def scheduler_main(out_path: Path, interval: float) -> None:
    """Scheduler mode: ``manage.py scheduler``, each pass recorded as a JSON line."""
    from django.core.management import call_command

    from runtime.management.commands import scheduler as command

    scheduler_pass = command.scheduler_pass
    out = out_path.open("a", buffering=1)

    def recorded_pass(**kwargs: Any) -> Any:
        statements = connection.bench_statements
        transactions = connection.bench_transaction_seconds
        transactions.clear()
        pid = backend_pid()  # None: closed between passes, the pass opens a new one
        pg_cpu = (process_cpu_seconds(pid) or 0.0) if pid is not None else 0.0
        cpu, started = time.process_time(), time.time()
        result = None
        try:
            result = scheduler_pass(**kwargs)
            return result
        finally:
            created = getattr(result, "created", None)
            pid_after = backend_pid()
            if pid_after is not None:
                pg_cpu = (process_cpu_seconds(pid_after) or 0.0) - (
                    pg_cpu if pid_after == pid else 0.0
                )
            record = {
                "t0": started,
                "t1": time.time(),
                "cpu": time.process_time() - cpu,
                "pg_cpu": pg_cpu if pid_after is not None else 0.0,
                "statements": connection.bench_statements - statements,
                "transactions": len(transactions),
                "longest_transaction": max(transactions, default=0.0),
                "created": len(created) if created is not None else None,
                "db_pid": pid_after,
            }
            out.write(json.dumps(record) + "\n")

    command.scheduler_pass = recorded_pass
    call_command("scheduler", interval=interval)


# --- the parent: running phases -------------------------------------------------------------


@dataclass
class Children:
    """The producer and scheduler processes of a phase and their files."""

    workdir: Path
    schedulers: list[tuple[subprocess.Popen, Path]] = field(default_factory=list)
    producers: list[tuple[subprocess.Popen, Path]] = field(default_factory=list)

    def _spawn(self, args: list[str], log: Path) -> subprocess.Popen:
        env = dict(os.environ, DATABASE_URL=current_database_url())
        with log.open("ab") as out:
            return subprocess.Popen(
                [sys.executable, str(THIS), *args],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def start_schedulers(self, phase: str, count: int, interval: float) -> None:
        for s in range(count):
            out = self.workdir / f"{phase}-scheduler-{s}.jsonl"
            out.touch()
            process = self._spawn(
                ["_scheduler", str(out), str(interval)], self.workdir / f"{phase}-scheduler-{s}.log"
            )
            self.schedulers.append((process, out))

    def start_producers(self, phase: str, items: list[PlanItem], processes: int) -> float:
        """Start the producers, wait until they are set up, let them go; the start time."""
        plans = []
        for p in range(processes):
            plan = self.workdir / f"{phase}-plan-{p}.json"
            plan.write_text(json.dumps(items[p::processes]))
            out = self.workdir / f"{phase}-producer-{p}.json"
            process = self._spawn(
                ["_produce", str(plan), str(out)], self.workdir / f"{phase}-producer-{p}.log"
            )
            self.producers.append((process, out))
            plans.append(plan)
        deadline = time.time() + 120
        while not all(plan.with_suffix(".ready").exists() for plan in plans):
            for process, out in self.producers:
                if process.poll() is not None:
                    raise SystemExit(f"a producer exited; see {out.with_suffix('.log')}")
            if time.time() > deadline:
                raise SystemExit("the producers did not start in time")
            time.sleep(0.05)
        start_at = time.time() + 0.2
        for plan in plans:
            ready = plan.with_suffix(".tmp")
            ready.write_text(repr(start_at))
            ready.replace(plan.with_suffix(".go"))  # atomic: never seen half written
        return start_at

    def passes(self) -> list[list[dict]]:
        return [
            [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
            for _, out in self.schedulers
        ]

    def check_alive(self) -> None:
        for process, out in self.schedulers:
            if process.poll() is not None:
                raise SystemExit(
                    f"a scheduler exited with status {process.returncode}; "
                    f"see {out.with_suffix('.log')}"
                )

    def wait_producers(self) -> tuple[list[list], float, float]:
        """Wait for the producers; their event rows, CPU and PostgreSQL CPU seconds."""
        events: list[list] = []
        cpu = pg_cpu = 0.0
        for process, out in self.producers:
            process.wait()
            if process.returncode != 0 or not out.exists():
                raise SystemExit(
                    f"a producer exited with status {process.returncode}; "
                    f"see {out.with_suffix('.log')}"
                )
            data = json.loads(out.read_text())
            events += data["events"]
            cpu += data["cpu"]
            pg_cpu += data["pg_cpu"]
        self.producers.clear()
        return events, cpu, pg_cpu

    def stop(self, grace: float = 60) -> None:
        """SIGTERM: a scheduler finishes its pass first; SIGKILL after ``grace`` seconds."""
        for process, _ in self.producers + self.schedulers:
            if process.poll() is None:
                process.terminate()  # all at once, then wait for each
        for process, _ in self.producers + self.schedulers:
            process_stop(process, grace=grace)
        self.producers.clear()


def last_run_pk() -> int:
    return DagRun.objects.aggregate(last=Max("pk"))["last"] or 0


def newest_run_created(*, after_pk: int) -> float:
    """``created_at`` of the newest asset-triggered run with a pk above ``after_pk``, or 0."""
    latest = DagRun.objects.filter(pk__gt=after_pk, run_type=DagRunType.ASSET_TRIGGERED).aggregate(
        latest=Max("created_at")
    )["latest"]
    return latest.timestamp() if latest else 0.0


def wait_started(children: Children, timeout: float = 120) -> None:
    """Until every scheduler has finished its first pass."""
    deadline = time.time() + timeout
    while not all(children.passes()):
        children.check_alive()
        if time.time() > deadline:
            raise SystemExit("the schedulers did not complete a first pass in time")
        time.sleep(0.2)


def wait_drained(children: Children, *, after: float, after_pk: int, timeout: float) -> bool:
    """Until each scheduler completed a pass started after the newest run (and ``after``)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        children.check_alive()
        newest = max(newest_run_created(after_pk=after_pk), after)
        if (
            all(any(p["t0"] > newest for p in passes) for passes in children.passes())
            and newest_run_created(after_pk=after_pk) <= newest
        ):
            return True
        time.sleep(0.5)
    return False


# --- the parent: analysis -------------------------------------------------------------------


@dataclass
class PhaseFigures:
    name: str
    schedulers: int
    events: int = 0
    runs: int = 0


def fmt_ms(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    return (
        f"p50 {_duration(percentile(values, 50))}, p99 {_duration(percentile(values, 99))}, "
        f"max {_duration(max(values))}"
    )


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "n/a"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def print_producers(
    events: list[list], cpu: float, pg_cpu: float, start_at: float, rate: float | None = None
) -> float:
    """Print the producer line; return the last commit time.

    With the ``rate`` asked for, also the cores its events cost (producers and their
    PostgreSQL backends), to tell a machine too small for it from a slow scheduler.
    """
    committed = [e for e in events if e[3] is None]
    errors = [e for e in events if e[3] is not None]
    last = max((e[2] for e in committed), default=start_at)
    lags = [e[2] - e[1] for e in committed]
    span = last - start_at
    line = (
        f"  producers        {len(committed):,} events committed in {span:.1f} s "
        f"({len(committed) / span if span > 0 else math.nan:.1f}/s), commit after due "
        f"p50 {_duration(percentile(lags, 50))} p99 {_duration(percentile(lags, 99))}; "
        f"per event {cpu * 1000 / max(1, len(events)):.1f} ms producer CPU + "
        f"{pg_cpu * 1000 / max(1, len(events)):.1f} ms PostgreSQL CPU"
    )
    if rate is not None:
        cores = (cpu + pg_cpu) / max(1, len(events)) * rate
        line += f"; {rate:g} events/s cost {cores:.1f} of the {os.cpu_count()} cores"
    if errors:
        line += f"; {len(errors)} ERRORS, e.g. {errors[0][3]}"
    print(line, flush=True)
    return last


def print_runs_and_passes(
    passes: list[list[dict]], runs: list[tuple[int, str, float]], work_started: float
) -> float:
    """Print runs, rates and pass figures; return the longest scheduler transaction."""
    flat = [p for per_scheduler in passes for p in per_scheduler]
    durations = [p["t1"] - p["t0"] for p in flat]
    statements = sum(p["statements"] for p in flat)
    cpu = sum(p["cpu"] for p in flat)
    pg_cpu = sum(p["pg_cpu"] for p in flat)
    longest = max((p["longest_transaction"] for p in flat), default=0.0)
    known = [p["created"] for p in flat if p["created"] is not None]
    creating = f" ({sum(1 for c in known if c)} creating runs)" if known else ""
    if len(passes) > 1:  # how the schedulers shared the work
        shares = ", ".join(f"{sum(p['created'] or 0 for p in per):,}" for per in passes)
        creating += f", runs by scheduler {shares}"
    if runs:
        span = max(created for _, _, created in runs) - work_started
        print(
            f"  runs created     {len(runs):,} in {span:.1f} s: "
            f"{len(runs) / span if span > 0 else math.nan:.1f} runs/s",
        )
    else:
        print("  runs created     0")
    per_run = max(1, len(runs))
    print(
        f"  scheduler        {len(flat)} passes{creating}, duration "
        f"p50 {_duration(percentile(durations, 50))}, max {_duration(max(durations, default=0))}; "
        f"per run {statements / per_run:.1f} statements, {cpu * 1000 / per_run:.1f} ms "
        f"scheduler CPU + {pg_cpu * 1000 / per_run:.1f} ms PostgreSQL CPU; longest "
        f"transaction {longest * 1000:.0f} ms",
        flush=True,
    )
    return longest


def phase_runs(after_pk: int) -> list[tuple[int, str, float]]:
    """(pk, dag_id, created_at) of the asset-triggered runs with a pk above ``after_pk``."""
    return [
        (pk, dag_id, created.timestamp())
        for pk, dag_id, created in DagRun.objects.filter(
            pk__gt=after_pk, run_type=DagRunType.ASSET_TRIGGERED
        ).values_list("pk", "dag_id", "created_at")
    ]


def print_latency(  # noqa: C901 - a report: one branch per figure it prints
    workload: Workload,
    runs: list[tuple[int, str, float]],
    commits: dict[str, float],
    longest_transaction: float,
) -> None:
    consumers = {c.dag_id: c for c in workload.consumers}
    run_ids = [pk for pk, _, _ in runs]
    links: dict[int, list[int]] = defaultdict(list)
    for start in range(0, len(run_ids), 5000):
        for run_pk, event_pk in DagRunAssetEvent.objects.filter(
            dag_run_id__in=run_ids[start : start + 5000]
        ).values_list("dag_run_id", "event_id"):
            links[run_pk].append(event_pk)
    event_ids = sorted({e for events in links.values() for e in events})
    asset_index = {
        pk: int(name.rsplit("_", 1)[1])
        for pk, name in Asset.objects.filter(name__startswith="asset_").values_list("pk", "name")
    }
    alias_index = {
        pk: int(name.rsplit("_", 1)[1]) for pk, name in AssetAlias.objects.values_list("pk", "name")
    }
    events: dict[int, tuple[int, str | None]] = {}
    aliases_of: dict[int, set[int]] = defaultdict(set)
    for start in range(0, len(event_ids), 5000):
        chunk = event_ids[start : start + 5000]
        for pk, asset_id, source_run_id in AssetEvent.objects.filter(pk__in=chunk).values_list(
            "pk", "asset_id", "source_run_id"
        ):
            events[pk] = (asset_index[asset_id], source_run_id)
        for event_id, alias_id in AssetAliasAssetEvent.objects.filter(
            event_id__in=chunk
        ).values_list("event_id", "alias_id"):
            aliases_of[event_id].add(alias_index[alias_id])

    ready_to_run: list[float] = []
    event_to_run: list[float] = []
    unexplained = unknown = 0
    for pk, dag_id, created in runs:
        consumer = consumers[dag_id]
        consumed = sorted((commits[events[e][1]], e) for e in links[pk] if events[e][1] in commits)
        if len(consumed) < len(links[pk]) or not consumed:
            unknown += 1
            continue
        assets: set[int] = set()
        aliases: set[int] = set()
        ready = None
        for committed, e in consumed:
            assets.add(events[e][0])
            aliases |= aliases_of[e]
            if tree_met(consumer.tree, assets, aliases):
                ready = committed
                break
        if ready is None:
            unexplained += 1
            ready = consumed[-1][0]
        ready_to_run.append(created - ready)
        if consumer.kind in ONE_EVENT_KINDS:
            event_to_run += [created - committed for committed, _ in consumed]
    print(f"  ready → run      {fmt_ms(ready_to_run)} ({len(ready_to_run):,} runs)")
    print(
        f"  event → run      {fmt_ms(event_to_run)} ({len(event_to_run):,} events consumed by "
        f"one-leaf and any-of DAGs)"
    )
    print(
        f"                   lower bounds; each true value is at most "
        f"{longest_transaction * 1000:.0f} ms more (longest scheduler transaction)"
        + (f"; {unknown} runs with events of unknown commit time left out" if unknown else "")
    )
    if unexplained:
        print(
            f"  note             {unexplained} runs whose consumed events alone do not meet "
            f"the condition (a queue row whose event an earlier run had taken)"
        )


def print_consistency() -> None:
    t = {
        "event": AssetEvent._meta.db_table,
        "asset": Asset._meta.db_table,
        "alias_event": AssetAliasAssetEvent._meta.db_table,
        "on_asset": DagScheduleAssetReference._meta.db_table,
        "on_alias": DagScheduleAssetAliasReference._meta.db_table,
        "on_name": DagScheduleAssetNameReference._meta.db_table,
        "on_uri": DagScheduleAssetUriReference._meta.db_table,
        "dag": Dag._meta.db_table,
        "run": DagRun._meta.db_table,
        "run_event": DagRunAssetEvent._meta.db_table,
        "queue": AssetDagRunQueue._meta.db_table,
    }
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT count(*) FROM (
                SELECT l.event_id, r.dag_id FROM {t["run_event"]} l
                JOIN {t["run"]} r ON r.id = l.dag_run_id
                GROUP BY l.event_id, r.dag_id HAVING count(*) > 1
            ) twice
            """
        )
        twice = cursor.fetchone()[0]
        cursor.execute(
            f"""
            WITH ev AS (
                SELECT e.id, e.asset_id, a.name, a.uri FROM {t["event"]} e
                JOIN {t["asset"]} a ON a.id = e.asset_id WHERE e.partition_key IS NULL
            ),
            expected AS (
                SELECT ev.id AS event_id, ev.asset_id, s.dag_id FROM ev
                JOIN {t["on_asset"]} s ON s.asset_id = ev.asset_id
                UNION
                SELECT ev.id, ev.asset_id, s.dag_id FROM ev
                JOIN {t["on_name"]} s ON s.name = ev.name
                UNION
                SELECT ev.id, ev.asset_id, s.dag_id FROM ev
                JOIN {t["on_uri"]} s ON s.uri = ev.uri
                UNION
                SELECT ev.id, ev.asset_id, s.dag_id FROM ev
                JOIN {t["alias_event"]} l ON l.event_id = ev.id
                JOIN {t["on_alias"]} s ON s.alias_id = l.alias_id
            ),
            classified AS (
                SELECT
                    EXISTS (
                        SELECT 1 FROM {t["run_event"]} l JOIN {t["run"]} r ON r.id = l.dag_run_id
                        WHERE l.event_id = x.event_id AND r.dag_id = x.dag_id
                    ) AS consumed,
                    EXISTS (
                        SELECT 1 FROM {t["queue"]} q
                        WHERE q.asset_id = x.asset_id AND q.target_dag_id = x.dag_id
                    ) AS queued
                FROM expected x JOIN {t["dag"]} d ON d.dag_id = x.dag_id
                WHERE NOT d.is_paused AND NOT d.is_stale
            )
            SELECT count(*), count(*) FILTER (WHERE consumed),
                   count(*) FILTER (WHERE NOT consumed AND queued),
                   count(*) FILTER (WHERE NOT consumed AND NOT queued)
            FROM classified
            """
        )
        pairs, consumed, waiting, lost = cursor.fetchone()
        cursor.execute(
            f"""
            SELECT count(*) FROM {t["run"]} r WHERE r.run_type = %s
            AND NOT EXISTS (SELECT 1 FROM {t["run_event"]} l WHERE l.dag_run_id = r.id)
            """,
            [DagRunType.ASSET_TRIGGERED],
        )
        empty = cursor.fetchone()[0]
    verdict = "OK" if not (twice or lost or empty) else "FAILED"
    print(
        f"  consistency      {verdict}: {pairs:,} (event, consumer DAG) pairs: {consumed:,} "
        f"consumed, {waiting:,} waiting in the queue, {lost} lost; {twice} consumed twice; "
        f"{empty} runs without events",
        flush=True,
    )


# --- the parent: phases ---------------------------------------------------------------------


@dataclass
class Bench:
    args: argparse.Namespace
    workload: Workload
    #: per position in ``--phases`` (a phase may be listed more than once)
    plans: list[list[PlanItem]]
    workdir: Path
    commits: dict[str, float] = field(default_factory=dict)
    #: statements the schedulers counted, and their backend pids (--check-statements-log)
    statements: int = 0
    db_pids: set[int] = field(default_factory=set)

    def run_phase(self, index: int) -> None:
        phase = self.args.phases[index]
        kind, schedulers = PHASES[phase]
        if kind == "mapping":
            mapping_phase(index, width=self.args.map_width)
            return
        items = self.plans[index]
        children = Children(self.workdir)
        files = f"{index}-{phase}"  # the children's file names
        after_pk = last_run_pk()
        try:
            if kind == "backlog":
                print(
                    f"\n{phase}: {len(items):,} events (one on each asset, one through each "
                    f"alias) with no scheduler running, then {schedulers} scheduler(s) drain the "
                    f"queue; {load_average()}",
                    flush=True,
                )
                start_at = children.start_producers(files, items, self.args.producers)
                events, cpu, pg_cpu = children.wait_producers()
                print_producers(events, cpu, pg_cpu, start_at)
                self._record(events)
                producers_done = time.time()
                children.start_schedulers(files, schedulers, self.args.interval)
            else:
                print(
                    f"\n{phase}: {schedulers} scheduler(s); producers at {self.args.rate:g} "
                    f"events/s for {self.args.seconds:g} s ({len(items):,} events); "
                    f"{load_average()}",
                    flush=True,
                )
                children.start_schedulers(files, schedulers, self.args.interval)
                wait_started(children)
                start_at = children.start_producers(files, items, self.args.producers)
                events, cpu, pg_cpu = children.wait_producers()
                producers_done = print_producers(events, cpu, pg_cpu, start_at, self.args.rate)
                self._record(events)
            drained = wait_drained(
                children,
                after=producers_done,
                after_pk=after_pk,
                timeout=self.args.drain_timeout,
            )
        except BaseException:
            children.stop(grace=2)  # interrupted or failed: no need to finish a pass
            raise
        children.stop()
        passes = children.passes()  # the last ones too, written while stopping
        for p in (p for per in passes for p in per):
            self.statements += p["statements"]
            if p["db_pid"] is not None:
                self.db_pids.add(p["db_pid"])
        if kind == "backlog":
            work_started = min((p["t0"] for per in passes for p in per), default=producers_done)
        else:
            work_started = start_at
        runs = phase_runs(after_pk)
        longest = print_runs_and_passes(passes, runs, work_started)
        if kind != "backlog":
            print_latency(self.workload, runs, self.commits, longest)
        newest = max((created for _, _, created in runs), default=producers_done)
        if drained:
            print(
                f"  drain            {max(0.0, newest - producers_done):.1f} s after the last event"
            )
        else:
            print(f"  drain            NOT drained within {self.args.drain_timeout:g} s")
        print_consistency()

    def _record(self, events: list[list]) -> None:
        self.commits.update(
            (run_id, committed) for run_id, _, committed, error in events if not error
        )


#: The mapping phase's workers: each claims this many map indexes at a time, then starts them.
MAPPING_CLAIM = 32


def mapping_phase(index: int, *, width: int) -> None:
    """Issue 38: a mapped task of ``width`` map indexes expands once its upstream is done (one
    scheduler pass: its time and statements), then workers claim and start every map index as
    ``manage.py worker`` does (``task_instances_claim``, then ``/run``'s service), in batches
    of :data:`MAPPING_CLAIM`, each ending at once so that the pool's slots free up: how long
    after the expansion each map index starts."""
    from django.test.utils import CaptureQueriesContext

    from assets_app.services.runs.advance import task_instances_advance
    from assets_app.services.runs.claims import (
        RunStart,
        task_instance_run_start,
        task_instances_claim,
    )
    from assets_app.services.runs.dag_runs import dag_run_trigger
    from assets_app.services.state.xcoms import task_map_record

    dag_id = f"bench_mapping_{index}"
    manifest = {
        "dags": [
            {
                "dag_id": dag_id,
                "tags": ["bench", "mapping"],
                "max_active_tasks": width,
                "tasks": [
                    {"task_id": "list_files"},
                    {
                        "task_id": "process_file",
                        "upstream": ["list_files"],
                        "mapped": {"length": {"xcom": "list_files"}, "group": None},
                    },
                ],
            }
        ]
    }
    dags_declare(manifest=manifest_parse(manifest, source="bench_mapping"), fileloc=dag_id)
    print(f"\nmapping: a {width:,}-wide mapped task; {load_average()}", flush=True)
    run = dag_run_trigger(dag_id=dag_id, run_id=f"bench_mapping_{index}")
    TaskInstance.objects.filter(dag_run=run, task_id="list_files").update(state="success")
    task_map_record(dag_run=run, task_id="list_files", map_index=-1, length=width)
    cpu0 = time.process_time()
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        task_instances_advance(dag_run_ids=[run.pk])
        expanded = time.perf_counter()
    cpu = time.process_time() - cpu0
    made = TaskInstance.objects.filter(dag_run=run, task_id="process_file").count()
    print(
        f"  expansion        {made:,} map indexes in {_duration(expanded - started)} "
        f"({len(queries)} statements, {cpu * 1000:.0f} ms scheduler CPU)",
        flush=True,
    )
    latencies: list[float] = []
    host = RunStart(hostname="bench", unixname="bench", pid=os.getpid(), start_date=timezone.now())
    while True:
        claimed = task_instances_claim(limit=MAPPING_CLAIM)
        if not claimed:
            break
        for ti in claimed:
            task_instance_run_start(task_instance_id=ti.pk, run=host)
            latencies.append(time.perf_counter() - expanded)
        # the tasks end at once (no hand-over: nothing is downstream), freeing their pool slots
        TaskInstance.objects.filter(pk__in=[ti.pk for ti in claimed]).update(state="success")
    span = max(latencies, default=0.0)
    print(
        f"  claim → start    {len(latencies):,} map indexes started in {_duration(span)} "
        f"({len(latencies) / span if span else math.nan:.0f}/s, claims of {MAPPING_CLAIM}); "
        f"after the expansion p50 {_duration(percentile(latencies, 50))} "
        f"p99 {_duration(percentile(latencies, 99))}",
        flush=True,
    )


def setup(args: argparse.Namespace) -> tuple[Workload, list[list[PlanItem]]]:
    rng = random.Random(args.seed)  # noqa: S311 - a seeded, repeatable workload
    workload = Workload.generate(dags=args.dags, assets=args.assets, rng=rng)
    started = time.perf_counter()
    result = dags_declare(
        manifest=manifest_parse(workload.manifest(), source="bench_scheduler"),
        fileloc="bench_scheduler",
    )
    declared = time.perf_counter() - started
    kinds = defaultdict(int)
    for consumer in workload.consumers:
        kinds[consumer.kind] += 1
    print(
        f"{connection.vendor} {connection.pg_version // 10000}; {args.dags:,} consumer DAGs ("
        + ", ".join(f"{count:,} {kind}" for kind, count in kinds.items())
        + f") over {args.assets:,} assets and {workload.aliases} aliases; "
        f"declared {len(result.dag_ids):,} DAGs in {declared:.1f} s",
        flush=True,
    )
    plans = []
    started = time.perf_counter()
    for index, phase in enumerate(args.phases):
        count = round(args.rate * args.seconds)
        if PHASES[phase][0] == "mapping":  # no events: a mapped task of its own
            plans.append([])
            continue
        plans.append(
            plan_events(
                workload,
                phase=f"{phase}_{index}",
                count=count,
                rate=None if PHASES[phase][0] == "backlog" else args.rate,
                rng=rng,
            )
        )
        running_task_instances(plans[index])
    history(args.history, dag_ids=[asset_dag(i) for i in range(args.assets)])
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    total = sum(len(items) for items in plans)
    print(
        f"{total:,} running producer task instances and {args.history:,} past events created, "
        f"and VACUUM ANALYZE, in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return workload, plans


#: phase: (kind, schedulers)
PHASES = {
    "backlog": ("backlog", 1),
    "backlog2": ("backlog", 2),
    "steady1": ("steady", 1),
    "steady2": ("steady", 2),
    "mapping": ("mapping", 1),
}


def main() -> None:  # noqa: C901 - the phases of the benchmark, in order
    if len(sys.argv) > 1 and sys.argv[1] == "_produce":
        producer_main(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_scheduler":
        scheduler_main(Path(sys.argv[2]), float(sys.argv[3]))
        return

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dags", type=int, default=10_000, help="consumer DAGs")
    parser.add_argument("--assets", type=int, default=2_000, help="assets (aliases: assets/40)")
    parser.add_argument("--rate", type=float, default=200, help="events per second (steady)")
    parser.add_argument("--seconds", type=float, default=60, help="producing time (steady)")
    parser.add_argument(
        "--phases",
        default="backlog,backlog2,steady1,steady2",
        help=f"from {', '.join(PHASES)}",
    )
    parser.add_argument(
        "--map-width", type=int, default=1000, help="map indexes of the mapping phase's task"
    )
    parser.add_argument(
        "--producers",
        type=int,
        default=4,
        help=f"producer processes ({PRODUCER_THREADS} threads each)",
    )
    parser.add_argument("--interval", type=float, default=1.0, help="scheduler --interval")
    parser.add_argument("--drain-timeout", type=float, default=900, help="seconds")
    parser.add_argument("--seed", type=int, default=12, help="random seed of the workload")
    parser.add_argument(
        "--history", type=int, default=20_000, help="past events in the database at the start"
    )
    parser.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep the work directory: each scheduler's passes (one JSON line per pass), the "
        "producers' records and the children's output",
    )
    parser.add_argument(
        "--check-statements-log",
        type=Path,
        metavar="FILE",
        help="PostgreSQL's log file: log every statement of the schedulers and compare with "
        "their counts (use with a small workload)",
    )
    args = parser.parse_args()
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if not args.phases or any(p not in PHASES for p in args.phases):
        parser.error(f"--phases: choose from {', '.join(PHASES)}")
    if args.dags < 1 or args.assets < 5 or args.rate <= 0 or args.seconds <= 0:
        parser.error("--dags >= 1, --assets >= 5, --rate > 0 and --seconds > 0 please")
    if args.producers < 1:
        parser.error("--producers >= 1")
    if args.check_statements_log and not args.check_statements_log.is_file():
        parser.error(f"--check-statements-log: {args.check_statements_log} is not a file")
    if connection.vendor != "postgresql":
        raise SystemExit("bench_scheduler.py needs PostgreSQL (DATABASE_URL=postgres://...)")
    logging.getLogger().setLevel(logging.WARNING)  # this process only; children log INFO

    stop_on_signals()
    workdir = Path(tempfile.mkdtemp(prefix="ar-bench-scheduler-"))
    failed = True
    try:
        with scratch_database("scheduler") as database:
            try:
                workload, plans = setup(args)
                if args.check_statements_log:
                    log_every_statement(database)
                    offset = args.check_statements_log.stat().st_size
                bench = Bench(args=args, workload=workload, plans=plans, workdir=workdir)
                for index in range(len(args.phases)):
                    bench.run_phase(index)
                if args.check_statements_log:
                    check_statements_log(
                        args.check_statements_log,
                        offset=offset,
                        database=database,
                        pids=bench.db_pids,
                        counted=bench.statements,
                    )
                failed = False
            finally:
                stop_children()
    except KeyboardInterrupt:
        print("\ninterrupted; cleaned up", file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)
        raise SystemExit(130) from None
    finally:
        if (failed or args.keep_logs) and workdir.exists():
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
