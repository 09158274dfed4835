"""``caldera login --exchange``: a CI job's OIDC ID token traded for a Caldera token under a
trust policy, as on GitHub Actions (the ID token asked of the runner's endpoint, here a
stand-in over HTTP) and on GitLab CI (the ID token in CALDERA_ID_TOKEN)."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from ..support.cli import Cli, json_lines, stub_server
from ..support.oidc_issuer import AUDIENCE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def policy(api, staff, member, oidc_issuer):
    body = {
        "name": "train-main",
        "issuer": oidc_issuer.url,
        "audience": AUDIENCE,
        "conditions": {"repository": "org/repo", "ref": "refs/heads/main"},
        "acts_as": member.username,
        "right": "submit",
    }
    response = api(staff).post("/api/v1/trust-policies/", body, format="json")
    assert response.status_code == 201, response.json()


@pytest.fixture
def github(oidc_issuer):
    """The runner's ID token endpoint: the job's signed token for the audience asked, to a
    bearer of the request token."""
    asked = []

    def answer(method, path, headers):
        query = parse_qs(urlsplit(path).query)
        asked.append(query)
        if headers.get("Authorization") != "bearer request-token":
            return 403, {}, {"message": "Unable to get ACTIONS_ID_TOKEN_REQUEST_URL"}
        claims = oidc_issuer.ci_claims(aud=query["audience"][0])
        return 200, {}, {"value": oidc_issuer.sign(claims)}

    with stub_server(answer) as url:
        yield f"{url}/token?api-version=2.0", asked


def test_a_github_actions_job_signs_in_with_its_id_token(live_server, tmp_path, policy, github):
    url, asked = github
    cli = Cli(tmp_path)
    signed_in = cli.run(
        "login", "--exchange", "--url", live_server.url, "-o", "json",
        ACTIONS_ID_TOKEN_REQUEST_URL=url, ACTIONS_ID_TOKEN_REQUEST_TOKEN="request-token",
    )  # fmt: skip
    assert signed_in.returncode == 0, signed_in.stdout + signed_in.stderr
    assert asked == [{"api-version": ["2.0"], "audience": [AUDIENCE]}]
    [answer] = json_lines(signed_in.stdout)
    assert answer["user"] == "alice" and answer["token"].startswith("cal_wit_")
    assert json.loads(cli.config.read_text())["token"].startswith("cal_wit_")
    assert cli.run("whoami").stdout.startswith(f"alice at {live_server.url}\n")


def test_a_gitlab_job_signs_in_with_its_id_token_and_a_refusal_says_why(
    live_server, tmp_path, policy, oidc_issuer
):
    cli = Cli(tmp_path)
    signed_in = cli.run(
        "login", "--exchange", "--url", live_server.url,
        CALDERA_ID_TOKEN=oidc_issuer.sign(oidc_issuer.ci_claims()),
    )  # fmt: skip
    assert signed_in.returncode == 0, signed_in.stderr
    assert "as alice" in signed_in.stdout

    dev = oidc_issuer.sign(oidc_issuer.ci_claims(ref="refs/heads/dev"))
    refused = Cli(tmp_path / "dev").run(
        "login", "--exchange", "--url", live_server.url, CALDERA_ID_TOKEN=dev
    )
    assert refused.returncode == 5
    assert "claim ref is refs/heads/dev" in refused.stderr
