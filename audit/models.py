"""Who changed what, when, from where: one row per change to the quota tree and its people.

The audit app knows nothing of quotas: callers hand it a type, a key and two snapshots
(plain JSON), so it stays below every other app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditEntry(models.Model):
    """One change. ``before`` is empty for a creation, ``after`` for a retirement or deletion.

    Entries are written in the transaction of the change they record, so a refused change
    leaves none, and they are never edited afterwards.
    """

    class Action(models.TextChoices):
        CREATED = "created", "created"
        UPDATED = "updated", "updated"
        RETIRED = "retired", "retired"
        DELETED = "deleted", "deleted"
        REVOKED = "revoked", "revoked"  # a credential, by its owner or staff
        EXPIRED = "expired", "expired"  # a credential, at its expiry
        USED = "used", "used from a new address"  # a credential, from an address it had not been

    class ObjectType(models.TextChoices):
        QUOTA_NODE = "quota node", "quota node"
        # A whole tree applied after its preview: the preview the person confirmed.
        QUOTA_TREE = "quota tree", "quota tree"
        QUEUE = "queue", "queue"
        DEPARTMENT = "department", "department"
        MEMBERSHIP = "membership", "membership"
        PERSON = "person", "person"  # a user's admin rights, as a sign-in sets them
        ACCESS_TOKEN = "access token", "access token"  # key: username/prefix
        TRUST_POLICY = "trust policy", "trust policy"
        SERVICE_IDENTITY = "service identity", "service identity"  # key: department/username

    class Source(models.TextChoices):
        """The channel a change came through; the actor says who used it."""

        ADMIN = "admin", "admin"  # the admin site's forms
        API = "api", "API"  # the REST API
        YAML_IMPORT = (
            "yaml import",
            "YAML import",
        )  # a whole tree pasted or uploaded on the admin's YAML page
        COMMAND = "command", "command"  # manage.py (import_tree, demo) and code without a person
        SIGN_IN = "sign-in", "sign-in"  # the identity provider's groups, at the person's sign-in
        PAGE = "page", "page"  # the portal's own pages (a person's or a department's)

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_entries",
    )
    action = models.CharField(max_length=10, choices=Action.choices)
    object_type = models.CharField(max_length=20, choices=ObjectType.choices)
    object_key = models.CharField(
        max_length=500, help_text="node path, queue name, department, department/username"
    )
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    source = models.CharField(max_length=20, choices=Source.choices)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [models.Index(fields=["object_type", "object_key"], name="audit_object")]

    def __str__(self) -> str:
        return f"{self.object_type} {self.object_key} {self.action}"
