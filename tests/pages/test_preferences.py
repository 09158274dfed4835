"""A person's language, time zone and theme: chosen on their page, else their browser's."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from access.models import Preference
from jobs.models import Job
from portal.preferences import ZONE_COOKIE

from ..support.jobs import submit
from ..support.pages import login

pytestmark = pytest.mark.django_db


def _enqueued_at(job, when: datetime) -> None:
    Job.objects.filter(pk=job.pk).update(enqueued_at=when)


def test_a_person_chooses_language_zone_and_theme_and_every_page_follows(client, member):
    login(client, member)

    response = client.post(
        "/account/preferences/",
        {"language": "zh-hans", "time_zone": "Asia/Shanghai", "theme": "dark"},
    )

    assert response.status_code == 302
    preference = Preference.objects.get(user=member)
    assert (preference.language, preference.time_zone, preference.theme) == (
        "zh-hans",
        "Asia/Shanghai",
        "dark",
    )
    page = client.get("/account/").content.decode()
    assert '<html lang="zh-hans" data-theme="dark">' in page
    assert "Asia/Shanghai" in page


def test_times_are_shown_in_the_chosen_zone_else_the_browsers(client, member):
    job = submit(member)
    _enqueued_at(job, datetime(2026, 11, 27, 11, 13, 0, tzinfo=UTC))
    login(client, member)

    assert "11:13:00" in client.get(f"/queues/{job.queue.name}/").content.decode()

    client.cookies[ZONE_COOKIE] = "Asia/Shanghai"
    assert "19:13:00" in client.get(f"/queues/{job.queue.name}/").content.decode()

    Preference.objects.create(user=member, time_zone="Europe/Berlin")
    assert "12:13:00" in client.get(f"/queues/{job.queue.name}/").content.decode()


def test_an_unknown_zone_or_language_is_refused_and_nothing_is_saved(client, member):
    login(client, member)

    response = client.post(
        "/account/preferences/", {"language": "xx", "time_zone": "Mars/Olympus", "theme": ""}
    )

    assert response.status_code == 302
    assert not Preference.objects.filter(user=member).exists()
    page = client.get("/account/").content.decode()
    assert "Nothing was changed" in page
    assert "Time zone" in page and "Language" in page


def test_a_cookie_naming_no_zone_is_ignored(client, member):
    login(client, member)
    client.cookies[ZONE_COOKIE] = "../../etc/passwd"

    assert client.get("/account/").status_code == 200


def test_the_browsers_language_is_honoured_without_a_choice(client, member):
    login(client, member)

    page = client.get("/account/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9").content.decode()

    assert '<html lang="zh-hans">' in page
