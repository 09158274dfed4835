"""Webhooks' fixtures: the settings that let a delivery reach the tests' receiver on
127.0.0.1 over http, with retries a few hundredths of a second apart, and the receiver."""

from __future__ import annotations

import pytest

from ..support.receiver import receiver


@pytest.fixture
def receivable(settings):
    """Deliveries may reach 127.0.0.1 over http, and retry quickly."""
    settings.WEBHOOK_ALLOW_HTTP = True
    # localhost may resolve to ::1 as well as 127.0.0.1 (the receiver listens on the latter).
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32", "::1/128"]
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0.05
    settings.WEBHOOK_RETRY_MAX_SECONDS = 0.2
    return settings


@pytest.fixture
def listener():
    """A real HTTP receiver on 127.0.0.1, answering 200 until told otherwise."""
    with receiver() as found:
        yield found
