"""``manage.py pools``: Airflow's ``airflow pools`` shapes, and a CommandError for bad input."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from assets_app.models import Pool

pytestmark = pytest.mark.django_db


def pools(*args: str) -> str:
    out = StringIO()
    call_command("pools", *args, stdout=out)
    return out.getvalue()


def test_set_list_get_delete():
    assert "Pool reports set: 3 slots" in pools("set", "reports", "3", "for reports")
    pools("set", "deferring", "-1", "", "--include-deferred")

    listing = pools("list")
    assert listing.splitlines()[0].split() == [
        "pool", "slots", "running", "queued", "open", "include_deferred", "description"
    ]  # fmt: skip
    assert any(line.split()[:5] == ["reports", "3", "0", "0", "3"] for line in listing.splitlines())
    rows = {row["pool"]: row for row in json.loads(pools("list", "--json"))}
    assert rows["deferring"]["open"] == -1
    assert rows["deferring"]["include_deferred"] is True
    assert rows["default_pool"]["slots"] == 128
    assert json.loads(pools("get", "reports", "--json"))["description"] == "for reports"

    assert "deleted" in pools("delete", "reports")
    assert not Pool.objects.filter(pool="reports").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("set", "p", "many", "d"), "SLOTS must be a whole number", id="slots-text"),
        pytest.param(("set", "p", "-5", "d"), "slots must be -1 (unlimited)", id="slots-low"),
        pytest.param(("set", "", "1", "d"), "name must not be empty", id="empty-name"),
        pytest.param(("delete", "default_pool"), "Default Pool can't be deleted", id="default"),
        pytest.param(("delete", "nope"), "`nope` was not found", id="missing"),
        pytest.param(("get", "nope"), "`nope` was not found", id="get-missing"),
        pytest.param(("import", "/nonexistent/p.json"), "cannot read", id="no-file"),
    ],
)
def test_bad_input_is_a_command_error(args, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pools(*args)


def test_export_then_import(tmp_path: Path):
    pools("set", "a", "2", "A")
    path = tmp_path / "pools.json"
    assert "pool(s) exported" in pools("export", str(path))
    exported = json.loads(path.read_text())
    assert exported["a"] == {"description": "A", "include_deferred": False, "slots": 2}

    Pool.objects.filter(pool="a").delete()
    exported["b"] = {"slots": 4, "description": "B", "include_deferred": True}
    path.write_text(json.dumps(exported))
    assert "3 pool(s) imported" in pools("import", str(path))
    assert Pool.objects.get(pool="b").include_deferred is True

    path.write_text("{not json")
    with pytest.raises(CommandError, match="is not valid JSON"):
        pools("import", str(path))
    path.write_text(json.dumps({"c": {"slots": "x"}}))
    with pytest.raises(CommandError, match="pool 'c': slots must be a whole number"):
        pools("import", str(path))
