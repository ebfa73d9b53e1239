"""Task functions the log tests run (through ``manage.py worker`` → ``task_sdk``): what they
print is the try's log, which the worker ships to the server."""

import os
import sys
import time
from pathlib import Path

from task_sdk import task


@task
def print_then_wait(*, ti_id):
    """Print a line (and a secret the server keeps), then wait until ``<ti_id>.go`` appears in
    ``$WORKER_TEST_OUT`` (at most a minute), then print another."""
    print(f"first line of {ti_id}", flush=True)
    print(f"connecting with password {os.environ['LOG_TEST_SECRET']}", flush=True)
    go = Path(os.environ["WORKER_TEST_OUT"]) / f"{ti_id}.go"
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    print("last line", flush=True)


@task
def print_fifty_megabytes():
    """Print 50 MB: 51,200 lines of 1,024 bytes."""
    line = "y" * 1023 + "\n"
    block = line * 512
    for _ in range(100):
        sys.stdout.write(block)
    sys.stdout.flush()
