"""Departments, the quota tree and its leaf queues."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils.translation import gettext_lazy as _

from . import quota
from .pools import pools_of


class QuotaNode(models.Model):
    """A node of the ElasticQuotaTree. ``min``/``max`` hold integer base units per resource.

    Nodes dropped from the tree are retired (``active=False``) rather than deleted, so the
    history of finished jobs keeps its queue; applying a tree that names them again revives
    them.
    """

    path = models.CharField(max_length=500, unique=True)
    name = models.CharField(max_length=100)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    min = models.JSONField(default=dict, blank=True)
    max = models.JSONField(default=dict, blank=True)
    namespaces = ArrayField(models.CharField(max_length=63), default=list, blank=True)
    # Fair sharing over time (queues.fairness): the node's weight among its siblings, and on
    # the root alone the tree's half-life (None: off, the rule compares usage now only).
    weight = models.FloatField(default=1.0, db_default=1.0)
    # What its subtree's pods may be (queues.pod_policy): {"security": "restricted",
    # "serviceAccounts": [...], "secrets": [...]}, each key inherited by the leaves below.
    pods = models.JSONField(default=dict, blank=True, db_default={})
    half_life = models.DurationField(null=True, blank=True)
    # On the root alone: the tree's node pools, in its order (queues.pools.Pool.as_json).
    node_pools = models.JSONField(default=list, blank=True, db_default=[])
    # Whether its subtree admits ("", Hold, HoldAndDrain) and what its leaves' jobs may do
    # (queues.limits: defaultTime, maxTime, maxRetries, perPerson; base units).
    stop_policy = models.CharField(max_length=20, blank=True, default="", db_default="")
    limits = models.JSONField(default=dict, blank=True, db_default={})
    active = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["path"]

    def __str__(self) -> str:
        return self.path

    @property
    def depth(self) -> int:
        return self.path.count("/")

    def as_node(self) -> quota.Node:
        return quota.Node(
            path=self.path,
            min=dict(self.min),
            max=dict(self.max),
            namespaces=tuple(self.namespaces),
            weight=self.weight,
            pools=pools_of(self.node_pools),
            stop=self.stop_policy,
            limits=dict(self.limits),
        )


class Queue(models.Model):
    """The one queue of a leaf node, named after its path (``root-algorithm-video``)."""

    class Policy(models.TextChoices):
        PRIORITY = "Priority", _("Priority (strict: the head blocks the queue)")
        BEST_EFFORT = "BestEffort", _("BestEffort (skip a head that does not fit)")

    node = models.OneToOneField(QuotaNode, on_delete=models.PROTECT, related_name="queue")
    name = models.CharField(max_length=500, unique=True)
    policy = models.CharField(max_length=20, choices=Policy.choices, default=Policy.PRIORITY)
    preemption = models.BooleanField(
        "preemption within the queue",
        default=False,
        help_text="A pending job may evict admitted jobs of this queue with a lower priority.",
    )
    backoff_base_seconds = models.FloatField(
        null=True, blank=True, help_text="First backoff delay; empty: the site's default."
    )
    backoff_max_seconds = models.FloatField(
        null=True, blank=True, help_text="Longest backoff delay; empty: the site's default."
    )
    priority_class = models.CharField(
        "Kubernetes PriorityClass",
        max_length=253,
        blank=True,
        help_text="Written into the job objects (ray.io/priority-class-name, schedulingPolicy).",
    )
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def name_for(path: str) -> str:
        return path.replace("/", "-")


class Department(models.Model):
    """A tenant: it owns one node of the tree and every queue below it."""

    name = models.SlugField(max_length=63, unique=True)
    quota_node = models.ForeignKey(QuotaNode, on_delete=models.PROTECT, related_name="departments")
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="departments"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member"
        MANAGER = "manager"

    department = models.ForeignKey(Department, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["department", "user"], name="one_membership_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role} of {self.department})"


class DecayedUsage(models.Model):
    """One node's decayed usage (``queues.fairness``), resource by resource, as beat last
    computed it from the ledger of holds: what the admission rule and the quota tree page
    read while the tree has a half-life. Named by path, like the usage history, so that a
    retired node's row goes when beat next writes the tree's."""

    path = models.CharField(max_length=500, primary_key=True)
    resources = models.JSONField(default=dict)  # resource -> decayed usage, 0.0 to 1.0
    usage = models.FloatField()  # the dominant resource's
    computed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.path}: {self.usage:.3f} at {self.computed_at}"
