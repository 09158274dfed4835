"""Access tokens: made, checked on every API request, revoked, expired, each change audited.

A token acts for one user with a scope (``queues.scope``): rights and departments, never
more than the user has. Made by its owner (on their page or through the API), by a
department's manager for the department's service identities, by staff for anyone (the
admin site), or by an exchange of a CI job's ID token (``access.exchange``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.models import AuditEntry
from audit.services import audit_record
from queues.models import Department
from queues.scope import RIGHTS, Right, Scope, includes, scope_of, scoped

from . import keys, tables
from .models import AccessToken

Action = AuditEntry.Action
Source = AuditEntry.Source
NAME_LENGTH = cast(int, AccessToken._meta.get_field("name").max_length)


class TokenInvalid(Exception):
    """A token that cannot be made as asked: ``errors`` is {field: [reason]}."""

    def __init__(self, errors: dict[str, str]):
        super().__init__(errors)
        self.errors = {field: [reason] for field, reason in errors.items()}


class TokenRefused(Exception):
    """A request's token that lets nobody in; the message says why, and never whose it is."""


def token_key(token: AccessToken) -> str:
    return f"{token.user.username}/{token.prefix}"


def token_snapshot(token: AccessToken) -> dict:
    departments = (
        "all" if token.all_departments else sorted(d.name for d in token.departments.all())
    )
    return {
        "name": token.name,
        "kind": token.kind,
        "right": token.right,
        "departments": departments,
        "expires_at": token.expires_at.isoformat() if token.expires_at else "never",
    }


def _audit(token: AccessToken, action: str, *, actor, source: str, before=None, after=None):
    audit_record(
        action=action,
        object_type=AuditEntry.ObjectType.ACCESS_TOKEN,
        object_key=token_key(token),
        before=before,
        after=after,
        actor=actor,
        source=source,
    )


def default_days() -> int:
    """A new token's lifetime when its maker picks none."""
    return min(settings.ACCESS_TOKEN_DEFAULT_DAYS, settings.ACCESS_TOKEN_MAX_DAYS)


def expiry_choices() -> list[int | None]:
    """The lifetimes, in days, a page offers (None: never, where settings allow it)."""
    longest = settings.ACCESS_TOKEN_MAX_DAYS
    days = sorted({d for d in (7, 30, 90, 180, 366) if d <= longest} | {longest, default_days()})
    options: list[int | None] = list(days)
    return [*options, None] if settings.ACCESS_TOKEN_ALLOW_NEVER else options


def person_departments(user) -> list[Department]:
    """The departments a token of ``user`` may name: those they belong to."""
    return list(Department.objects.filter(membership__user=user).order_by("name"))


@dataclass(frozen=True)
class Asked:
    """A token as its maker asks for it, checked by ``token_create``."""

    name: str
    right: str
    departments: Collection[str] | None = None  # names; None: all the person's, later ones too
    expires_in_days: int | None = -1  # -1: the settings' default; None: never


def _checked(
    user, asked: Asked, maker_scope: Scope | None
) -> tuple[list[Department], datetime | None]:
    """The departments and expiry of ``asked`` for ``user``, or TokenInvalid naming each
    field that is wrong. ``maker_scope``: the scope of the token that asks for this one,
    which the new one may not exceed."""
    errors: dict[str, str] = {}
    name = asked.name.strip()
    if not name:
        errors["name"] = _("give the token a name, e.g. the pipeline it is for")
    elif len(name) > NAME_LENGTH:
        errors["name"] = _("at most %(most)d characters") % {"most": NAME_LENGTH}
    if asked.right not in RIGHTS:
        errors["right"] = _("%(right)r is not one of %(rights)s") % {
            "right": asked.right,
            "rights": ", ".join(RIGHTS),
        }
    elif asked.right == Right.ADMIN and not user.is_staff:
        errors["right"] = _("admin is for staff only")
    elif hasattr(user, "service_identity") and includes(asked.right, Right.MANAGE):
        errors["right"] = _("a service identity's tokens submit at most")
    elif maker_scope is not None and not maker_scope.allows(asked.right):
        errors["right"] = _("the token making it has %(right)s; a new one cannot have more") % {
            "right": maker_scope.right
        }
    held = {d.name: d for d in person_departments(user)}
    chosen: list[Department] = []
    if asked.departments is not None:
        unknown = sorted(set(asked.departments) - set(held))
        if unknown:
            errors["departments"] = _("%(names)s: not a department of %(person)s") % {
                "names": ", ".join(unknown),
                "person": user.username,
            }
        elif not asked.departments:
            errors["departments"] = _("name at least one department, or leave it out for all")
        chosen = [held[name] for name in sorted(set(asked.departments) & set(held))]
    if maker_scope is not None and maker_scope.departments is not None:
        if asked.departments is None or any(d.pk not in maker_scope.departments for d in chosen):
            errors.setdefault(
                "departments", _("the token making it names fewer departments; name them")
            )
    expires_at: datetime | None = None
    days = (
        settings.ACCESS_TOKEN_DEFAULT_DAYS if asked.expires_in_days == -1 else asked.expires_in_days
    )
    if days is None:
        if not settings.ACCESS_TOKEN_ALLOW_NEVER:
            errors["expires_in_days"] = _("tokens here expire; pick 1 to %(most)d days") % {
                "most": settings.ACCESS_TOKEN_MAX_DAYS
            }
    elif not 1 <= days <= settings.ACCESS_TOKEN_MAX_DAYS:
        errors["expires_in_days"] = _("from 1 to %(most)d days") % {
            "most": settings.ACCESS_TOKEN_MAX_DAYS
        }
    else:
        expires_at = timezone.now() + timedelta(days=days)
    live = AccessToken.objects.filter(user=user, revoked_at=None).exclude(
        expires_at__lte=timezone.now()
    )
    if live.count() >= settings.ACCESS_TOKENS_PER_PERSON:
        errors["name"] = _(
            "%(person)s holds %(count)d live tokens, the most allowed; revoke one first"
        ) % {"person": user.username, "count": settings.ACCESS_TOKENS_PER_PERSON}
    if errors:
        raise TokenInvalid(errors)
    return chosen, expires_at


def token_create(*, user, asked: Asked, actor, source: str) -> tuple[AccessToken, str]:
    """Make a personal access token for ``user``; returns it and its secret, which is shown
    this once and kept only as its digest. ``actor`` is whoever asks: the user, a manager
    of a service identity's department, or staff; when ``actor`` acts through a token, the
    new token cannot exceed that token's scope."""
    departments, expires_at = _checked(user, asked, scope_of(actor))
    key = keys.new_key(AccessToken.Kind.PERSONAL)
    with transaction.atomic():
        token = AccessToken.objects.create(
            user=user,
            kind=AccessToken.Kind.PERSONAL,
            name=asked.name.strip(),
            prefix=keys.display_prefix(key),
            digest=keys.digest(key),
            right=asked.right,
            all_departments=asked.departments is None,
            expires_at=expires_at,
            created_by=actor,
        )
        token.departments.set(departments)
        _audit(token, Action.CREATED, actor=actor, source=source, after=token_snapshot(token))
    return token, key


def token_revoke(*, token: AccessToken, actor, source: str, now: datetime | None = None) -> bool:
    """Revoke one token; False when it was revoked already (nothing is recorded again)."""
    now = now or timezone.now()
    with transaction.atomic():
        revoked = AccessToken.objects.filter(pk=token.pk, revoked_at=None).update(
            revoked_at=now, revoked_by=actor if actor and actor.is_authenticated else None
        )
        if revoked:
            _audit(token, Action.REVOKED, actor=actor, source=source, before=token_snapshot(token))
    return bool(revoked)


def tokens_revoke_all(*, user, actor, source: str) -> int:
    """Revoke every live token of ``user`` (a leak of unknown reach); returns how many."""
    now = timezone.now()
    count = 0
    with transaction.atomic():
        live = AccessToken.objects.filter(user=user, revoked_at=None).select_related("user")
        for token in live.order_by("id").select_for_update(of=("self",)):
            count += token_revoke(token=token, actor=actor, source=source, now=now)
    return count


def tokens_expire(now: datetime | None = None) -> int:
    """Record the expiry of every token that expired since the last sweep (beat runs it);
    tokens a CI job got by an exchange are many and short-lived, and their exchange is
    their record, so they are marked without an entry."""
    now = now or timezone.now()
    count = 0
    with transaction.atomic():
        due = (
            AccessToken.objects.filter(expires_at__lte=now, expiry_recorded=False)
            .select_related("user")
            .order_by("id")
            .select_for_update(of=("self",), skip_locked=True)
        )
        for token in due[:1000]:
            if token.revoked_at is None and token.kind != AccessToken.Kind.EXCHANGED:
                _audit(token, Action.EXPIRED, actor=None, source=Source.COMMAND)
                count += 1
            AccessToken.objects.filter(pk=token.pk).update(expiry_recorded=True)
    return count


def token_authenticate(key: str, address: str | None) -> tuple[object, AccessToken]:
    """The user a request's token acts as, carrying the token's scope, and the token; or
    TokenRefused saying why (malformed, unknown, revoked, expired, its user inactive)."""
    refusal = keys.key_refusal(key)
    if refusal is not None:
        raise TokenRefused(refusal)
    found = tables.token_find(keys.digest(key), address)
    if found is None:
        raise TokenRefused("the token is not valid")
    token, user, now = found.token, found.user, timezone.now()
    if token.revoked_at is not None:
        raise TokenRefused(f"the token was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC")
    if token.expires_at is not None and token.expires_at <= now:
        raise TokenRefused(f"the token expired on {token.expires_at:%Y-%m-%d %H:%M} UTC")
    if not user.is_active:
        raise TokenRefused("the token's user is inactive")
    token.user = user
    due = token.last_used_at is None or token.last_used_at < now - tables.USE_RECORDED_EVERY
    if address and (due or not found.address_known):
        _record_use(token, address, now)
    departments = None if token.all_departments else found.departments
    return scoped(user, Scope(token.right, departments, token.pk)), token


def _record_use(token: AccessToken, address: str, now: datetime) -> None:
    with transaction.atomic():
        if tables.token_use(token.pk, address, now) and token.kind != AccessToken.Kind.EXCHANGED:
            _audit(
                token, Action.USED, actor=token.user, source=Source.API, after={"address": address}
            )


def full_token(user, *, name: str, actor=None, source: str = Source.COMMAND) -> str:
    """The secret of a new token with all of ``user``'s rights in all their departments, for
    the default expiry: what ``manage.py token_create`` makes without options, and the
    benchmarks' clients."""
    right = Right.ADMIN if user.is_staff else Right.MANAGE
    if hasattr(user, "service_identity"):
        right = Right.SUBMIT
    _, key = token_create(
        user=user, asked=Asked(name=name, right=right), actor=actor, source=source
    )
    return key
