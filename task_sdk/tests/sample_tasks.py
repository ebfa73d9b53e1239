"""Task functions the task_sdk tests run in real child processes (loaded by file path).

The ``wire_*`` tasks reproduce the tasks that produced the recorded Airflow wire samples.
"""

import ctypes
import os
import signal
import sys
import time

from task_sdk import Asset, AssetAlias, Metadata, task

ASSET_ONE = Asset(name="asset_one", uri="s3://bucket/one")
ASSET_TWO = Asset(name="asset_two", uri="s3://bucket/two")
DYN_ASSET = Asset(name="dyn_asset", uri="s3://bucket/dyn", extra={"asset_level": "x"})
MY_ALIAS = AssetAlias("my_alias")
BY_NAME = Asset.ref(name="by_name_asset")
BY_URI = Asset.ref(uri="s3://bucket/by-uri")


@task(outlets=[ASSET_ONE])
def wire_asset(outlet_events):
    outlet_events[ASSET_ONE].extra = {"k": "v"}


@task(outlets=[ASSET_ONE])
def wire_asset_plain():
    pass


@task(outlets=[MY_ALIAS])
def wire_alias(*, outlet_events):
    outlet_events[MY_ALIAS].add(DYN_ASSET, extra={"k": "v"})


@task(outlets=[ASSET_TWO, MY_ALIAS])
def wire_mixed(context):
    events = context["outlet_events"]
    events[ASSET_TWO].extra["k"] = "v2"
    events[MY_ALIAS].add(DYN_ASSET, extra={"from": "alias"})


@task(outlets=[BY_NAME, BY_URI])
def wire_name_ref(outlet_events):
    outlet_events[BY_NAME].extra["via"] = "name"
    outlet_events[BY_URI].extra["via"] = "uri"


@task(outlets=[BY_NAME, BY_URI])
def wire_ref_plain():
    pass


@task(outlets=[ASSET_ONE, MY_ALIAS])
def wire_metadata():
    yield Metadata(ASSET_ONE, {"k": "meta"})
    yield Metadata(DYN_ASSET, {"k": "meta-alias"}, alias=MY_ALIAS)


@task(outlets=[ASSET_ONE])
def wire_partitions(outlet_events):
    outlet_events[ASSET_ONE].extra["k"] = "v"
    # the recorded sample lists the partitions in this order (Airflow keeps them in a set)
    outlet_events[ASSET_ONE].add_partitions(["2026-01-02", "2026-01-01"])


def wire_no_outlets():
    return None


@task(outlets=[ASSET_ONE])
def raises():
    outlet_events_would_be_lost = "nothing is sent for a failed task"
    raise RuntimeError(outlet_events_would_be_lost)


@task(outlets=[ASSET_ONE])
def prints_fake_messages_then_fails():
    # stdout/stderr are the task's log: a line that looks like a message must not be obeyed
    fake = (
        '{"type":"SucceedTask","end_date":"2026-01-01T00:00:00Z",'
        '"task_outlets":[],"outlet_events":[]}'
    )
    print(fake)
    print(fake, file=sys.stderr)
    raise ValueError("the real outcome")


def chatty():
    print("line on stdout")
    print("line on stderr", file=sys.stderr)


def returns_value():
    return {"answer": 42}


def kills_itself():
    os.kill(os.getpid(), signal.SIGKILL)


def exits_hard():
    os._exit(3)


def segfaults():
    ctypes.string_at(0)


def sleeps():
    time.sleep(60)


def asks_for_everything(**kwargs):
    print(sorted(kwargs))


@task(outlets=[Asset.ref(name="missing")])
def resolves_missing_ref(outlet_events):
    outlet_events[Asset.ref(name="missing")].extra["x"] = 1


def lingers_after_success():
    # a non-daemon thread keeps the task process alive after it reported success
    import threading

    threading.Thread(target=time.sleep, args=(60,)).start()
