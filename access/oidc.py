"""A CI platform's OIDC ID token checked: the workload identity a pipeline signs in with.

GitHub Actions and GitLab CI give each job an ID token their issuer signs (GitHub's
``https://token.actions.githubusercontent.com``). A trust policy names an issuer, an
audience and conditions on the token's claims; the exchange endpoint trades a token that
meets one for a short-lived Caldera token. It calls, in this order:

1. ``unverified_issuer(id_token)``: whose token this claims to be, to pick that issuer's
   policies. Nothing is trusted yet; a token of an issuer no policy names is refused by the
   caller (suggested words: ``issuer 'https://a' is not trusted``).
2. ``verify(id_token, issuer=..., audience=...)``: the signature against the keys the issuer
   publishes, then issuer, audience, expiry, not-before and issued-at. Returns the claims.
   ``issuer`` is a policy's, never the token's own ``iss`` unchecked: Caldera fetches from
   it, and keeps what it fetched, so only the issuers an admin named may be asked.
3. ``condition_refusal(claims, conditions)``: the policy's conditions on those claims.

Every refusal is a ``Refused`` whose ``reason`` names the failing check in words safe to
show the caller: they hold only what the caller sent, what the policy asks for and the
issuer's public URL. ``IssuerUnavailable``, a kind of ``Refused``, says the issuer did not
answer: not the caller's fault, and it may pass, so the endpoint should answer 503 (the
pipeline can retry) rather than 401 (which says its credential is bad).

The issuer's keys are read from its discovery document's ``jwks_uri`` and kept per issuer
in this process for WORKLOAD_IDENTITY_KEYS_SECONDS. Issuers rotate keys and sign with the
new one at once, so a token naming a key id the cache lacks has the keys read again, but
at most once per WORKLOAD_IDENTITY_KEYS_REFRESH_SECONDS per issuer: anyone may send a
token with a made-up key id, and must not be able to make Caldera hammer the issuer. A
refetch that fails is refused as unavailable; stale keys are not used in its place.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jwt
import requests
from django.conf import settings

logger = logging.getLogger(__name__)

# Asymmetric signatures only: ``none`` proves nothing, and an HMAC "verified" with a public
# key is a signature anyone can make (the classic algorithm confusion).
ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
MAX_TOKEN_CHARS = 16 * 1024  # GitHub's and GitLab's tokens are 1 to 2 KiB
MAX_DOCUMENT_BYTES = 256 * 1024  # a discovery document or a key set; GitHub's are 1 to 3 KiB
MAX_SHOWN_CHARS = 200  # of a claim's value quoted back in a refusal
GLOB_CHARACTERS = frozenset("*?[")


class Refused(Exception):
    """An ID token refused; ``reason`` names the failing check, safe to show the caller."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class IssuerUnavailable(Refused):
    """The issuer did not answer as an issuer should: the token may be good (answer 503)."""


# ---- Reading a token -------------------------------------------------------------------


def unverified_issuer(id_token: str) -> str:
    """The token's ``iss``, unverified: only to choose which policies to verify it against."""
    return _issuer_of(_unverified_claims(id_token))


def _issuer_of(claims: Mapping[str, Any]) -> str:
    issuer = claims.get("iss")
    if not isinstance(issuer, str) or not issuer:
        raise Refused("the ID token names no issuer (iss)")
    return issuer


def _unverified_claims(id_token: str) -> dict[str, Any]:
    if len(id_token) > MAX_TOKEN_CHARS:
        raise Refused(f"the ID token is longer than {MAX_TOKEN_CHARS} characters")
    try:
        claims: dict[str, Any] = jwt.decode(id_token, options={"verify_signature": False})
    except jwt.InvalidTokenError as error:
        raise Refused("the ID token is not a JWT") from error
    return claims


def _signing_header(id_token: str) -> tuple[str, str]:
    """The token's algorithm and key id, refused unless the algorithm is one we allow."""
    try:
        header = jwt.get_unverified_header(id_token)
    except jwt.InvalidTokenError as error:
        raise Refused("the ID token is not a JWT") from error
    algorithm, kid = header.get("alg"), header.get("kid")
    if algorithm not in ALGORITHMS:
        raise Refused(
            f"the ID token is signed with {_shown(algorithm)}, which is not allowed "
            f"(allowed: {', '.join(ALGORITHMS)})"
        )
    if not isinstance(kid, str) or not kid:
        # GitHub and GitLab always name the key; guessing one from the set is not worth it.
        raise Refused("the ID token names no key id (kid)")
    return algorithm, kid


# ---- Verifying it ----------------------------------------------------------------------


def verify(
    id_token: str, *, issuer: str, audience: str, leeway_seconds: int = 60
) -> dict[str, Any]:
    """The token's claims, once its signature verifies against a key ``issuer`` publishes
    and its issuer, audience (a string or a list holding ``audience``), expiry (required),
    not-before and issued-at hold, with ``leeway_seconds`` of clock skew either way."""
    claims = _unverified_claims(id_token)
    algorithm, kid = _signing_header(id_token)
    if _issuer_of(claims) != issuer:
        # Before any network: a token of another issuer need not cost a fetch.
        raise Refused(f"issuer is {_shown(claims['iss'])}; the policy asks for {issuer!r}")
    key = _signing_key(issuer=issuer, kid=kid, algorithm=algorithm)
    try:
        verified: dict[str, Any] = jwt.decode(
            id_token,
            key,
            algorithms=[algorithm],
            audience=audience,
            issuer=issuer,
            leeway=leeway_seconds,
            options={"require": ["exp", "iss", "aud"]},
        )
    except jwt.InvalidTokenError as error:
        raise Refused(
            _failed_check(error, claims, audience=audience, leeway=leeway_seconds)
        ) from error
    return verified


def _failed_check(
    error: jwt.InvalidTokenError, claims: Mapping[str, Any], *, audience: str, leeway: int
) -> str:
    """PyJWT's refusal in words that name the check and the values it compared. PyJWT
    checks the signature first, so the claims quoted here are the ones the issuer signed
    unless the refusal is the signature's own."""
    if isinstance(error, jwt.InvalidSignatureError):
        return "signature does not verify"
    if isinstance(error, jwt.ExpiredSignatureError):
        return f"the ID token expired at {_when(claims['exp'])}"
    if isinstance(error, jwt.ImmatureSignatureError):
        nbf = claims.get("nbf")
        if isinstance(nbf, int | float) and nbf > time.time() + leeway:
            return f"the ID token is not valid before {_when(nbf)}"
        return f"the ID token was issued in the future, at {_when(claims.get('iat'))}"
    if isinstance(error, jwt.MissingRequiredClaimError):
        return f"the ID token has no {error.claim} claim"
    if isinstance(error, jwt.InvalidAudienceError):
        return f"audience is {_shown(claims.get('aud'))}; the policy asks for {audience!r}"
    return f"the ID token is malformed: {error}"


def _when(timestamp: Any) -> str:
    try:
        return datetime.fromtimestamp(int(timestamp), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError, OverflowError, OSError):
        return _shown(timestamp)


def _shown(value: Any) -> str:
    """A value the caller sent, quoted back no longer than MAX_SHOWN_CHARS."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3] + "..."


# ---- The issuer's keys -----------------------------------------------------------------


@dataclass(frozen=True)
class _Published:
    keys: Mapping[str, jwt.PyJWK]  # by key id
    fetched_at: float  # time.monotonic()


_published: dict[str, _Published] = {}
_refreshed_at: dict[str, float] = {}  # the last refetch an unknown key id asked for
_refresh_lock = threading.Lock()


def _signing_key(*, issuer: str, kid: str, algorithm: str) -> jwt.PyJWK:
    """The key ``issuer`` publishes as ``kid``: from the cache while it is fresh, read
    again when the cache does not hold it (a key id the issuer's set, just read, does not
    hold is not worth a second read)."""
    keys = _cached_keys(issuer)
    if keys is None or (kid not in keys and _may_refresh(issuer)):
        keys = _fetch_keys(issuer)
    key = keys.get(kid)
    if key is None:
        raise Refused(f"the ID token is signed with key {kid!r}, which {issuer} does not publish")
    if key.algorithm_name != algorithm:
        raise Refused(
            f"the ID token is signed with {algorithm}, but key {kid!r} of {issuer} is "
            f"for {key.algorithm_name}"
        )
    return key


def _cached_keys(issuer: str) -> Mapping[str, jwt.PyJWK] | None:
    published = _published.get(issuer)
    if published is None:
        return None
    if time.monotonic() - published.fetched_at >= settings.WORKLOAD_IDENTITY_KEYS_SECONDS:
        return None
    return published.keys


def _may_refresh(issuer: str) -> bool:
    """Whether an unknown key id may have ``issuer``'s keys read again now; if so, the
    next one may not for WORKLOAD_IDENTITY_KEYS_REFRESH_SECONDS (taken under a lock, so
    a burst of requests in several threads makes one refetch, not one each)."""
    now = time.monotonic()
    with _refresh_lock:
        last = _refreshed_at.get(issuer)
        if last is not None and now - last < settings.WORKLOAD_IDENTITY_KEYS_REFRESH_SECONDS:
            return False
        _refreshed_at[issuer] = now
        return True


def _fetch_keys(issuer: str) -> Mapping[str, jwt.PyJWK]:
    """The keys ``issuer`` publishes, read through its discovery document and cached."""
    discovery = _get_json(f"{issuer.rstrip('/')}/.well-known/openid-configuration", issuer)
    if discovery.get("issuer") != issuer:
        # A document of another issuer would let that issuer's keys sign for this one.
        raise Refused(
            f"the discovery document of {issuer} names {_shown(discovery.get('issuer'))} "
            f"as its issuer"
        )
    jwks_uri = discovery.get("jwks_uri")
    if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
        raise Refused(f"the discovery document of {issuer} names no http(s) jwks_uri")
    keys = _signing_keys(_get_json(jwks_uri, issuer))
    _published[issuer] = _Published(keys=keys, fetched_at=time.monotonic())
    return keys


def _signing_keys(jwks: Mapping[str, Any]) -> dict[str, jwt.PyJWK]:
    """The key set's public signing keys by key id. Keys without an id, for encryption,
    private, symmetric or of a type PyJWT cannot read are left out, not fatal: one odd key
    must not stop the others from verifying."""
    keys: dict[str, jwt.PyJWK] = {}
    listed = jwks.get("keys")
    for jwk in listed if isinstance(listed, list) else []:
        if not isinstance(jwk, dict) or not isinstance(jwk.get("kid"), str):
            continue
        if jwk.get("use", "sig") != "sig" or "d" in jwk:
            continue
        try:
            key = jwt.PyJWK(jwk)
        except jwt.PyJWTError:
            continue
        if key.algorithm_name in ALGORITHMS:
            keys[jwk["kid"]] = key
    return keys


def _get_json(url: str, issuer: str) -> dict[str, Any]:
    """A JSON object from the issuer, within WORKLOAD_IDENTITY_TIMEOUT_SECONDS in all and
    MAX_DOCUMENT_BYTES: requests' own timeout bounds each read, not the whole answer."""
    timeout = settings.WORKLOAD_IDENTITY_TIMEOUT_SECONDS
    deadline = time.monotonic() + timeout
    body = bytearray()
    try:
        with requests.get(url, timeout=timeout, stream=True) as response:
            if response.status_code != 200:
                raise _unavailable(issuer, f"{response.status_code} at {url}")
            for chunk in response.iter_content(chunk_size=16 * 1024):
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise _unavailable(issuer, f"more than {MAX_DOCUMENT_BYTES} bytes at {url}")
                if time.monotonic() > deadline:
                    raise _unavailable(issuer, f"no whole answer within {timeout:g} s at {url}")
    except requests.Timeout as error:
        raise _unavailable(issuer, f"no answer within {timeout:g} s at {url}", error) from error
    except requests.RequestException as error:
        raise _unavailable(issuer, f"{url} could not be read", error) from error
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise _unavailable(issuer, f"no JSON object at {url}")
    return document


def _unavailable(issuer: str, what: str, error: Exception | None = None) -> IssuerUnavailable:
    """The refusal for an issuer that did not answer: the log keeps the underlying error
    (addresses, proxies), the caller is told what failed and where."""
    logger.warning("workload identity: the issuer %s did not answer: %s (%s)", issuer, what, error)
    return IssuerUnavailable(f"the issuer {issuer} did not answer: {what}")


# ---- A policy's conditions -------------------------------------------------------------


def condition_refusal(claims: Mapping[str, Any], conditions: Mapping[str, str]) -> str | None:
    """Why ``claims`` fail the policy's ``conditions``, or None when every one holds.

    Each condition is a claim name and a pattern. A pattern holding ``*``, ``?`` or ``[``
    is a glob matched against the whole value (fnmatch.fnmatchcase: case-sensitive, and
    ``*`` crosses ``/`` and ``:``, so ``repo:org/*`` is every repository of org and every
    ref); any other pattern must equal the value. A missing (or null) claim fails. A
    number or a boolean is compared as its JSON text (``42``, ``true``), as GitLab and
    GitHub send some claims as strings and other issuers as JSON values; a list or an
    object fails, as no pattern says which of its parts to compare. The first condition
    that fails, in the conditions' order, is the one named.
    """
    for name, pattern in conditions.items():
        value = claims.get(name)
        if value is None:
            return f"claim {name} is missing; the policy asks for {pattern}"
        text = _claim_text(value)
        if text is None:
            kind = "a list" if isinstance(value, list) else "an object"
            return f"claim {name} is {kind}; the policy asks for {pattern}"
        if not _matches(text, pattern):
            return f"claim {name} is {_shown_text(text)}; the policy asks for {pattern}"
    return None


def _claim_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def _matches(value: str, pattern: str) -> bool:
    if GLOB_CHARACTERS.intersection(pattern):
        return fnmatch.fnmatchcase(value, pattern)
    return value == pattern


def _shown_text(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 3] + "..."
