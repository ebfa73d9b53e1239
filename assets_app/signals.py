"""Notifications sent after asset changes are committed (docs/concepts.md, "Signals").

Both signals are sent from ``transaction.on_commit`` callbacks, so receivers only ever see
committed rows, and with ``send_robust``, so a failing receiver is logged and never breaks
the request that registered the changes.

``asset_changed``
    Sent once per asset that received at least one new event.
    ``sender`` is :class:`~assets_app.models.Asset`; keyword argument ``asset`` (the model
    instance).

``asset_event_emitted``
    Sent once per new asset event. ``sender`` is :class:`~assets_app.models.AssetEvent`;
    keyword arguments ``event`` (the model instance, ``event.asset`` already loaded) and
    ``source_alias_names`` (a tuple of the alias names it was emitted through, possibly empty).

Example::

    from django.dispatch import receiver
    from assets_app.models import AssetEvent
    from assets_app.signals import asset_event_emitted

    @receiver(asset_event_emitted, sender=AssetEvent)
    def forward_to_lineage(sender, event, source_alias_names, **kwargs):
        ...
"""

from __future__ import annotations

from django.dispatch import Signal

asset_changed = Signal()
asset_event_emitted = Signal()
