"""A headless Chromium driven through Selenium and Debian's chromedriver.

The browser and its driver come from the system (``apt-get install chromium chromium-driver``,
done by .ci/run); nothing is downloaded at run time: the driver path is given explicitly, so
Selenium Manager is never asked. Without both binaries the browser tests are skipped.
``CHROMIUM_BIN`` and ``CHROMEDRIVER_BIN`` override where they are looked for.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1200",
)


def _find(env_var: str, *names: str) -> str | None:
    explicit = os.environ.get(env_var)
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in names:
        found = shutil.which(name) or (
            f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").is_file() else None
        )
        if found:
            return found
    return None


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    """A fresh headless Chromium (own profile under tmp_path), quit after the test."""
    chromium = _find("CHROMIUM_BIN", "chromium", "chromium-browser")
    if chromium is None:
        pytest.skip("no chromium binary found (apt-get install chromium chromium-driver)")
    chromedriver = _find("CHROMEDRIVER_BIN", "chromedriver")
    if chromedriver is None:
        pytest.skip("chromium found but no chromedriver (apt-get install chromium-driver)")
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    service = webdriver.ChromeService(
        executable_path=chromedriver, log_output=str(tmp_path / "chromedriver.log")
    )
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
