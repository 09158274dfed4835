"""Node pools on the pages, in Debian's Chromium: the quota tree page shows each pool's bars
under the total, and a job that accepts only H100 says it waits for the H100 pool, naming
the pool it does not accept, in English and in Chinese, on a desktop and on a phone.
CALDERA_SCREENSHOT_DIR keeps the screenshots (docs/screenshots/pools-*.png)."""

from __future__ import annotations

import re

import pytest

from jobs.cluster import get_backend
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.reconcile import jobs_reconcile
from jobs.engine.sync import cluster_sync
from portal.management.commands.demo import DEMO_NODES
from queues.services import tree_apply

from ..support.chromium import launch
from ..support.jobs import RAY_JOB, submit_document
from ..support.trees import GPU, pooled_tree_document
from .test_browser import log_in_as_alice, screenshot

HEAD = {"resources": {"cpu": "1", "memory": "1G"}}


def gpus(each: int) -> list[dict]:
    return [
        {"name": "gpus", "replicas": 2, "resources": {"cpu": "1", "memory": "1G", GPU: str(each)}}
    ]


@pytest.fixture
def h100_used(transactional_db, member, settings):
    """video holds its H100 share (4 GPUs); a second job accepts only H100 and waits."""
    settings.SIMULATED_CLUSTER_NODES = DEMO_NODES
    settings.BACKOFF_BASE_SECONDS = 600
    get_backend.cache_clear()
    tree_apply(document=pooled_tree_document())
    first = submit_document(
        member, RAY_JOB, name="video-h100", head=HEAD, workers=gpus(2), pools=["h100"]
    )
    on_a100 = submit_document(
        member, RAY_JOB, name="video-a100", head=HEAD, workers=gpus(1), pools=["a100"]
    )
    admission_cycle()
    jobs_reconcile([first.pk, on_a100.pk])
    cluster_sync()
    waiting = submit_document(
        member, RAY_JOB, name="video-waits", head=HEAD, workers=gpus(1), pools=["h100"]
    )
    admission_cycle()
    yield waiting
    get_backend.cache_clear()


@pytest.mark.parametrize(
    ("viewport", "locale"),
    [((1366, 900), "en-US"), ((390, 844), "en-US"), ((1366, 900), "zh-CN"), ((390, 844), "zh-CN")],
    ids=["desktop-en", "phone-en", "desktop-zh", "phone-zh"],
)
def test_the_pages_show_each_pool_and_why_a_job_waits_for_one(
    live_server, h100_used, viewport, locale
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
            page.goto(live_server.url + "/quota/")
            video = page.locator("table.tree tbody.node").filter(has_text="root/algorithm/video")
            h100 = "节点池 h100 中的 nvidia.com/gpu" if chinese else "nvidia.com/gpu in pool h100"
            expect(video.locator("th.resource", has_text=h100)).to_have_count(1)
            if not chinese:
                bar = video.get_by_role("img", name=f"{h100} of root/algorithm/video: used")
                expect(bar).to_have_attribute("aria-label", re.compile("used 4 of max 4"))
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            video.scroll_into_view_if_needed()
            screenshot(page, f"pools-quota-{language}-{width}.png", full_page=False)

            page.goto(f"{live_server.url}/jobs/{h100_used.pk}/")
            said = (
                "节点池 h100 不在它的列表中"
                if chinese
                else "waits for nvidia.com/gpu in pool h100 of root/algorithm/video: used 4 of "
                "max 4; it asks for 2; pool a100 is not in its list"
            )
            expect(page.locator("p.waiting")).to_contain_text(said.replace("h100 不", "a100 不"))
            blocking = page.get_by_role("table").locator("tr.blocks")
            expect(blocking).to_have_count(1)
            expect(blocking).to_contain_text(h100)
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            page.locator("p.waiting").scroll_into_view_if_needed()
            screenshot(page, f"pools-waiting-{language}-{width}.png", full_page=width > 1000)
        finally:
            browser.close()
