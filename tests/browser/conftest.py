"""The ``browser`` fixture: headless Chromium through ``devtools.browser`` (system chromium
and chromedriver, nothing downloaded). Without both binaries the browser tests are skipped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.browser import BrowserMissingError, chromium_start


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    """A fresh headless Chromium (own profile under tmp_path), 1400 px wide, quit after the
    test; skipped without chromium and chromedriver."""
    try:
        driver = chromium_start(tmp_path)
    except BrowserMissingError as exc:
        pytest.skip(str(exc))
    try:
        yield driver
    finally:
        driver.quit()
