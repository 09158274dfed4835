"""Error pages for a person, within the site's layout and with ``DEBUG=0``: a 404 names what
was not found and keeps the navigation; a form refused by the CSRF check (its page older
than the person's sign-in) keeps what was typed and sends it again with a fresh token."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client

from jobs.models import Job

from ..support.pages import RAY_FORM, login

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _production(settings):
    settings.DEBUG = False


def test_a_404_names_the_address_within_the_layout(client, member):
    page = login(client, member).get("/jobs/999999/")

    assert page.status_code == 404
    text = page.content.decode()
    assert 'aria-label="Main"' in text and ">Dashboard</a>" in text  # the navigation
    assert "There is nothing at /jobs/999999/ that you may see" in text


def test_a_404_for_someone_signed_out_has_the_layout_without_navigation(client):
    page = client.get("/no-such-page/")

    assert page.status_code == 404
    text = page.content.decode()
    assert '<header class="topbar">' in text and 'aria-label="Main"' not in text
    assert "There is nothing at /no-such-page/" in text


def kept_form(text: str) -> tuple[str, dict[str, str]]:
    """The kept form's address and fields, as the browser would send them."""
    form = re.search(r'<form method="post" action="([^"]*)" class="kept">(.*?)</form>', text, re.S)
    assert form is not None, text
    fields = {
        unescape(name): unescape(value)
        for name, value in re.findall(
            r'<input type="hidden" name="([^"]*)" value="([^"]*)">', form[2]
        )
    }
    return unescape(form[1]), fields


def test_a_form_refused_by_the_csrf_check_keeps_what_was_typed(member):
    browser = login(Client(enforce_csrf_checks=True), member)
    browser.get("/jobs/new/")  # its CSRF cookie
    typed = {**RAY_FORM, "name": "kept-by-the-refusal", "script": "print('line one')\nprint(2)\n"}

    refused = browser.post("/jobs/new/", {**typed, "csrfmiddlewaretoken": "stale" * 8})

    assert refused.status_code == 403
    text = refused.content.decode()
    assert "This form is out of date" in text and "What you typed is kept below" in text
    assert 'aria-label="Main"' in text
    assert not Job.objects.exists()
    action, fields = kept_form(text)
    assert action == "/jobs/new/"
    token = fields.pop("csrfmiddlewaretoken")
    assert fields == typed

    sent = browser.post(action, {**fields, "csrfmiddlewaretoken": token})

    assert sent.status_code in (200, 302), sent.content.decode()[:500]
    job = Job.objects.get()
    assert (job.name, job.script) == ("kept-by-the-refusal", "print('line one')\nprint(2)\n")


def test_a_refused_form_never_carries_a_password_back(member):
    browser = Client(enforce_csrf_checks=True)
    browser.get("/accounts/login/")

    refused = browser.post("/accounts/login/", {"username": "alice", "password": "pw-alice"})

    assert refused.status_code == 403
    text = refused.content.decode()
    assert "pw-alice" not in text
    assert "you are signed out" in text
