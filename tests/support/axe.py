"""axe-core in the browser tests: the main pages a person reads, and what axe finds on one.

``axe.min.js`` beside this file is axe-core's own build (tests/support/README.md: its
version and source), read from the repository and never fetched. It is evaluated in the
page through Playwright, which runs it outside the page's Content-Security-Policy: the
pages keep the policy they are served with (no inline script), so what axe sees is what
a person gets.

A check is a browser context (``Opened``: a viewport, the system's colour scheme and the
browser's language, ``locale``, which it sends as Accept-Language) in which a person signs
in and may choose a theme on their page (``signed_in``), then visits ``main_pages`` or
``admin_pages``; ``serious_violations`` lists what axe finds serious or critical on each.
The helpers find what they click by its name in the HTML, not by its words, so they work
in any language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

AXE = Path(__file__).with_name("axe.min.js")
BLOCKING = ("serious", "critical")

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


@dataclass(frozen=True)
class Theme:
    """How a page comes to be light or dark: the system's scheme (``scheme``, which
    Playwright emulates as prefers-color-scheme) and the person's choice on their page
    (``chosen``: "" for none, else "light" or "dark")."""

    name: str
    scheme: str
    chosen: str = ""


THEMES = [
    Theme("light", scheme="light"),
    Theme("dark-system", scheme="dark"),
    Theme("dark-chosen", scheme="light", chosen="dark"),
]


@dataclass(frozen=True)
class Visit:
    """A page to check: its name in a failure, its path, and ``invalid``: a form on it is
    sent with nothing filled in first, so its errors are checked too."""

    name: str
    path: str
    invalid: bool = False


def main_pages(*, job: int, queue: str, department: str) -> list[Visit]:
    """Every main page of a signed-in manager: ``job`` a job's id (one with events),
    ``queue`` a queue's name, ``department`` a department's."""
    return [
        Visit("dashboard", "/"),
        Visit("jobs", "/jobs/"),
        Visit("job", f"/jobs/{job}/"),
        Visit("submit", "/jobs/new/"),
        Visit("submit with errors", "/jobs/new/", invalid=True),
        Visit("submit objects", "/jobs/new/objects/"),
        Visit("queues", "/queues/"),
        Visit("queue", f"/queues/{queue}/"),
        Visit("quota tree", "/quota/"),
        Visit("accounting", "/accounting/"),
        Visit("account", "/account/"),
        Visit("department", f"/departments/{department}/"),
        Visit("webhooks", f"/departments/{department}/webhooks/"),
        Visit("not found", "/jobs/999999999/"),
    ]


def admin_pages() -> list[Visit]:
    """Caldera's own pages in Django's admin, for staff. Not yet the change forms of a
    quota node and of a department: their rows of children and members are Django's
    tabular inlines, whose fields are named only by their column's heading, which axe
    finds critical (``label``, ``select-name``)."""
    return [
        Visit("admin", "/admin/"),
        Visit("quota nodes", "/admin/queues/quotanode/"),
        Visit("tree editor", "/admin/queues/quotanode/tree/"),
        Visit("departments", "/admin/queues/department/"),
    ]


def context_options(theme: Theme, viewport: dict, *, locale: str = "en-US") -> dict:
    """Playwright's ``browser.new_context`` arguments for a check: the system's scheme,
    the viewport, and the browser's language (its Accept-Language)."""
    return {"color_scheme": theme.scheme, "viewport": viewport, "locale": locale}


def serious_violations(page) -> list[dict]:
    """What axe finds serious or critical on the page as it is now: each violation's
    ``id``, ``impact``, ``help`` and the ``targets`` (CSS selectors) of its nodes."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    found = page.evaluate(
        """async () => {
            const result = await axe.run(document, {resultTypes: ["violations"]});
            return result.violations.map((v) => ({
                id: v.id, impact: v.impact, help: v.help,
                targets: v.nodes.map((n) => n.target.join(" ")),
                summaries: v.nodes.map((n) => n.failureSummary),
            }));
        }"""
    )
    return [v for v in found if v["impact"] in BLOCKING]


def described(violations: list[dict]) -> str:
    """The violations as lines to read in a failing test's message."""
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']}")
        for target, summary in zip(v["targets"][:5], v["summaries"][:5], strict=False):
            lines.append(f"    {target}: {' '.join((summary or '').split())[:300]}")
    return "\n".join(lines)


class Opened:
    """A page in its own browser context, its console's errors kept: each one is
    ``unexpected`` but the 404 of a page not found and the 400 of a form sent with errors,
    which the checks ask for on purpose."""

    def __init__(self, browser, theme: Theme, viewport: dict, *, locale: str = "en-US") -> None:
        self.context = browser.new_context(**context_options(theme, viewport, locale=locale))
        self.page = self.context.new_page()
        self.page.set_default_timeout(5_000)
        self.errors: list[str] = []
        self.page.on(
            "console",
            lambda m: m.type == "error" and self.errors.append(f"{self.page.url}: {m.text}"),
        )
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def unexpected(self) -> list[str]:
        expected = ("404 (Not Found)", "400 (Bad Request)")
        return [e for e in self.errors if not any(status in e for status in expected)]


def signed_in(
    browser, url: str, theme: Theme, viewport: dict, username: str = "bob", *, locale="en-US"
) -> Opened:
    """A page signed in as ``username`` (password ``pw-<username>``), with
    ``theme.chosen`` saved on their page."""
    from playwright.sync_api import expect

    opened = Opened(browser, theme, viewport, locale=locale)
    page = opened.page
    page.goto(url + "/accounts/login/")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill("pw-" + username)
    page.locator("form[action$='/accounts/login/'] button[type=submit]").click()
    expect(page.locator("header.topbar nav")).to_be_visible()
    if theme.chosen:
        choose(page, url, theme.chosen)
    return opened


def choose(page, url: str, theme: str) -> None:
    """Saves ``theme`` ("" for the system's, "light" or "dark") on the person's page."""
    from playwright.sync_api import expect

    page.goto(url + "/account/")
    page.locator(f"form.preferences input[name=theme][value='{theme}']").check()
    page.locator("form.preferences button[type=submit]").click()
    named = f'html[data-theme="{theme}"]' if theme else "html:not([data-theme])"
    expect(page.locator(named)).to_have_count(1)


def background_is_dark(page, painted: str = "html") -> bool:
    """Whether the page's background is dark (its luminance below middle grey): the root's,
    which paints the canvas on Caldera's pages, or ``painted``'s (the admin paints body)."""
    colour = page.locator(painted).evaluate(
        "(element) => getComputedStyle(element).backgroundColor"
    )
    red, green, blue, *alpha = (float(part) for part in re.findall(r"[\d.]+", colour))
    assert alpha != [0], f"{painted} has no background of its own"
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue < 128
