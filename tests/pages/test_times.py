"""Times on the pages: each in the zone the page is shown in (the person's choice, else
their browser's, from the cookie static/zone.js sets), that zone named in the top bar and
in every time's title, the instant itself for static/time.js, which writes the relative
times and countdowns; the admin in the same zone."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from access.models import Preference
from jobs.models import Job, State
from jobs.usage.samples import usage_record
from portal.preferences import ZONE_COOKIE

from ..support.jobs import submit
from ..support.pages import HTMX, login

pytestmark = pytest.mark.django_db

TEMPLATES = settings.BASE_DIR / "templates"

ENQUEUED = datetime(2026, 11, 27, 11, 13, 0, tzinfo=UTC)
SHANGHAI_TIME = (
    '<time datetime="2026-11-27T19:13:00+08:00" '
    'title="Friday 2026-11-27 19:13:00 (Asia/Shanghai, UTC+08:00)" data-relative>'
    "2026-11-27 19:13:00</time>"
)


def _enqueued(member) -> Job:
    job = submit(member)
    Job.objects.filter(pk=job.pk).update(enqueued_at=ENQUEUED)
    return job


def test_it_writes_every_time_in_the_browsers_zone_and_names_it(client, member):
    job = _enqueued(member)
    login(client, member)
    client.cookies[ZONE_COOKIE] = "Asia/Shanghai"

    page = client.get(reverse("queue-detail", args=[job.queue.name])).content.decode()

    assert SHANGHAI_TIME in page
    assert "11:13:00" not in page
    # Once in the top bar, linking to where it is changed.
    assert re.search(
        r'<a class="zone" href="/account/#id_time_zone"[^>]*>'
        r'<span class="visually-hidden">Times in </span>Asia/Shanghai, UTC\+08:00</a>',
        page,
    )
    # The browser may show it again in its own zone: the person chose none.
    assert '<meta name="caldera-zone" content="Asia/Shanghai" data-follow-browser>' in page


def test_without_a_cookie_the_page_is_in_utc_and_says_so(client, member):
    job = _enqueued(member)
    login(client, member)

    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()

    assert (
        '<time datetime="2026-11-27T11:13:00+00:00" title="Friday 2026-11-27 11:13:00 (UTC)">'
        "2026-11-27 11:13:00</time>"
    ) in page
    assert '<meta name="caldera-zone" content="UTC" data-follow-browser>' in page


def test_a_persons_own_zone_wins_over_the_browsers_and_is_kept(client, member):
    job = _enqueued(member)
    Preference.objects.create(user=member, time_zone="Europe/Berlin")
    login(client, member)
    client.cookies[ZONE_COOKIE] = "Asia/Shanghai"

    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()

    assert 'datetime="2026-11-27T12:13:00+01:00"' in page
    assert "(Europe/Berlin, UTC+01:00)" in page
    # Chosen: the page is not asked for again in the browser's zone.
    assert '<meta name="caldera-zone" content="Europe/Berlin">' in page


def test_a_backing_off_job_counts_down_to_its_next_try(client, member):
    job = submit(member)
    next_try = (timezone.now() + timedelta(minutes=10)).replace(microsecond=0)
    Job.objects.filter(pk=job.pk).update(
        state=State.BACKOFF,
        next_attempt_at=next_try,
        backoff_reason="no room",
        last_tried_at=timezone.now(),
    )
    login(client, member)
    client.cookies[ZONE_COOKIE] = "Asia/Shanghai"
    local = next_try.astimezone(ZoneInfo("Asia/Shanghai"))
    countdown = (
        f'Next try <time datetime="{local.isoformat()}" '
        f'title="{local:%A %Y-%m-%d %H:%M:%S} (Asia/Shanghai, UTC+08:00)" '
        f'data-countdown="in %s">{local:%H:%M:%S}</time>'
    )

    for url in (
        reverse("job-detail", args=[job.pk]),
        reverse("queue-detail", args=[job.queue.name]),
    ):
        assert countdown in client.get(url).content.decode(), url
    # The fragments write the same, so they still answer 304 while the words tick.
    url = reverse("job-detail", args=[job.pk])
    first = client.get(url, headers=HTMX)
    assert countdown in first.content.decode()
    assert client.get(url, headers=HTMX | {"If-None-Match": first["ETag"]}).status_code == 304


def test_a_page_answering_a_form_is_not_asked_for_again(client, member):
    login(client, member)
    client.cookies[ZONE_COOKIE] = "Asia/Shanghai"

    page = client.post(reverse("job-submit"), {"queue": ""}).content.decode()

    assert '<meta name="caldera-zone" content="Asia/Shanghai">' in page


def test_the_admin_shows_times_in_the_persons_zone(client, staff, member):
    _enqueued(member)
    login(client, staff)
    client.cookies[ZONE_COOKIE] = "Asia/Shanghai"

    page = client.get(reverse("admin:jobs_job_changelist")).content.decode()

    assert "7:13 p.m." in page
    assert "11:13 a.m." not in page
    # The admin's "you are N hours ahead" note compares the browser with this offset.
    assert 'data-admin-utc-offset="28800"' in page
    # Its first page in a browser of another zone asks again in that zone, as Caldera's do.
    assert '<meta name="caldera-zone" content="Asia/Shanghai" data-follow-browser>' in page
    assert "/static/zone.js" in page


def test_the_usage_charts_name_the_zone_of_their_time_axis(client, member):
    submit(member)
    usage_record(now=timezone.now() - timedelta(minutes=1))
    login(client, member)
    client.cookies[ZONE_COOKIE] = "Asia/Shanghai"

    page = client.get(reverse("queue-detail", args=["root-algorithm-video"])).content.decode()

    assert '<li class="muted chart-zone">Times in Asia/Shanghai, UTC+08:00.</li>' in page


def test_a_job_being_placed_counts_down_to_its_start_timeout(client, member, settings):
    job = submit(member)
    clock = (timezone.now() - timedelta(seconds=30)).replace(microsecond=0)
    Job.objects.filter(pk=job.pk).update(state=State.ADMITTED, start_clock_at=clock)
    login(client, member)
    client.cookies[ZONE_COOKIE] = "Asia/Shanghai"
    deadline = (clock + timedelta(seconds=settings.START_TIMEOUT_SECONDS)).astimezone(
        ZoneInfo("Asia/Shanghai")
    )

    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()

    assert (
        f'Start timeout <time datetime="{deadline.isoformat()}" '
        f'title="{deadline:%A %Y-%m-%d %H:%M:%S} (Asia/Shanghai, UTC+08:00)" '
        f'data-countdown="in %s">{deadline:%H:%M:%S}</time>'
    ) in page


def test_no_template_writes_a_time_by_hand():
    """Every time on a page goes through {% moment %} (portal/templatetags/times.py), so
    each names its zone and the browser can write it in words; a page added later too."""
    by_hand = re.compile(r"<time[\s>]|\|time:|\|date:[\"'][^\"']*[aAfgGhHisPTeOZcrU]")
    found = [
        f"{path.relative_to(TEMPLATES)}: {line.strip()}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for line in path.read_text().splitlines()
        if by_hand.search(line)
    ]
    assert found == []
