"""Benchmark the event-reading pages, routes and commands over a big ``asset_event`` table
(among them the admin's overview, asset page and DAG page, whose query counts must not grow).

Usage (from the repository root)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ar_bench \\
        .venv/bin/python bench/bench_events_scale.py                  # 1,000,000 events
    .venv/bin/python bench/bench_events_scale.py --events 200000      # SQLite scratch file
    ... --explain                         # also print the plan of every query over --slow-ms

It creates a scratch database the way the test runner does (``test_<name>`` on PostgreSQL, a
temporary file on SQLite), migrates it and fills it with set-based SQL: 1,000 assets (all
active), 50 source DAGs with 100 runs each, 5 aliases; ``--events`` events one every 30
seconds up to now (about 1% manual, no source), 10% of them emitted through an alias
(``asset_alias_asset_event``) and 5% consumed by a DAG run (``dagrun_asset_event``). After
``VACUUM ANALYZE`` it times each scenario warm (median of ``--repeat`` runs after one warm-up) and
prints it with the number of SQL statements it sent. Admin pages go through Django's test
client as a logged-in superuser, execution API routes with a signed task token. The last
scenario prunes the oldest ~30% of the events and checks that no alias or DAG-run link is
left pointing at a deleted event. The database is dropped at the end.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from assets_app.models import AssetAlias, AssetEvent, DagRun  # noqa: E402
from assets_app.tokens import token_issue  # noqa: E402

ASSETS = 1_000
DAGS = 50
RUNS_PER_DAG = 100
ALIASES = 5
STEP_SECONDS = 30  # one event every 30 s, the newest "now"


# --- filling ---------------------------------------------------------------------------------


def _series(n: int) -> str:
    """A FROM clause yielding ``i`` = 1..n."""
    if connection.vendor == "postgresql":
        return f"generate_series(1, {n}) AS s(i)"
    return (
        f"(WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n}) "
        "SELECT i FROM s) AS s"
    )


def _ago(seconds_sql: str) -> str:
    """SQL for now() minus an integer number of seconds, stored the way Django stores it."""
    if connection.vendor == "postgresql":
        return f"(now() - ({seconds_sql}) * interval '1 second')"
    return f"strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || ({seconds_sql}) || ' seconds')"


def _json(key: str, value_sql: str) -> str:
    if connection.vendor == "postgresql":
        return f"jsonb_build_object('{key}', {value_sql})"
    return f"json_object('{key}', {value_sql})"


def _pad(value_sql: str, width: int) -> str:
    if connection.vendor == "postgresql":
        return f"lpad(({value_sql})::text, {width}, '0')"
    return f"substr('0000000000' || ({value_sql}), -{width}, {width})"


def fill(events: int) -> None:
    now = _ago("0")
    statements = [
        # assets, all active
        f"""INSERT INTO asset (name, uri, "group", extra, created_at, updated_at)
            SELECT 'asset_' || {_pad("i - 1", 4)}, 's3://bench/asset_' || {_pad("i - 1", 4)},
                   'asset', {_json("n", "i")}, {now}, {now}
            FROM {_series(ASSETS)} ORDER BY i""",
        "INSERT INTO asset_active (asset_id, name, uri) SELECT id, name, uri FROM asset",
        # source DAGs and their runs
        f"""INSERT INTO dag (dag_id, is_paused, is_stale, task_ids, fileloc)
            SELECT 'dag_' || {_pad("i - 1", 2)}, false, false, '["produce"]', ''
            FROM {_series(DAGS)}""",
        f"""INSERT INTO dag_run (dag_id, run_id, run_after, start_date, run_type, state, conf,
                                 created_at)
            SELECT 'dag_' || {_pad("(i - 1) % " + str(DAGS), 2)},
                   'run_' || {_pad("(i - 1) / " + str(DAGS), 3)},
                   {_ago(f"({DAGS * RUNS_PER_DAG} - i) * 600")},
                   {_ago(f"({DAGS * RUNS_PER_DAG} - i) * 600")},
                   'asset_triggered', 'success', '{{}}', {now}
            FROM {_series(DAGS * RUNS_PER_DAG)} ORDER BY i""",
        f"""INSERT INTO asset_alias (name, "group")
            SELECT 'alias_' || (i - 1), 'asset' FROM {_series(ALIASES)}""",
        # events: asset i % 1000, DAG i % 50 (so each asset has one producing DAG), run
        # (i / 50) % 100 of that DAG; every 97th event is manual
        f"""INSERT INTO asset_event (asset_id, extra, source_task_id, source_dag_id,
                                     source_run_id, source_map_index, timestamp)
            SELECT (SELECT min(id) FROM asset) + i % {ASSETS}, {_json("n", "i")},
                   CASE WHEN i % 97 = 0 THEN NULL ELSE 'produce' END,
                   CASE WHEN i % 97 = 0 THEN NULL
                        ELSE 'dag_' || {_pad("i % " + str(DAGS), 2)} END,
                   CASE WHEN i % 97 = 0 THEN NULL
                        ELSE 'run_' || {_pad(f"(i / {DAGS}) % {RUNS_PER_DAG}", 3)} END,
                   -1, {_ago(f"({events} - i) * {STEP_SECONDS}")}
            FROM {_series(events)} ORDER BY i""",
        # 10% of the events through an alias, 5% consumed by a run
        f"""INSERT INTO asset_alias_asset_event (alias_id, event_id)
            SELECT (SELECT min(id) FROM asset_alias) + (e.id / 10) % {ALIASES}, e.id
            FROM asset_event e WHERE e.id % 10 = 0""",
        """INSERT INTO asset_alias_asset (alias_id, asset_id)
            SELECT DISTINCT l.alias_id, e.asset_id
            FROM asset_alias_asset_event l JOIN asset_event e ON e.id = l.event_id""",
        f"""INSERT INTO dagrun_asset_event (dag_run_id, event_id, dag_id)
            SELECT r.id, l.event_id, r.dag_id FROM (
                SELECT (SELECT min(id) FROM dag_run) + (e.id / 20) % {DAGS * RUNS_PER_DAG}
                    AS dag_run_id, e.id AS event_id
                FROM asset_event e WHERE e.id % 20 = 0
            ) l JOIN dag_run r ON r.id = l.dag_run_id""",
    ]
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)
        # what autovacuum leaves behind on an insert-mostly table: statistics and a visibility
        # map (index-only scans)
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")


# --- measuring -------------------------------------------------------------------------------


class Recorder:
    """``connection.execute_wrapper`` keeping every statement with its time and final SQL."""

    def __init__(self) -> None:
        self.queries: list[dict] = []

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            elapsed = time.perf_counter() - started
            final = sql
            if not many:
                try:
                    final = connection.ops.last_executed_query(context["cursor"], sql, params)
                except Exception:  # only used for --explain
                    final = sql
            self.queries.append({"sql": final, "time": elapsed})


def measure(action: Callable[[], object], repeat: int) -> tuple[float, int, list[dict]]:
    """(median ms, statements, recorded queries) of ``action``, warm."""
    recorder = Recorder()
    action()  # warm-up
    with connection.execute_wrapper(recorder):
        action()  # the statement count
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), len(recorder.queries), recorder.queries


def explain(queries: list[dict], slow_ms: float) -> None:
    for query in queries:
        if float(query["time"]) * 1000 < slow_ms:
            continue
        sql = query["sql"]
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        prefix = "EXPLAIN ANALYZE " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
        with connection.cursor() as cursor:
            cursor.execute(prefix + sql)
            plan = "\n".join("      " + " ".join(str(c) for c in row) for row in cursor.fetchall())
        print(f"    {float(query['time']) * 1000:.1f} ms: {sql[:600]}\n{plan}")


def get(client: Client, url: str, **headers: str) -> Callable[[], object]:
    def action() -> object:
        response = client.get(url, headers=headers)
        if response.status_code != 200:
            raise SystemExit(f"GET {url} -> {response.status_code}: {response.content[:300]!r}")
        return response

    return action


def command(*args: str) -> Callable[[], object]:
    def action() -> object:
        out = io.StringIO()
        call_command(*args, stdout=out)
        if len(out.getvalue().splitlines()) < 2:
            raise SystemExit(f"{args}: too little output: {out.getvalue()!r}")
        return out

    return action


def scenarios(events: int) -> list[tuple[str, Callable[[], object]]]:
    user, _ = get_user_model().objects.get_or_create(
        username="bench", defaults={"is_staff": True, "is_superuser": True}
    )
    admin = Client()
    admin.force_login(user)
    api = Client()
    auth = {"Authorization": f"Bearer {token_issue(task_instance_id=uuid.uuid4())}"}

    changelist = "/admin/assets_app/assetevent/"
    alias = AssetAlias.objects.order_by("id").first()
    newest = AssetEvent.objects.order_by("-id").values_list("timestamp", flat=True).first()
    span_start = newest - timedelta(seconds=events * STEP_SECONDS)
    middle = (span_start + (newest - span_start) / 2).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    asset_id = AssetEvent.objects.order_by("-id").values_list("asset_id", flat=True).first()
    event_id = AssetEvent.objects.filter(alias_links__isnull=False).order_by("-id")[0].pk
    run_id = DagRun.objects.filter(event_links__isnull=False).order_by("-id")[0].pk
    after = (newest - timedelta(days=30)).isoformat()
    before = (newest - timedelta(days=10)).isoformat()
    name, uri = "asset_0007", "s3://bench/asset_0007"

    def api_url(path: str, **params: object) -> str:
        return f"/execution/asset-events/{path}?{urlencode(params)}"

    def admin_url(**params: object) -> str:
        return f"{changelist}?{urlencode(params)}" if params else changelist

    return [
        ("admin overview (index)", get(admin, "/admin/")),
        ("admin events: first page", get(admin, admin_url())),
        ("admin events: ?p=50", get(admin, admin_url(p=50))),
        ("admin events: source DAG", get(admin, admin_url(source_dag="dag_07"))),
        (
            "admin events: time range (7 days)",
            get(
                admin,
                admin_url(
                    timestamp__gte=str(middle),
                    timestamp__lt=str(middle + timedelta(days=7)),
                ),
            ),
        ),
        (
            "admin events: date hierarchy (a day)",
            get(
                admin,
                admin_url(
                    timestamp__year=middle.year,
                    timestamp__month=middle.month,
                    timestamp__day=middle.day,
                ),
            ),
        ),
        ("admin events: search asset uri", get(admin, admin_url(q=uri))),
        ("admin events: search DAG id", get(admin, admin_url(q="dag_07"))),
        ("admin events: source alias", get(admin, admin_url(source_alias=alias.pk))),
        ("admin events: manual only", get(admin, admin_url(source="manual"))),
        ("admin asset change page", get(admin, f"/admin/assets_app/asset/{asset_id}/change/")),
        ("admin asset list", get(admin, "/admin/assets_app/asset/")),
        ("admin DAG change page", get(admin, "/admin/assets_app/dag/dag_07/change/")),
        ("admin DAG run change page", get(admin, f"/admin/assets_app/dagrun/{run_id}/change/")),
        (
            "admin event change page",
            get(admin, f"/admin/assets_app/assetevent/{event_id}/change/"),
        ),
        ("admin alias->event links", get(admin, "/admin/assets_app/assetaliasassetevent/")),
        (
            "api by-asset limit=20 asc",
            get(api, api_url("by-asset", name=name, uri=uri, limit=20), **auth),
        ),
        (
            "api by-asset limit=20 desc",
            get(api, api_url("by-asset", name=name, uri=uri, limit=20, ascending="false"), **auth),
        ),
        (
            "api by-asset after/before desc",
            get(
                api,
                api_url(
                    "by-asset",
                    name=name,
                    uri=uri,
                    after=after,
                    before=before,
                    ascending="false",
                    limit=50,
                ),
                **auth,
            ),
        ),
        (
            "api by-asset name only, limit=1",
            get(api, api_url("by-asset", name=name, limit=1), **auth),
        ),
        (
            "api by-asset-alias limit=20 desc",
            get(
                api, api_url("by-asset-alias", name=alias.name, limit=20, ascending="false"), **auth
            ),
        ),
        (
            "api by-asset-alias after/before asc",
            get(
                api,
                api_url("by-asset-alias", name=alias.name, after=after, before=before, limit=50),
                **auth,
            ),
        ),
        ("cmd asset_events --limit 20", command("asset_events", "--limit", "20")),
        ("cmd asset_events --json", command("asset_events", "--limit", "20", "--json")),
        ("cmd asset_events --dag", command("asset_events", "--limit", "20", "--dag", "dag_07")),
        (
            "cmd asset_events --alias",
            command("asset_events", "--limit", "20", "--alias", alias.name),
        ),
        ("cmd asset_events --name --json", command("asset_events", "--name", name, "--json")),
    ]


def prune(events: int) -> None:
    days = int(events * STEP_SECONDS * 0.7 / 86_400) + 1
    before = AssetEvent.objects.count()
    counter = Recorder()
    with connection.execute_wrapper(counter):
        started = time.perf_counter()
        call_command("prune_asset_events", "--older-than-days", str(days), stdout=io.StringIO())
        elapsed = time.perf_counter() - started
    after = AssetEvent.objects.count()
    with connection.cursor() as cursor:
        orphans = {}
        for table in ("asset_alias_asset_event", "dagrun_asset_event"):
            cursor.execute(
                f"SELECT COUNT(*) FROM {table} l LEFT JOIN asset_event e ON e.id = l.event_id "
                "WHERE e.id IS NULL"
            )
            orphans[table] = cursor.fetchone()[0]
    deleted = before - after
    print(
        f"{'cmd prune --older-than-days ' + str(days):<38} {elapsed * 1000:>10.0f} "
        f"{len(counter.queries):>7}   deleted {deleted} ({deleted / before:.0%}), "
        f"{deleted / elapsed:,.0f} events/s, orphan links: {orphans}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="asset_event rows")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per scenario")
    parser.add_argument("--explain", action="store_true", help="print plans of slow queries")
    parser.add_argument("--slow-ms", type=float, default=20.0, help="--explain threshold")
    parser.add_argument("--only", default="", help="run scenarios whose name contains this")
    parser.add_argument("--no-prune", action="store_true", help="skip the prune scenario")
    parser.add_argument(
        "--keepdb",
        action="store_true",
        help="keep the scratch database and reuse it if already filled (implies --no-prune)",
    )
    args = parser.parse_args()

    setup_test_environment()
    old_name = connection.creation.create_test_db(
        verbosity=0, autoclobber=not args.keepdb, keepdb=args.keepdb
    )
    try:
        started = time.perf_counter()
        if not (args.keepdb and AssetEvent.objects.exists()):
            fill(args.events)
        print(
            f"{connection.vendor}: {AssetEvent.objects.count():,} events, filled and analyzed "
            f"in {time.perf_counter() - started:.1f} s; median of {args.repeat} warm runs\n"
        )
        print(f"{'scenario':<38} {'ms':>10} {'queries':>7}")
        for label, action in scenarios(args.events):
            if args.only and args.only not in label:
                continue
            median, count, queries = measure(action, args.repeat)
            slowest = max((float(q["time"]) * 1000 for q in queries), default=0.0)
            print(f"{label:<38} {median:>10.1f} {count:>7}   slowest query {slowest:.1f} ms")
            if args.explain:
                explain(queries, args.slow_ms)
        if not (args.no_prune or args.keepdb):
            prune(args.events)
    finally:
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=args.keepdb)


if __name__ == "__main__":
    main()
