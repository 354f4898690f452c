"""Headless Chromium for the browser tests: a test that needs it skips, with the reason, where
it is missing — and fails instead when the environment variable ``CI`` is set, since CI installs
it (``.ci/run``)."""

from __future__ import annotations

import os

import pytest

from tinyattn.inspect import browser


def unavailable(reason: str) -> None:
    """Skip (locally) or fail (under CI) for ``reason``."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests, but {reason}", pytrace=False)
    pytest.skip(f"no headless Chromium here: {reason}")


def require_browser() -> None:
    """Skip or fail unless selenium, Chromium and chromedriver are all there."""
    reason = browser.missing()
    if reason is not None:
        unavailable(reason)


def start_browser(width: int = 1400, height: int = 1000):
    """A headless Chromium driven by selenium (skips or fails where there is none)."""
    require_browser()
    try:
        return browser.headless_chromium(width, height)
    except browser.BrowserUnavailable as err:
        unavailable(str(err))
