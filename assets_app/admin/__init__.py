"""The operator's view of the registry (docs/admin.md), one module per area.

- ``assets``: assets, aliases and the alias → asset links (editable);
- ``events``: asset events and the alias → event links;
- ``dags``: DAGs (only the pause flag is editable, through ``assets_app.services.dags.declare``) and
  the asset DAG-run queue;
- ``runs``: DAG runs and task instances;
- ``secrets``: variables and connections (secrets write-only, through their services);
- ``pools``: pools with their used and open slots (written through their services);
- ``import_errors``: DAG files that failed to load (read-only);
- ``audit``: the Audit log, who triggered, paused, cleared or marked what and who changed a
  variable or connection (read-only; a DAG's page links to its events);
- ``state_stores``: the task and asset state stores (read-only);
- ``common`` (links, pretty JSON, durations, mixins) and ``filters`` serve them all;
- ``panels`` reads what the index (an overview), the asset page and the DAG page show beyond
  their forms, drawn by ``charts`` (pygal bar charts, grandalf-laid-out lineage, inline SVG).

Event-like tables (asset events, alias → event links, DAG runs, task instances, the queue)
are read-only. List pages never query per row (FKs joined, to-many relations prefetched for
the page only) and the big lists count at most ``CappedCountPaginator.max_count`` rows instead
of running ``COUNT(*)`` over the table. Reads beyond a list's own query (the event search, an
asset's DAG references) are selectors. Events survive deletion of their asset: such an event
shows "deleted asset #id".
"""

from django.contrib import admin

from assets_app.admin import (
    assets,
    audit,
    dags,
    events,
    import_errors,
    pools,
    runs,
    secrets,
    state_stores,
)

# the index opens with the overview (assets_app.admin.panels.overview) above the model list
admin.site.index_template = "admin/assets_app/index.html"
# the lists fit 1400 px only without the model sidebar (276 px); breadcrumbs and the index
# link every page
admin.site.enable_nav_sidebar = False

__all__ = [
    "assets",
    "audit",
    "dags",
    "events",
    "import_errors",
    "pools",
    "runs",
    "secrets",
    "state_stores",
]
