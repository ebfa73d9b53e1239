"""Operator use case on the asset DAG-run queue: dropping what a DAG waits on."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from assets_app.exceptions import NotFoundError
from assets_app.selectors.dags import queued_events_query

logger = logging.getLogger(__name__)


@transaction.atomic
def queued_events_delete(
    *, dag_id: str | None = None, asset_id: int | None = None, before: datetime | None = None
) -> int:
    """Delete the queue rows of a DAG, an asset or both (created before ``before``): the DAG no
    longer waits on those assets' changes. None to delete → ``NotFoundError``."""
    deleted, _ = queued_events_query(dag_id=dag_id, asset_id=asset_id, before=before).delete()
    if not deleted:
        what = " and ".join(
            part
            for part in (
                f"dag_id: `{dag_id}`" if dag_id is not None else "",
                f"asset_id: `{asset_id}`" if asset_id is not None else "",
            )
            if part
        )
        raise NotFoundError(f"Queue event with {what} was not found")
    transaction.on_commit(lambda: logger.info("deleted %s queued event(s)", deleted))
    return deleted
