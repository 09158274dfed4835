"""The polled fragments' validator (portal/fragments.py): an unchanged fragment answers 304
to its ETag, a changed one 200 with a new ETag, and the ETag differs between people with
other rights; fragments and pages are compressed (portal/middleware.py, CompressHtml)."""

from __future__ import annotations

import gzip

import pytest
from django.urls import reverse

from jobs.services import job_cancel

from ..support.jobs import submit
from ..support.pages import HTMX, login

pytestmark = pytest.mark.django_db

VIDEO = "root-algorithm-video"


def test_it_answers_304_to_an_unchanged_queue_fragment_and_200_once_it_changes(client, member):
    submit(member, name="first")
    login(client, member)
    url = reverse("queue-detail", args=[VIDEO])

    first = client.get(url, headers=HTMX)
    assert first.status_code == 200
    etag = first["ETag"]
    assert etag.startswith('"') and etag.endswith('"')
    # Kept by the browser alone, and asked for again at every poll.
    assert set(first["Cache-Control"].split(", ")) == {"private", "no-cache"}
    assert "HX-Request" in first["Vary"]

    again = client.get(url, headers=HTMX | {"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again["ETag"] == etag

    submit(member, name="second")
    changed = client.get(url, headers=HTMX | {"If-None-Match": etag})
    assert changed.status_code == 200
    assert "second" in changed.content.decode()
    assert changed["ETag"] != etag
    assert client.get(url, headers=HTMX | {"If-None-Match": changed["ETag"]}).status_code == 304


def test_it_answers_304_to_the_job_and_dashboard_fragments(client, member):
    job = submit(member)
    login(client, member)
    for url in (reverse("job-detail", args=[job.pk]), reverse("dashboard")):
        first = client.get(url, headers=HTMX)
        assert first.status_code == 200, url
        again = client.get(url, headers=HTMX | {"If-None-Match": first["ETag"]})
        assert again.status_code == 304, url


def test_it_gives_a_person_with_other_rights_another_validator(
    client, member, other_member, manager
):
    submit(member)
    url = reverse("queue-detail", args=[VIDEO])
    etags, contents = {}, {}
    for person in (member, other_member, manager):
        client.force_login(person)
        response = client.get(url, headers=HTMX)
        assert response.status_code == 200
        etags[person.username] = response["ETag"]
        contents[person.username] = response.content
    assert contents["alice"] == contents["carol"]
    # The same bytes for alice and carol, both members; still each their own validator,
    # and bob's (a manager) is another again.
    assert len(set(etags.values())) == 3

    client.force_login(manager)
    stale = client.get(url, headers=HTMX | {"If-None-Match": etags["alice"]})
    assert stale.status_code == 200


def test_it_never_answers_304_to_a_job_that_has_ended(client, member):
    job = submit(member)
    login(client, member)
    url = reverse("job-detail", args=[job.pk])
    etag = client.get(url, headers=HTMX)["ETag"]
    job_cancel(user=member, job=job)
    ended = client.get(url, headers=HTMX | {"If-None-Match": etag})
    # 286 stops the polling; a 304 would reach htmx as the cached 200, and it would poll on.
    assert ended.status_code == 286
    assert "ETag" not in ended


def test_it_gives_pages_no_validator_but_varies_them_with_htmx(client, member):
    login(client, member)
    page = client.get(reverse("queue-detail", args=[VIDEO]))
    assert page.status_code == 200
    assert "ETag" not in page
    assert "HX-Request" in page["Vary"]


def test_it_compresses_a_fragment_and_still_answers_304_to_its_weakened_etag(client, member):
    submit(member)
    login(client, member)
    url = reverse("queue-detail", args=[VIDEO])
    plain = client.get(url, headers=HTMX)
    packed = client.get(url, headers=HTMX | {"Accept-Encoding": "gzip"})
    assert packed["Content-Encoding"] == "gzip"
    assert gzip.decompress(packed.content) == plain.content
    assert len(packed.content) * 2 < len(plain.content)
    # A compressed answer's ETag is weak (RFC 9110); the browser sends it back as it is.
    assert packed["ETag"] == "W/" + plain["ETag"]
    again = client.get(
        url, headers=HTMX | {"Accept-Encoding": "gzip", "If-None-Match": packed["ETag"]}
    )
    assert again.status_code == 304


def test_it_leaves_the_apis_json_uncompressed(client, member):
    login(client, member)
    response = client.get("/api/v1/jobs/", headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200
    assert "Content-Encoding" not in response


def test_a_304_carries_its_validator_alone_and_the_200_its_security_headers(client, member):
    submit(member)
    login(client, member)
    url = reverse("queue-detail", args=[VIDEO])
    first = client.get(url, headers=HTMX)
    assert "Content-Security-Policy" in first.headers
    assert "X-Frame-Options" in first.headers

    again = client.get(url, headers=HTMX | {"If-None-Match": first["ETag"]})

    assert again.status_code == 304
    # The browser keeps the stored 200's other headers; each poll of an open page sends these.
    assert {name.lower() for name in again.headers} == {"cache-control", "etag", "vary"}
    assert again["ETag"] == first["ETag"].removeprefix("W/")
