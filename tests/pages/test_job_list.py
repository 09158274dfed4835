"""The jobs list: one filter, sort and keyset page for /jobs/ and GET /api/v1/jobs/."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext

from jobs.document.validation import JobInvalid
from jobs.models import Job, State
from jobs.reads.listing import API_QUERY, PAGE_QUERY, JobQuery, job_list
from jobs.reads.listing import parse_query as parse

from ..support.jobs import PYTORCH_JOB, RAY_JOB, submit_document

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"


@pytest.fixture
def jobs(member, other_member, manager, outsider):
    """Fifteen jobs of algorithm's people in two queues and two kinds, one of outsider's."""
    made = []
    for n in range(15):
        owner = [member, other_member, manager][n % 3]
        document = RAY_JOB if n % 2 == 0 else PYTORCH_JOB
        made.append(submit_document(owner, document, name=f"sweep-{n % 4}", priority=-(n % 5)))
    Job.objects.filter(pk__in=[made[0].pk, made[5].pk]).update(state=State.SUCCEEDED)
    Job.objects.filter(pk=made[7].pk).update(created_at=datetime(2026, 1, 10, 12, 0, tzinfo=UTC))
    submit_document(outsider, RAY_JOB, queue="root/infrastructure/devops", name="theirs")
    return made


def parse_query(params: dict) -> JobQuery:
    """The query of the jobs page's URL with ``params``."""
    return parse(params, declared=PAGE_QUERY)


def ids(user, **params) -> list[int]:
    return [job.pk for job in job_list(user, parse_query(params)).jobs]


def everything(user, **params) -> list[int]:
    """Every page of a query, followed through its cursors."""
    query, seen = parse_query({**params, "limit": "4"}), []
    while query is not None:
        page = job_list(user, query)
        seen += [job.pk for job in page.jobs]
        query = page.next
    return seen


def test_each_filter_narrows_to_the_jobs_it_names(jobs, member, manager):
    mine = [j.pk for j in jobs if j.owner_id == member.pk]
    everyone = sorted((j.pk for j in jobs), reverse=True)
    assert ids(member) == everyone[:50]  # outsider's job is not algorithm's to see
    assert ids(member, mine="1") == sorted(mine, reverse=True)
    assert ids(member, owner="alice") == sorted(mine, reverse=True)
    assert ids(member, owner="alice,bob") == sorted(
        (j.pk for j in jobs if j.owner_id in (member.pk, manager.pk)), reverse=True
    )
    assert ids(member, state="succeeded") == [jobs[5].pk, jobs[0].pk]
    assert ids(member, state="queued,succeeded") == everyone
    text = [j.pk for j in jobs if j.queue.name == "root-algorithm-text"]
    assert ids(member, queue="root-algorithm-text") == sorted(text, reverse=True)
    assert ids(member, queue="root/algorithm/text") == sorted(text, reverse=True)
    assert ids(member, kind="pytorch") == sorted(text, reverse=True)
    assert ids(member, runtime="kuberay") == ids(member, kind="ray")
    assert ids(member, priority_min="-1", priority_max="0") == sorted(
        (j.pk for j in jobs if j.priority >= -1), reverse=True
    )
    assert ids(member, q="SWEEP-3") == sorted(
        (j.pk for j in jobs if j.name == "sweep-3"), reverse=True
    )
    assert ids(member, submitted_before="2026-01-10") == [jobs[7].pk]  # the whole day
    assert ids(member, submitted_before="2026-01-10T11:00:00Z") == []
    assert jobs[7].pk not in ids(member, submitted_after="2026-01-11")


@pytest.mark.parametrize(
    "sort", ["submitted", "-submitted", "name", "-name", "priority", "-priority", "owner",
             "-owner", "queue", "state", "-kind", "runtime"],
)  # fmt: skip
def test_every_sort_pages_through_every_job_once_in_its_order(jobs, member, sort):
    column = sort.lstrip("-")
    key = {
        "submitted": lambda j: j.pk,
        "name": lambda j: (j.name, j.pk),
        "priority": lambda j: (j.priority, j.pk),
        "owner": lambda j: (j.owner.username, j.pk),
        "queue": lambda j: (j.queue.name, j.pk),
        "state": lambda j: (j.state, j.pk),
        "kind": lambda j: (j.kind, j.pk),
        "runtime": lambda j: (j.runtime, j.pk),
    }[column]
    expected = [j.pk for j in sorted(Job.objects.filter(pk__in=[j.pk for j in jobs]), key=key)]
    if sort.startswith("-"):
        expected.reverse()
    assert everything(member, sort=sort) == expected


def test_a_deep_page_costs_what_the_first_costs(jobs, member):
    first = parse_query({"limit": "2"})
    deep = job_list(member, parse_query({"limit": "2"})).next
    for _ in range(4):
        deep = job_list(member, deep).next
    captured_sql = []
    for query in (first, deep):
        with CaptureQueriesContext(connection) as captured:
            job_list(member, query)
        captured_sql.append([q["sql"] for q in captured.captured_queries])
    assert len(captured_sql[0]) == len(captured_sql[1])  # the same queries
    assert not any("OFFSET" in sql for sqls in captured_sql for sql in sqls)
    assert any("ROW(" in sql for sql in captured_sql[1])  # the deep page starts after a row


def test_groups_count_what_the_filter_matches(jobs, member):
    page = job_list(member, parse_query({"group": "state"}))
    assert page.groups == [("queued", 13), ("succeeded", 2)]
    page = job_list(member, parse_query({"group": "queue", "kind": "ray"}))
    assert page.groups == [("root-algorithm-video", 8)]


@pytest.mark.parametrize(
    ("params", "field", "reason"),
    [
        ({"state": "sleeping"}, "state", "unknown state 'sleeping'"),
        ({"state": "queued,"}, "state", "has an empty value in 'queued,'"),
        ({"kind": "tensorflow"}, "kind", "unknown kind 'tensorflow'"),
        ({"priority_min": "high"}, "priority_min", "must be an integer, got 'high'"),
        ({"priority_max": "1" * 30}, "priority_max", "must be at most 999999999"),
        ({"submitted_after": "yesterday"}, "submitted_after", "is not a date"),
        ({"submitted_after": "2026-11-24T10:00"}, "submitted_after", "with its offset"),
        ({"submitted_before": "2026-02-30"}, "submitted_before", "is not a date"),
        ({"sort": "size"}, "sort", "must be one of submitted, name,"),
        ({"after": "not-a-cursor"}, "after", "not a cursor this list gave"),
        ({"q": "x" * 101}, "q", "at most 100 characters"),
        ({"mine": "banana"}, "mine", "must be one of 1, true, 0, false, not 'banana'"),
        ({"limit": "-3"}, "limit", "must be at least 1, got '-3'"),
        ({"limit": "501"}, "limit", "must be at most 500, got '501'"),
        ({"limit": ""}, "limit", "is empty"),
        ({"limit": ["5", "6"]}, "limit", "is given 2 times; give it once"),
    ],
)
def test_it_names_a_bad_parameter_with_its_reason(params, field, reason, api, member, client):
    for declared in (API_QUERY, PAGE_QUERY):
        with pytest.raises(JobInvalid) as refused:
            parse(QueryDict(urlencode(params, doseq=True)), declared=declared)
        assert reason in refused.value.errors[field][0]
    answer = api(member).get(JOBS, params)
    assert answer.status_code == 400 and reason in str(answer.json()[field])
    client.force_login(member)
    page = client.get("/jobs/", params)
    assert page.status_code == 400 and reason in html.unescape(page.content.decode())


def test_it_names_a_bad_group_on_the_page_and_an_offset_in_the_api(api, member, client):
    client.force_login(member)
    page = client.get("/jobs/", {"group": "owner"})
    assert page.status_code == 400 and "not 'owner'" in html.unescape(page.content.decode())
    answer = api(member).get(JOBS, {"offset": "-1"})
    assert answer.json() == {"offset": ["must be at least 0, got '-1'"]}


def test_it_reads_the_empty_fields_of_the_pages_form_as_not_filled_in(jobs, client, member):
    client.force_login(member)
    form = {name: "" for name in ("q", "owner", "queue", "kind", "runtime", "priority_min")}

    page = client.get("/jobs/", {**form, "submitted_after": "", "group": "", "state": "queued"})

    assert page.status_code == 200
    assert "13 jobs" in page.content.decode()
    page = client.get("/jobs/", {**form, "limit": ""})
    assert page.status_code == 400 and "is empty" in page.content.decode()


def test_a_cursor_of_another_sort_is_refused(jobs, member):
    by_name = job_list(member, parse_query({"sort": "name", "limit": "2"})).next
    cursor = by_name.params()["after"]
    with pytest.raises(JobInvalid, match="not a cursor of this sort"):
        parse_query({"sort": "priority", "after": cursor})
    with pytest.raises(JobInvalid, match="not a cursor of this sort"):
        parse({"sort": "priority", "after": cursor}, declared=API_QUERY)


def test_the_api_pages_by_cursor_with_the_pages_filters(jobs, api, member):
    client = api(member)
    seen, url = [], f"{JOBS}?kind=ray&sort=-priority&limit=3"
    while url:
        page = client.get(url).json()
        assert page["count"] == 8
        seen += [job["id"] for job in page["results"]]
        url = page["next"]
    assert seen == everything(member, kind="ray", sort="-priority")
    legacy = client.get(f"{JOBS}?kind=ray&offset=3&limit=3").json()
    assert [job["id"] for job in legacy["results"]] == ids(member, kind="ray")[3:6]


def test_the_jobs_page_lists_filters_sorts_groups_and_pages(jobs, client, member):
    client.force_login(member)
    page = client.get("/jobs/", {"kind": "pytorch", "group": "state", "limit": "3"})
    text = page.content.decode()
    assert page.status_code == 200
    assert "7 jobs" in text
    assert text.count('href="/jobs/') >= 3
    assert 'value="pytorch" selected' in text
    assert "Next page" in text and "after=" in text
    assert "/jobs/?state=queued&amp;kind=pytorch&amp;limit=3" in text  # a group narrows
    assert "sort=name" in text  # the column's link
    following = JobQuery().url("/jobs/", sort="name")
    assert following == "/jobs/?sort=name"
    assert client.get("/jobs/", {"state": ["queued", "succeeded"]}).status_code == 200


def test_counting_stops_past_its_bound(jobs, member, settings, monkeypatch):
    monkeypatch.setattr("jobs.reads.listing.COUNT_MAX", 10)
    page = job_list(member, parse_query({}))
    assert (page.count, page.more) == (10, True)
    page = job_list(member, parse_query({"kind": "ray"}))
    assert (page.count, page.more) == (8, False)


def test_grouped_rows_sit_together_under_their_groups_heading(jobs, client, member):
    client.force_login(member)

    text = client.get("/jobs/", {"group": "state"}).content.decode()

    headings = re.findall(
        r'<th colspan="10" scope="rowgroup">(\w+) <span class="count">(\d+)', text
    )
    assert headings == [("Queued", "13"), ("Succeeded", "2")]
    queued, succeeded = text.index(">Queued <"), text.index(">Succeeded <")
    rows = [m.start() for m in re.finditer(r'name="ids" value="(\d+)"', text)]
    assert len(rows) == 15
    assert sum(queued < row < succeeded for row in rows) == 13
    assert sum(row > succeeded for row in rows) == 2
    # Every page of a grouped list keeps to the group's order.
    assert everything(member, group="queue") == sorted(
        everything(member), key=lambda pk: (Job.objects.get(pk=pk).queue.name, pk)
    )
