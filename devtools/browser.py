"""A headless Chromium driven through Selenium and Debian's chromedriver (for the browser tests
and ``manage.py screenshots``).

The browser and its driver come from the system (``apt-get install chromium chromium-driver``,
done by .ci/run); nothing is downloaded at run time: the driver path is given explicitly, so
Selenium Manager is never asked. ``CHROMIUM_BIN`` and ``CHROMEDRIVER_BIN`` override where they
are looked for.
"""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path
from typing import Any

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
    "--hide-scrollbars",
)
WIDTH = 1400


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


class BrowserMissingError(RuntimeError):
    """No chromium or no chromedriver on this machine."""


def chromium_start(profile_dir: Path, *, width: int = WIDTH, height: int = 1200) -> Any:
    """A fresh headless Chromium (its own profile under ``profile_dir``), ``width`` px wide.

    Raises ``BrowserMissingError`` when the browser or its driver is not installed.
    """
    chromium = _find("CHROMIUM_BIN", "chromium", "chromium-browser")
    if chromium is None:
        raise BrowserMissingError("no chromium found (apt-get install chromium chromium-driver)")
    chromedriver = _find("CHROMEDRIVER_BIN", "chromedriver")
    if chromedriver is None:
        raise BrowserMissingError("no chromedriver found (apt-get install chromium-driver)")
    from selenium import webdriver

    profile_dir.mkdir(parents=True, exist_ok=True)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir / 'chromium-profile'}")
    service = webdriver.ChromeService(
        executable_path=chromedriver, log_output=str(profile_dir / "chromedriver.log")
    )
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    # the viewport, not the window, is `width` wide
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    return driver


def full_page_png(driver: Any, path: Path, *, max_height: int | None = None) -> Path:
    """Save a screenshot of the whole page (not only the window), or of its top
    ``max_height`` px, as a PNG file."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    if max_height is not None:
        size = {**size, "height": min(size["height"], max_height)}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        },
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def log_in(driver: Any, base_url: str, username: str, password: str) -> None:
    """Log in through the admin's login form."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base_url}/admin/login/")
    driver.find_element(By.ID, "id_username").send_keys(username)
    driver.find_element(By.ID, "id_password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "#login-form [type=submit]").click()
    WebDriverWait(driver, 15).until(
        lambda d: (
            "/admin/login/" not in d.current_url
            and d.execute_script("return document.readyState") == "complete"
        )
    )
