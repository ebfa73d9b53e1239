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


# -- values the server cannot store (the case comes from the environment) ----------------------


@task(outlets=[ASSET_ONE, MY_ALIAS])
def writes_unstorable_json(outlet_events):
    case = os.environ["SDK_TEST_CASE"]
    extra = outlet_events[ASSET_ONE].extra
    if case == "nan":
        extra["r"] = float("nan")
    elif case == "infinity-nested":
        extra["r"] = [1, {"x": float("inf")}]
    elif case == "alias-minus-infinity":
        outlet_events[MY_ALIAS].add(DYN_ASSET, extra={"r": float("-inf")})
    elif case == "metadata":
        yield Metadata(ASSET_ONE, {"r": {"deep": [float("nan")]}})
    elif case == "surrogate":
        extra["r"] = "\ud800"
    elif case == "nul":
        extra["r"] = "a\x00b"
    elif case == "int-key":
        extra[1] = "one"
    elif case == "too-deep":
        value = []
        for _ in range(63):
            value = [value]
        extra["r"] = value  # extra is level 1, so the innermost list is level 65
    elif case == "return-nan":
        return {"ratio": float("nan")}
    return None


# -- consumers -------------------------------------------------------------------------------

ORDERS = Asset("orders", "s3://bucket/orders")


@task(inlets=[ORDERS, MY_ALIAS])
def consume(*, inlet_events, triggering_asset_events):
    newest = inlet_events[ORDERS][-1]
    history = inlet_events[ORDERS]
    return {
        "newest": {"id": newest.id, "extra": newest.extra, "at": newest.timestamp.isoformat()},
        "count": len(history),
        "extras": [event.extra for event in history],
        "through_alias": [event.id for event in inlet_events[MY_ALIAS]],
        "triggering": [
            {
                "asset": event.asset.name,
                "extra": event.extra,
                "aliases": [alias.name for alias in event.source_aliases],
                "source": [event.source_dag_id, event.source_run_id, event.source_task_id],
                "aware": event.timestamp.tzinfo is not None,
            }
            for event in triggering_asset_events[ORDERS]
        ],
        "triggering_keys": sorted(str(key) for key in triggering_asset_events),
    }


@task(inlets=[ORDERS])
def reads_an_undeclared_inlet(*, inlet_events):
    return inlet_events[ASSET_TWO]  # raises KeyError: not a declared inlet


# -- process groups --------------------------------------------------------------------------


def _start_grandchild(*command):
    import subprocess

    # inherits the task's stdout and stderr, as a careless task's helper process would
    child = subprocess.Popen(list(command or ["sleep", "1000"]))
    print(f"grandchild {child.pid}", flush=True)
    return child


def grandchild_then_sleeps():
    _start_grandchild()
    time.sleep(60)


def grandchild_ignoring_sigterm_then_sleeps():
    # the shell and its sleep inherit "SIGTERM ignored"; only SIGKILL ends them
    _start_grandchild("sh", "-c", "trap '' TERM; sleep 1000; true")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)


def grandchild_then_lingers():
    import threading

    _start_grandchild()
    threading.Thread(target=time.sleep, args=(60,)).start()


def grandchild_then_returns():
    _start_grandchild()


def prints_where_it_runs():
    print(f"SDK_TEST_CASE={os.environ.get('SDK_TEST_CASE')} ", end="")
    print(f"PARENT_ONLY={os.environ.get('PARENT_ONLY')} cwd={os.getcwd()}")


def returns_conf(dag_run):
    return dag_run["conf"]
