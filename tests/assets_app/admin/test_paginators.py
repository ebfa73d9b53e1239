"""assets_app.paginators."""

from __future__ import annotations

import pytest

from assets_app.models import AssetEvent
from assets_app.paginators import CappedCountPaginator
from tests.factories import AssetEventFactory

pytestmark = pytest.mark.django_db


def test_capped_paginator_counts_at_most_its_cap(monkeypatch):
    # given
    monkeypatch.setattr(CappedCountPaginator, "max_count", 3)
    AssetEventFactory.create_batch(5)

    # when
    paginator = CappedCountPaginator(AssetEvent.objects.order_by("-id"), per_page=2)

    # then
    assert paginator.count == 3
    assert paginator.num_pages == 2


def test_capped_paginator_counts_a_list_too(monkeypatch):
    monkeypatch.setattr(CappedCountPaginator, "max_count", 3)
    assert CappedCountPaginator([1, 2], per_page=1).count == 2
    assert CappedCountPaginator(list(range(5)), per_page=1).count == 3
