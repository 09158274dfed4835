"""The pages in a real browser: log in, submit a Ray job, follow it into its queue; sign in
through the company's OpenID provider.

Drives Debian's Chromium (``apt-get install chromium``) through Playwright against
pytest-django's live server. Every test fails on an error in the browser's console, among
them any Content-Security-Policy violation. Set CALDERA_SCREENSHOT_DIR to keep screenshots
of the pages.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from .conftest import RAY_JOB
from .test_job_list import submit

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def page():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(5_000)
            errors: list[str] = []
            page.on(
                "console",
                lambda message: (
                    message.type == "error"
                    and errors.append(f"{page.url} ({message.location['url']}): {message.text}")
                ),
            )
            page.on("pageerror", lambda error: errors.append(str(error)))
            yield page
            assert not errors, f"the browser's console: {errors}"
        finally:
            browser.close()


def screenshot(page, name: str) -> None:
    folder = os.environ.get("CALDERA_SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=str(Path(folder) / name), full_page=True)


def test_it_submits_a_ray_job_and_finds_it_first_in_its_queue(
    live_server, transactional_db, member, page
):
    from playwright.sync_api import expect

    page.goto(live_server.url + "/jobs/new/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/jobs/new/$"))
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("pw-alice")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Submit a job")).to_be_visible()

    page.get_by_label("Queue").select_option("root/algorithm/video")
    page.get_by_label("Kind").select_option("ray")
    page.locator("#id_name").fill("browser-rayjob")
    page.get_by_label("Image").fill("rayproject/ray:2.36.1")
    page.get_by_label("Entrypoint (Ray)").fill("python /home/ray/samples/sample_code.py")
    page.locator("#id_head_cpu").fill("4")
    page.locator("#id_head_memory").fill("4G")
    page.locator("#id_worker_name").fill("small-group")
    page.locator("#id_worker_replicas").fill("2")
    page.locator("#id_worker_cpu").fill("4")
    page.locator("#id_worker_memory").fill("4G")
    # The preview follows the form: a bad quantity is named, then the RayJob appears.
    page.locator("#id_worker_cpu").fill("4 cores")
    expect(page.locator("#preview-problems")).to_contain_text(
        "workers[0].resources.cpu: '4 cores' is not a Kubernetes quantity"
    )
    page.locator("#id_worker_cpu").fill("4")
    expect(page.locator("#preview-ready")).to_contain_text("cpu 12, memory 12G")
    expect(page.locator("#preview pre.manifest")).to_contain_text("name: browser-rayjob-0")
    page.get_by_role("button", name="Submit job").click()

    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    expect(page.get_by_role("heading", name=re.compile("browser-rayjob"))).to_be_visible()
    expect(page.locator("#job-status .state")).to_have_text("queued")
    expect(page.locator("#job-status dd.position")).to_have_text("1")
    screenshot(page, "caldera-job.png")

    page.get_by_role("link", name="root-algorithm-video").first.click()
    expect(page.get_by_role("heading", name="root-algorithm-video")).to_be_visible()
    row = page.locator("#queue-lists table.pending tbody tr").filter(has_text="browser-rayjob")
    expect(row.locator("td.position")).to_have_text("1")
    screenshot(page, "caldera-queue.png")


def test_a_researcher_signs_in_through_the_company_provider(live_server, provider, page):
    from playwright.sync_api import expect

    provider.register("http://testserver", live_server.url)
    provider.person("dana", ["/caldera/algorithm", "/caldera/admins"], first_name="Dana")

    page.goto(live_server.url + "/queues/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/queues/$"))
    screenshot(page, "caldera-login.png")
    page.get_by_role("link", name="Sign in with Company SSO").click()
    expect(page.get_by_role("heading", name="Company sign-in")).to_be_visible()  # the provider
    page.get_by_label("Username").fill("dana")
    page.get_by_label("Password").fill("idp-dana")
    page.get_by_role("button", name="Sign in").click()

    expect(page).to_have_url(live_server.url + "/queues/")
    expect(page.get_by_role("link", name="root-algorithm-video")).to_be_visible()
    # Pages beyond the researcher's, under the same policy: the quota tree, the admin's
    # tree editor (dana is an admin through her group), the API docs.
    page.goto(live_server.url + "/quota/")
    expect(page.locator("table.tree")).to_be_visible()
    page.goto(live_server.url + "/admin/queues/quotanode/tree/")
    expect(page.locator("textarea.tree-document")).to_be_visible()
    page.goto(live_server.url + "/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Caldera API")


def log_in(page, url: str, username: str) -> None:
    page.goto(url + "/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-" + username)
    page.get_by_role("button", name="Log in").click()


@pytest.fixture
def two_sweeps(transactional_db, member, other_member, manager):
    """Three jobs of alice's and three of carol's; made before the browser starts (its
    event loop would refuse the database calls)."""
    for n in range(3):
        submit(member, RAY_JOB, name=f"sweep-{n}")
        submit(other_member, RAY_JOB, name=f"other-{n}")


def test_a_manager_cancels_a_filtered_set_and_a_member_only_their_own(
    live_server, two_sweeps, page
):
    from playwright.sync_api import expect

    log_in(page, live_server.url, "alice")
    page.goto(live_server.url + "/jobs/")
    page.get_by_label("Name contains").fill("sweep")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"/jobs/\?q=sweep"))
    expect(page.locator(".list-count")).to_have_text("3 jobs")
    page.goto(live_server.url + "/jobs/")  # every job, and alice picks two of carol's
    page.get_by_label(re.compile(r"Select other-0")).check()
    page.get_by_label(re.compile(r"Select sweep-0")).check()
    page.get_by_role("button", name="Apply to the selected jobs").click()
    expect(page.locator(".messages")).to_contain_text(
        "1 cancelled; 1 refused: members cancel only their own jobs"
    )
    screenshot(page, "caldera-jobs-refused.png")

    page.get_by_role("button", name="Log out").click()
    log_in(page, live_server.url, "bob")
    page.goto(live_server.url + "/jobs/?q=other&state=queued")
    page.get_by_role("button", name="Apply to all 3 matching").click()
    expect(page.locator(".messages")).to_contain_text("3 cancelled")
    expect(page.get_by_text("No job matches.")).to_be_visible()
    screenshot(page, "caldera-jobs.png")


def test_a_researcher_submits_a_copy_of_a_job(live_server, two_sweeps, page):
    from playwright.sync_api import expect

    log_in(page, live_server.url, "alice")
    page.goto(live_server.url + "/jobs/?q=sweep-1")
    page.get_by_role("link", name="sweep-1").click()
    page.get_by_role("link", name="Submit a copy").click()
    expect(page.get_by_text(re.compile(r"A copy of sweep-1 #\d+"))).to_be_visible()
    expect(page.locator("#id_name")).to_have_value("sweep-1")
    expect(page.locator("#id_worker_replicas")).to_have_value("2")
    page.locator("#id_name").fill("sweep-1-again")
    page.get_by_role("button", name="Submit job").click()
    expect(page.get_by_role("heading", name=re.compile("sweep-1-again"))).to_be_visible()
    expect(page.locator("#job-status .state")).to_have_text("queued")
