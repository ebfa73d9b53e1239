"""A task for the reaper's end-to-end test: it runs until it is killed."""

import time

from task_sdk import task


@task
def sleeps():
    time.sleep(120)
