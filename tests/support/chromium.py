"""Debian's Chromium for the browser tests, launched one way (Playwright cannot download a
browser of its own here: .ci/run installs the package)."""

from __future__ import annotations

import os

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def launch(playwright):
    """A headless Chromium; the test fails, naming the package, where it is missing."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
