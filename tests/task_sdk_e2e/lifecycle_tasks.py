"""Tasks for the run-lifecycle end-to-end tests (retries, the reaper)."""

import os
import time
from pathlib import Path

from task_sdk import task


@task
def sleeps():
    """Runs until it is killed."""
    time.sleep(120)


@task
def fails_once():
    """Fails the first time (leaving a marker file), succeeds afterwards."""
    marker = Path(os.environ["LIFECYCLE_MARKER"])
    if not marker.exists():
        marker.write_text("tried")
        raise RuntimeError("first try fails")
    return "second try"
