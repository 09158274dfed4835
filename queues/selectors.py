"""Reads of the quota tree, queues and departments, scoped to a user."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import timedelta

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _

from kube.quantity import ResourceList

from . import fairness, signals
from .models import DecayedUsage, Department, Membership, Queue, QuotaNode
from .pools import Pool, pools_of
from .quota import Node, path_to_root
from .scope import Right, scope_of

# Table names for raw SQL, from the models.
QUEUES = Queue._meta.db_table
QUOTA_NODES = QuotaNode._meta.db_table

STAFF = "staff"
MANAGER = Membership.Role.MANAGER
MEMBER = Membership.Role.MEMBER
READER = "reader"  # sees what a member sees, changes nothing: a read-only token's role


def _subtree(paths: list[str], prefix: str) -> Q:
    """Rows whose ``prefix``path lies in the subtree of any of ``paths``."""
    condition = Q(pk__in=[])
    for path in paths:
        condition |= Q(**{f"{prefix}path": path}) | Q(**{f"{prefix}path__startswith": path + "/"})
    return condition


def user_roles(user) -> dict[str, str]:
    """Department node path -> the user's role there, as the request acts: a token's scope
    (``queues.scope``) keeps only its departments and caps the role by its rights (``read``:
    reader, ``submit``: member, ``manage`` and ``admin``: the person's own)."""
    if not user.is_authenticated:
        return {}
    memberships = Membership.objects.filter(user=user)
    scope = scope_of(user)
    if scope is not None and scope.departments is not None:
        memberships = memberships.filter(department_id__in=scope.departments)
    roles = dict(memberships.values_list("department__quota_node__path", "role"))
    if scope is None or scope.allows(Right.MANAGE):
        return roles
    capped = MEMBER if scope.allows(Right.SUBMIT) else READER
    return dict.fromkeys(roles, capped)


def departments_for_user(user) -> QuerySet[Department]:
    """The departments a user sees: staff all, others theirs (a token's, of those)."""
    if user.is_staff:
        return Department.objects.all()
    scope = scope_of(user)
    departments = Department.objects.filter(membership__user=user)
    if scope is not None and scope.departments is not None:
        departments = departments.filter(pk__in=scope.departments)
    return departments


def queues_for_user(user) -> QuerySet[Queue]:
    """The queues a user sees: every queue below the nodes of their departments."""
    queues = Queue.objects.select_related("node")
    if user.is_staff:
        return queues
    return queues.filter(_subtree(list(user_roles(user)), "node__"))


def queue_role(user, queue: Queue, roles: dict[str, str] | None = None) -> str | None:
    """The user's strongest role over a queue: staff, manager, member, reader, or None.

    ``roles`` is ``user_roles(user)`` when the caller already has it (a batch asks for
    many queues).
    """
    if user.is_staff:
        return STAFF
    roles = user_roles(user) if roles is None else roles
    found = [roles[path] for path in path_to_root(queue.node.path) if path in roles]
    for role in (MANAGER, MEMBER, READER):
        if role in found:
            return role
    return None


def scope_refusal(user, queue: Queue, needed: str) -> str | None:
    """Why a token's scope, and not the person, keeps ``user`` from doing what needs
    ``needed`` on ``queue``: its rights, where the person holds them there (a manager's for
    ``manage``), or a department of the person's it does not name. None when the scope is
    not the reason, or the request carries no token."""
    scope = scope_of(user)
    if scope is None:
        return None
    held = Membership.objects.filter(
        user=user, department__quota_node__path__in=path_to_root(queue.node.path)
    )
    if needed == Right.MANAGE:
        held = held.filter(role=MANAGER)
    if not scope.allows(needed):
        return scope.lacks(needed) if held.exists() else None
    if scope.departments is None:
        return None
    outside = (
        held.exclude(department_id__in=scope.departments)
        .values_list("department__name", flat=True)
        .first()
    )
    if outside is None:
        return None
    return _("this token's scope does not include the department %(department)s") % {
        "department": outside
    }


def queue_department(queue: Queue) -> Department | None:
    """The department that owns the queue: the one on the nearest node above it."""
    return queue_departments([queue]).get(queue.pk)


def queue_departments(queues: Iterable[Queue]) -> dict[int, Department]:
    """The department owning each of these queues (by queue id), in one query."""
    paths = {queue.pk: path_to_root(queue.node.path) for queue in queues}
    wanted = {path for chain in paths.values() for path in chain}
    departments = {
        d.quota_node.path: d
        for d in Department.objects.filter(quota_node__path__any=list(wanted)).select_related(
            "quota_node"
        )
    }
    owners = {}
    for queue_id, chain in paths.items():
        nearest = next((departments[path] for path in chain if path in departments), None)
        if nearest is not None:
            owners[queue_id] = nearest
    return owners


def queue_for_namespace(namespace: str) -> Queue | None:
    """The active queue whose leaf binds ``namespace``: where a Kubernetes object sent
    without a queue goes (the tree binds a namespace to one leaf)."""
    return (
        Queue.objects.filter(active=True, node__namespaces__contains=[namespace])
        .select_related("node")
        .order_by("node__path")
        .first()
    )


def queue_for_submit(name: str) -> tuple[Queue, dict[str, Node]] | None:
    """A queue by name or path, with the quota nodes of its path (see queues_for_submit)."""
    return queues_for_submit([name]).get(name)


def queues_for_submit(names: list[str]) -> dict[str, tuple[Queue, dict[str, Node]]]:
    """Queues by name or path, each with the quota nodes of its path, in two queries.

    Submitting is the hot path (benchmarks submit 250 jobs a second, and a batch may name
    a thousand queues): one query finds every queue with its node, a second the active
    nodes on their paths, both through unique indexes, whatever the size of the tree.
    Names that are no queue are missing from the answer.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT w.name, q.id, q.name, q.policy, q.active, q.priority_class, n.id, n.path,
                   n.namespaces
            FROM unnest(%(names)s::text[]) AS w(name)
            JOIN {QUEUES} q ON q.name = w.name
            JOIN {QUOTA_NODES} n ON n.id = q.node_id
            UNION ALL
            SELECT w.name, q.id, q.name, q.policy, q.active, q.priority_class, n.id, n.path,
                   n.namespaces
            FROM unnest(%(names)s::text[]) AS w(name)
            JOIN {QUOTA_NODES} n ON n.path = w.name
            JOIN {QUEUES} q ON q.node_id = n.id
            """,
            {"names": list(names)},
        )
        queues: dict[str, Queue] = {}
        for wanted, *row in cursor.fetchall():
            queues.setdefault(wanted, _queue_of(row))  # a name and a path never collide
        paths = {path for q in queues.values() for path in path_to_root(q.node.path)}
        cursor.execute(
            "SELECT path, min::text, max::text, pods::text, node_pools::text, stop_policy,"
            f" limits::text FROM {QUOTA_NODES} WHERE active AND path = ANY(%s)",
            [sorted(paths)],
        )
        nodes = {
            path: Node(
                path=path,
                min=json.loads(low),
                max=json.loads(high),
                pods=json.loads(pods),
                pools=pools_of(json.loads(said)),
                stop=stop,
                limits=json.loads(limits),
            )  # fmt: skip
            for path, low, high, pods, said, stop, limits in cursor.fetchall()
        }
    return {
        wanted: (queue, {p: nodes[p] for p in path_to_root(queue.node.path) if p in nodes})
        for wanted, queue in queues.items()
    }


def _queue_of(row) -> Queue:
    queue_id, queue_name, policy, active, priority_class, node_id, path, namespaces = row[:8]
    node = QuotaNode(id=node_id, path=path, name=path.rsplit("/", 1)[-1], namespaces=namespaces)
    queue = Queue(
        id=queue_id,
        name=queue_name,
        policy=policy,
        active=active,
        priority_class=priority_class,
        node=node,
    )
    queue._state.adding = node._state.adding = False
    return queue


def tree_nodes() -> dict[str, Node]:
    """Every active node by path, read as one JSON document: the admission cycle and every
    explanation of a waiting job read the whole tree, and building a model instance per
    node cost more than the rest of a job's page."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(json_agg(json_build_array(path, min, max, namespaces, weight,"
            f" node_pools, stop_policy, limits)), '[]')::text FROM {QUOTA_NODES} WHERE active"
        )
        rows = json.loads(cursor.fetchone()[0])
    return {
        path: Node(
            path, low, high, tuple(names), weight, pools=pools_of(said), stop=stop, limits=limits
        )
        for path, low, high, names, weight, said, stop, limits in rows
    }


def node_pools() -> tuple[Pool, ...]:
    """The tree's node pools, in its order (kept on its root; ``queues.pools``)."""
    said = (
        QuotaNode.objects.filter(active=True, parent=None)
        .values_list("node_pools", flat=True)
        .first()
    )
    return pools_of(said or ())


def half_life() -> timedelta | None:
    """The tree's fair-sharing half-life (kept on its root), or None: fair sharing over
    time is off (``queues.fairness``)."""
    return (
        QuotaNode.objects.filter(active=True, parent=None)
        .values_list("half_life", flat=True)
        .first()
    )


def decayed_usage() -> dict[str, DecayedUsage]:
    """Every node's decayed usage as beat last wrote it, by path."""
    return {row.path: row for row in DecayedUsage.objects.all()}


def shares_used_under(
    tree: Mapping[str, Node], with_half_life: timedelta | None
) -> dict[str, float]:
    """Each node's share used (``queues.fairness.shares_used``) in ``tree`` with
    ``with_half_life`` (the stored tree's, or a tree being previewed); empty without one,
    which leaves the admission rule as it was."""
    if with_half_life is None:
        return {}
    usage = {path: row.usage for path, row in decayed_usage().items()}
    return fairness.shares_used(tree, usage)


def node_usage() -> Mapping[str, ResourceList]:
    """Usage by node path, as the layers above answer it (``queues.signals``)."""
    return signals.usage(QuotaNode)


def namespace_trouble() -> Mapping[str, str]:
    """The bound namespaces the cluster takes no jobs in now, with why and the fix, as the
    layers above answer it (``queues.signals``)."""
    return signals.namespace_trouble(QuotaNode)


def tree_namespaces() -> list[str]:
    """Every namespace the tree's active leaves bind, sorted."""
    return sorted(
        {
            namespace
            for namespaces in QuotaNode.objects.filter(active=True).values_list(
                "namespaces", flat=True
            )
            for namespace in namespaces
        }
    )
