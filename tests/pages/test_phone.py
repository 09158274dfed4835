"""Pages on a phone and from the keyboard: at 390 px no page scrolls sideways (a table wider
than the screen scrolls inside its own box, which the keyboard can reach), and the first
Tab offers to skip to the content."""

from __future__ import annotations

import pytest

from ..support.chromium import launch
from ..support.jobs import RAY_JOB, running, submit_document
from .test_browser import log_in

pytestmark = pytest.mark.browser

PAGES = (
    "/",
    "/jobs/",
    "/jobs/new/",
    "/jobs/new/objects/",
    "/queues/",
    "/queues/root-algorithm-video/",
    "/quota/",
    "/account/",
    "/departments/algorithm/",
)


@pytest.fixture
def busy(transactional_db, member):
    """A running job and three waiting ones of alice's, made before the browser starts."""
    job = running(member)
    for n in range(3):
        submit_document(member, RAY_JOB, name=f"sweep-{n}")
    return job


def test_no_page_scrolls_sideways_on_a_phone(live_server, busy):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": 390, "height": 844})
            log_in(page, live_server.url, "alice")
            wide = {}
            for url in (*PAGES, f"/jobs/{busy.pk}/"):
                page.goto(live_server.url + url)
                width = page.evaluate("document.documentElement.scrollWidth")
                if width > 390:
                    wide[url] = width
                # Every box that scrolls sideways can be reached from the keyboard.
                unreachable = page.evaluate(
                    """() => [...document.querySelectorAll('.table-scroll')]
                        .filter(box => box.scrollWidth > box.clientWidth && box.tabIndex < 0)
                        .map(box => box.querySelector('table')?.className || 'table')"""
                )
                if unreachable:
                    wide[url + " (a box the keyboard cannot scroll)"] = unreachable
            assert wide == {}
        finally:
            browser.close()


def test_the_first_tab_offers_to_skip_to_the_content(live_server, busy):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            log_in(page, live_server.url, "alice")
            page.goto(live_server.url + "/jobs/")
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.textContent") == "Skip to the content"
            page.keyboard.press("Enter")
            assert page.evaluate("document.activeElement.id") == "content"
        finally:
            browser.close()


def test_the_jobs_filters_fold_on_a_phone_and_stay_open_at_a_desk(live_server, busy):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": 390, "height": 844})
            log_in(page, live_server.url, "alice")
            page.goto(live_server.url + "/jobs/?state=queued")
            # Folded: the first job is on the first screen, the filter's summary above it.
            expect(page.locator("details.filter-fold")).not_to_have_attribute("open", "")
            expect(page.locator("details.filter-fold > summary")).to_contain_text("1")
            first_job = page.locator("table.job-list tbody tr").first
            assert first_job.bounding_box()["y"] < 844
            page.locator("details.filter-fold > summary").click()
            expect(page.get_by_label("Name contains")).to_be_visible()
            # A filter with an error stays open, so that its error is read.
            page.goto(live_server.url + "/jobs/?priority_min=high")
            expect(page.locator("details.filter-fold")).to_have_attribute("open", "")
            # At a desk the filters are always open, and no summary stands above them.
            page.set_viewport_size({"width": 1366, "height": 900})
            page.goto(live_server.url + "/jobs/")
            expect(page.get_by_label("Name contains")).to_be_visible()
            expect(page.locator("details.filter-fold > summary")).to_be_hidden()
        finally:
            browser.close()
