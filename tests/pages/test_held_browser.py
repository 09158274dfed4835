"""A held job on the pages, in Debian's Chromium: its page says who holds it and since when,
the queue page marks it, and Release sends it back to be tried, in English and in Chinese,
on a desktop and on a phone. CALDERA_SCREENSHOT_DIR keeps the screenshots
(docs/screenshots/held-*.png)."""

from __future__ import annotations

import pytest

from jobs.models import Job
from jobs.services import job_hold

from ..support.chromium import launch
from ..support.jobs import RAY_JOB, submit_document
from .test_browser import log_in_as_alice, screenshot

SMALL = {"head": {"resources": {"cpu": "2", "memory": "1Gi"}}, "workers": []}


@pytest.fixture
def held(transactional_db, member):
    """alice's job, held by her, ahead of another of hers."""
    job = submit_document(member, RAY_JOB, name="sweep-held", **SMALL)
    submit_document(member, RAY_JOB, name="sweep-next", **SMALL)
    job_hold(user=member, job=job)
    return job


@pytest.mark.parametrize(
    ("viewport", "locale"),
    [((1366, 900), "en-US"), ((390, 844), "en-US"), ((1366, 900), "zh-CN"), ((390, 844), "zh-CN")],
    ids=["desktop-en", "phone-en", "desktop-zh", "phone-zh"],
)
def test_a_held_job_says_who_holds_it_and_is_released_from_its_page(
    live_server, held, viewport, locale
):
    from playwright.sync_api import expect, sync_playwright

    width, height = viewport
    chinese = locale.startswith("zh")
    language = "zh" if chinese else "en"
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, locale=locale)
            log_in_as_alice(page, live_server.url)
            page.goto(f"{live_server.url}/queues/root-algorithm-video/")
            row = page.locator("tr", has_text="sweep-held")
            expect(row.locator(".state-held")).to_have_text("已挂起" if chinese else "held")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            screenshot(page, f"held-queue-{language}-{width}.png", full_page=width > 1000)

            page.goto(f"{live_server.url}/jobs/{held.pk}/")
            said = "被 alice 挂起" if chinese else "It is held by alice since"
            expect(page.locator("p.waiting")).to_contain_text(said)
            expect(page.locator("dd.held")).to_contain_text("alice")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            screenshot(page, f"held-job-{language}-{width}.png", full_page=width > 1000)

            page.get_by_role("button", name="释放" if chinese else "Release").click()
            expect(page.locator(".messages")).to_contain_text(
                "已释放" if chinese else "Released: the next admission cycle tries it."
            )
            expect(page.get_by_role("button", name="挂起" if chinese else "Hold")).to_be_visible()
        finally:
            browser.close()
    assert Job.objects.get(pk=held.pk).held_at is None
