"""The accounting page: the form, the table as the API answers it, export links, and the
refusal of a bad period in place."""

from __future__ import annotations

import pytest

from ..support.ledger import write_ledger

pytestmark = pytest.mark.django_db


@pytest.fixture
def ledger(member, intern, outsider):
    return write_ledger(member=member, intern=intern, outsider=outsider)


def test_it_shows_the_departments_of_october_with_export_links(client, staff, ledger):
    client.force_login(staff)
    response = client.get(
        "/accounting/", {"from": "2026-10-01", "to": "2026-10-31", "group": "department"}
    )
    assert response.status_code == 200
    page = response.content.decode()
    for name in ("algorithm", "interns", "infrastructure", "nvidia.com/gpu", "UTC"):
        assert name in page
    assert "/api/v1/accounting/?from=2026-10-01&amp;to=2026-10-31" in page
    assert "format=csv" in page and "format=json" in page
    csv = client.get(
        "/api/v1/accounting/",
        {"from": "2026-10-01", "to": "2026-10-31", "group": "department", "format": "csv"},
    )
    assert csv.status_code == 200 and b"infrastructure" in csv.content


def test_a_member_sees_only_their_own_jobs(client, member, ledger):
    client.force_login(member)
    page = client.get("/accounting/", {"from": "2026-10-01", "to": "2026-10-31", "group": "person"})
    assert page.status_code == 200
    assert "alice" in page.content.decode() and "oscar" not in page.content.decode()


def test_a_node_chosen_in_the_form_narrows_the_table_and_the_exports(client, staff, ledger):
    client.force_login(staff)
    query = {"from": "2026-10-01", "to": "2026-10-31", "group": "leaf"}
    page = client.get("/accounting/", {**query, "node": "root/infrastructure"}).content.decode()
    assert "root/infrastructure/devops" in page and "root/algorithm/video</th>" not in page
    assert '<option value="root/infrastructure" selected>' in page
    assert "node=root%2Finfrastructure" in page  # the CSV and JSON links keep it
    whole = client.get("/accounting/", {**query, "node": ""}).content.decode()
    assert "root/algorithm/video</th>" in whole


def test_a_reversed_period_is_refused_in_place(client, member):
    client.force_login(member)
    response = client.get("/accounting/", {"from": "2026-10-05", "to": "2026-10-01"})
    assert response.status_code == 400
    assert "<code>to</code>" in response.content.decode()


def test_the_form_s_empty_fields_read_as_the_defaults(client, member):
    client.force_login(member)
    response = client.get("/accounting/", {"from": "", "to": "", "group": "leaf", "every": "day"})
    assert response.status_code == 200


def test_it_is_in_the_navigation(client, member):
    client.force_login(member)
    assert 'href="/accounting/"' in client.get("/").content.decode()
