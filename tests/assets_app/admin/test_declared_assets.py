"""An asset that a DAG file or manifest declares is the file's (issue 40): its admin page is
read-only and names the file, its delete is refused; an asset no file declares stays editable."""

from __future__ import annotations

import pytest
from django.urls import reverse

from assets_app.models import Asset, DagScheduleAssetReference, TaskOutletAssetReference
from tests.assets_app.admin import change, page_text
from tests.factories import AssetFactory, DagFactory

pytestmark = pytest.mark.django_db

DAG_FILE = "/srv/airflow/dags/orders/warehouse_orders_daily_rollup_v2.py"


@pytest.fixture
def declared() -> Asset:
    asset = AssetFactory(name="orders", uri="s3://warehouse/orders")
    producer = DagFactory(dag_id="warehouse_orders_daily_rollup_v2", fileloc=DAG_FILE)
    TaskOutletAssetReference.objects.create(dag=producer, task_id="rollup", asset=asset)
    consumer = DagFactory(dag_id="orders_report", fileloc="/srv/airflow/dags/report.py")
    DagScheduleAssetReference.objects.create(dag=consumer, asset=asset)
    return asset


def test_a_declared_assets_page_is_read_only_and_names_its_files(admin_client, declared):
    text = page_text(admin_client, change("asset", declared.pk))

    assert "Declared by" in text
    assert DAG_FILE in text
    assert "/srv/airflow/dags/report.py" in text
    assert 'name="_save"' not in text  # no save button: nothing to edit here
    delete = reverse("admin:assets_app_asset_delete", args=[declared.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert Asset.objects.filter(pk=declared.pk).exists()
    response = admin_client.post(change("asset", declared.pk), {"group": "edited", "extra": "{}"})
    assert response.status_code == 403
    declared.refresh_from_db()
    assert declared.group == ""


def test_a_stale_dags_asset_and_an_undeclared_one_stay_editable(admin_client, declared):
    from assets_app.models import Dag

    Dag.objects.update(is_stale=True)  # both files gone from their folders
    loose = AssetFactory(name="scratch", uri="s3://scratch/x")

    for asset in (declared, loose):
        text = page_text(admin_client, change("asset", asset.pk))
        assert 'name="_save"' in text
        assert "no file: created here or by an event" in text
