"""Workload identity end to end: a trust policy, a CI job's ID token signed by the tests' own
issuer (a process reached over HTTP), exchanged for a short-lived token that submits."""

from __future__ import annotations

import time

import pytest
from rest_framework.test import APIClient

from access.models import AccessToken, Exchange, TrustPolicy
from audit.models import AuditEntry
from jobs.models import Job
from queues.departments import membership_set

from ..support.jobs import INTERN_JOB, RAY_JOB
from ..support.oidc_issuer import AUDIENCE

pytestmark = pytest.mark.django_db
EXCHANGE = "/api/v1/auth/exchange/"
POLICIES = "/api/v1/trust-policies/"


def policy_body(at, user, **changes) -> dict:
    """A policy trusting ``at``'s (an issuer's) pushes to org/repo's main, acting as ``user``."""
    return {
        "name": "train-main",
        "issuer": at.url,
        "audience": AUDIENCE,
        "conditions": {"repository": "org/repo", "ref": "refs/heads/main"},
        "acts_as": user.username,
        "right": "submit",
        **changes,
    }


@pytest.fixture
def policy(api, staff, member, oidc_issuer):
    response = api(staff).post(POLICIES, policy_body(oidc_issuer, member), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def exchanged(id_token: str):
    return APIClient(REMOTE_ADDR="192.0.2.7").post(EXCHANGE, {"token": id_token}, format="json")


def bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_ci_job_submits_with_no_stored_secret(policy, oidc_issuer, member):
    response = exchanged(oidc_issuer.sign(oidc_issuer.ci_claims()))

    assert response.status_code == 200, response.json()
    answer = response.json()
    assert answer["token"].startswith("cal_wit_")
    assert (answer["user"], answer["right"], answer["policy"]) == ("alice", "submit", "train-main")
    submitted = bearer(answer["token"]).post("/api/v1/jobs/", RAY_JOB, format="json")
    assert submitted.status_code == 201
    token = AccessToken.objects.get(pk=Job.objects.get().token_id)
    assert (token.kind, token.policy.name, token.user) == ("exchanged", "train-main", member)
    lifetime = (token.expires_at - token.created_at).total_seconds()
    assert lifetime == 900
    record = Exchange.objects.get()
    assert (record.policy.name, record.token, record.address) == ("train-main", token, "192.0.2.7")
    assert record.claims["repository"] == "org/repo" and record.claims["ref"] == "refs/heads/main"
    assert record.subject == "repo:org/repo:ref:refs/heads/main"


def test_the_token_has_the_policys_scope(api, staff, member, departments, oidc_issuer):
    membership_set(department=departments["interns"], username="alice", role="member")
    body = policy_body(oidc_issuer, member, right="read", departments=["interns"])
    assert api(staff).post(POLICIES, body, format="json").status_code == 201
    key = exchanged(oidc_issuer.sign(oidc_issuer.ci_claims())).json()["token"]

    submitted = bearer(key).post("/api/v1/jobs/", INTERN_JOB, format="json")
    seen = bearer(key).get("/api/v1/departments/").json()

    assert submitted.json() == {"detail": "this token's scope is read; this needs submit"}
    assert [d["name"] for d in seen] == ["interns"]


@pytest.mark.parametrize(
    "claims, reason",
    [
        ({"aud": "someone-else"}, "audience is 'someone-else'; the policy asks for 'caldera'"),
        ({"ref": "refs/heads/dev"},
         "claim ref is refs/heads/dev; the policy asks for refs/heads/main"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 4000,
          "nbf": int(time.time()) - 4000}, "the ID token expired at "),
    ],
)  # fmt: skip
def test_a_token_that_fails_a_check_is_refused_naming_it(policy, oidc_issuer, claims, reason):
    response = exchanged(oidc_issuer.sign(oidc_issuer.ci_claims(**claims)))

    assert response.status_code == 401
    assert response.json()["detail"].startswith(f"policy train-main: {reason}")
    assert not AccessToken.objects.filter(kind="exchanged").exists()
    assert not Exchange.objects.exists()


def test_a_token_of_an_issuer_no_policy_names_is_refused(policy, oidc_issuers):
    stranger = oidc_issuers.issuer()

    response = exchanged(stranger.sign(stranger.ci_claims()))

    assert response.status_code == 401
    assert response.json() == {
        "detail": f"issuer {stranger.url!r} is not trusted: no policy names it"
    }


def test_a_key_the_issuer_does_not_publish_is_refused(policy, oidc_issuer):
    unpublished = oidc_issuer.new_key()

    response = exchanged(oidc_issuer.sign(oidc_issuer.ci_claims(), kid=unpublished))

    assert response.status_code == 401
    assert "which " in response.json()["detail"] and "does not publish" in response.json()["detail"]


def test_the_issuer_rotating_its_key_is_followed(policy, oidc_issuer):
    assert exchanged(oidc_issuer.sign(oidc_issuer.ci_claims())).status_code == 200
    oidc_issuer.rotate()

    response = exchanged(oidc_issuer.sign(oidc_issuer.ci_claims()))

    assert response.status_code == 200


def test_a_second_policy_lets_in_what_the_first_refuses(api, staff, member, policy, oidc_issuer):
    body = policy_body(
        oidc_issuer, member, name="any-branch", conditions={"sub": "repo:org/repo:*"}
    )
    assert api(staff).post(POLICIES, body, format="json").status_code == 201

    response = exchanged(oidc_issuer.sign(oidc_issuer.ci_claims(ref="refs/heads/dev")))

    assert response.status_code == 200 and response.json()["policy"] == "any-branch"


def test_an_issuer_that_does_not_answer_is_a_503_to_try_again(api, staff, member, oidc_issuer):
    gone = "http://127.0.0.1:9"  # nothing listens there
    body = policy_body(oidc_issuer, member, issuer=gone)
    assert api(staff).post(POLICIES, body, format="json").status_code == 201

    response = exchanged(oidc_issuer.sign(oidc_issuer.ci_claims(iss=gone)))

    assert response.status_code == 503
    assert response["Retry-After"] == "30"
    assert "did not answer" in response.json()["detail"]


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"conditions": {}}, "conditions"),
        ({"issuer": "http://ci.example.com"}, "issuer"),
        ({"right": "admin"}, "right"),
        ({"departments": ["infrastructure"]}, "departments"),
        ({"lifetime_seconds": 13 * 3600}, "lifetime_seconds"),
        ({"acts_as": "nobody"}, "acts_as"),
    ],
)
def test_a_policy_is_refused_naming_the_field(api, staff, member, oidc_issuer, changes, field):
    response = api(staff).post(POLICIES, policy_body(oidc_issuer, member, **changes), format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not TrustPolicy.objects.exists()


def test_only_staff_with_an_admin_token_define_policies(api, manager, member, oidc_issuer):
    response = api(manager).post(POLICIES, policy_body(oidc_issuer, member), format="json")

    assert response.status_code == 403


def test_policies_are_audited(api, staff, policy):
    api(staff).delete(f"{POLICIES}train-main/")

    entries = AuditEntry.objects.filter(object_type="trust policy", object_key="train-main")
    assert list(entries.order_by("id").values_list("action", flat=True)) == ["created", "deleted"]
