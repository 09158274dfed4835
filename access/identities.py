"""Service identities: a department's pipelines as a user of their own, made and managed by
the department's managers (and staff). No password and no sign-in: only tokens, which
submit at most; its jobs say "submitted by pipeline <name>"."""

from __future__ import annotations

import re
from typing import cast

from django.contrib.auth import get_user_model
from django.db import transaction

from audit.models import AuditEntry
from audit.services import audit_record
from queues.departments import membership_set
from queues.models import Department, Membership

from .models import ServiceIdentity
from .services import TokenInvalid

NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")
DESCRIPTION = cast(int, ServiceIdentity._meta.get_field("description").max_length)


def may_manage(user, department: Department) -> bool:
    """Staff, and the department's managers, manage its members' pipelines."""
    if user.is_staff:
        return True
    return Membership.objects.filter(
        user=user, department=department, role=Membership.Role.MANAGER
    ).exists()


def username_for(department: Department, name: str) -> str:
    return f"svc-{department.name}-{name}"


def is_service(user) -> bool:
    return ServiceIdentity.objects.filter(user_id=user.pk).exists()


def service_identity_create(
    *, department: Department, name: str, description: str = "", actor, source: str
) -> ServiceIdentity:
    """A new service identity ``svc-<department>-<name>``, a member of ``department``."""
    errors = {}
    if not NAME.fullmatch(name):
        errors["name"] = "1 to 40 lowercase letters, digits and -, e.g. nightly-train"
    elif get_user_model().objects.filter(username=username_for(department, name)).exists():
        errors["name"] = f"{username_for(department, name)} exists"
    if len(description) > DESCRIPTION:
        errors["description"] = f"at most {DESCRIPTION} characters"
    if errors:
        raise TokenInvalid(errors)
    username = username_for(department, name)
    with transaction.atomic():
        user = get_user_model().objects.create(username=username)
        user.set_unusable_password()
        user.save(update_fields=["password"])
        identity = ServiceIdentity.objects.create(
            user=user, department=department, description=description, created_by=actor
        )
        membership_set(
            department=department,
            username=username,
            role=Membership.Role.MEMBER,
            actor=actor,
            source=source,
        )
        audit_record(
            action=AuditEntry.Action.CREATED,
            object_type=AuditEntry.ObjectType.SERVICE_IDENTITY,
            object_key=f"{department.name}/{username}",
            after={"description": description},
            actor=actor,
            source=source,
        )
    return identity
