"""A DAG file's import error (``assets_app.services.dags.dag_files``) where an operator looks: the
admin, the operator API's ``/api/v1/import-errors`` and Airflow's ``/api/v2/importErrors``."""

from __future__ import annotations

from pathlib import Path

import pytest

from assets_app.models import DagImportError
from assets_app.services.dags.dag_files import FileOutcome, ParsedFile, dag_file_store
from tests.operatorapi.conftest import make_user, token_client

pytestmark = pytest.mark.django_db

FOLDER = Path("/dags")
TRACE = 'Traceback (most recent call last):\n  File "/dags/broken.py", line 3\nSyntaxError: bad'


@pytest.fixture
def stored() -> DagImportError:
    result = dag_file_store(
        parsed=ParsedFile(path=FOLDER / "broken.py", errors=[TRACE]), folder=FOLDER
    )
    assert result.outcome == FileOutcome.IMPORT_ERROR
    return DagImportError.objects.get()


def test_the_same_error_again_writes_nothing(stored):
    # when the file fails the same way again
    again = dag_file_store(
        parsed=ParsedFile(path=FOLDER / "broken.py", errors=[TRACE]), folder=FOLDER
    )

    # then the row is as it was
    assert again.outcome == FileOutcome.IMPORT_ERROR_UNCHANGED
    assert DagImportError.objects.get().timestamp == stored.timestamp


def test_the_public_api_lists_and_gets_import_errors_in_airflows_shape(stored, admin_api):
    body = {
        "import_error_id": stored.pk,
        "timestamp": stored.timestamp.isoformat().replace("+00:00", "Z"),
        "filename": "/dags/broken.py",
        "bundle_name": "dags-folder",
        "stack_trace": TRACE,
    }
    listed = admin_api.get("importErrors", {"filename_pattern": "broken"})
    assert listed.status_code == 200
    assert listed.json() == {"import_errors": [body], "total_entries": 1}
    assert admin_api.get("importErrors", {"filename_pattern": "other"}).json()["total_entries"] == 0
    assert admin_api.get(f"importErrors/{stored.pk}").json() == body
    missing = admin_api.get("importErrors/999999")
    assert missing.status_code == 404
    assert missing.json() == {
        "detail": "The ImportError with import_error_id: `999999` was not found"
    }
    assert admin_api.get("importErrors", {"order_by": "nope"}).status_code == 400
    assert admin_api.get("importErrors/abc").status_code in (404, 422)


def test_the_operator_api_lists_and_gets_import_errors(stored):
    api = token_client(make_user("viewer", "view_dagimporterror"))
    listed = api.get("/api/v1/import-errors")
    assert listed.status_code == 200, listed.content
    (row,) = listed.json()["results"]
    assert row["id"] == stored.pk
    assert row["filename"] == "/dags/broken.py"
    assert row["stacktrace"] == TRACE
    assert api.get(f"/api/v1/import-errors/{stored.pk}").json()["stacktrace"] == TRACE
    assert api.get("/api/v1/import-errors", {"filename": "/dags/other.py"}).json()["results"] == []
    assert api.get("/api/v1/import-errors/999999").status_code == 404
    nobody = token_client(make_user("nobody"))
    assert nobody.get("/api/v1/import-errors").status_code == 403


def test_the_admin_shows_import_errors_read_only(stored, admin_client):
    changelist = admin_client.get("/admin/assets_app/dagimporterror/")
    assert changelist.status_code == 200
    assert b"/dags/broken.py" in changelist.content
    assert b"SyntaxError: bad" in changelist.content
    page = admin_client.get(f"/admin/assets_app/dagimporterror/{stored.pk}/change/")
    assert page.status_code == 200
    assert b"line 3" in page.content
    assert admin_client.get("/admin/assets_app/dagimporterror/add/").status_code == 403
