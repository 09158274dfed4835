"""In Debian's Chromium, on a desktop and on a phone: a failed job's page leads with why it
failed and the last lines of its log kept as it ended, its pods gone; a running Ray job's
page links its Ray dashboard. CALDERA_SCREENSHOT_DIR keeps the screenshots
(docs/screenshots/job-end-kept-*.png, ray-dashboard-*.png)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from jobs.models import Job, SimulatedPod, State

from ..support.chromium import launch
from ..support.jobs import RAY_JOB, submit_document
from .test_browser import log_in_as_alice, screenshot

SMALL = {"head": {"resources": {"cpu": "2", "memory": "4Gi"}}, "workers": []}
VIEWPORTS = [
    ((1366, 900), "en-US"), ((390, 844), "en-US"), ((1366, 900), "zh-CN"), ((390, 844), "zh-CN"),
]  # fmt: skip
IDS = ["desktop-en", "phone-en", "desktop-zh", "phone-zh"]


def started(user, *, ago: float, **changes) -> Job:
    at = timezone.now() - timedelta(seconds=ago)
    job = submit_document(user, RAY_JOB, now=at, **SMALL, **changes)
    admission_cycle(now=at)
    jobs_reconcile([job.pk], now=at)
    cluster_sync(now=at)
    return job


@pytest.fixture
def failed(transactional_db, member) -> Job:
    """alice's job that failed with exit code 3 after 60 s; its pods are gone."""
    job = started(
        member, ago=70, name="resnet-sweep", run_seconds=60,
        env={"CALDERA_SIMULATED_EXIT_CODE": "3"},
    )  # fmt: skip
    cluster_sync()
    job.refresh_from_db()
    assert job.state == State.FAILED
    assert not SimulatedPod.objects.filter(job_id=job.pk).exists()
    return job


@pytest.mark.parametrize(("viewport", "locale"), VIEWPORTS, ids=IDS)
def test_a_failed_jobs_page_leads_with_its_cause_and_its_kept_log(
    live_server, failed, viewport, locale
):
    from playwright.sync_api import expect, sync_playwright

    width, height = viewport
    language = locale[:2]
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, locale=locale)
            log_in_as_alice(page, live_server.url)
            page.goto(f"{live_server.url}/jobs/{failed.pk}/")
            cause = page.locator("section.failure")
            expect(cause.locator("dd.failure-reason")).to_contain_text("exited with code 3")
            expect(cause.locator("dd.exit-code")).to_have_text("3")
            expect(cause.locator("pre.failure-log")).to_contain_text(
                "Exited with code 3 after 60 s"
            )
            expect(page.locator("#log-note")).to_contain_text(
                "作业于" if language == "zh" else "kept when the job ended at"
            )
            expect(page.locator("#log-lines pre")).to_contain_text("Exited with code 3")
            top = page.evaluate("document.querySelector('section.failure').offsetTop")
            assert top < page.evaluate("document.querySelector('dl.facts dt').offsetTop") + 1
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            screenshot(page, f"job-end-kept-{language}-{width}.png", full_page=width > 1000)
        finally:
            browser.close()


@pytest.mark.parametrize(("viewport", "locale"), VIEWPORTS, ids=IDS)
def test_a_running_ray_jobs_page_links_its_dashboard(
    live_server, transactional_db, member, settings, viewport, locale
):
    from playwright.sync_api import expect, sync_playwright

    settings.RAY_DASHBOARD_URL = "https://ray.example.com/{namespace}/{service}/"
    job = started(member, ago=12, name="ray-tune")
    job.refresh_from_db()
    service = f"{job.ray_cluster}-head-svc"
    width, height = viewport
    language = locale[:2]
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, locale=locale)
            log_in_as_alice(page, live_server.url)
            page.goto(f"{live_server.url}/jobs/{job.pk}/")
            link = page.get_by_role(
                "link", name="打开 Ray 仪表盘" if language == "zh" else "Open the Ray dashboard"
            )
            expect(link).to_have_attribute("href", f"https://ray.example.com/video/{service}/")
            expect(page.locator("dd.ray-dashboard")).to_contain_text(service)
            expect(page.locator("#log-lines pre")).to_contain_text("Started ")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            screenshot(page, f"ray-dashboard-{language}-{width}.png", full_page=width > 1000)
        finally:
            browser.close()
