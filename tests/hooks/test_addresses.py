"""Where a webhook may be sent: https only unless allowed, never a private, loopback or
link-local address (nor a name resolving to one) unless WEBHOOK_ALLOWED_NETWORKS holds it;
checked when the hook is made, naming the field ``url``."""

from __future__ import annotations

import ipaddress

import pytest

from hooks.addresses import UrlRefused, addresses_check, destination
from hooks.services import WebhookInvalid, webhook_create

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://10.0.0.1/hook", "10.0.0.1 is a private, loopback, link-local or reserved"),
        ("https://169.254.169.254/latest/meta-data", "169.254.169.254 is a private"),
        ("https://127.0.0.1:8443/", "127.0.0.1 is a private"),
        ("https://[::1]/", "::1 is a private"),
        ("https://[::ffff:10.1.2.3]/", "10.1.2.3 is a private"),
        ("https://0.0.0.0/", "0.0.0.0 is a private"),
        ("https://100.64.0.1/", "100.64.0.1 is a private"),
        ("http://example.com/", "only https URLs are allowed"),
        ("ftp://example.com/", "the URL must start with https://"),
        ("https://user:pw@example.com/", "the URL may not carry a user name or password"),
        ("https:///nohost", "the URL names no host"),
        ("https://example.com:99999/", "the URL's port is not a number"),
    ],
)
def test_it_refuses(settings, url, why):
    settings.WEBHOOK_ALLOW_HTTP = False
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    with pytest.raises(UrlRefused) as refused:
        destination(url)
    assert str(refused.value).startswith(why)


def test_a_name_that_resolves_to_loopback_is_refused(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    with pytest.raises(UrlRefused) as refused:
        destination("https://localhost/")
    assert str(refused.value).startswith("localhost resolves to ")
    assert "is a private, loopback, link-local or reserved address" in str(refused.value)


def test_one_refused_address_among_allowed_ones_refuses_the_name(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # not ::1
    # What a name with an IPv4 and an IPv6 address resolves to (localhost, on many hosts).
    both = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    with pytest.raises(UrlRefused, match="^localhost resolves to ::1 is a private"):
        addresses_check("localhost", both)
    addresses_check("localhost", both[:1])  # the allowed one alone passes


def test_it_connects_to_the_addresses_it_checked(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]
    found = destination("https://localhost:8443/hook?x=1")
    assert (found.host, found.port, found.target) == ("localhost", 8443, "/hook?x=1")
    assert "127.0.0.1" in found.addresses


def test_an_allowed_network_lets_a_private_address_through(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.20.0.0/16"]
    assert destination("https://10.20.3.4/ci").addresses == ("10.20.3.4",)
    with pytest.raises(UrlRefused):
        destination("https://10.21.0.1/ci")


def test_http_only_where_the_setting_allows_it(settings):
    settings.WEBHOOK_ALLOW_HTTP = True
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert destination("http://10.0.0.1/hook").scheme == "http"


def test_making_a_hook_refuses_a_private_address_naming_url(settings, departments, manager):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    with pytest.raises(WebhookInvalid) as invalid:
        webhook_create(department=departments["algorithm"], url="https://10.0.0.1/", actor=manager)
    assert list(invalid.value.errors) == ["url"]
