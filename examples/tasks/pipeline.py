"""The tasks of ``examples/pipeline.yaml`` (docs/pipelines.md), written with ``task_sdk``:
``extract >> transform >> load >> notify``; each logs what it does."""

import logging

from task_sdk import Asset, task

log = logging.getLogger(__name__)


@task
def extract() -> None:
    log.info("extracted 3 orders")


@task
def transform() -> None:
    log.info("cleaned 3 orders")


@task(outlets=[Asset(name="orders_clean", uri="s3://warehouse/orders_clean")])
def load() -> None:
    log.info("loaded s3://warehouse/orders_clean")


@task
def notify() -> None:
    log.info("told the team")
