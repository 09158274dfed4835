"""The tests' OpenID provider (tests/support/identity_provider) as Caldera's tests reach it:
its control API over HTTP, Caldera as its client, and the group map a deployment would set.
The fixtures ``identity_provider`` and ``provider`` of tests/conftest.py start and
configure it."""

from __future__ import annotations

from dataclasses import dataclass

import requests

CLIENT_ID, CLIENT_SECRET = "caldera", "caldera-secret"
# As a Keycloak realm would send them (full group paths).
GROUP_MAP = {
    "/caldera/algorithm": "algorithm:member",
    "/caldera/algorithm-leads": "algorithm:manager",
    "/caldera/interns": ["interns:member"],
    "/caldera/admins": "admin",
}


@dataclass
class Provider:
    url: str
    issuer: str

    def control(self, **body) -> None:
        response = requests.post(f"{self.url}/control/", json=body, timeout=10)
        response.raise_for_status()

    def register(self, *portals: str) -> None:
        """Caldera, reached at ``portals``, as the provider's client."""
        self.control(
            client={
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": [f"{url}/oidc/callback/" for url in portals],
            }
        )

    def person(self, username: str, groups: list[str], **profile) -> None:
        """A person at the provider, with password ``idp-<username>``."""
        password = "idp-" + username
        self.control(user={"username": username, "password": password, "groups": groups, **profile})
