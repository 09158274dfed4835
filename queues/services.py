"""Writes to the quota tree, its queues and its departments."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils.translation import gettext as _

from audit.models import AuditEntry
from audit.services import audit_record, describe_changes
from kube.quantity import QuantityError, ResourceList, format_resources, parse_resources

from . import fairness, pools, quota, signals
from .limits import limits_read, limits_yaml, stop_read
from .models import Queue, QuotaNode
from .phrases import in_language
from .pod_policy import policy_read

Action = AuditEntry.Action
ObjectType = AuditEntry.ObjectType
Source = AuditEntry.Source

API_VERSION = "scheduling.sigs.k8s.io/v1beta1"
KIND = "ElasticQuotaTree"
TREE_NAME = "elasticquotatree"  # the one tree's metadata.name, and its key in the audit
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class TreeError(ValueError):
    """The tree cannot be applied; ``errors`` maps a field path to its reasons."""

    def __init__(self, errors: Mapping[str, str | list[str]]):
        self.errors = {
            field: reasons if isinstance(reasons, list) else [reasons]
            for field, reasons in errors.items()
        }
        super().__init__(
            "; ".join(f"{field}: {r}" for field, rs in self.errors.items() for r in rs)
        )


@dataclass(frozen=True)
class ParsedTree:
    nodes: list[quota.Node]
    leaves: set[str]
    half_life: timedelta | None = None  # spec.fairSharing.halfLife (queues.fairness)
    node_pools: tuple[pools.Pool, ...] = ()  # spec.nodePools, in the tree's order


def tree_parse(document: object) -> ParsedTree:
    """Read an ElasticQuotaTree object (as JSON/YAML data) into nodes with exact quantities."""
    errors: dict[str, str] = {}
    if not isinstance(document, Mapping):
        raise TreeError({"body": _("must be an ElasticQuotaTree object")})
    if document.get("apiVersion", API_VERSION) != API_VERSION:
        errors["apiVersion"] = _("must be %(value)s") % {"value": API_VERSION}
    if document.get("kind", KIND) != KIND:
        errors["kind"] = _("must be %(value)s") % {"value": KIND}
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        spec = {}
    root = spec.get("root")
    if not isinstance(root, Mapping):
        errors["spec.root"] = _("is required and must be an object")
        raise TreeError(errors)
    nodes: list[quota.Node] = []
    leaves: set[str] = set()
    half_life = _half_life(spec.get("fairSharing"), errors)
    node_pools, refused_pools = pools.pools_read(spec.get("nodePools"), "spec.nodePools")
    errors.update({where: in_language(reason) for where, reason in refused_pools.items()})

    def visit(raw: object, field: str, parent: str | None) -> None:
        if not isinstance(raw, Mapping):
            errors[field] = _("must be an object")
            return
        name = raw.get("name")
        if not isinstance(name, str) or not _NODE_NAME.match(name) or len(name) > 63:
            errors[f"{field}.name"] = _(
                "%(name)s is not a valid node name (lowercase letters, digits, '-', '.', '_')"
            ) % {"name": repr(name)}
            return
        path = f"{parent}/{name}" if parent else name
        resources = {}
        for key in ("min", "max"):
            try:
                resources[key] = parse_resources(f"{field}.{key}", raw.get(key))
            except QuantityError as error:
                errors[error.field] = in_language(error.reason)
        per_pool, refused = pools.quota_read(raw.get("pools"), f"{field}.pools", node_pools)
        errors.update({where: in_language(reason) for where, reason in refused.items()})
        for pool, quota_of_pool in per_pool.items():
            for key in ("min", "max"):
                try:
                    amounts = parse_resources(f"{field}.pools.{pool}.{key}", quota_of_pool.get(key))
                except QuantityError as error:
                    errors[error.field] = in_language(error.reason)
                else:
                    resources.setdefault(key, {}).update(pools.pooled_list({pool: amounts}))
        namespaces = raw.get("namespaces") or []
        if not isinstance(namespaces, list) or not all(
            isinstance(ns, str) and _NAMESPACE.match(ns) and len(ns) <= 63 for ns in namespaces
        ):
            errors[f"{field}.namespaces"] = _("must be a list of Kubernetes namespace names")
            namespaces = []
        children = raw.get("children") or []
        if not isinstance(children, list):
            errors[f"{field}.children"] = _("must be a list")
            children = []
        weight = raw.get("weight", 1)
        if (
            isinstance(weight, bool)
            or not isinstance(weight, int | float)
            or not 0 < weight <= fairness.WEIGHT_MAX
        ):
            errors[f"{field}.weight"] = _(
                "must be a number above 0 and at most %(max)s (the node's fair-share weight "
                "among its siblings)"
            ) % {"max": f"{fairness.WEIGHT_MAX:g}"}
            weight = 1
        pods, refused = policy_read(raw.get("pods"), f"{field}.pods")
        errors.update({where: in_language(reason) for where, reason in refused.items()})
        stop, refused = stop_read(raw.get("stopPolicy"), f"{field}.stopPolicy")
        errors.update({where: in_language(reason) for where, reason in refused.items()})
        limits, refused = limits_read(raw.get("limits"), f"{field}.limits")
        errors.update({where: in_language(reason) for where, reason in refused.items()})
        nodes.append(
            quota.Node(
                path=path,
                min=resources.get("min", {}),
                max=resources.get("max", {}),
                namespaces=tuple(namespaces),
                weight=float(weight),
                pods=pods,
                pools=node_pools if parent is None else (),
                stop=stop,
                limits=limits,
            )
        )
        if not children:
            leaves.add(path)
        seen: set[str] = set()
        for index, child in enumerate(children):
            child_name = child.get("name") if isinstance(child, Mapping) else None
            if isinstance(child_name, str):  # else visit() says why (a list is unhashable)
                if child_name in seen:
                    errors[f"{field}.children[{index}].name"] = _("%(name)s appears twice") % {
                        "name": repr(child_name)
                    }
                    continue
                seen.add(child_name)
            visit(child, f"{field}.children[{index}]", path)

    visit(root, "spec.root", None)
    if errors:
        raise TreeError(errors)
    problems = quota.validate_tree(nodes)
    if problems:
        raise TreeError({"spec.root": [in_language(problem) for problem in problems]})
    return ParsedTree(nodes=nodes, leaves=leaves, half_life=half_life, node_pools=node_pools)


def _half_life(raw: object, errors: dict[str, str]) -> timedelta | None:
    """``spec.fairSharing.halfLife``: None when the tree leaves fair sharing over time off."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - {"halfLife"}:
        errors["spec.fairSharing"] = _("must be an object with one field, halfLife")
        return None
    if raw.get("halfLife") is None:
        return None
    value = fairness.parse_half_life(raw["halfLife"])
    if value is None or not fairness.HALF_LIFE_MIN <= value <= fairness.HALF_LIFE_MAX:
        errors["spec.fairSharing.halfLife"] = _(
            "must be a duration from 1h to 365d, such as %(example)s"
        ) % {"example": fairness.SUGGESTED_HALF_LIFE}
        return None
    return value


@dataclass(frozen=True)
class NodeChange:
    """What applying a tree did to one node, with its values before and after (as exported)."""

    action: str
    path: str
    before: dict | None
    after: dict | None

    def describe(self) -> str:
        """``updated root/algorithm/video: max cpu: 14 → 20``; a retirement needs no details."""
        if self.action == Action.RETIRED:
            return f"{self.action} {self.path}"
        return f"{self.action} {self.path}: " + "; ".join(describe_changes(self.before, self.after))


def count_nodes(changes: list[NodeChange]) -> str:
    return "1 node changed" if len(changes) == 1 else f"{len(changes)} nodes changed"


def node_snapshot(
    *,
    min: ResourceList,
    max: ResourceList,
    namespaces: Iterable[str],
    weight: float = 1.0,
    half_life: timedelta | None = None,
    pods: Mapping | None = None,
    node_pools: Iterable[Mapping] = (),
    stop: str = "",
    limits: Mapping | None = None,
) -> dict:
    """A node's values as the audit keeps them: exact quantities spelled as in the YAML;
    a weight, a half-life and pools only when set, so that a tree without fair sharing or
    pools keeps the snapshots it always had."""
    totals, low_by_pool = pools.by_pool(min)
    high, high_by_pool = pools.by_pool(max)
    snapshot: dict = {
        "min": format_resources(totals),
        "max": format_resources(high),
        "namespaces": list(namespaces),
    }
    if low_by_pool or high_by_pool:
        snapshot["pools"] = _pool_quota(low_by_pool, high_by_pool)
    if node_pools:
        snapshot["nodePools"] = [dict(pool) for pool in node_pools]
    if weight != 1.0:
        snapshot["weight"] = weight
    if pods:
        snapshot["pods"] = dict(pods)
    if stop:
        snapshot["stopPolicy"] = stop
    if limits:
        snapshot["limits"] = limits_yaml(limits)
    if half_life is not None:
        snapshot["halfLife"] = fairness.format_half_life(half_life)
    return snapshot


def _pool_quota(
    low: Mapping[str, ResourceList], high: Mapping[str, ResourceList], order: Iterable[str] = ()
) -> dict[str, dict[str, dict[str, str]]]:
    """A node's ``pools`` as the YAML writes it: each pool's min and max, by pool name, in
    the tree's order of its pools (``order``), the others after by name."""
    named = set(low) | set(high)
    ranked = [pool for pool in order if pool in named] + sorted(named - set(order))
    return {
        pool: {
            "min": format_resources(low.get(pool, {})),
            "max": format_resources(high.get(pool, {})),
        }
        for pool in ranked
    }


def _snapshot_of(row: QuotaNode) -> dict:
    root = row.parent_id is None
    return node_snapshot(
        min=row.min, max=row.max, namespaces=row.namespaces, weight=row.weight,
        half_life=row.half_life if root else None, pods=row.pods,
        node_pools=row.node_pools if root else (), stop=row.stop_policy, limits=row.limits,
    )  # fmt: skip


def tree_apply(*, document: object, actor=None, source: str = Source.COMMAND) -> list[QuotaNode]:
    """Apply a whole tree like ``kubectl apply``: create, update and retire nodes and queues.

    A node that still has live jobs in its queue cannot be retired; nothing is written then.
    Every node and queue that really changed gets an audit entry in the same transaction.
    """
    return _tree_write(document, actor=actor, source=source)[0]


def tree_import(*, document: object, actor=None, source: str = Source.COMMAND) -> list[NodeChange]:
    """``tree_apply`` for the YAML imports (the admin's YAML page, ``manage.py import_tree``),
    which tell the person what changed; an empty list means the tree already matched."""
    return _tree_write(document, actor=actor, source=source)[1]


def tree_check(*, document: object) -> ParsedTree:
    """Every check of ``tree_apply`` without writing, for forms that show errors in place.

    ``tree_apply`` checks again under its lock: the tree may change in between.
    """
    parsed = tree_parse(document)
    existing = {
        row.path: row for row in QuotaNode.objects.filter(active=True).only("path", "active")
    }
    _refuse_retiring_busy(_leaving(existing, parsed))
    return parsed


def _leaving(existing: Mapping[str, QuotaNode], parsed: ParsedTree) -> list[str]:
    """Active nodes the tree drops, or that stop being leaves: their queues go."""
    wanted = {node.path for node in parsed.nodes}
    return [
        path
        for path, node in existing.items()
        if node.active and (path not in wanted or path not in parsed.leaves)
    ]


def _tree_write(
    document: object, *, actor, source: str
) -> tuple[list[QuotaNode], list[NodeChange]]:
    parsed = tree_parse(document)
    wanted = {node.path: node for node in parsed.nodes}
    changes: list[NodeChange] = []
    with transaction.atomic():
        existing = {node.path: node for node in QuotaNode.objects.select_for_update()}
        _refuse_retiring_busy(_leaving(existing, parsed))
        saved: dict[str, QuotaNode] = {}
        for node in sorted(parsed.nodes, key=lambda n: n.path.count("/")):
            row = existing.get(node.path)
            half_life = parsed.half_life if node.parent is None else None
            node_pools = [p.as_json() for p in parsed.node_pools] if node.parent is None else []
            after = node_snapshot(
                min=node.min, max=node.max, namespaces=node.namespaces, weight=node.weight,
                half_life=half_life, pods=node.pods, node_pools=node_pools,
                stop=node.stop, limits=node.limits,
            )  # fmt: skip
            if row is None or not row.active:
                changes.append(NodeChange(Action.CREATED, node.path, None, after))
            else:
                before = _snapshot_of(row)
                if before != after:
                    changes.append(NodeChange(Action.UPDATED, node.path, before, after))
            row = row or QuotaNode(path=node.path)
            row.name = node.name
            row.parent = saved[node.parent] if node.parent else None
            row.min, row.max = node.min, node.max
            row.namespaces = list(node.namespaces)
            row.weight, row.half_life = node.weight, half_life
            row.node_pools = node_pools
            row.pods = dict(node.pods)
            row.stop_policy, row.limits = node.stop, dict(node.limits)
            row.active = True
            row.save()
            saved[node.path] = row
        retired = [row for path, row in existing.items() if path not in wanted and row.active]
        for row in sorted(retired, key=lambda r: -r.depth):
            before = _snapshot_of(row)
            changes.append(NodeChange(Action.RETIRED, row.path, before, None))
            row.active = False
            row.save(update_fields=["active", "updated_at"])
        for change in changes:
            audit_record(
                action=change.action,
                object_type=ObjectType.QUOTA_NODE,
                object_key=change.path,
                before=change.before,
                after=change.after,
                actor=actor,
                source=source,
            )
        _sync_queues(saved, parsed.leaves, actor=actor, source=source)
        transaction.on_commit(lambda: signals.tree_changed.send(sender=QuotaNode))
    return list(saved.values()), changes


def _refuse_retiring_busy(paths: list[str]) -> None:
    if not paths:
        return
    queues = dict(
        Queue.objects.filter(node__path__any=paths, active=True).values_list("id", "node__path")
    )
    busy = {queues[qid]: count for qid, count in signals.live_jobs(Queue, queues).items() if count}
    if busy:
        raise TreeError(
            {
                "spec.root": [
                    _(
                        "cannot retire %(path)s: it has %(count)s queued or admitted jobs; "
                        "cancel or finish them first"
                    )
                    % {"path": path, "count": count}
                    for path, count in sorted(busy.items())
                ]
            }
        )


QUEUE_SETTINGS = (
    "policy",
    "preemption",
    "backoff_base_seconds",
    "backoff_max_seconds",
    "priority_class",
)


def queue_snapshot(queue: Queue) -> dict:
    return {
        "node": queue.node.path,
        **{name: getattr(queue, name) for name in QUEUE_SETTINGS},
    }


def _audit_queue(action: str, queue: Queue, before, after, *, actor, source: str) -> None:
    audit_record(
        action=action,
        object_type=ObjectType.QUEUE,
        object_key=queue.name,
        before=before,
        after=after,
        actor=actor,
        source=source,
    )


def _sync_queues(nodes: Mapping[str, QuotaNode], leaves: set[str], *, actor, source: str) -> None:
    """One active queue per leaf: created with its leaf, retired with it, revived with it."""
    by_node = {queue.node_id: queue for queue in Queue.objects.select_for_update()}
    for path, node in nodes.items():
        queue = by_node.get(node.id)
        is_leaf = path in leaves
        if queue is None and is_leaf:
            queue = Queue.objects.create(node=node, name=Queue.name_for(path))
            _audit_queue(
                Action.CREATED, queue, None, queue_snapshot(queue), actor=actor, source=source
            )
        elif queue is not None and queue.active != is_leaf:
            queue.active = is_leaf
            queue.save(update_fields=["active"])
            snapshot = queue_snapshot(queue)
            if is_leaf:
                _audit_queue(Action.CREATED, queue, None, snapshot, actor=actor, source=source)
            else:
                _audit_queue(Action.RETIRED, queue, snapshot, None, actor=actor, source=source)
    live = [node.id for node in nodes.values()]
    leaving = Queue.objects.exclude(node_id__any=live).filter(active=True).select_related("node")
    for queue in leaving:
        _audit_queue(Action.RETIRED, queue, queue_snapshot(queue), None, actor=actor, source=source)
    leaving.update(active=False)


def queue_update(
    *, queue: Queue, changes: Mapping[str, object], actor=None, source: str = Source.COMMAND
) -> Queue:
    """Change a queue's policy, preemption, backoff or PriorityClass, and audit the change.

    Its name, node and activity follow the tree and are not set here.
    """
    unknown = set(changes) - set(QUEUE_SETTINGS)
    if unknown:
        raise ValueError(f"not a queue setting: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        row = Queue.objects.select_for_update().select_related("node").get(pk=queue.pk)
        before = queue_snapshot(row)
        for name, value in changes.items():
            setattr(row, name, value)
        if changes:
            row.save(update_fields=list(changes))
        _audit_queue(Action.UPDATED, row, before, queue_snapshot(row), actor=actor, source=source)
    return row


def tree_find(document: Mapping, path: str) -> dict:
    """The node at ``path`` inside an ElasticQuotaTree object (to be edited in place)."""
    node = document["spec"]["root"]
    names = path.split("/")
    if not node or node.get("name") != names[0]:
        raise TreeError({"path": _("%(path)r is not a node of the quota tree") % {"path": path}})
    for name in names[1:]:
        node = next((kid for kid in node.get("children", []) if kid["name"] == name), None)
        if node is None:
            raise TreeError(
                {"path": _("%(path)r is not a node of the quota tree") % {"path": path}}
            )
    return node


def tree_published() -> dict:
    """The active tree as kube-queue's ElasticQuotaTree takes it: each node's totals, no
    pools (a scheduler that knows no pools reads the totals every pool shares)."""
    document = tree_export()
    document["spec"].pop("nodePools", None)

    def strip(node: dict) -> None:
        node.pop("pools", None)
        for kid in node.get("children", []):
            strip(kid)

    if document["spec"]["root"]:
        strip(document["spec"]["root"])
    return document


def tree_export() -> dict:
    """The active tree as an ElasticQuotaTree object, in the seed's format, its node pools
    and each node's quota per pool included (Caldera's own YAML, which round-trips)."""
    rows = list(QuotaNode.objects.filter(active=True).order_by("path"))
    children: dict[int | None, list[QuotaNode]] = {}
    for row in rows:
        children.setdefault(row.parent_id, []).append(row)

    def render(row: QuotaNode) -> dict:
        low, low_by_pool = pools.by_pool(row.min)
        high, high_by_pool = pools.by_pool(row.max)
        node: dict = {"name": row.name, "min": format_resources(low), "max": format_resources(high)}
        if low_by_pool or high_by_pool:
            node["pools"] = _pool_quota(low_by_pool, high_by_pool, (p.name for p in declared))
        if row.weight != 1.0:
            node["weight"] = int(row.weight) if row.weight.is_integer() else row.weight
        if row.pods:
            node["pods"] = dict(row.pods)
        if row.stop_policy:
            node["stopPolicy"] = row.stop_policy
        if row.limits:
            node["limits"] = limits_yaml(row.limits)
        kids = children.get(row.id, [])
        if kids:
            node["children"] = [render(kid) for kid in kids]
        else:
            node["namespaces"] = list(row.namespaces)
        return node

    roots = children.get(None, [])
    spec: dict = {}
    declared = pools.pools_of(roots[0].node_pools) if roots else ()
    if declared:
        spec["nodePools"] = [pool.as_json() for pool in declared]
    spec["root"] = render(roots[0]) if roots else {}
    if roots and roots[0].half_life is not None:
        spec["fairSharing"] = {"halfLife": fairness.format_half_life(roots[0].half_life)}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": TREE_NAME, "namespace": "kube-system"},
        "spec": spec,
    }
