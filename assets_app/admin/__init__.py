"""The operator's view of the registry (SPEC §6), one module per area.

- ``assets``: assets, aliases and the alias → asset links (editable);
- ``events``: asset events and the alias → event links;
- ``dags``: DAGs (only the pause flag is editable, through ``assets_app.services.dags``) and
  the asset DAG-run queue;
- ``runs``: DAG runs and task instances;
- ``common`` (links, pretty JSON, durations, mixins) and ``filters`` serve them all.

Event-like tables (asset events, alias → event links, DAG runs, task instances, the queue)
are read-only. List pages never query per row (FKs joined, to-many relations prefetched for
the page only) and the big lists count at most ``CappedCountPaginator.max_count`` rows instead
of running ``COUNT(*)`` over the table. Reads beyond a list's own query (the event search, an
asset's DAG references) are selectors. Events survive deletion of their asset: such an event
shows "deleted asset #id".
"""

from assets_app.admin import assets, dags, events, runs

__all__ = ["assets", "dags", "events", "runs"]
