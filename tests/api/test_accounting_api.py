"""GET /api/v1/accounting/: the accounting as JSON and CSV, its refusals naming the
parameter, and who sees what (staff everything, a manager their departments, a member
their own jobs)."""

from __future__ import annotations

import csv
import io
import json
from datetime import date

import pytest

from jobs.usage.accounting import accounting_report, visibility_for
from jobs.usage.accounting_out import AccountingOut, report_out, row_out

from ..support.ledger import write_ledger

pytestmark = pytest.mark.django_db
URL = "/api/v1/accounting/"
OCTOBER = {"from": "2026-10-01", "to": "2026-10-31"}


@pytest.fixture
def ledger(member, intern, outsider):
    return write_ledger(member=member, intern=intern, outsider=outsider)


def test_it_answers_gpu_hours_of_a_department_in_a_month(api, staff, ledger):
    response = api(staff).get(URL, {**OCTOBER, "group": "department", "every": "month"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["from"] == "2026-10-01" and body["to"] == "2026-10-31"
    rows = {row["group"]: row for row in body["rows"]}
    infrastructure = rows["infrastructure"]
    # oscar's 3 GPUs from 09:00 on the 2nd, still held: to the end of October (now is past).
    assert infrastructure["held_hours"]["nvidia.com/gpu"] == 3 * (15 + 29 * 24)
    assert infrastructure["start"] == "2026-10-01"
    assert rows["algorithm"]["jobs"] == {"succeeded": 1, "failed": 0, "cancelled": 1}
    assert rows["algorithm"]["min_hours"]["cpu"] == 32 * 31 * 24
    assert rows["interns"]["preemptions"] == 1
    assert rows["interns"]["wait_p90_seconds"] == 60


def test_csv_parses_and_has_the_json_s_rows(api, staff, ledger):
    client = api(staff)
    query = {**OCTOBER, "group": "leaf", "every": "day"}
    rows = client.get(URL, query).json()["rows"]
    response = client.get(URL, {**query, "format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    parsed = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["start"], r["group"]) for r in parsed] == [(r["start"], r["group"]) for r in rows]
    for line, row in zip(parsed, rows, strict=True):
        assert float(line["held_hours[cpu]"]) == row["held_hours"]["cpu"]
        assert int(line["jobs_succeeded"]) == row["jobs"]["succeeded"]
    by_accept = client.get(URL, query, HTTP_ACCEPT="text/csv")
    assert by_accept.content == response.content


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"from": "2026-13-01"}, "from"),
        ({"to": "yesterday"}, "to"),
        ({"from": "2026-10-02", "to": "2026-10-01"}, "to"),
        ({"from": "2020-01-01", "to": "2026-01-01", "every": "day"}, "to"),
        ({"from": "1990-01-01", "to": "2026-01-01", "every": "month"}, "from"),
        ({"from": "2010-01-01", "to": "2026-01-01", "every": "month"}, "to"),
        ({"from": "9999-12-31"}, "from"),
        ({"from": "2026-10-01", "to": "9999-12-31", "every": "month"}, "to"),
        ({"group": "team"}, "group"),
        ({"every": "week"}, "every"),
        ({"format": "xml"}, "format"),
        ({"format": ""}, "format"),
        ({"node": "root/nowhere"}, "node"),
        ({"node": "r" * 501}, "node"),
    ],
)
def test_bad_input_is_refused_naming_the_parameter(api, member, query, field):
    response = api(member).get(URL, query)
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("application/json")
    assert list(response.json()) == [field]


def test_a_refusal_is_json_though_csv_was_asked_for(api, member):
    response = api(member).get(URL, {"to": "nope", "format": "csv"})
    assert response.status_code == 400
    assert list(response.json()) == ["to"]


def test_who_sees_what(api, staff, manager, member, other_member, intern, ledger):
    def people(user):
        answer = api(user).get(URL, {**OCTOBER, "group": "person"})
        assert answer.status_code == 200
        return {row["group"] for row in answer.json()["rows"]}

    assert people(staff) == {"alice", "ian", "oscar"}
    assert people(manager) == {"alice"}  # the algorithm department's jobs
    assert people(member) == {"alice"}  # her own
    assert people(other_member) == set()  # carol has none, and sees no one else's
    assert people(intern) == {"ian"}


def test_a_node_narrows_the_answer_and_its_csv_s_name(api, staff, ledger):
    client = api(staff)
    query = {**OCTOBER, "group": "person", "node": "root/infrastructure"}
    body = client.get(URL, query).json()
    assert [row["group"] for row in body["rows"]] == ["oscar"]
    everyone = {
        row["group"]: row for row in client.get(URL, {**OCTOBER, "group": "person"}).json()["rows"]
    }
    assert body["rows"][0] == everyone["oscar"]
    response = client.get(URL, {**query, "format": "csv"})
    assert (
        "accounting-2026-10-01-2026-10-31-root.infrastructure-person-month.csv"
        in response["Content-Disposition"]
    )


def test_a_node_does_not_widen_what_a_reader_sees(api, manager, ledger):
    answer = api(manager).get(URL, {**OCTOBER, "group": "person", "node": "root/infrastructure"})
    assert answer.status_code == 200 and answer.json()["rows"] == []


def test_it_needs_a_signed_in_person(client):
    assert client.get(URL).status_code in (401, 403)


def test_a_refusal_answers_in_the_client_s_language(api, member):
    response = api(member).get(
        URL, {"from": "2026-10-05", "to": "2026-10-01"}, HTTP_ACCEPT_LANGUAGE="zh-Hans"
    )
    assert response.status_code == 400
    assert response.json() == {"to": ["必须不早于 from（2026-10-05）"]}


def test_the_answer_is_what_its_declared_serializer_would_write(staff, ledger):
    """The answer is written without the serializer, for speed; the schema states it with
    the serializer: both give the same document."""
    report = accounting_report(
        since=date(2026, 10, 1),
        until=date(2026, 10, 31),
        group="department",
        every="day",
        visibility=visibility_for(staff),
    )
    declared = AccountingOut(
        {
            "since": report.since,
            "until": report.until,
            "group": report.group,
            "every": report.every,
            "computed_to": report.computed_to,
            "resources": report.resources,
            "rows": [row_out(row) for row in report.rows],
        }
    ).data
    assert report.rows and json.loads(json.dumps(declared)) == report_out(report)
