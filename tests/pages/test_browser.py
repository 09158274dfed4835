"""The pages in a real browser: log in, submit a Ray job, follow it into its queue, watch a
running job's log; sign in through the company's OpenID provider.

Drives Debian's Chromium (``apt-get install chromium``) through Playwright against
pytest-django's live server. Every test fails on an error in the browser's console, among
them any Content-Security-Policy violation. Set CALDERA_SCREENSHOT_DIR to keep screenshots
of the pages.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import requests
from django.db import connection
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.models import Job, JobEvent, State
from jobs.reads.estimate import estimates_refresh
from jobs.services import job_cancel
from jobs.usage.samples import usage_record

from ..support.chromium import launch
from ..support.jobs import RAY_JOB, running, submit_document

pytestmark = pytest.mark.browser


class Console:
    """The browser console's errors during a test; each fails the test, except those the
    test says it expects (``allow``): a page answered 403 on purpose logs one."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.expected: list[re.Pattern] = []

    def allow(self, pattern: str) -> None:
        self.expected.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.expected)]


@pytest.fixture
def console() -> Console:
    return Console()


@pytest.fixture
def browser_zone() -> str:
    """The browser's time zone; a test names another with
    ``@pytest.mark.parametrize("browser_zone", [...])``."""
    return "UTC"


@pytest.fixture
def page(console, browser_zone):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(
                viewport={"width": 1280, "height": 900}, timezone_id=browser_zone
            )
            page.set_default_timeout(5_000)
            errors = console.errors
            page.on(
                "console",
                lambda message: (
                    message.type == "error"
                    and errors.append(f"{page.url} ({message.location['url']}): {message.text}")
                ),
            )
            page.on("pageerror", lambda error: errors.append(str(error)))
            yield page
            assert not console.unexpected(), f"the browser's console: {errors}"
        finally:
            browser.close()


def screenshot(page, name: str, *, full_page: bool = True) -> None:
    folder = os.environ.get("CALDERA_SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=str(Path(folder) / name), full_page=full_page)


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


def log_in_as_alice(page, url: str) -> None:
    """Signed in through the login page in the browser's own language (its labels are
    found by their ids)."""
    page.goto(url + "/accounts/login/")
    page.locator("#id_username").fill("alice")
    page.locator("#id_password").fill("pw-alice")
    page.locator("#id_password").press("Enter")
    page.wait_for_url(re.compile(r"/$"))


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
        submit_document(member, RAY_JOB, name=f"sweep-{n}")
        submit_document(other_member, RAY_JOB, name=f"other-{n}")


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
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(live_server.url + "/jobs/?group=state")
    expect(page.locator(".list-count")).to_have_text("6 jobs")
    screenshot(page, "caldera-jobs-list.png")
    page.goto(live_server.url + "/jobs/")  # every job, and alice picks two of carol's
    page.get_by_label(re.compile(r"Select other-0")).check()
    page.get_by_label(re.compile(r"Select sweep-0")).check()
    page.get_by_label("Action").select_option("cancel")
    page.get_by_role("button", name="Apply to the selected jobs").click()
    page.get_by_role("dialog").get_by_role("button", name="Cancel 2 jobs").click()
    expect(page.locator(".messages")).to_contain_text(
        "1 cancelled; 1 refused: members cancel only their own jobs"
    )
    screenshot(page, "caldera-jobs-refused.png")

    page.get_by_role("button", name="Log out").click()
    log_in(page, live_server.url, "bob")
    page.goto(live_server.url + "/jobs/?q=other&state=queued")
    page.get_by_label("Action").select_option("cancel")
    page.get_by_role("button", name="Apply to all 3 matching").click()
    page.get_by_role("dialog").get_by_role("button", name="Cancel 3 jobs").click()
    expect(page.locator(".messages")).to_contain_text("3 cancelled")
    expect(page.get_by_text("No job matches.")).to_be_visible()
    screenshot(page, "caldera-jobs.png")


@pytest.mark.parametrize("viewport", [(1366, 900), (390, 844)], ids=["desktop", "phone"])
def test_a_bulk_cancel_asks_first_and_does_nothing_when_dismissed(
    live_server, two_sweeps, page, viewport
):
    from playwright.sync_api import expect

    width, height = viewport
    page.set_viewport_size({"width": width, "height": height})
    log_in(page, live_server.url, "bob")
    page.goto(live_server.url + "/jobs/?state=queued")
    expect(page.locator(".list-count")).to_have_text("6 jobs")
    apply_all = page.get_by_role("button", name="Apply to all 6 matching")
    apply_all.click()  # no action chosen: the browser asks for one, nothing is sent
    expect(page.get_by_role("dialog")).to_have_count(0)
    page.get_by_label("Action").select_option("cancel")

    apply_all.click()
    dialog = page.get_by_role("dialog", name="Cancel 6 jobs of 2 people in 1 queue?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("All 6 are other people's work.")
    go_back = dialog.get_by_role("link", name="Go back")
    expect(go_back).to_be_focused()  # the harmless choice first
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(apply_all).to_be_focused()  # back where the question was asked

    apply_all.click()
    expect(go_back).to_be_focused()
    go_back.click()
    expect(dialog).to_be_hidden()
    expect(apply_all).to_be_focused()
    page.reload()
    expect(page.locator(".list-count")).to_have_text("6 jobs")  # nothing was cancelled
    expect(page.locator(".messages")).to_have_count(0)


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


@pytest.fixture
def running_job(transactional_db, member):
    """alice's Ray job, running on the simulated cluster for 3 seconds: its head pod has
    written its start line, and writes its first progress line at 5 seconds."""
    return running(member, ago=3)


def test_a_running_jobs_log_lines_appear_on_its_page(live_server, running_job, page):
    from playwright.sync_api import expect

    log_in(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/jobs/{running_job.pk}/")

    lines = page.locator("#job-log pre.log")
    expect(lines).to_contain_text(f"Started rayjob-video-{running_job.pk}-head-0 on node-")
    # The section asks again every 2 s while the job runs: the next line arrives by itself.
    expect(lines).to_contain_text("step 1: 5 s of 600 s, 0%", timeout=10_000)
    expect(page.get_by_role("link", name="Download the whole log")).to_have_attribute(
        "href", f"/jobs/{running_job.pk}/log/download/"
    )
    screenshot(page, "caldera-job-log.png")


def submit_and_close(*args, **changes) -> None:
    submit_document(*args, **changes)
    connection.close()  # this thread's


@pytest.fixture
def busy_hour(transactional_db, member, intern):
    """An hour of the usage history, a sample a minute, as the queues filled: video runs a
    12-cpu job from 45 minutes ago, the interns borrow from 30 minutes ago while video's
    second job waits, and a third video job has waited for the last 15 minutes."""
    now = timezone.now()

    def minutes(first: int, last: int) -> None:
        for ago in range(first, last - 1, -1):
            usage_record(now=now - timedelta(minutes=ago))

    minutes(60, 46)
    submit_document(member, RAY_JOB, name="video-a")
    admission_cycle()
    minutes(45, 31)
    submit_document(member, RAY_JOB, name="video-b")
    submit_document(intern, RAY_JOB, name="intern-a", queue="root/interns/intern-video")
    admission_cycle()
    minutes(30, 16)
    submit_document(member, RAY_JOB, name="video-c")
    submit_document(intern, RAY_JOB, name="intern-b", queue="root/interns/intern-text")
    admission_cycle()
    minutes(15, 1)


def test_the_quota_tree_shows_bars_that_refresh_and_usage_charts(
    live_server, busy_hour, member, page
):
    from playwright.sync_api import expect

    log_in(page, live_server.url, "alice")
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(live_server.url + "/quota/?range=hour")

    video = page.locator("table.tree tbody.node").filter(has_text="root/algorithm/video")
    cpu = video.get_by_role("img", name="cpu of root/algorithm/video: used")
    expect(cpu).to_have_attribute("aria-label", re.compile("used 12 of max 14, min 12, "))
    expect(cpu.locator("rect.seg-used")).to_have_attribute("width", "85.71")  # 12 of 14
    expect(cpu).to_have_attribute("aria-label", re.compile("pending demand 24$"))
    charts = page.locator("#usage-history figure.usage-chart")
    expect(charts).to_have_count(3)
    expect(page.get_by_role("img", name="cpu of root over the last hour")).to_be_visible()
    expect(charts.first.locator("path.used-line")).to_have_attribute("d", re.compile("^M"))
    screenshot(page, "caldera-quota-tree.png")

    # The bars follow the queues by themselves: a fourth job raises the pending demand.
    # (Submitted from another thread: Playwright's loop runs in this one.)
    with ThreadPoolExecutor(1) as pool:
        pool.submit(submit_and_close, member, RAY_JOB, name="video-d").result()
    expect(cpu).to_have_attribute("aria-label", re.compile("pending demand 36$"), timeout=10_000)

    video.get_by_role("link", name="usage over time").click()
    page.get_by_role("navigation", name="Time range").get_by_role("link", name="Week").click()
    expect(page).to_have_url(re.compile(r"range=week&node=root%2Falgorithm%2Fvideo"))
    expect(
        page.get_by_role("img", name="cpu of root/algorithm/video over the last week")
    ).to_be_visible()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + "/quota/?range=hour")
    expect(video.locator(".fig-summary").first).to_be_visible()
    screenshot(page, "caldera-quota-tree-phone.png")


@pytest.fixture
def video_waiting(transactional_db, member, other_member, settings):
    """alice's first job holds 12 of video's 14 cpu; her second waits for it, backing off
    for longer than the test takes; carol's waits behind the second."""
    settings.BACKOFF_BASE_SECONDS = 600
    submit_document(member, RAY_JOB, name="video-first")
    second = submit_document(member, RAY_JOB, name="video-second")
    admission_cycle()
    submit_document(other_member, RAY_JOB, name="video-third")
    estimates_refresh()
    return second


def test_a_waiting_job_shows_its_path_and_about_when_it_starts(live_server, video_waiting, page):
    from playwright.sync_api import expect

    log_in(page, live_server.url, "alice")
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server.url}/jobs/{video_waiting.pk}/")
    expect(page.locator("p.waiting")).to_contain_text(
        "waits for cpu in root/algorithm/video: used 12 of max 14; it asks for 12"
    )
    path = page.get_by_role("table", name="Its path from its leaf to the root")
    blocking = path.locator("tr.blocks")
    expect(blocking).to_have_count(1)
    expect(blocking).to_contain_text("root/algorithm/video")
    expect(blocking).to_contain_text("blocks it")
    expect(page.locator("dd.estimate")).to_contain_text(
        re.compile(r"about 10 min: 1 running job expected to end by \d\d:\d\d")
    )
    screenshot(page, "caldera-waiting-job.png")

    # The queue page says the same of every waiting job, and when each should start.
    page.get_by_role("link", name="root-algorithm-video").first.click()
    third = page.locator("#queue-lists table.pending tbody tr").filter(has_text="video-third")
    expect(third).to_contain_text(
        re.compile(r"1 job ahead; the first job ahead, #\d+, backs off until")
    )
    expect(third.locator("td time[title^='about 20 min']")).to_have_text(re.compile(r"^\d\d:\d\d$"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/jobs/{video_waiting.pk}/")
    expect(path).to_be_visible()
    screenshot(page, "caldera-waiting-job-phone.png")


@pytest.fixture
def wide_job(transactional_db, member):
    """A job from before JOB_MAX_WORKER_GROUPS: 5,000 groups of two pods."""
    tiny = {"cpu": "10m", "memory": "1Mi"}
    job = submit_document(member, RAY_JOB, name="wide", head={"resources": tiny}, workers=[])
    job.workers = [{"name": f"g{n}", "replicas": 2, "resources": tiny} for n in range(5_000)]
    job.save(update_fields=["workers"])
    return job


def test_a_large_jobs_page_shows_a_bounded_summary_of_its_pods(live_server, wide_job, page):
    """Its page shows the first groups and how many more, at a desk and on a phone, never
    one row per pod."""
    from playwright.sync_api import expect

    log_in(page, live_server.url, "alice")
    for width, height, name in (
        (1366, 900, "caldera-large-job.png"),
        (390, 844, "caldera-large-job-phone.png"),
    ):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server.url}/jobs/{wide_job.pk}/")
        pods = page.get_by_role("table", name="Its pods")
        expect(pods.locator("tbody tr")).to_have_count(1 + 8 + 1)  # the head, 8 groups, the rest
        expect(pods.locator("tr.more")).to_contain_text("and 4992 more groups (9984 pods)")
        expect(page.get_by_text("its Kubernetes objects are at")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        screenshot(page, name)


@pytest.fixture
def stuck_leaving(transactional_db, member, settings):
    """alice's job, cancelled while running, whose objects the cluster has kept past
    LEAVING_WARN_SECONDS; the scheduler said five times that its head did not fit."""
    job = submit_document(member, RAY_JOB, name="video-stuck")
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING, dequeued_at=now)
    JobEvent.objects.create(
        job=job, created_at=now - timedelta(minutes=9), type=JobEvent.Type.WARNING,
        reason="FailedScheduling", message="0/4 nodes are available: 4 Insufficient cpu.",
        involved=f"pod/video-stuck-{job.pk}-head-x7k2p", dedup_key="k8s/series-1", count=5,
        first_at=now - timedelta(minutes=13),
    )  # fmt: skip
    job_cancel(user=member, job=job, now=now)
    late = now - timedelta(seconds=settings.LEAVING_WARN_SECONDS + 120)
    Job.objects.filter(pk=job.pk).update(leaving_since=late)
    return job


def test_a_job_stuck_leaving_says_what_to_check_and_a_repeated_event_is_one_row(
    live_server, stuck_leaving, page
):
    from playwright.sync_api import expect

    log_in(page, live_server.url, "alice")
    for width, height, name in (
        (1366, 900, "caldera-stuck-leaving.png"),
        (390, 844, "caldera-stuck-leaving-phone.png"),
    ):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server.url}/jobs/{stuck_leaving.pk}/")
        expect(page.locator("p.stuck")).to_contain_text("the cluster still has its objects")
        expect(page.locator("p.stuck code").first).to_have_text(
            f"kubectl get rayjobs.ray.io video-stuck-{stuck_leaving.pk} -n video -o yaml"
        )
        repeated = page.locator("tr.event").filter(has_text="FailedScheduling")
        expect(repeated).to_have_count(1)
        expect(repeated.locator(".repeats")).to_contain_text(re.compile(r"^5 times, first "))
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        screenshot(page, name)


def test_a_token_is_made_seen_once_used_and_revoked(live_server, transactional_db, member, page):
    """The minute a researcher spends: a submit token for one department, its secret copied
    once, a pipeline's requests with it, then revoked and refused."""
    from playwright.sync_api import expect

    page.goto(live_server.url + "/account/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("pw-alice")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Your account")).to_be_visible()
    page.get_by_label("Name").fill("train-main")
    page.get_by_label(re.compile(r"submit: read")).check()
    page.get_by_label("Only these:").check()
    page.get_by_label("algorithm").check()
    page.get_by_role("button", name="Create token").click()

    key = page.locator("#made-secret").input_value()
    screenshot(page, "account-token-made.png")
    assert key.startswith("cal_pat_")
    headers = {"Authorization": f"Token {key}"}
    jobs = live_server.url + "/api/v1/jobs/"
    assert requests.post(jobs, json=RAY_JOB, headers=headers, timeout=10).status_code == 201
    page.goto(live_server.url + "/account/")
    assert key not in page.content()
    row = page.locator("tr", has_text="train-main")
    expect(row).to_contain_text("submit")
    expect(row).to_contain_text("127.0.0.1")  # its last use, from the pipeline's address

    row.get_by_role("button", name=re.compile(r"^Revoke cal_pat_")).click()

    expect(page.get_by_role("status")).to_contain_text("Revoked")
    refused = requests.get(jobs, headers=headers, timeout=10)
    assert refused.status_code == 401
    assert refused.json()["detail"].startswith("the token was revoked on ")


def test_a_form_out_of_date_keeps_what_was_typed_and_sends_it_again(
    live_server, transactional_db, member, page, console
):
    from playwright.sync_api import expect

    # The refused form's answer is a 403, and so is the stale page's preview request.
    console.allow(r"status of 403 \(Forbidden\)|Response Status Error Code 403")

    log_in(page, live_server.url, "alice")
    page.goto(live_server.url + "/jobs/new/")
    page.get_by_label("Queue").select_option("root/algorithm/video")
    page.locator("#id_name").fill("typed-before-signing-in-again")
    page.get_by_label("Image").fill("rayproject/ray:2.36.1")
    page.get_by_label("Entrypoint (Ray)").fill("python /home/ray/samples/sample_code.py")
    page.locator("#id_head_cpu").fill("4")
    page.locator("#id_head_memory").fill("4G")
    # The preview of what was typed is answered first: a preview sent once the secret
    # changed would bring the page up to date itself, before the submit is refused.
    page.wait_for_load_state("networkidle")
    # As when alice signs in again in another tab: a new CSRF secret, the form's is stale.
    page.context.add_cookies([{"name": "csrftoken", "value": "a" * 32, "url": live_server.url}])

    page.get_by_role("button", name="Submit job").click()

    expect(page.get_by_role("heading", name="This form is out of date")).to_be_visible()
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    page.locator("summary", has_text="What you typed").click()
    expect(page.locator(".kept-fields")).to_contain_text("typed-before-signing-in-again")
    screenshot(page, "form-out-of-date.png")
    page.get_by_role("button", name="Send it again").click()

    expect(page.get_by_role("heading", name="typed-before-signing-in-again")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))  # the job, queued once


def test_a_stale_page_is_brought_up_to_date_by_its_first_refused_part(
    live_server, transactional_db, member, page, console
):
    from playwright.sync_api import expect

    console.allow(r"status of 403 \(Forbidden\)|Response Status Error Code 403")
    log_in(page, live_server.url, "alice")
    page.goto(live_server.url + "/jobs/new/")
    page.get_by_label("Queue").select_option("root/algorithm/video")
    # As when alice signs in again in another tab: a new CSRF secret, the page's is stale.
    page.context.add_cookies([{"name": "csrftoken", "value": "b" * 32, "url": live_server.url}])
    with page.expect_response(lambda r: r.url.endswith("/preview/") and r.status == 403):
        page.locator("#id_name").fill("typed-on-a-stale-page")

    # The preview asks again with the session's token: the name is there now.
    expect(page.locator("#preview")).to_contain_text("image: is required")
    expect(page.locator("#preview")).not_to_contain_text("name: is required")
    page.get_by_label("Image").fill("rayproject/ray:2.36.1")
    page.get_by_label("Entrypoint (Ray)").fill("python /home/ray/samples/sample_code.py")
    page.locator("#id_head_cpu").fill("4")
    page.locator("#id_head_memory").fill("4G")
    page.get_by_role("button", name="Submit job").click()

    expect(page.get_by_role("heading", name="typed-on-a-stale-page")).to_be_visible()


def refreshes(page, path: str, count: int) -> list[int]:
    """Waits for ``count`` more polls of the fragment at ``path``; the bytes of each answer's
    body. The browser asks with If-None-Match, and a 304's empty body reaches the page as
    the 200 it has kept, so the length of what the server sent tells them apart."""
    sent = []
    for _ in range(count):
        with page.expect_response(
            lambda response: (
                response.request.headers.get("hx-request") == "true"
                and response.url.split("?")[0].endswith(path)
            ),
            timeout=5_000,
        ) as polled:
            pass
        sent.append(int(polled.value.all_headers()["content-length"]))
    return sent


def test_focus_and_a_text_selection_survive_three_refreshes(live_server, two_sweeps, member, page):
    """The refreshing parts are morphed, not replaced: the focused link and the selected
    text stay as they were through refreshes that change nothing (304) and one that does."""
    from playwright.sync_api import expect

    log_in(page, live_server.url, "alice")
    queue_path = "/queues/root-algorithm-video/"
    page.goto(live_server.url + queue_path)
    link = page.locator("#queue-lists table.pending").get_by_role("link", name="sweep-1")
    link.focus()
    sent = refreshes(page, queue_path, 1)
    with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        pool.submit(submit_and_close, member, RAY_JOB, name="sweep-late").result()
    expect(page.locator("#queue-said")).to_have_text("7 pending, 0 in the cluster.")
    sent += refreshes(page, queue_path, 2)
    assert 0 in sent, sent  # unchanged: a 304, nothing sent
    expect(link).to_be_focused()
    assert page.evaluate("document.activeElement.textContent") == "sweep-1"

    job_path = link.get_attribute("href")
    page.goto(live_server.url + job_path)
    expect(page.locator("#job-status dd.position")).to_have_text("3")
    namespace = page.locator("#job-status dd.mono").first
    page.evaluate(
        """(element) => {
            const range = document.createRange();
            range.selectNodeContents(element);
            getSelection().removeAllRanges();
            getSelection().addRange(range);
        }""",
        namespace.element_handle(),
    )
    selected = page.evaluate("getSelection().toString()")
    assert selected == namespace.text_content()
    refreshes(page, job_path, 1)
    with ThreadPoolExecutor(1) as pool:  # one ahead of it leaves: its position changes
        pool.submit(cancel_and_close, "sweep-0").result()
    expect(page.locator("#job-said")).to_have_text("Queued, position 2 in root-algorithm-video.")
    refreshes(page, job_path, 2)
    assert page.evaluate("getSelection().toString()") == selected


def cancel_and_close(name: str) -> None:
    job = Job.objects.get(name=name)
    job_cancel(user=job.owner, job=job)
    connection.close()  # this thread's


@pytest.fixture
def backing_off(transactional_db, member):
    """alice's job, backing off for ten minutes after a try that found no room."""
    job = submit_document(member, RAY_JOB, name="backs-off")
    Job.objects.filter(pk=job.pk).update(
        state=State.BACKOFF,
        next_attempt_at=timezone.now() + timedelta(minutes=10),
        backoff_reason="no room in the cluster",
        last_tried_at=timezone.now(),
    )
    return Job.objects.select_related("queue").get(pk=job.pk)


@pytest.mark.parametrize("browser_zone", ["Asia/Shanghai"])
def test_times_are_in_the_browsers_zone_with_relative_words_and_countdowns(
    live_server, backing_off, page
):
    """A browser in Shanghai: the first page tells Caldera its zone and is shown again in
    it; times are exact on hover and for screen readers, in words ("now", "in 9:59") for
    the eye; the words move on, and the refreshing part still answers 304."""
    from playwright.sync_api import expect

    page.goto(live_server.url + "/accounts/login/")
    expect(page.locator('meta[name="caldera-zone"]')).to_have_attribute("content", "Asia/Shanghai")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    assert cookies["caldera_tz"] == "Asia/Shanghai"
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("pw-alice")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("a.zone")).to_have_text("Times in Asia/Shanghai, UTC+08:00")

    page.clock.install()  # the page's clock, moved on below by the test
    job_path = f"/jobs/{backing_off.pk}/"
    page.goto(live_server.url + job_path)
    shanghai = ZoneInfo("Asia/Shanghai")
    enqueued = backing_off.enqueued_at.astimezone(shanghai)
    timeline = page.locator("dl.timeline time").first
    expect(timeline).to_have_text(f"{enqueued:%Y-%m-%d %H:%M:%S}")
    expect(timeline).to_have_attribute(
        "title", f"{enqueued:%A %Y-%m-%d %H:%M:%S} (Asia/Shanghai, UTC+08:00)"
    )

    event = page.locator("#events tbody time[data-relative]").first
    said = event.locator(".time-seen")
    expect(said).to_have_text(re.compile(r"^(now|\d+ seconds ago)$"))
    expect(said).to_have_attribute("aria-hidden", "true")
    expect(event.locator(".visually-hidden")).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d "))
    countdown = page.locator("p.waiting .clock time[data-countdown] .time-seen")
    next_try = backing_off.next_attempt_at.astimezone(shanghai)
    expect(countdown.locator("xpath=..")).to_have_attribute(
        "title", re.compile(rf"^\w+ {next_try:%Y-%m-%d %H:%M:%S} \(Asia/Shanghai")
    )
    expect(countdown).to_have_text(re.compile(r"^in (10:00|9:\d\d)$"))
    before, left = said.text_content(), countdown.text_content()

    page.clock.run_for(20_000)
    expect(said).not_to_have_text(before)
    expect(said).to_have_text(re.compile(r"^\d+ seconds ago$"))
    expect(countdown).not_to_have_text(left)
    expect(countdown).to_have_text(re.compile(r"^in 9:\d\d$"))
    page.clock.fast_forward("10:00")  # past the next try: the countdown ends
    expect(countdown).to_have_text("now")
    expect(said).to_have_text("10 minutes ago")

    # Polled again on the real clock: unchanged answers (304) leave the words standing.
    page.clock.resume()
    sent = refreshes(page, job_path, 2)
    assert 0 in sent, sent
    expect(event.locator(".time-seen")).to_have_count(1)
    expect(said).to_have_text("10 minutes ago")
    expect(countdown).to_have_text("now")

    page.clock.set_system_time(timezone.now())  # back to the real time
    page.goto(f"{live_server.url}/queues/{backing_off.queue.name}/")
    row = page.locator("#queue-lists table.pending tbody tr").filter(has_text="backs-off")
    expect(row.locator("time[data-countdown] .time-seen")).to_have_text(
        re.compile(r"^in \d+:\d\d$")
    )
    expect(row.locator("time[data-relative] .time-seen")).to_have_text(
        re.compile(r"^(now|\d+ (seconds?|minutes?) ago)$")
    )
    # The exact time kept for screen readers stays inside the table's own scroll box.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(row.locator("time[data-relative] .time-seen")).to_have_count(1)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


@pytest.mark.parametrize(("width", "height"), [(1366, 900), (390, 844)])
def test_a_browser_asking_for_chinese_signs_in_and_reads_its_pages_in_chinese(
    live_server, transactional_db, member, page, console, width, height
):
    from playwright.sync_api import expect

    console.allow(r"404 \(Not Found\)")  # the missing page, asked for on purpose
    page.set_extra_http_headers({"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"})
    page.set_viewport_size({"width": width, "height": height})
    page.goto(live_server.url + "/accounts/login/")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.get_by_label("用户名").fill("alice")
    page.get_by_label("密码").fill("pw-alice")
    page.get_by_role("button", name="登录").click()
    expect(page.get_by_role("link", name="仪表板")).to_be_visible()

    page.goto(live_server.url + "/account/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("你的账户")
    expect(page.get_by_role("button", name="创建令牌")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, f"account-zh-{width}.png")

    page.goto(live_server.url + "/no/such/page/")
    expect(page.get_by_role("heading", level=1)).to_have_text("未找到")
    expect(page.get_by_role("link", name="返回仪表板")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.get_by_role("button", name="退出登录").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("登录")


@pytest.mark.parametrize(
    ("viewport", "locale"),
    [((1366, 900), "en-US"), ((390, 844), "en-US"), ((1366, 900), "zh-CN"), ((390, 844), "zh-CN")],
    ids=["desktop-en", "phone-en", "desktop-zh", "phone-zh"],
)
def test_a_training_job_mounts_its_dataset_shared_memory_and_a_secret_from_the_form(
    live_server, transactional_db, member, viewport, locale
):
    from playwright.sync_api import expect, sync_playwright

    width, height = viewport
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, locale=locale)
            log_in_as_alice(page, live_server.url)
            page.goto(live_server.url + "/jobs/new/")
            page.locator("#id_queue").select_option("root/algorithm/text")
            page.locator("#id_kind").select_option("pytorch")
            page.locator("#id_name").fill("resnet-ddp")
            page.locator("#id_image").fill("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime")
            page.locator("#id_command").fill("torchrun --nproc-per-node 1 train.py")
            for field, value in (("cpu", "2"), ("memory", "8Gi"), ("gpu", "1")):
                page.locator(f"#id_head_{field}").fill(value)
                page.locator(f"#id_worker_{field}").fill(value)
            page.locator("#id_head_memory_limit").fill("16Gi")
            page.locator("#id_worker_memory_limit").fill("16Gi")
            page.locator("#id_claims").fill("datasets:/data:ro\ncheckpoints:/ckpt")
            page.locator("#id_shm").fill("8Gi")
            page.locator("#id_secret_env").fill("HF_TOKEN=hf-credentials/token")
            preview = page.locator("#preview pre.manifest")
            expect(preview).to_contain_text("claimName: datasets")
            expect(preview).to_contain_text("medium: Memory")
            expect(preview).to_contain_text("secretKeyRef")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            language = "zh" if locale.startswith("zh") else "en"
            screenshot(page, f"submit-training-{language}-{width}.png")
            page.locator("#id_shm").scroll_into_view_if_needed()
            page.evaluate("window.scrollBy(0, -120)")
            screenshot(page, f"submit-storage-{language}-{width}.png", full_page=False)
            page.locator("form.submit-form button.primary").click()
            expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
            manifest = page.locator("pre.manifest").first
            expect(manifest).to_contain_text("claimName: checkpoints")
            expect(manifest).to_contain_text("sizeLimit: 8Gi")
            expect(manifest).to_contain_text("name: hf-credentials")
        finally:
            browser.close()
    job = Job.objects.get()
    assert (job.shm, job.secret_env["HF_TOKEN"]) == ("8Gi", "hf-credentials/token")


@pytest.mark.parametrize(
    ("viewport", "locale"),
    [((1366, 900), "en-US"), ((390, 844), "zh-CN")],
    ids=["desktop-en", "phone-zh"],
)
def test_a_team_s_rayjob_file_is_submitted_as_it_is_and_shown_as_sent(
    live_server, transactional_db, member, viewport, locale
):
    from playwright.sync_api import expect, sync_playwright

    from ..support import k8s_schema

    text = (k8s_schema.SAMPLES / "kuberay-ray-job.volcano-scheduler-queue.yaml").read_text()
    width, height = viewport
    language = "zh" if locale.startswith("zh") else "en"
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": width, "height": height}, locale=locale)
            log_in_as_alice(page, live_server.url)
            page.goto(live_server.url + "/jobs/new/objects/")
            page.locator("#id_queue").select_option("root/algorithm/video")
            page.locator("#id_objects").fill(text)
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            screenshot(page, f"submit-objects-{language}-{width}.png", full_page=False)
            page.locator("form.submit-objects button.primary").click()
            expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
            sent = page.locator("section.sent")
            expect(sent.locator("ul.replaced")).to_contain_text("kuberay-test-queue")
            expect(sent.locator("pre.manifest")).to_contain_text("rayVersion: 2.52.0")
            assert page.evaluate("document.documentElement.scrollWidth") <= width
            sent.scroll_into_view_if_needed()
            screenshot(page, f"job-as-sent-{language}-{width}.png", full_page=False)
        finally:
            browser.close()
