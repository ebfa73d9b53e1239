"""``manage.py screenshots`` (``make screenshots``, the docs' pictures) run as a real
subprocess: it writes one 1400 px wide PNG per page and leaves the database it ran on alone."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest

from assets_app.models import Asset
from devtools.browser import BrowserMissingError, chromium_start
from tests.live_server import REPO, server_env

# what a browser shows and does; the pages' queries run on both databases in tests/assets_app/admin
pytestmark = [pytest.mark.slow, pytest.mark.sqlite]

PAGES = (
    "overview.png",
    "asset.png",
    "dag.png",
    "dag-graph.png",
    "run.png",
    "runs.png",
    "events.png",
    "emit-event.png",
)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_screenshots_command_writes_the_docs_pictures(transactional_db, tmp_path):
    # given a browser, and a row in the configured database that must survive
    try:
        chromium_start(tmp_path / "probe").quit()
    except BrowserMissingError as exc:
        pytest.skip(str(exc))
    Asset.objects.create(name="keep-me", uri="s3://keep/me")

    # when
    result = subprocess.run(
        [sys.executable, "manage.py", "screenshots", "--out", str(tmp_path / "shots")],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )

    # then
    assert result.returncode == 0, result.stdout + result.stderr
    for name in PAGES:
        data = (tmp_path / "shots" / name).read_bytes()
        width, height = _png_size(data)
        assert width == 1400, (name, width, height)
        assert height >= 600, (name, width, height)
    assert list(Asset.objects.values_list("name", flat=True)) == ["keep-me"]
    # the docs show what the command writes (the README the overview, the admin page the rest)
    assert "(docs/screenshots/overview.png)" in (REPO / "README.md").read_text()
    admin_page = (REPO / "docs" / "admin.md").read_text()
    for name in ("overview.png", "asset.png", "dag.png", "events.png"):
        assert f"(screenshots/{name})" in admin_page
        assert (REPO / "docs" / "screenshots" / name).is_file()
    assert "manage.py screenshots --out docs/screenshots" in (REPO / "Makefile").read_text()
