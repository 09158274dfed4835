"""The command as a person runs it: alice, signed in through the environment."""

from __future__ import annotations

import pytest

from access.services import full_token

from ..support.cli import Cli


@pytest.fixture
def token(member) -> str:
    return full_token(member, name="cli")


@pytest.fixture
def cli(live_server, tmp_path, token) -> Cli:
    """The command as alice, signed in through the environment."""
    return Cli(tmp_path, {"CALDERA_URL": live_server.url, "CALDERA_TOKEN": token})
