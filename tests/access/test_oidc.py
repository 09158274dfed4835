"""A CI platform's ID token checked (access/oidc.py) against a real issuer over HTTP.

The issuer is a process of its own (tests/support/oidc_issuer.py) serving a discovery
document and a key set from a file each test writes; every test has an issuer of its own,
so what one test left in Caldera's key cache cannot decide another. The issuer counts the
requests it receives, which is how the cache and its refresh limit are seen from outside.
"""

from __future__ import annotations

import base64
import json
import socket
import time

import pytest

from access.oidc import (
    MAX_TOKEN_CHARS,
    IssuerUnavailable,
    Refused,
    condition_refusal,
    unverified_issuer,
    verify,
)

from ..support.oidc_issuer import AUDIENCE, Issuer, forged

GITHUB = "https://token.actions.githubusercontent.com"


def refusal(id_token: str, issuer: str, **options) -> Refused:
    """Why ``verify`` refuses the token for a policy of ``issuer`` and our audience."""
    with pytest.raises(Refused) as refused:
        verify(id_token, issuer=issuer, audience=AUDIENCE, **options)
    return refused.value


def iso(timestamp: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


# ---- Accepted ----------------------------------------------------------------------------


def test_a_good_token_is_verified_and_its_claims_returned(oidc_issuer: Issuer):
    claims = oidc_issuer.ci_claims()

    verified = verify(oidc_issuer.sign(claims), issuer=oidc_issuer.url, audience=AUDIENCE)

    assert verified == claims


def test_the_audience_may_be_a_list_holding_ours(oidc_issuer: Issuer):
    token = oidc_issuer.sign(oidc_issuer.ci_claims(aud=["https://github.com/org", AUDIENCE]))

    assert verify(token, issuer=oidc_issuer.url, audience=AUDIENCE)["repository"] == "org/repo"


def test_an_es256_key_is_used_as_well_as_an_rs256_one(oidc_issuer: Issuer):
    elliptic = oidc_issuer.new_key("ES256")
    oidc_issuer.publish(oidc_issuer.kid, elliptic)

    token = oidc_issuer.sign(oidc_issuer.ci_claims(), kid=elliptic)

    assert verify(token, issuer=oidc_issuer.url, audience=AUDIENCE)["sub"].startswith("repo:")


def test_clock_skew_within_the_leeway_is_forgiven(oidc_issuer: Issuer):
    now = int(time.time())
    just_expired = oidc_issuer.sign(
        oidc_issuer.ci_claims(iat=now - 300, nbf=now - 300, exp=now - 30)
    )
    early = oidc_issuer.sign(oidc_issuer.ci_claims(iat=now + 30, nbf=now + 30))

    for token in just_expired, early:
        assert verify(token, issuer=oidc_issuer.url, audience=AUDIENCE, leeway_seconds=60)
    assert refusal(just_expired, oidc_issuer.url, leeway_seconds=0).reason == (
        f"the ID token expired at {iso(now - 30)}"
    )
    assert refusal(early, oidc_issuer.url, leeway_seconds=0).reason == (
        f"the ID token is not valid before {iso(now + 30)}"
    )


# ---- Refused, each with its reason -------------------------------------------------------


def test_a_token_for_another_audience_is_refused(oidc_issuer: Issuer):
    token = oidc_issuer.sign(oidc_issuer.ci_claims(aud="sts.amazonaws.com"))

    assert (
        refusal(token, oidc_issuer.url).reason
        == "audience is 'sts.amazonaws.com'; the policy asks for 'caldera'"
    )


def test_a_token_of_another_issuer_is_refused_without_asking_the_policys_issuer(
    oidc_issuer: Issuer,
):
    token = oidc_issuer.sign(oidc_issuer.ci_claims(iss=GITHUB))

    assert refusal(token, oidc_issuer.url).reason == (
        f"issuer is '{GITHUB}'; the policy asks for '{oidc_issuer.url}'"
    )
    assert oidc_issuer.hits() == {"discovery": 0, "jwks": 0}


def test_the_issuer_is_read_unverified_to_choose_the_policies(oidc_issuer: Issuer):
    assert unverified_issuer(oidc_issuer.sign(oidc_issuer.ci_claims(iss=GITHUB))) == GITHUB

    claims = oidc_issuer.ci_claims()
    del claims["iss"]
    with pytest.raises(Refused) as refused:
        unverified_issuer(oidc_issuer.sign(claims))
    assert refused.value.reason == "the ID token names no issuer (iss)"


def test_an_expired_token_is_refused_with_its_expiry(oidc_issuer: Issuer):
    expired = int(time.time()) - 3600
    token = oidc_issuer.sign(
        oidc_issuer.ci_claims(iat=expired - 300, nbf=expired - 300, exp=expired)
    )

    assert refusal(token, oidc_issuer.url).reason == f"the ID token expired at {iso(expired)}"


def test_a_token_not_yet_valid_is_refused_with_its_start(oidc_issuer: Issuer):
    start = int(time.time()) + 3600
    token = oidc_issuer.sign(oidc_issuer.ci_claims(nbf=start, exp=start + 300))

    assert (
        refusal(token, oidc_issuer.url).reason == f"the ID token is not valid before {iso(start)}"
    )


def test_a_token_issued_in_the_future_is_refused(oidc_issuer: Issuer):
    issued = int(time.time()) + 3600
    token = oidc_issuer.sign(oidc_issuer.ci_claims(iat=issued, exp=issued + 300))

    assert refusal(token, oidc_issuer.url).reason == (
        f"the ID token was issued in the future, at {iso(issued)}"
    )


@pytest.mark.parametrize(
    "claim, value, reason",
    [
        ("exp", None, "the ID token has no exp claim"),
        ("aud", None, "the ID token has no aud claim"),
        (
            "exp",
            "tomorrow",
            "the ID token is malformed: Expiration Time claim (exp) must be an integer.",
        ),
    ],
)
def test_a_token_without_the_claims_checked_is_refused(oidc_issuer: Issuer, claim, value, reason):
    claims = oidc_issuer.ci_claims(**{claim: value})
    if value is None:
        del claims[claim]

    assert refusal(oidc_issuer.sign(claims), oidc_issuer.url).reason == reason


def test_a_key_the_issuer_does_not_publish_is_refused(oidc_issuer: Issuer):
    stray = oidc_issuer.new_key()  # the issuer holds it, but its key set does not list it

    token = oidc_issuer.sign(oidc_issuer.ci_claims(), kid=stray)

    assert refusal(token, oidc_issuer.url).reason == (
        f"the ID token is signed with key '{stray}', which {oidc_issuer.url} does not publish"
    )


def test_a_published_key_id_on_another_keys_signature_does_not_verify(oidc_issuer: Issuer):
    stray = oidc_issuer.private_keys[oidc_issuer.new_key()]

    token = oidc_issuer.sign(oidc_issuer.ci_claims(), kid=oidc_issuer.kid, key=stray)

    assert refusal(token, oidc_issuer.url).reason == "signature does not verify"


def test_a_token_whose_claims_were_changed_does_not_verify(oidc_issuer: Issuer):
    header, _, signature = oidc_issuer.sign(oidc_issuer.ci_claims(ref="refs/heads/dev")).split(".")
    claims = json.dumps(oidc_issuer.ci_claims(ref="refs/heads/main")).encode()
    changed = base64.urlsafe_b64encode(claims).decode().rstrip("=")

    assert refusal(f"{header}.{changed}.{signature}", oidc_issuer.url).reason == (
        "signature does not verify"
    )


def test_a_key_used_with_another_algorithm_than_its_own_is_refused(oidc_issuer: Issuer):
    elliptic = oidc_issuer.private_keys[oidc_issuer.new_key("ES256")]

    token = oidc_issuer.sign(oidc_issuer.ci_claims(), kid=oidc_issuer.kid, key=elliptic)

    assert refusal(token, oidc_issuer.url).reason == (
        f"the ID token is signed with ES256, but key '{oidc_issuer.kid}' of "
        f"{oidc_issuer.url} is for RS256"
    )


@pytest.mark.parametrize("algorithm", ["none", "HS256"])
def test_no_signature_and_an_hmac_keyed_with_the_public_key_are_refused(
    oidc_issuer: Issuer, algorithm
):
    token = forged(
        oidc_issuer.ci_claims(),
        algorithm=algorithm,
        secret=oidc_issuer.public_pem(oidc_issuer.kid),
        kid=oidc_issuer.kid,
    )

    assert refusal(token, oidc_issuer.url).reason == (
        f"the ID token is signed with '{algorithm}', which is not allowed (allowed: RS256, "
        "RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)"
    )


def test_a_token_naming_no_key_is_refused(oidc_issuer: Issuer):
    token = oidc_issuer.sign(oidc_issuer.ci_claims(), headers={"kid": None})

    assert refusal(token, oidc_issuer.url).reason == "the ID token names no key id (kid)"


@pytest.mark.parametrize(
    "token",
    [
        "",
        "not-a-token",
        "a.b.c",
        "e30.e30",  # two segments
        "e30.bm90IGpzb24.c2ln",  # the claims are not JSON
        "W10.e30.c2ln",  # the header is a list
    ],
)
def test_a_malformed_token_is_refused(oidc_issuer: Issuer, token):
    assert refusal(token, oidc_issuer.url).reason == "the ID token is not a JWT"
    with pytest.raises(Refused, match="the ID token is not a JWT"):
        unverified_issuer(token)


def test_a_token_past_the_size_limit_is_refused_unread(oidc_issuer: Issuer):
    claims = oidc_issuer.ci_claims(padding="x" * MAX_TOKEN_CHARS)

    token = oidc_issuer.sign(claims)

    reason = f"the ID token is longer than {MAX_TOKEN_CHARS} characters"
    assert refusal(token, oidc_issuer.url).reason == reason
    with pytest.raises(Refused, match=reason):
        unverified_issuer(token)
    assert oidc_issuer.hits() == {"discovery": 0, "jwks": 0}


# ---- The issuer's keys: cached, followed through a rotation, refreshed within a limit ------


def test_the_issuers_keys_are_read_once_and_kept(oidc_issuer: Issuer):
    for _ in range(3):
        verify(oidc_issuer.sign(oidc_issuer.ci_claims()), issuer=oidc_issuer.url, audience=AUDIENCE)

    assert oidc_issuer.hits() == {"discovery": 1, "jwks": 1}


def test_the_issuers_keys_are_read_again_once_kept_long_enough(oidc_issuer: Issuer, settings):
    settings.WORKLOAD_IDENTITY_KEYS_SECONDS = 0

    for _ in range(2):
        verify(oidc_issuer.sign(oidc_issuer.ci_claims()), issuer=oidc_issuer.url, audience=AUDIENCE)
    assert oidc_issuer.hits() == {"discovery": 2, "jwks": 2}

    # A key id the set just read lacks is not worth a second read.
    made_up = oidc_issuer.sign(oidc_issuer.ci_claims(), kid=oidc_issuer.new_key())
    assert "does not publish" in refusal(made_up, oidc_issuer.url).reason
    assert oidc_issuer.hits() == {"discovery": 3, "jwks": 3}


def test_the_issuers_key_rotation_is_followed(oidc_issuer: Issuer):
    old = oidc_issuer.kid
    before = oidc_issuer.sign(oidc_issuer.ci_claims())
    verify(before, issuer=oidc_issuer.url, audience=AUDIENCE)

    new = oidc_issuer.rotate()
    after = oidc_issuer.sign(oidc_issuer.ci_claims(run_id="6243"))

    assert verify(after, issuer=oidc_issuer.url, audience=AUDIENCE)["run_id"] == "6243"
    assert refusal(before, oidc_issuer.url).reason == (
        f"the ID token is signed with key '{old}', which {oidc_issuer.url} does not publish"
    )
    assert new != old
    assert oidc_issuer.hits() == {"discovery": 2, "jwks": 2}


def test_unknown_key_ids_read_the_keys_again_at_most_once_per_interval(
    oidc_issuer: Issuer, settings
):
    verify(oidc_issuer.sign(oidc_issuer.ci_claims()), issuer=oidc_issuer.url, audience=AUDIENCE)

    for _ in range(5):
        made_up = oidc_issuer.sign(oidc_issuer.ci_claims(), kid=oidc_issuer.new_key())
        assert "does not publish" in refusal(made_up, oidc_issuer.url).reason

    assert oidc_issuer.hits() == {"discovery": 2, "jwks": 2}  # the first made-up id's read

    settings.WORKLOAD_IDENTITY_KEYS_REFRESH_SECONDS = 0  # the interval passed
    made_up = oidc_issuer.sign(oidc_issuer.ci_claims(), kid=oidc_issuer.new_key())
    assert "does not publish" in refusal(made_up, oidc_issuer.url).reason
    assert oidc_issuer.hits() == {"discovery": 3, "jwks": 3}


def test_keys_that_cannot_sign_are_left_out_and_do_not_stop_the_others(oidc_issuer: Issuer):
    encryption = oidc_issuer.new_key()
    oidc_issuer.publish(
        oidc_issuer.kid,
        extra_keys=(
            "not a key",
            {"kty": "RSA", "n": "AQAB"},  # no key id
            {"kty": "oct", "kid": "shared", "k": "c2VjcmV0"},  # symmetric
            {"kty": "EC", "kid": "odd-curve", "crv": "P-192", "x": "AA", "y": "AA"},
            {**oidc_issuer.public_jwk(encryption), "use": "enc"},
        ),
    )

    good = oidc_issuer.sign(oidc_issuer.ci_claims())
    by_the_encryption_key = oidc_issuer.sign(oidc_issuer.ci_claims(), kid=encryption)

    naming_the_symmetric_key = oidc_issuer.sign(
        oidc_issuer.ci_claims(), kid="shared", key=oidc_issuer.private_keys[oidc_issuer.kid]
    )

    assert verify(good, issuer=oidc_issuer.url, audience=AUDIENCE)["ref"] == "refs/heads/main"
    for token, kid in (by_the_encryption_key, encryption), (naming_the_symmetric_key, "shared"):
        assert refusal(token, oidc_issuer.url).reason == (
            f"the ID token is signed with key '{kid}', which {oidc_issuer.url} does not publish"
        )


# ---- An issuer that does not answer as an issuer should ----------------------------------


def test_an_issuer_that_is_not_there_is_unavailable_not_a_bad_token(oidc_issuer: Issuer):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gone = f"http://127.0.0.1:{port}/ci"
    token = oidc_issuer.sign(oidc_issuer.ci_claims(iss=gone))

    refused = refusal(token, gone)

    assert isinstance(refused, IssuerUnavailable)
    assert refused.reason == (
        f"the issuer {gone} did not answer: {gone}/.well-known/openid-configuration "
        "could not be read"
    )


def test_an_issuer_answering_404_is_unavailable(oidc_issuer: Issuer, oidc_issuers):
    unknown = f"{oidc_issuers.url}/nobody"
    token = oidc_issuer.sign(oidc_issuer.ci_claims(iss=unknown))

    refused = refusal(token, unknown)

    assert isinstance(refused, IssuerUnavailable)
    assert refused.reason == (
        f"the issuer {unknown} did not answer: 404 at {unknown}/.well-known/openid-configuration"
    )


def test_an_issuer_slower_than_the_timeout_is_unavailable(oidc_issuer: Issuer, settings):
    settings.WORKLOAD_IDENTITY_TIMEOUT_SECONDS = 0.3
    oidc_issuer.publish(oidc_issuer.kid, delay_seconds=3)

    refused = refusal(oidc_issuer.sign(oidc_issuer.ci_claims()), oidc_issuer.url)

    assert isinstance(refused, IssuerUnavailable)
    assert refused.reason == (
        f"the issuer {oidc_issuer.url} did not answer: no answer within 0.3 s at "
        f"{oidc_issuer.url}/.well-known/openid-configuration"
    )


def test_a_discovery_document_naming_another_issuer_is_refused(oidc_issuer: Issuer):
    oidc_issuer.publish(oidc_issuer.kid, discovery={"issuer": GITHUB})

    refused = refusal(oidc_issuer.sign(oidc_issuer.ci_claims()), oidc_issuer.url)

    assert not isinstance(refused, IssuerUnavailable)
    assert refused.reason == (
        f"the discovery document of {oidc_issuer.url} names '{GITHUB}' as its issuer"
    )
    assert oidc_issuer.hits() == {"discovery": 1, "jwks": 0}


# ---- A policy's conditions on the claims -------------------------------------------------

CLAIMS = {
    "sub": "repo:org/repo:ref:refs/heads/main",
    "repository": "org/repo",
    "ref": "refs/heads/main",
    "run_attempt": 2,
    "ref_protected": True,
    "groups": ["a", "b"],
}


def test_claims_meeting_every_condition_are_not_refused():
    conditions = {"repository": "org/repo", "ref": "refs/heads/main", "sub": "repo:org/repo:*"}

    assert condition_refusal(CLAIMS, conditions) is None
    assert condition_refusal(CLAIMS, {}) is None


@pytest.mark.parametrize(
    "conditions, reason",
    [
        (
            {"ref": "refs/heads/dev"},
            "claim ref is refs/heads/main; the policy asks for refs/heads/dev",
        ),
        (  # equality, not a prefix
            {"ref": "refs/heads/mai"},
            "claim ref is refs/heads/main; the policy asks for refs/heads/mai",
        ),
        (  # case counts
            {"repository": "Org/Repo"},
            "claim repository is org/repo; the policy asks for Org/Repo",
        ),
        (  # a glob matches the whole value
            {"sub": "repo:org/rep:*"},
            "claim sub is repo:org/repo:ref:refs/heads/main; the policy asks for repo:org/rep:*",
        ),
        (  # ... not a prefix of it
            {"ref": "refs/heads/ma?"},
            "claim ref is refs/heads/main; the policy asks for refs/heads/ma?",
        ),
        (  # case counts in a glob too
            {"repository": "Org/*"},
            "claim repository is org/repo; the policy asks for Org/*",
        ),
        (
            {"sub": "repo:org/repo:ref:refs/tags/v[0-9]*"},
            "claim sub is repo:org/repo:ref:refs/heads/main; "
            "the policy asks for repo:org/repo:ref:refs/tags/v[0-9]*",
        ),
        (
            {"environment": "production"},
            "claim environment is missing; the policy asks for production",
        ),
        ({"run_attempt": "1"}, "claim run_attempt is 2; the policy asks for 1"),
        ({"groups": "a"}, "claim groups is a list; the policy asks for a"),
    ],
)
def test_a_condition_that_does_not_hold_is_named(conditions, reason):
    assert condition_refusal(CLAIMS, conditions) == reason


@pytest.mark.parametrize(
    "conditions",
    [
        {"sub": "repo:org/repo:ref:refs/heads/*"},
        {"sub": "repo:org/*"},
        {"sub": "repo:org/rep?:ref:refs/heads/main"},
        {"ref": "refs/heads/[lm]ain"},
        {"run_attempt": "2", "ref_protected": "true"},  # as their JSON text
    ],
)
def test_globs_and_json_values_match(conditions):
    assert condition_refusal(CLAIMS, conditions) is None


def test_the_first_failing_condition_in_the_policys_order_is_named():
    ref = {"ref": "refs/heads/release-*"}
    environment = {"environment": "production"}

    assert condition_refusal(CLAIMS, {**ref, **environment}) == (
        "claim ref is refs/heads/main; the policy asks for refs/heads/release-*"
    )
    assert condition_refusal(CLAIMS, {**environment, **ref}) == (
        "claim environment is missing; the policy asks for production"
    )
