"""Workload identity: trust policies, and a CI job's ID token exchanged for a short-lived
access token with the scope of the policy it meets.

Nothing secret is stored in the CI: GitHub Actions or GitLab CI sign an ID token for the
job (``access.oidc`` checks it against the issuer's published keys), and an admin's trust
policy says which jobs (claim conditions) act as whom, with which rights, for how long.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction
from django.utils import timezone

from audit.models import AuditEntry
from audit.services import audit_record
from queues.models import Department
from queues.scope import RIGHTS, Right, includes

from . import keys, oidc
from .models import AccessToken, Exchange, TrustPolicy
from .services import TokenInvalid

LIFETIME_SECONDS = (60, 12 * 3600)
DEFAULT_LIFETIME_SECONDS = 15 * 60
MOST_CONDITIONS = 20
LONGEST_PATTERN = 500
TOKEN_NAME = AccessToken._meta.get_field("name").max_length
SLUG = re.compile(r"[-\w]{1,63}", re.ASCII)


@dataclass(frozen=True)
class PolicyIn:
    """A trust policy as an admin writes it, checked by ``policy_save``."""

    name: str
    issuer: str
    audience: str
    conditions: Mapping[str, str]
    acts_as: Any  # a user
    right: str = Right.SUBMIT
    departments: Collection[str] | None = None  # names; None: all of acts_as's
    lifetime_seconds: int = DEFAULT_LIFETIME_SECONDS
    active: bool = True


def issuer_refusal(issuer: str) -> str | None:
    """An issuer is an https URL, or http on this machine (a local issuer)."""
    parts = urlsplit(issuer)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname:
        try:
            if ipaddress.ip_address(parts.hostname).is_loopback:
                return None
        except ValueError:
            if parts.hostname == "localhost":
                return None
    return "an https URL, e.g. https://token.actions.githubusercontent.com"


def policy_errors(policy: PolicyIn) -> dict[str, str]:
    """Every field of ``policy`` that is wrong, with why."""
    errors = {}
    if not SLUG.fullmatch(policy.name or ""):
        errors["name"] = "1 to 63 letters, digits, - or _"
    refusal = issuer_refusal(policy.issuer.rstrip("/"))
    if refusal is not None:
        errors["issuer"] = refusal
    if not policy.audience.strip():
        errors["audience"] = "the audience the CI job asks its ID token for, e.g. caldera"
    conditions = policy.conditions
    if not isinstance(conditions, Mapping) or not conditions:
        errors["conditions"] = (
            "at least one claim condition, e.g. repository or sub: without one, every "
            "pipeline the issuer signs for would be let in"
        )
    elif len(conditions) > MOST_CONDITIONS or not all(
        isinstance(name, str) and isinstance(pattern, str) and 0 < len(pattern) <= LONGEST_PATTERN
        for name, pattern in conditions.items()
    ):
        errors["conditions"] = (
            f"at most {MOST_CONDITIONS} claim names, each with a value or glob of 1 to "
            f"{LONGEST_PATTERN} characters"
        )
    user = policy.acts_as
    if policy.right not in RIGHTS:
        errors["right"] = f"{policy.right!r} is not one of {', '.join(RIGHTS)}"
    elif policy.right == Right.ADMIN and not user.is_staff:
        errors["right"] = f"admin only for staff; {user.username} is not"
    elif hasattr(user, "service_identity") and includes(policy.right, Right.MANAGE):
        errors["right"] = "a service identity submits at most"
    if policy.departments is not None:
        held = set(Department.objects.filter(membership__user=user).values_list("name", flat=True))
        unknown = sorted(set(policy.departments) - held)
        if unknown:
            errors["departments"] = f"{', '.join(unknown)}: not a department of {user.username}"
        elif not policy.departments:
            errors["departments"] = "name at least one department, or leave it out for all"
    low, high = LIFETIME_SECONDS
    if not low <= policy.lifetime_seconds <= high:
        errors["lifetime_seconds"] = f"from {low} to {high} seconds"
    return errors


def policy_snapshot(policy: TrustPolicy) -> dict:
    departments = sorted(d.name for d in policy.departments.all()) or "all"
    return {
        "issuer": policy.issuer,
        "audience": policy.audience,
        "conditions": dict(policy.conditions),
        "acts_as": policy.acts_as.username,
        "right": policy.right,
        "departments": departments,
        "lifetime_seconds": policy.lifetime_seconds,
        "active": policy.active,
    }


def policy_save(
    asked: PolicyIn, *, actor, source: str, policy: TrustPolicy | None = None
) -> TrustPolicy:
    """Create a trust policy, or change ``policy``, once every field is right; audited."""
    errors = policy_errors(asked)
    taken = TrustPolicy.objects.filter(name=asked.name)
    if policy is not None:
        taken = taken.exclude(pk=policy.pk)
    if taken.exists():
        errors["name"] = f"a trust policy named {asked.name!r} exists"
    if errors:
        raise TokenInvalid(errors)
    with transaction.atomic():
        before = policy_snapshot(policy) if policy is not None else None
        policy = policy or TrustPolicy()
        policy.name = asked.name
        policy.issuer = asked.issuer.rstrip("/")
        policy.audience = asked.audience.strip()
        policy.conditions = dict(asked.conditions)
        policy.acts_as = asked.acts_as
        policy.right = asked.right
        policy.lifetime_seconds = asked.lifetime_seconds
        policy.active = asked.active
        policy.save()
        names = asked.departments or []
        policy.departments.set(Department.objects.filter(name__in=names))
        audit_record(
            action=AuditEntry.Action.CREATED if before is None else AuditEntry.Action.UPDATED,
            object_type=AuditEntry.ObjectType.TRUST_POLICY,
            object_key=policy.name,
            before=before,
            after=policy_snapshot(policy),
            actor=actor,
            source=source,
        )
    return policy


def policy_delete(policy: TrustPolicy, *, actor, source: str) -> None:
    """Delete a policy; the tokens it gave keep their short lives, its exchanges their rows."""
    with transaction.atomic():
        before, name = policy_snapshot(policy), policy.name
        policy.delete()
        audit_record(
            action=AuditEntry.Action.DELETED,
            object_type=AuditEntry.ObjectType.TRUST_POLICY,
            object_key=name,
            before=before,
            actor=actor,
            source=source,
        )


@dataclass(frozen=True)
class Exchanged:
    token: AccessToken
    key: str
    policy: TrustPolicy


def exchange(id_token: str, *, address: str | None) -> Exchanged:
    """The access token a CI job's ID token earns: that of the first active policy (by name)
    of its issuer whose audience and conditions it meets. Raises ``oidc.Refused`` naming
    each policy's failing check, or ``oidc.IssuerUnavailable`` when the issuer does not
    answer (the pipeline may try again)."""
    issuer = oidc.unverified_issuer(id_token).rstrip("/")
    policies = list(
        TrustPolicy.objects.filter(issuer=issuer, active=True)
        .select_related("acts_as")
        .prefetch_related("departments")
        .order_by("name")
    )
    if not policies:
        raise oidc.Refused(f"issuer {issuer!r} is not trusted: no policy names it")
    reasons = []
    verified: dict[str, dict] = {}  # claims by audience: one check per audience
    for policy in policies:
        try:
            claims = verified.get(policy.audience) or oidc.verify(
                id_token, issuer=policy.issuer, audience=policy.audience
            )
        except oidc.IssuerUnavailable:
            raise
        except oidc.Refused as refused:
            reasons.append(f"policy {policy.name}: {refused.reason}")
            continue
        verified[policy.audience] = claims
        refusal = oidc.condition_refusal(claims, policy.conditions)
        if refusal is not None:
            reasons.append(f"policy {policy.name}: {refusal}")
            continue
        if not policy.acts_as.is_active:
            reasons.append(f"policy {policy.name}: it acts as {policy.acts_as}, who is inactive")
            continue
        return _issue(policy, claims, address)
    raise oidc.Refused("; ".join(reasons))


def _issue(policy: TrustPolicy, claims: Mapping, address: str | None) -> Exchanged:
    key = keys.new_key(AccessToken.Kind.EXCHANGED)
    now = timezone.now()
    subject = str(claims.get("sub", ""))[:500]
    departments = list(policy.departments.all())
    with transaction.atomic():
        token = AccessToken.objects.create(
            user=policy.acts_as,
            kind=AccessToken.Kind.EXCHANGED,
            name=f"{policy.name}: {subject}"[:TOKEN_NAME],
            prefix=keys.display_prefix(key),
            digest=keys.digest(key),
            right=policy.right,
            all_departments=not departments,
            created_at=now,
            expires_at=now + timedelta(seconds=policy.lifetime_seconds),
            policy=policy,
        )
        token.departments.set(departments)
        kept = {name: claims.get(name) for name in (*policy.conditions, "iss", "sub", "aud")}
        Exchange.objects.create(
            at=now,
            policy=policy,
            issuer=policy.issuer,
            subject=subject,
            claims=kept,
            token=token,
            address=address,
        )
    return Exchanged(token, key, policy)
