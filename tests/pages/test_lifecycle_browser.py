"""Stop policies, per-person limits and retries on the pages, in Debian's Chromium, in English
and in Chinese, on a desktop and on a phone: the quota page marks the stopped node and the
limits, a job at its owner's limit and a job of a stopped queue say why they wait, and a
retried job lists its failed attempt. CALDERA_SCREENSHOT_DIR keeps the screenshots
(docs/screenshots/limits-*.png, stopped-*.png, retried-*.png)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from queues.services import tree_apply, tree_export, tree_find

from ..support.chromium import launch
from ..support.jobs import RAY_JOB, submit_document
from .test_browser import log_in_as_alice, screenshot

SMALL = {"head": {"resources": {"cpu": "2", "memory": "1Gi"}}, "workers": [], "run_seconds": 600}


@pytest.fixture
def scene(transactional_db, member, other_member):
    """video lets one person hold one job; text is on Hold; alice runs one job in video and
    waits with another; her job in text waits for the stop; carol's job failed its first
    attempt of three."""
    document = tree_export()
    tree_find(document, "root/algorithm/video")["limits"] = {
        "defaultTime": "2h", "maxTime": "1d", "perPerson": {"jobs": 1},
    }  # fmt: skip
    tree_find(document, "root/algorithm/text")["stopPolicy"] = "Hold"
    tree_apply(document=document)
    now = timezone.now()
    running = submit_document(member, RAY_JOB, name="train-first", now=now, **SMALL)
    waiting = submit_document(member, RAY_JOB, name="train-second", now=now, **SMALL)
    stopped = submit_document(
        member, RAY_JOB, name="eval-text", queue="root/algorithm/text", now=now, **SMALL
    )
    retried = submit_document(
        other_member, RAY_JOB, name="sweep-retried", now=now, retries=2,
        env={"CALDERA_SIMULATED_EXIT_CODE": "3"}, **{**SMALL, "run_seconds": 5},
    )  # fmt: skip
    admission_cycle(now=now)
    jobs_reconcile([running.pk, retried.pk], now=now)
    cluster_sync(now=now)
    cluster_sync(now=now + timedelta(seconds=6))  # the attempt failed: stopping
    cluster_sync(now=now + timedelta(seconds=7))  # its objects gone: attempt 2 waits
    return {"waiting": waiting, "stopped": stopped, "retried": retried}


@pytest.mark.parametrize(
    ("viewport", "locale"),
    [((1366, 900), "en-US"), ((390, 844), "en-US"), ((1366, 900), "zh-CN"), ((390, 844), "zh-CN")],
    ids=["desktop-en", "phone-en", "desktop-zh", "phone-zh"],
)
def test_stops_limits_and_attempts_are_said_on_the_pages(live_server, scene, viewport, locale):
    from playwright.sync_api import expect, sync_playwright

    width, height = viewport
    chinese = locale.startswith("zh")
    language = "zh" if chinese else "en"
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, locale=locale)
            log_in_as_alice(page, live_server.url)

            page.goto(f"{live_server.url}/quota/")
            expect(page.locator(".stopped")).to_contain_text("stopPolicy Hold")
            expect(page.locator(".node-limits")).to_contain_text("perPerson.jobs: 1")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            screenshot(page, f"limits-quota-{language}-{width}.png", full_page=False)

            page.goto(f"{live_server.url}/jobs/{scene['waiting'].pk}/")
            said = "每人上限" if chinese else "the most one person may have there"
            expect(page.locator("p.waiting")).to_contain_text(said)
            expect(page.locator("dd.time-limit")).to_have_text("2h")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            screenshot(page, f"limits-person-{language}-{width}.png", full_page=width > 1000)

            page.goto(f"{live_server.url}/jobs/{scene['stopped'].pk}/")
            said = "恢复" if chinese else "to be resumed: its stopPolicy is Hold"
            expect(page.locator("p.waiting")).to_contain_text(said)
            screenshot(page, f"stopped-job-{language}-{width}.png", full_page=False)

            page.goto(f"{live_server.url}/jobs/{scene['retried'].pk}/")
            expect(page.locator("dd.attempt")).to_contain_text("2")
            expect(page.locator("table.attempts")).to_contain_text("exited with code 3")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            screenshot(page, f"retried-job-{language}-{width}.png", full_page=width > 1000)
        finally:
            browser.close()
