"""The accounting page in a real browser: both themes and both languages, at a desktop's
1366x900 and a phone's 390x844 (its table scrolls inside its own region, never the page),
axe-core finding nothing serious, and its CSV export downloading the table's rows, of the
whole tree and of one node's subtree."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pytest

from ..support.axe import (
    DESKTOP,
    PHONE,
    THEMES,
    background_is_dark,
    described,
    serious_violations,
    signed_in,
)
from ..support.ledger import write_ledger

pytestmark = pytest.mark.browser

LOOKS = [(THEMES[0], "en-US"), (THEMES[1], "en-US"), (THEMES[0], "zh-CN"), (THEMES[2], "zh-CN")]
QUERIES = [
    "?from=2026-10-01&to=2026-10-31&group=department&every=month",
    "?from=2026-10-01&to=2026-10-03&group=person&every=day",
]


@pytest.fixture
def ledger(transactional_db, member, intern, outsider, staff):
    """Made before the browser starts (its event loop would refuse the database)."""
    return write_ledger(member=member, intern=intern, outsider=outsider)


@pytest.mark.parametrize(
    ("theme", "locale"), LOOKS, ids=[f"{theme.name}-{locale}" for theme, locale in LOOKS]
)
def test_the_page_reads_in_every_look_and_size(live_server, ledger, browser, theme, locale):
    url = live_server.url
    found = {}
    for viewport in (DESKTOP, PHONE):
        opened = signed_in(browser, url, theme, viewport, "root-admin", locale=locale)
        page = opened.page
        page.goto(url + "/")
        page.locator("nav a[href='/accounting/']").click()
        assert page.locator("h1").inner_text() in ("Accounting", "用量核算")
        for query in QUERIES:
            page.goto(url + "/accounting/" + query)
            assert background_is_dark(page) == (theme.name != "light")
            assert page.locator("html").get_attribute("lang") == (
                "zh-hans" if locale.startswith("zh") else "en"
            )
            assert page.locator("table.accounting tbody tr").count() >= 3
            assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
            folder = os.environ.get("CALDERA_SCREENSHOT_DIR")
            if folder:
                name = (
                    f"accounting-{theme.name}-{locale}-{viewport['width']}-{QUERIES.index(query)}"
                )
                page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
            violations = serious_violations(page)
            if violations:
                found[f"{query} at {viewport['width']}"] = described(violations)
        opened.context.close()
        assert not opened.unexpected(), opened.errors
    assert not found, "\n".join(f"{name}:\n{text}" for name, text in found.items())


def test_the_form_and_the_csv_export(live_server, ledger, browser):
    url = live_server.url
    opened = signed_in(browser, url, THEMES[0], DESKTOP, "root-admin")
    page = opened.page
    page.goto(url + "/accounting/")
    page.locator("input[name=from]").fill("2026-10-01")
    page.locator("input[name=to]").fill("2026-10-31")
    page.locator("select[name=group]").select_option("leaf")
    page.locator("form.filters button.primary").click()
    page.wait_for_url("**/accounting/?*group=leaf*")
    assert page.locator("table.accounting th.mono", has_text="root/algorithm/video").count() == 1
    with page.expect_download() as download:
        page.locator(".exports a", has_text="CSV").click()
    text = Path(download.value.path()).read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {row["group"] for row in rows} >= {"root/algorithm/video", "root/interns/intern-video"}
    page.locator("select[name=node]").select_option("root/infrastructure")
    page.locator("form.filters button.primary").click()
    page.wait_for_url("**/accounting/?*node=root%2Finfrastructure*")
    groups = page.locator("table.accounting tbody th.mono").all_inner_texts()
    assert groups == ["root/infrastructure/devops"]
    with page.expect_download() as download:
        page.locator(".exports a", has_text="CSV").click()
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    assert [row["group"] for row in rows] == ["root/infrastructure/devops"]
    page.goto(url + "/accounting/?from=2026-10-05&to=2026-10-01")
    assert page.locator(".errors").inner_text().startswith("to")
    opened.context.close()
