"""An asset alias: the producer decides at run time which asset it wrote (one per day here)
and records the event through the alias; the consumer is scheduled on the alias, so each event
on any asset the alias resolved to triggers it. `make run` loads this folder."""

import pendulum
from airflow.sdk import DAG, Asset, AssetAlias, task

DAILY_FILES = AssetAlias("daily-exports")

with DAG(
    dag_id="daily_export_by_alias",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    tags=["exports", "alias"],
):

    @task(outlets=[DAILY_FILES])
    def write_todays_file(*, outlet_events, logical_date):
        day = logical_date.strftime("%Y-%m-%d")
        todays = Asset(name=f"export-{day}", uri=f"s3://warehouse/exports/{day}.parquet")
        outlet_events[DAILY_FILES].add(todays, extra={"rows": 42})

    write_todays_file()

with DAG(
    dag_id="load_daily_export",
    schedule=DAILY_FILES,
    tags=["exports", "alias"],
    is_paused_upon_creation=False,
):

    @task
    def load(*, triggering_asset_events):
        for events in triggering_asset_events.values():  # keyed by the alias here
            for event in events:
                print(f"loading {event.asset.uri}: {event.extra}")

    load()
