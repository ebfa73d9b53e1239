"""Task functions the worker tests run (through ``manage.py worker`` → ``task_sdk``).

Each writes a marker file named after its task instance into ``$WORKER_TEST_OUT`` with
``open(..., "x")``: a second run of one task instance would fail on the existing file.
"""

import os
import time
from pathlib import Path

from task_sdk import Asset, task


def _mark(ti_id: str, text: str) -> None:
    with (Path(os.environ["WORKER_TEST_OUT"]) / ti_id).open("x") as marker:
        marker.write(text)


@task
def record_once(*, ti_id, run_id, try_number):
    time.sleep(0.2)
    _mark(ti_id, f"{run_id} try {try_number}")
    print(f"ran {ti_id}")


@task
def sleep_then_record(*, ti_id):
    time.sleep(2)
    _mark(ti_id, "finished")


@task
def sleep_long(*, ti_id):
    _mark(ti_id, "started")
    time.sleep(120)


@task
def fail_first_try(*, ti_id, try_number):
    if try_number == 1:
        raise RuntimeError("the first try fails")
    _mark(ti_id, f"try {try_number}")


@task
def exits_hard():
    os._exit(3)


@task
def record_cwd(*, ti_id):
    _mark(ti_id, f"cwd {os.getcwd()}")


STEP_OUTPUT = Asset(name="step_output", uri="s3://registry-tests/step/output.parquet")


@task(outlets=[STEP_OUTPUT])
def step(*, ti_id, outlet_events):
    """A function whose name is not its task's id (manifest task ``t1``): returns a value and
    writes an outlet event."""
    outlet_events[STEP_OUTPUT].extra = {"rows": 3}
    _mark(ti_id, "stepped")
    return {"rows": 3}


@task
def fails_with_a_reason():
    raise ValueError("the input file orders.csv has no header row")


@task
def hold_a_slot(*, ti_id):
    """Long enough that two claims overlap it: the pool tests watch the slots meanwhile."""
    time.sleep(0.4)
    _mark(ti_id, "done")
