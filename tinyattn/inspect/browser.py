"""Drive a headless Chromium on a view's page: what the browser tests, the benchmark of the page
and the README's screenshot use (optional: ``selenium`` and Debian's ``chromium`` and
``chromium-driver``, or any Chromium with its matching chromedriver on the ``PATH``).

Chromium runs headless, without a sandbox (it may run as root), with its background
networking, updates and sync off (the page needs no network: it is a ``file://`` URL) and a
fresh profile in a temporary folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage")

INSTALL_HINT = ("install it with: apt-get install chromium chromium-driver (and pip install "
                "selenium, or pip install 'tinyattn[test]')")


class BrowserUnavailable(RuntimeError):
    """No headless Chromium can be started here (the message says what is missing)."""


def find_chromium() -> tuple[str | None, str | None]:
    """The paths of a Chromium (or Chrome) program and of its chromedriver, None where not
    found (``TINYATTN_CHROMIUM`` and ``TINYATTN_CHROMEDRIVER`` override the search)."""
    chosen = os.environ.get("TINYATTN_CHROMIUM")
    names = (chosen,) if chosen else ("chromium", "chromium-browser", "google-chrome", "chrome")
    binary = next((p for p in (shutil.which(n) for n in names) if p), None)
    driver = shutil.which(os.environ.get("TINYATTN_CHROMEDRIVER") or "chromedriver")
    return binary, driver


def missing() -> str | None:
    """Why no headless Chromium can be driven here, or None when one can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return f"selenium is not installed; {INSTALL_HINT}"
    binary, driver = find_chromium()
    if binary is None:
        return f"no Chromium program found (chromium, chromium-browser, google-chrome); " \
               f"{INSTALL_HINT}"
    if driver is None:
        return f"no chromedriver found on the PATH; {INSTALL_HINT}"
    return None


def headless_chromium(width: int = 1400, height: int = 900) -> Any:
    """A selenium WebDriver on a new headless Chromium with a ``width × height`` window, its
    console log readable (``driver.get_log("browser")``); ``driver.quit()`` ends it and
    removes its profile.

    Raises
    ------
    BrowserUnavailable
        When selenium, Chromium or chromedriver is missing, or Chromium does not start.
    """
    reason = missing()
    if reason is not None:
        raise BrowserUnavailable(reason)
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = find_chromium()
    profile = tempfile.mkdtemp(prefix="tinyattn-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
    except WebDriverException as err:
        shutil.rmtree(profile, ignore_errors=True)
        raise BrowserUnavailable(f"Chromium did not start ({binary}, {driver_path}): "
                                 f"{err.msg or err}") from None
    quit_driver = driver.quit

    def quit_and_clean() -> None:
        try:
            quit_driver()
        finally:
            shutil.rmtree(profile, ignore_errors=True)

    driver.quit = quit_and_clean
    return driver


def open_page(driver: Any, path: str | os.PathLike, timeout: float = 30.0) -> None:
    """Load the page at ``path`` (a ``file://`` URL) and wait until its script has drawn it
    (``document.body.dataset.ready``)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(Path(path).resolve().as_uri())
    WebDriverWait(driver, timeout).until(
        lambda d: d.execute_script("return document.body.dataset.ready === '1'"))


def console_errors(driver: Any) -> list[str]:
    """The console's error messages since the last call (level SEVERE)."""
    return [entry["message"] for entry in driver.get_log("browser")
            if entry.get("level") == "SEVERE"]
