"""What Caldera does in a cluster, as RBAC rules: one declaration that the deploy's roles
are generated from (``manage.py cluster_rbac``), that ``cluster_check`` asks the API server
about, and that it compares what is granted with.

Caldera needs its job objects, their script ConfigMaps, their events and the logs of their
pods only in the namespaces the quota tree binds; the ElasticQuotaTree only in
``kube-system``; and cluster-wide nothing but reading the nodes, reading the tree's
namespaces, its own access reviews and, when it publishes them, Volcano queues (which have
no namespace).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from . import kinds

QUOTA_NAMESPACE = "kube-system"
REVIEWS = "authorization.k8s.io"
MANAGED = {"app.kubernetes.io/managed-by": "caldera"}
# What grants Caldera its roles in the namespaces the tree binds, as every page, check and
# message says it.
RBAC_FIX = "manage.py cluster_rbac | kubectl apply -f -"


@dataclass(frozen=True)
class Grant:
    """Verbs on one resource of one API group ("" is the core group), perhaps only on the
    objects named."""

    group: str
    resource: str
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()

    def rule(self) -> dict[str, Any]:
        rule = {"apiGroups": [self.group], "resources": [self.resource], "verbs": list(self.verbs)}
        if self.names:
            rule["resourceNames"] = list(self.names)
        return rule


# Reading a job's log: its head or master pod found by its labels, then that pod's log.
LOG_GRANTS = (Grant("", "pods", ("list",)), Grant("", "pods/log", ("get",)))


def leaf_grants(runtimes: Iterable[str]) -> list[Grant]:
    """What Caldera does in each namespace the tree binds."""
    jobs = [
        Grant(
            r.group,
            r.plural,
            ("list", "watch", "create", "delete", *(("patch",) if r.suspend_path else ())),
        )
        for r in (kinds.RESOURCES[runtime] for runtime in runtimes)
    ]
    return [
        *jobs,
        Grant("", "configmaps", ("create", "delete")),
        Grant("", "events", ("list", "watch")),
        *LOG_GRANTS,
    ]


def watch_grants(runtimes: Iterable[str], scope: str) -> list[Grant]:
    """With the cluster scope of the watches (KUBERNETES_WATCH_SCOPE=cluster), what
    Caldera reads in every namespace: its job objects (a watch selects those labelled
    ``caldera.io/job-id``; RBAC cannot narrow by label) and the events. None otherwise."""
    if scope != "cluster":
        return []
    return [
        *(
            Grant(r.group, r.plural, ("list", "watch"))
            for r in (kinds.RESOURCES[runtime] for runtime in runtimes)
        ),
        Grant("", "events", ("list", "watch")),
    ]


def quota_grants(publish: Iterable[str]) -> list[Grant]:
    """What Caldera does in ``kube-system``: write the ElasticQuotaTree, if it publishes it."""
    if "elasticquotatree" not in publish:
        return []
    return [Grant(kinds.QUOTA_TREE.group, kinds.QUOTA_TREE.plural, ("create", "patch"))]


# What Caldera does at the cluster scope whatever the tree: deploy/kubernetes/rbac.yaml's
# ClusterRole "caldera" (a test holds the file to this).
BASE_GRANTS = (
    Grant("", "nodes", ("list",)),
    Grant(REVIEWS, "selfsubjectaccessreviews", ("create",)),
    Grant(REVIEWS, "selfsubjectrulesreviews", ("create",)),
)


# What every signed-in identity may do whatever its own roles: the ClusterRole
# system:basic-user, which a cluster binds to system:authenticated (Kubernetes 1.28 and
# later), lets it review its own access and rules and ask who it is. A rules review lists
# these in every namespace whatever the roles an admin gave Caldera: not an extra to warn of.
BASIC_USER_GRANTS = (
    Grant(REVIEWS, "selfsubjectaccessreviews", ("create",)),
    Grant(REVIEWS, "selfsubjectrulesreviews", ("create",)),
    Grant("authentication.k8s.io", "selfsubjectreviews", ("create",)),
)


def tree_grants(namespaces: Iterable[str], publish: Iterable[str]) -> list[Grant]:
    """What Caldera does at the cluster scope for the tree: read its namespaces, and write
    Volcano queues (which have no namespace) if it publishes them."""
    grants = []
    if namespaces:
        grants.append(Grant("", "namespaces", ("get",), tuple(sorted(set(namespaces)))))
    if "volcano" in publish:
        queue = kinds.VOLCANO_QUEUE
        grants.append(Grant(queue.group, queue.plural, ("list", "create", "patch", "delete")))
    return grants


def rbac_documents(
    *,
    namespaces: Sequence[str],
    runtimes: Sequence[str],
    publish: Sequence[str],
    watch_scope: str = "namespace",
    account: str = "caldera",
    account_namespace: str = "caldera-system",
) -> list[dict[str, Any]]:
    """The ClusterRole, Roles and bindings that grant Caldera what it does for the tree
    (with deploy/kubernetes/rbac.yaml's, exactly what it does). Applied again whenever the
    tree binds other namespaces."""
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": account_namespace}]
    documents: list[dict[str, Any]] = []

    def role(kind: str, name: str, grants: list[Grant], namespace: str | None = None) -> None:
        where = {"namespace": namespace} if namespace else {}
        metadata = {"name": name, **where, "labels": dict(MANAGED)}
        documents.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": kind,
                "metadata": metadata,
                "rules": [grant.rule() for grant in grants],
            }
        )
        documents.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": f"{kind}Binding",
                "metadata": metadata,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
                "subjects": subject,
            }
        )

    role("ClusterRole", f"{account}-tree", tree_grants(namespaces, publish))
    if watch_grants(runtimes, watch_scope):
        role("ClusterRole", f"{account}-watch", watch_grants(runtimes, watch_scope))
    for namespace in sorted(set(namespaces)):
        role("Role", f"{account}-jobs", leaf_grants(runtimes), namespace)
    if quota_grants(publish):
        role("Role", f"{account}-quota", quota_grants(publish), QUOTA_NAMESPACE)
    return documents


def wanted_in(
    namespace: str,
    *,
    namespaces: Iterable[str],
    runtimes: Iterable[str],
    publish: Iterable[str],
    watch_scope: str = "namespace",
) -> list[Grant]:
    """Everything Caldera uses that a rules review of ``namespace`` may show: what it does
    there, and what it does at the cluster scope (cluster roles show in every namespace)."""
    namespaces = set(namespaces)
    grants = [*BASE_GRANTS, *tree_grants(namespaces, publish), *watch_grants(runtimes, watch_scope)]
    if namespace in namespaces:
        grants += leaf_grants(runtimes)
    if namespace == QUOTA_NAMESPACE:
        grants += quota_grants(publish)
    return grants


def beyond(rules: Iterable[dict[str, Any]], wanted: Iterable[Grant]) -> list[str]:
    """The grants of a rules review's ``resourceRules`` that Caldera does not use, each as
    ``verb resource.group`` (``*`` where a rule has a wildcard). What every signed-in
    identity may do (``BASIC_USER_GRANTS``) is left out."""
    used = {
        (grant.group, grant.resource, verb, name)
        for grant in (*wanted, *BASIC_USER_GRANTS)
        for verb in grant.verbs
        for name in grant.names or ("",)
    }
    found = []
    for rule in rules:
        names = rule.get("resourceNames") or [""]
        for group in rule.get("apiGroups") or [""]:
            for resource in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    for name in names:
                        if (group, resource, verb, name) not in used:
                            shown = f"{verb} {resource}{f'.{group}' if group else ''}"
                            found.append(shown + (f" ({name})" if name else ""))
    return sorted(set(found))
