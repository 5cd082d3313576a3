"""A real headless Chromium for the pages people work in offline (review.html, criteria.html): Selenium driving
the system browser and driver, downloads landing in a temporary directory.

Skipped with a one-line reason when chromium or chromedriver is missing, except under CI=true, where a missing
browser is a failure (.ci/run installs both).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

__all__ = ["browser", "wait_for"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]


def _browser_or_skip() -> tuple[str, str]:
    if CHROMIUM and DRIVER:
        return CHROMIUM, DRIVER
    reason = "chromium and chromedriver not on PATH; install them with: apt-get install -y chromium chromium-driver"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture
def browser(tmp_path: Path):
    chromium, driver_path = _browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    opts.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                           "download.prompt_for_download": False})
    service = Service(executable_path=driver_path, env={**os.environ, "HOME": str(tmp_path)})
    drv = webdriver.Chrome(service=service, options=opts)
    drv.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    try:
        yield drv, downloads
    finally:
        drv.quit()


def wait_for(pred, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
