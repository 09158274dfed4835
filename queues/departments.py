"""Writes to departments, their memberships and the people a sign-in brings, each audited in
its own transaction."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from audit.models import AuditEntry
from audit.services import audit_record

from .models import Department, Membership, QuotaNode

Action = AuditEntry.Action
ObjectType = AuditEntry.ObjectType
Source = AuditEntry.Source


def department_snapshot(department: Department) -> dict:
    return {"name": department.name, "quota_node": department.quota_node.path}


def _audit_department(action: str, key: str, before, after, *, actor, source: str) -> None:
    audit_record(
        action=action,
        object_type=ObjectType.DEPARTMENT,
        object_key=key,
        before=before,
        after=after,
        actor=actor,
        source=source,
    )


def department_create(
    *, name: str, quota_node: QuotaNode, actor=None, source: str = Source.COMMAND
) -> Department:
    with transaction.atomic():
        department = Department.objects.create(name=name, quota_node=quota_node)
        after = department_snapshot(department)
        _audit_department(Action.CREATED, name, None, after, actor=actor, source=source)
    return department


def department_update(
    *,
    department: Department,
    name: str,
    quota_node: QuotaNode,
    actor=None,
    source: str = Source.COMMAND,
) -> Department:
    """Rename a department or move it to another node; its history stays under both names
    (the entry of the rename carries the old one)."""
    with transaction.atomic():
        rows = Department.objects.select_for_update().select_related("quota_node")
        row = rows.get(pk=department.pk)
        before = department_snapshot(row)
        row.name, row.quota_node = name, quota_node
        row.save(update_fields=["name", "quota_node"])
        after = department_snapshot(row)
        _audit_department(Action.UPDATED, row.name, before, after, actor=actor, source=source)
    return row


def department_delete(*, department: Department, actor=None, source: str = Source.COMMAND) -> None:
    """Delete a department and its memberships, each recorded (the jobs keep their queues)."""
    with transaction.atomic():
        for membership in Membership.objects.filter(department=department):
            membership_delete(membership=membership, actor=actor, source=source)
        row = Department.objects.select_related("quota_node").filter(pk=department.pk).first()
        if row is None:
            return
        before = department_snapshot(row)
        row.delete()
        _audit_department(Action.DELETED, row.name, before, None, actor=actor, source=source)


def membership_key(membership: Membership) -> str:
    """``algorithm/alice``: the department first, so a department's history includes it."""
    return f"{membership.department.name}/{membership.user.username}"


def membership_set(
    *,
    department: Department,
    username: str,
    role: str,
    actor=None,
    source: str = Source.COMMAND,
) -> Membership:
    """Add a user (created if missing, without a usable password) with a role, or change the
    role; only a real change is audited, so setting the same role twice records one entry."""
    with transaction.atomic():
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            # A new person signs in once an admin gives them a password (or with a token).
            user.set_unusable_password()
            user.save(update_fields=["password"])
        membership, added = Membership.objects.select_for_update().get_or_create(
            department=department, user=user, defaults={"role": role}
        )
        before = None if added else {"role": membership.role}
        if not added and membership.role != role:
            membership.role = role
            membership.save(update_fields=["role"])
        audit_record(
            action=Action.CREATED if added else Action.UPDATED,
            object_type=ObjectType.MEMBERSHIP,
            object_key=membership_key(membership),
            before=before,
            after={"role": membership.role},
            actor=actor,
            source=source,
        )
    return membership


def membership_delete(*, membership: Membership, actor=None, source: str = Source.COMMAND) -> None:
    """Remove a person from a department; removing one already gone records nothing."""
    with transaction.atomic():
        row = (
            Membership.objects.select_for_update()
            .select_related("department", "user")
            .filter(pk=membership.pk)
            .first()
        )
        if row is None:
            return
        row.delete()
        audit_record(
            action=Action.DELETED,
            object_type=ObjectType.MEMBERSHIP,
            object_key=membership_key(row),
            before={"role": row.role},
            actor=actor,
            source=source,
        )


def person_signed_in(
    *,
    username: str,
    profile: Mapping[str, str],
    roles: Mapping[str, str],
    departments: Collection[str],
    admin: bool | None,
) -> tuple[AbstractBaseUser, list[str]]:
    """What an identity provider says of a person at their sign-in, made true in one
    transaction: the user (created the first time, without a password: they sign in through
    the provider), their profile (``email``, ``first_name``, ``last_name``), their
    memberships in ``departments`` (the ones the provider's groups govern) exactly
    ``roles`` ({department: role}), and, unless ``admin`` is None, their admin rights.
    Memberships in other departments are an admin's to change and stay. Every change is
    audited with the person as actor and ``sign-in`` as source.

    Returns the user and the departments of ``roles`` that do not exist (nobody is added
    to them; the caller says so in its log).
    """
    with transaction.atomic():
        user, created = (
            get_user_model()
            .objects.select_for_update()
            .get_or_create(username=username, defaults=dict(profile))
        )
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        elif any(getattr(user, field) != value for field, value in profile.items()):
            for field, value in profile.items():
                setattr(user, field, value)
            user.save(update_fields=list(profile))
        if admin is not None and (user.is_staff, user.is_superuser) != (admin, admin):
            before = {"admin": user.is_staff and user.is_superuser}
            user.is_staff = user.is_superuser = admin
            user.save(update_fields=["is_staff", "is_superuser"])
            audit_record(
                action=Action.UPDATED,
                object_type=ObjectType.PERSON,
                object_key=username,
                before=before,
                after={"admin": admin},
                actor=user,
                source=Source.SIGN_IN,
            )
        governed = Department.objects.filter(name__in=[*departments, *roles])
        by_name = {department.name: department for department in governed}
        held = Membership.objects.filter(user=user, department__name__in=list(departments))
        for membership in held.select_related("department", "user"):
            if membership.department.name not in roles:
                membership_delete(membership=membership, actor=user, source=Source.SIGN_IN)
        for name, role in sorted(roles.items()):
            if name in by_name:
                membership_set(
                    department=by_name[name],
                    username=username,
                    role=role,
                    actor=user,
                    source=Source.SIGN_IN,
                )
    return user, sorted(set(roles) - set(by_name))
