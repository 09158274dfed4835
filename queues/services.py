"""Writes to the quota tree, its queues and its departments."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.dispatch import Signal

from . import quota
from .models import Department, Membership, Queue, QuotaNode
from .quantity import QuantityError, format_resources, parse_resources

API_VERSION = "scheduling.sigs.k8s.io/v1beta1"
KIND = "ElasticQuotaTree"
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# Sent after a change to the tree commits; the jobs app wakes backed-off jobs and admits.
tree_changed = Signal()

# Set by the jobs app: counts the live (queued, backing off or admitted) jobs per queue id,
# so that a node in use is never retired. queues/ knows nothing of jobs itself.
live_jobs_counter: Callable[[Iterable[int]], Mapping[int, int]] | None = None


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


def tree_parse(document: object) -> ParsedTree:
    """Read an ElasticQuotaTree object (as JSON/YAML data) into nodes with exact quantities."""
    errors: dict[str, str] = {}
    if not isinstance(document, Mapping):
        raise TreeError({"body": "must be an ElasticQuotaTree object"})
    if document.get("apiVersion", API_VERSION) != API_VERSION:
        errors["apiVersion"] = f"must be {API_VERSION}"
    if document.get("kind", KIND) != KIND:
        errors["kind"] = f"must be {KIND}"
    spec = document.get("spec")
    root = spec.get("root") if isinstance(spec, Mapping) else None
    if not isinstance(root, Mapping):
        errors["spec.root"] = "is required and must be an object"
        raise TreeError(errors)
    nodes: list[quota.Node] = []
    leaves: set[str] = set()

    def visit(raw: object, field: str, parent: str | None) -> None:
        if not isinstance(raw, Mapping):
            errors[field] = "must be an object"
            return
        name = raw.get("name")
        if not isinstance(name, str) or not _NODE_NAME.match(name) or len(name) > 63:
            errors[f"{field}.name"] = (
                f"{name!r} is not a valid node name (lowercase letters, digits, '-', '.', '_')"
            )
            return
        path = f"{parent}/{name}" if parent else name
        resources = {}
        for key in ("min", "max"):
            try:
                resources[key] = parse_resources(f"{field}.{key}", raw.get(key))
            except QuantityError as error:
                errors[error.field] = error.reason
        namespaces = raw.get("namespaces") or []
        if not isinstance(namespaces, list) or not all(
            isinstance(ns, str) and _NAMESPACE.match(ns) and len(ns) <= 63 for ns in namespaces
        ):
            errors[f"{field}.namespaces"] = "must be a list of Kubernetes namespace names"
            namespaces = []
        children = raw.get("children") or []
        if not isinstance(children, list):
            errors[f"{field}.children"] = "must be a list"
            children = []
        nodes.append(
            quota.Node(
                path=path,
                min=resources.get("min", {}),
                max=resources.get("max", {}),
                namespaces=tuple(namespaces),
            )
        )
        if not children:
            leaves.add(path)
        seen: set[str] = set()
        for index, child in enumerate(children):
            child_name = child.get("name") if isinstance(child, Mapping) else None
            if child_name in seen:
                errors[f"{field}.children[{index}].name"] = f"{child_name!r} appears twice"
                continue
            seen.add(child_name)
            visit(child, f"{field}.children[{index}]", path)

    visit(root, "spec.root", None)
    if errors:
        raise TreeError(errors)
    problems = quota.validate_tree(nodes)
    if problems:
        raise TreeError({"spec.root": problems})
    return ParsedTree(nodes=nodes, leaves=leaves)


def tree_apply(*, document: object) -> list[QuotaNode]:
    """Apply a whole tree like ``kubectl apply``: create, update and retire nodes and queues.

    A node that still has live jobs in its queue cannot be retired; nothing is written then.
    """
    parsed = tree_parse(document)
    wanted = {node.path: node for node in parsed.nodes}
    with transaction.atomic():
        existing = {node.path: node for node in QuotaNode.objects.select_for_update()}
        leaving = [
            path
            for path, node in existing.items()
            if node.active and (path not in wanted or path not in parsed.leaves)
        ]
        _refuse_retiring_busy(leaving)
        saved: dict[str, QuotaNode] = {}
        for node in sorted(parsed.nodes, key=lambda n: n.path.count("/")):
            row = existing.get(node.path) or QuotaNode(path=node.path)
            row.name = node.name
            row.parent = saved[node.parent] if node.parent else None
            row.min, row.max = node.min, node.max
            row.namespaces = list(node.namespaces)
            row.active = True
            row.save()
            saved[node.path] = row
        retired = [existing[path] for path in existing if path not in wanted]
        for row in sorted(retired, key=lambda r: -r.depth):
            row.active = False
            row.save(update_fields=["active", "updated_at"])
        _sync_queues(saved, parsed.leaves)
        transaction.on_commit(lambda: tree_changed.send(sender=QuotaNode))
    return list(saved.values())


def _refuse_retiring_busy(paths: list[str]) -> None:
    if not paths or live_jobs_counter is None:
        return
    queues = dict(
        Queue.objects.filter(node__path__in=paths, active=True).values_list("id", "node__path")
    )
    busy = {queues[qid]: count for qid, count in live_jobs_counter(queues).items() if count}
    if busy:
        raise TreeError(
            {
                "spec.root": [
                    f"cannot retire {path}: it has {count} queued or admitted jobs; "
                    "cancel or finish them first"
                    for path, count in sorted(busy.items())
                ]
            }
        )


def _sync_queues(nodes: Mapping[str, QuotaNode], leaves: set[str]) -> None:
    by_node = {queue.node_id: queue for queue in Queue.objects.select_for_update()}
    for path, node in nodes.items():
        queue = by_node.get(node.id)
        is_leaf = path in leaves
        if queue is None and is_leaf:
            Queue.objects.create(node=node, name=Queue.name_for(path))
        elif queue is not None and queue.active != is_leaf:
            queue.active = is_leaf
            queue.save(update_fields=["active"])
    live = {node.id for node in nodes.values()}
    Queue.objects.exclude(node_id__in=live).filter(active=True).update(active=False)


def tree_with_node_changed(
    *, path: str, min: Mapping[str, str], max: Mapping[str, str], namespaces: Iterable[str]
) -> dict:
    """The active tree as an ElasticQuotaTree object with one node's values replaced.

    Editing one node goes through ``tree_parse``/``tree_apply`` like the whole tree, so the
    admin site, the API and a YAML import share one set of checks.
    """
    document = tree_export()
    node = document["spec"]["root"]
    names = path.split("/")
    if not node or node.get("name") != names[0]:
        raise TreeError({"path": f"{path!r} is not a node of the quota tree"})
    for name in names[1:]:
        node = next((kid for kid in node.get("children", []) if kid["name"] == name), None)
        if node is None:
            raise TreeError({"path": f"{path!r} is not a node of the quota tree"})
    node["min"], node["max"] = dict(min), dict(max)
    if "children" not in node:
        node["namespaces"] = list(namespaces)
    elif list(namespaces):
        raise TreeError({"namespaces": "only leaves bind namespaces"})
    return document


def tree_export() -> dict:
    """The active tree as an ElasticQuotaTree object, in the seed's format."""
    rows = list(QuotaNode.objects.filter(active=True).order_by("path"))
    children: dict[int | None, list[QuotaNode]] = {}
    for row in rows:
        children.setdefault(row.parent_id, []).append(row)

    def render(row: QuotaNode) -> dict:
        node: dict = {
            "name": row.name,
            "min": format_resources(row.min),
            "max": format_resources(row.max),
        }
        kids = children.get(row.id, [])
        if kids:
            node["children"] = [render(kid) for kid in kids]
        else:
            node["namespaces"] = list(row.namespaces)
        return node

    roots = children.get(None, [])
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {"root": render(roots[0]) if roots else {}},
    }


def node_validate_change(
    *, path: str, min: Mapping[str, int], max: Mapping[str, int], namespaces: Iterable[str]
) -> list[str]:
    """The invariant violations the tree would have if ``path`` took these values."""
    nodes = [row.as_node() for row in QuotaNode.objects.filter(active=True)]
    changed = quota.Node(path=path, min=dict(min), max=dict(max), namespaces=tuple(namespaces))
    nodes = [changed if node.path == path else node for node in nodes]
    if all(node.path != path for node in nodes):
        nodes.append(changed)
    return quota.validate_tree(nodes)


def department_create(*, name: str, quota_node: QuotaNode) -> Department:
    return Department.objects.create(name=name, quota_node=quota_node)


def membership_set(*, department: Department, username: str, role: str) -> Membership:
    """Add a user (created if missing, without a usable password) with a role."""
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        # A new person signs in once an admin gives them a password (or with a token).
        user.set_unusable_password()
        user.save(update_fields=["password"])
    membership, _ = Membership.objects.update_or_create(
        department=department, user=user, defaults={"role": role}
    )
    return membership
