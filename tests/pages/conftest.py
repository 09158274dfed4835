"""What the page tests share."""

from __future__ import annotations

import pytest

from ..support.chromium import launch


@pytest.fixture
def browser():
    """Debian's Chromium, launched for one test and closed after it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = launch(playwright)
        try:
            yield launched
        finally:
            launched.close()
