"""The themes in a real browser: the person's choice and the system's scheme paint the
pages, and axe-core finds nothing serious on any main page in either theme.

Each check is its own browser context (tests/support/axe.py): the system's scheme is
emulated there, the person signs in and, for a chosen theme, chooses it on their page.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.fair_share import fair_share_record
from jobs.reads.estimate import estimates_refresh
from jobs.services import job_cancel
from jobs.usage.samples import usage_record
from queues.services import tree_apply

from ..support.axe import (
    DESKTOP,
    PHONE,
    THEMES,
    Opened,
    admin_pages,
    background_is_dark,
    choose,
    described,
    main_pages,
    serious_violations,
    signed_in,
)
from ..support.jobs import RAY_JOB, submit_document
from ..support.trees import seed_tree_document

pytestmark = pytest.mark.browser


@pytest.fixture
def busy(transactional_db, member, other_member, manager, settings):
    """What the main pages show when they are in use: a running job with its events, one
    backing off behind it, one waiting behind that, one cancelled; usage samples for the
    charts. Made before the browser starts (its event loop would refuse the database)."""
    settings.BACKOFF_BASE_SECONDS = 600
    # Fair sharing over time on: the quota tree page shows each node's share used.
    document = seed_tree_document()
    document["spec"]["fairSharing"] = {"halfLife": "7d"}
    tree_apply(document=document)
    usage_record()
    first = submit_document(member, RAY_JOB, name="video-first")
    second = submit_document(member, RAY_JOB, name="video-second")
    admission_cycle()
    submit_document(other_member, RAY_JOB, name="video-third")
    gone = submit_document(other_member, RAY_JOB, name="video-gone")
    job_cancel(user=other_member, job=gone)
    estimates_refresh()
    usage_record()
    fair_share_record(now=timezone.now() + timedelta(hours=12))
    return {"first": first, "second": second}


def test_a_dark_choice_or_a_dark_system_paints_the_pages_dark(live_server, busy, browser):
    url = live_server.url
    for theme, viewport in ((THEMES[0], DESKTOP), (THEMES[1], PHONE)):
        opened = signed_in(browser, url, theme, viewport)
        page = opened.page
        page.goto(url + "/queues/")
        assert background_is_dark(page) == (theme.scheme == "dark"), theme
        # The person's choice wins over the system's, either way round.
        choose(page, url, "dark" if theme.scheme == "light" else "light")
        page.goto(url + "/queues/")
        assert background_is_dark(page) == (theme.scheme == "light"), theme
        page.goto(url + "/jobs/999999999/")  # an error page too
        assert background_is_dark(page) == (theme.scheme == "light"), theme
        choose(page, url, "")  # back to the system's
        assert background_is_dark(page) == (theme.scheme == "dark"), theme
        page.goto(url + "/jobs/999999999/")
        assert page.locator("html").get_attribute("data-theme") is None
        assert background_is_dark(page) == (theme.scheme == "dark"), theme
        page.context.clear_cookies()  # signed out: the error page knows no person
        page.goto(url + "/no-such-page/")
        assert background_is_dark(page) == (theme.scheme == "dark"), theme
        assert not opened.unexpected(), opened.errors
        opened.context.close()


def test_the_admin_and_the_api_docs_follow_the_theme_a_person_chose(
    live_server, transactional_db, staff, browser
):
    """They are not Caldera's templates at the top (Django's admin, Swagger UI), so
    static/page-theme.js names the theme on them from the person's choice."""
    from playwright.sync_api import expect

    url = live_server.url
    opened = signed_in(browser, url, THEMES[1], DESKTOP, username="root-admin")  # a dark system
    page = opened.page
    page.goto(url + "/admin/")
    expect(page.locator("html")).to_have_attribute("data-theme", "auto")
    assert background_is_dark(page, "body")
    expect(page.locator(".theme-toggle")).to_have_count(0)  # the choice is on the person's page
    page.goto(url + "/api/docs/")
    expect(page.locator("html.dark-mode")).to_have_count(1)
    choose(page, url, "light")
    page.goto(url + "/admin/")
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    assert not background_is_dark(page, "body")
    page.goto(url + "/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Caldera API")
    expect(page.locator("html.dark-mode")).to_have_count(0)
    assert not opened.unexpected(), opened.errors
    opened.context.close()


# Each theme in English, and the two ways to be dark again in Chinese (a browser that asks
# for it): every main page in both languages and both themes.
LOOKS = [(theme, "en-US") for theme in THEMES] + [(THEMES[0], "zh-CN"), (THEMES[1], "zh-CN")]
# The screenshots in docs/screenshots (and the README): (page, theme, language, width).
SHOWN = {
    *((page, "light", "en", 1366) for page in ("dashboard", "jobs", "job", "queue")),
    *((page, "dark-system", "zh", 1366) for page in ("dashboard", "jobs", "job", "queue")),
    ("job", "light", "zh", 390), ("queue", "light", "zh", 390),
    ("job", "dark-system", "en", 390), ("jobs", "dark-system", "en", 390),
}  # fmt: skip


def shot(page, visit: str, theme, locale: str, viewport: dict) -> None:
    """With CALDERA_SCREENSHOT_DIR set, the page as it looks now, for docs/screenshots."""
    folder = os.environ.get("CALDERA_SCREENSHOT_DIR")
    language = "zh" if locale.startswith("zh") else "en"
    look = (visit, theme.name, language, viewport["width"])
    if folder and look in SHOWN:
        page.screenshot(path=str(Path(folder) / ("-".join(map(str, look)) + ".png")))


@pytest.mark.parametrize(
    ("theme", "locale"), LOOKS, ids=[f"{theme.name}-{locale}" for theme, locale in LOOKS]
)
def test_axe_finds_nothing_serious_on_the_main_pages(live_server, busy, browser, theme, locale):
    from playwright.sync_api import expect

    url = live_server.url
    pages = main_pages(job=busy["second"].pk, queue="root-algorithm-video", department="algorithm")
    found = {}
    for viewport in (DESKTOP, PHONE):
        opened = signed_in(browser, url, theme, viewport, locale=locale)
        page = opened.page
        for visit in pages:
            if viewport is PHONE and visit.name not in ("dashboard", "job", "queue", "jobs"):
                continue  # the phone's layout differs on these; the rest share the desktop's
            page.goto(url + visit.path)
            if visit.invalid:  # sent empty: the form answers with its errors
                page.locator("form.submit-form button.primary").click()
                expect(page.locator(".errors").first).to_be_visible()
            assert background_is_dark(page) == (theme.name != "light"), visit.name
            assert page.locator("html").get_attribute("lang") == (
                "zh-hans" if locale.startswith("zh") else "en"
            ), visit.name
            assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
            shot(page, visit.name, theme, locale, viewport)
            violations = serious_violations(page)
            if violations:
                found[f"{visit.name} at {viewport['width']}"] = described(violations)
        opened.context.close()
        assert not found, "\n".join(f"{name}:\n{text}" for name, text in found.items())
        assert not opened.unexpected(), opened.errors

    # The page that signs a person in, before any choice: the system's scheme.
    opened = Opened(browser, theme, DESKTOP)
    opened.page.goto(url + "/accounts/login/")
    violations = serious_violations(opened.page)
    assert not violations, described(violations)
    assert not opened.unexpected(), opened.errors
    opened.context.close()


@pytest.mark.parametrize("theme", THEMES, ids=[t.name for t in THEMES])
def test_axe_finds_nothing_serious_on_calderas_admin_pages(
    live_server, transactional_db, staff, departments, browser, theme
):
    url = live_server.url
    pages = admin_pages()
    opened = signed_in(browser, url, theme, DESKTOP, username="root-admin")
    page = opened.page
    found = {}
    for visit in pages:
        page.goto(url + visit.path)
        assert background_is_dark(page, "body") == (theme.name != "light"), visit.name
        violations = serious_violations(page)
        if violations:
            found[visit.name] = described(violations)
    opened.context.close()
    assert not found, "\n".join(f"{name}:\n{text}" for name, text in found.items())
    assert not opened.unexpected(), opened.errors
