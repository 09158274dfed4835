"""What a credential lets its bearer do: its rights and the departments it may act in.

A person signed in to the pages acts with everything they are. A request made with a token
acts with the token's scope, which travels on the user the token authenticates
(``scoped``), so the one place that computes a request's departments and roles
(``queues.selectors.user_roles``) narrows every list, page, bulk action and write at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _


class Right(models.TextChoices):
    """A token's rights, each including the ones before it."""

    READ = "read", _("read: lists, pages' data, logs")
    SUBMIT = "submit", _("submit: read, and submit, cancel and resubmit one's own jobs")
    MANAGE = "manage", _("manage: everything the person may do in the departments")
    ADMIN = "admin", _("admin: the person's staff rights too")


RIGHTS: list[str] = list(Right.values)  # in order: each includes those before it


def includes(held: str, needed: str) -> bool:
    return RIGHTS.index(held) >= RIGHTS.index(needed)


@dataclass(frozen=True)
class Scope:
    """``departments``: the ids of the departments the token acts in; None for all of the
    person's, today's and later ones. ``token``: the token's id, so that what the request
    does (a job it submits) is traced to it."""

    right: str
    departments: frozenset[int] | None = None
    token: int | None = None

    def allows(self, needed: str) -> bool:
        return includes(self.right, needed)

    def lacks(self, needed: str) -> str:
        """The refusal of a request that needs ``needed``."""
        return gettext("this token's scope is %(right)s; this needs %(needed)s") % {
            "right": self.right,
            "needed": needed,
        }


SCOPE_ATTRIBUTE = "token_scope"


def scoped(user, scope: Scope):
    """``user`` acting with ``scope``: their staff rights (``is_staff``, ``is_superuser``,
    which Django, DRF and every check here read) lowered, in this request only, when the
    scope does not name ``admin``. The user is never saved by the request that carries it."""
    setattr(user, SCOPE_ATTRIBUTE, scope)
    if not scope.allows(Right.ADMIN):
        user.is_staff = user.is_superuser = False
    return user


def scope_of(user) -> Scope | None:
    """The scope a request's user acts with; None for a person signed in to the pages."""
    return getattr(user, SCOPE_ATTRIBUTE, None)
