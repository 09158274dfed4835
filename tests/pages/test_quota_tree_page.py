"""The quota tree page (bars per node and resource, refreshed by polling), the usage charts
on it and on each queue page, and the history as CSV and through the API."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.fair_share import fair_share_record
from jobs.models import USAGE_SAMPLES, UsageSample
from jobs.usage.samples import usage_record
from queues.models import DecayedUsage
from queues.services import tree_apply

from ..support.jobs import submit
from ..support.pages import HTMX, login
from ..support.trees import seed_tree_document

pytestmark = pytest.mark.django_db

VIDEO = "root/algorithm/video"


@pytest.fixture
def busy(member, intern):
    """video runs one 12-cpu job and has a second waiting; the interns (min 0) borrow 24
    cpu in their two leaves: 16 from the root's min that no department is guaranteed,
    8 from algorithm's and infrastructure's unused mins."""
    first, second = submit(member, name="first"), submit(member, name="second")
    borrowers = [
        submit(intern, name="intern-a", queue="root/interns/intern-video"),
        submit(intern, name="intern-b", queue="root/interns/intern-text"),
    ]
    result = admission_cycle()
    assert sorted(result.admitted) == sorted([first.pk, *(job.pk for job in borrowers)])
    assert result.backed_off == [second.pk]


def figures(response, path: str) -> dict[str, dict]:
    row = next(row for row in response.context["rows"] if row["node"].path == path)
    return {r["name"]: r for r in row["resources"]}


def numbers(row: dict) -> tuple:
    return tuple(row[k] for k in ("used", "min", "max", "borrowed", "lent", "free", "pending"))


def test_it_shows_every_nodes_bars_with_the_numbers(client, outsider, busy):
    response = login(client, outsider).get(reverse("quota-tree"))

    assert response.status_code == 200
    assert numbers(figures(response, VIDEO)["cpu"]) == ("12", "12", "14", "0", "0", "2", "12")
    assert numbers(figures(response, "root/interns")["cpu"]) == (
        "24", "0", "64", "24", "0", "40", "0",
    )  # fmt: skip
    # Of the 8 cpu borrowed beyond the root's unassigned 16, algorithm (20 unused) lends
    # 20/36 and infrastructure (16 unused) 16/36, rounded down.
    assert figures(response, "root/algorithm")["cpu"]["lent"] == "4.444"
    assert figures(response, "root/infrastructure")["cpu"]["lent"] == "3.555"
    assert figures(response, "root")["memory"]["pending"] == "12G"
    html = response.content.decode()
    assert (
        'aria-label="cpu of root/algorithm/video: used 12 of max 14, min 12, borrowed 0, '
        'lent 0, free 2, pending demand 12"'
    ) in html
    assert html.count('<svg class="bar"') == 27  # 9 nodes x 3 resources
    # algorithm's cpu bar, to its max of 48: 12 used, then 4.444 lent.
    assert '<rect class="seg-lent" x="25.0" width="9.26" height="9"/>' in html
    assert 'hx-trigger="every 5s"' in html
    assert "The part of its min the node does not use that its siblings use" in html


def test_a_poll_gets_only_the_bars_and_304_while_nothing_changed(client, member, busy):
    login(client, member)
    url = reverse("quota-tree") + "?node=root/algorithm&range=week"

    fragment = client.get(url, headers=HTMX)
    html = fragment.content.decode().strip()
    assert html.startswith('<div id="quota-bars"') and "<html" not in html
    assert 'hx-get="/quota/?node=root%2Falgorithm&amp;range=week"' in html
    assert 'id="usage-history"' not in html  # the charts are not polled
    etag = fragment["ETag"]

    assert client.get(url, headers=HTMX | {"If-None-Match": etag}).status_code == 304
    submit(member, name="third")
    changed = client.get(url, headers=HTMX | {"If-None-Match": etag})
    assert changed.status_code == 200
    assert (
        f"cpu of {VIDEO}: used 12 of max 14, min 12, borrowed 0, lent 0, free 2, pending demand 24"
        in (changed.content.decode())
    )


def recorded(minutes_ago: int) -> None:
    usage_record(now=timezone.now() - timedelta(minutes=minutes_ago))


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("", "cpu of root over the last hour"),  # the range that holds a young history
        ("?range=hour", "cpu of root over the last hour"),
        ("?range=day&node=root/algorithm/video", f"cpu of {VIDEO} over the last day"),
        ("?range=week&node=root/interns", "cpu of root/interns over the last week"),
    ],
)
def test_the_page_draws_a_chart_per_resource_for_each_range(client, member, busy, query, title):
    recorded(3)
    recorded(2)

    html = login(client, member).get(reverse("quota-tree") + query).content.decode()

    assert html.count('<figure class="usage-chart">') == 3
    assert f'<title id="usage-1-title">{title}</title>' in html
    assert html.count('<path class="used-line" d="M') == 3
    name = re.search(r"range=(\w+)", query)[1] if "range" in query else "hour"
    assert re.search(rf'<a href="\?[^"]*range={name}[^"]*#usage-history" aria-current', html)
    node = re.search(r"node=([\w/]+)", query)[1] if "node" in query else "root"
    assert f'<option value="{node}" selected>' in html


def test_the_page_says_when_there_are_no_samples_yet(client, member):
    html = login(client, member).get(reverse("quota-tree")).content.decode()
    assert "No samples for root over the last hour yet: Caldera records one every 60 s." in html


def test_the_chart_opens_on_the_range_that_holds_the_history(client, member, busy):
    recorded(3 * 60)  # three hours old: more than an hour's, within a day's

    html = login(client, member).get(reverse("quota-tree")).content.decode()

    assert '<title id="usage-1-title">cpu of root over the last day</title>' in html


def test_the_page_says_when_there_is_no_tree_yet(client, staff):
    response = login(client, staff).get(reverse("quota-tree") + "?range=hour")
    assert response.status_code == 200
    assert "There is no quota tree yet" in response.content.decode()
    assert 'id="usage-history"' not in response.content.decode()


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("?range=year", "range: must be one of hour, day, week, not 'year'"),
        ("?node=root/nowhere", "node: 'root/nowhere' is no node of the quota tree"),
    ],
)
def test_a_bad_node_or_range_answers_400_naming_it(client, api, member, query, named):
    login(client, member)
    page = client.get(reverse("quota-tree") + query)
    assert page.status_code == 400 and named[1:] in unescape(page.content.decode())
    table = client.get(reverse("quota-history-csv") + query)
    assert table.status_code == 400 and named in table.content.decode()
    answer = api(member).get(reverse("api-quota-history") + query)
    field, reason = named.split(": ", 1)
    assert answer.status_code == 400 and answer.json() == {field: [reason]}
    queue = client.get(reverse("queue-detail", args=["root-algorithm-video"]) + "?range=year")
    assert queue.status_code == 400


def test_the_csv_gives_each_point_with_the_apis_fields(client, member, busy):
    recorded(2)
    recorded(1)

    response = login(client, member).get(reverse("quota-history-csv") + f"?node={VIDEO}&range=hour")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert 'filename="usage-root-algorithm-video-hour.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["at", "node", "resource", "used", "min", "max", "pending", "admitted"]
    assert len(rows) == 1 + 2 * 3
    assert [row[1:] for row in rows[1:3]] == [[VIDEO, "cpu", "12", "12", "14", "12", "1"]] * 2
    assert rows[3][1:] == [VIDEO, "memory", "12000000000", "12884901888", "15032385536",
                           "12000000000", "1"]  # fmt: skip
    assert rows[1][0] < rows[2][0]


def test_the_api_gives_the_same_points_as_json(api, outsider, busy):
    recorded(1)
    UsageSample.objects.create(
        at=timezone.now() - timedelta(minutes=5), node=VIDEO, resource="cpu", used=1500,
        min=12000, max=None, pending=0, admitted=1,
    )  # fmt: skip

    response = api(outsider).get(reverse("api-quota-history") + f"?node={VIDEO}&range=hour")

    assert response.status_code == 200
    body = response.json()
    assert (body["node"], body["range"], body["step_seconds"]) == (VIDEO, "hour", 60)
    cpu = [point for point in body["points"] if point["resource"] == "cpu"]
    assert [(p["used"], p["min"], p["max"], p["pending"], p["admitted"]) for p in cpu] == [
        (1.5, 12, None, 0, 1),
        (12, 12, 14, 12, 1),
    ]
    assert cpu[0]["at"] < cpu[1]["at"] and cpu[1]["node"] == VIDEO
    # The root by default, over the last day.
    default = api(outsider).get(reverse("api-quota-history")).json()
    assert (default["node"], default["range"], default["step_seconds"]) == ("root", "day", 300)


def test_only_people_signed_in_see_the_tree_and_its_history(client, tree):
    for url in [reverse("quota-tree"), reverse("quota-history-csv")]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.get(reverse("api-quota-history")).status_code in (401, 403)


def test_the_queue_page_shows_its_leafs_charts_and_its_poll_reads_no_history(client, member):
    submit(member)
    recorded(1)
    url = reverse("queue-detail", args=["root-algorithm-video"])
    login(client, member)

    html = client.get(url + "?range=week").content.decode()
    assert f'<title id="usage-1-title">cpu of {VIDEO} over the last week</title>' in html
    assert 'href="/quota/history.csv?node=root%2Falgorithm%2Fvideo&amp;range=week"' in html
    assert '<a href="?range=hour#usage-history">' in html

    with CaptureQueriesContext(connection) as captured:
        poll = client.get(url + "?range=week", headers=HTMX).content.decode()
    assert '<section id="usage-history" class="usage-history" hx-preserve="true">' in poll
    assert "usage-chart" not in poll
    assert not any(USAGE_SAMPLES in query["sql"] for query in captured.captured_queries)


def test_the_history_endpoint_is_in_the_api_schema(client, member):
    schema = login(client, member).get(reverse("api-schema") + "?format=json").json()
    operation = schema["paths"]["/api/v1/quota-tree/history/"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"node", "range"}
    point = schema["components"]["schemas"]["UsagePoint"]["properties"]
    assert point["max"]["nullable"] is True and point["used"]["type"] == "number"


def test_with_a_half_life_each_node_shows_the_share_it_used_lately(client, member, busy):
    document = seed_tree_document()
    document["spec"]["fairSharing"] = {"halfLife": "7d"}
    document["spec"]["root"]["children"][2]["weight"] = 2  # interns
    tree_apply(document=document)
    fair_share_record(now=timezone.now() + timedelta(days=1))  # a day of what busy holds

    response = login(client, member).get(reverse("quota-tree"))
    rows = {row["node"].path: row["fair"] for row in response.context["rows"]}
    assert rows["root"] is None  # the root's share is the whole cluster, always
    # interns: weight 2 of 4 among the root's children, so half the cluster.
    assert rows["root/interns"]["share"] == "50.0%" and rows["root/interns"]["weight"] == "2"
    assert rows["root/algorithm"]["share"] == "25.0%"
    decayed = DecayedUsage.objects.get(path="root/interns").usage
    assert decayed > DecayedUsage.objects.get(path="root/algorithm").usage > 0
    assert rows["root/interns"]["used"] == f"{decayed / 0.5:.0%}"
    html = unescape(response.content.decode())
    assert "Fair sharing over time is on, with a half-life of 7d" in html
    assert f"used {rows['root/interns']['used']} of its share lately (share 50.0% of" in html


def test_without_a_half_life_the_page_shows_no_fair_share(client, member, busy):
    response = login(client, member).get(reverse("quota-tree"))
    assert all(row["fair"] is None for row in response.context["rows"])
    assert "Fair sharing over time is on" not in response.content.decode()
