"""The tree editor's preview in Chromium at a desktop's and a phone's size: whose jobs
stop, in words a person reads, with nothing axe finds serious and nothing wider than the
screen; a node's page with its children within the screen too."""

from __future__ import annotations

import pytest
import yaml

from jobs.document.schema import job_parse
from jobs.engine.admission.cycle import admission_cycle
from jobs.services import job_submit
from queues import exchange

from ..support.axe import DESKTOP, PHONE, THEMES, described, serious_violations, signed_in
from ..support.jobs import RAY_JOB

pytestmark = pytest.mark.browser


@pytest.fixture
def lowered(transactional_db, member, staff) -> dict:
    """Three 4-cpu jobs of alice's running in video, and the tree with video's max lowered
    to 8 cpu (made before the browser starts: its event loop refuses the database)."""
    small = {**RAY_JOB, "workers": [], "head": {"resources": {"cpu": "4", "memory": "2Gi"}}}
    jobs = [job_submit(user=member, draft=job_parse({**small, "name": f"j{n}"})) for n in range(3)]
    admission_cycle()
    document = yaml.safe_load(exchange.tree_yaml())
    video = document["spec"]["root"]["children"][0]["children"][1]
    video["min"]["cpu"], video["max"]["cpu"] = 4, 8
    return {"text": yaml.safe_dump(document), "newest": jobs[2].pk}


@pytest.mark.parametrize(("theme", "viewport"), [(THEMES[0], DESKTOP), (THEMES[1], PHONE)])
def test_the_preview_names_whose_jobs_stop_at_each_size(
    live_server, lowered, browser, theme, viewport
):
    from playwright.sync_api import expect

    opened = signed_in(browser, live_server.url, theme, viewport, "root-admin")
    page = opened.page
    page.goto(live_server.url + "/admin/queues/quotanode/tree/")
    page.locator("#tree-document").fill(lowered["text"])
    page.get_by_role("button", name="Preview the change").click()

    preview = page.locator("section.tree-preview")
    expect(preview).to_be_visible()
    expect(preview).to_contain_text(f"#{lowered['newest']} j2 (alice, root-algorithm-video)")
    expect(preview).to_contain_text("lowered below its usage")
    expect(page.get_by_role("button", name="Apply the tree")).to_be_visible()
    assert preview.evaluate("s => s.scrollWidth <= s.clientWidth"), "the preview is too wide"
    assert preview.evaluate("s => s.getBoundingClientRect().right <= window.innerWidth + 1")
    violations = serious_violations(page)
    assert not violations, described(violations)
    assert not opened.unexpected(), opened.errors
    opened.context.close()


@pytest.fixture
def algorithm(transactional_db, tree, staff) -> int:
    return tree["root/algorithm"].pk


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_node_s_page_with_its_children_fits_the_screen(live_server, algorithm, browser, viewport):
    """Its children's table, wider than the page beside the admin's navigation, scrolls
    in its own box; every field in it has a name a screen reader says."""
    opened = signed_in(browser, live_server.url, THEMES[0], viewport, "root-admin")
    page = opened.page
    page.goto(live_server.url + f"/admin/queues/quotanode/{algorithm}/change/")
    assert page.locator("#children-group tbody tr.has_original").count() == 2
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    assert page.get_by_label("Max (ceiling) of video").count() == 1
    # The page's own errors; axe, probing this page, sets styles the policy refuses.
    assert not opened.unexpected(), opened.errors
    violations = serious_violations(page)
    assert not violations, described(violations)
    opened.context.close()
