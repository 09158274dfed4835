"""What a leaf's pods may be: the Pod Security Standards' profile they are held to, the
ServiceAccounts they may run as, and the Secrets they may read. An admin sets it on any
node of the quota tree (``pods`` in the ElasticQuotaTree document); a leaf takes each key
from the nearest node on its path that sets it, so a department's ``restricted`` holds for
all its leaves.

Caldera's ServiceAccount creates the tenants' pods, so this is what Caldera lets a tenant
have in its namespace: never more than the baseline profile, the namespace's ``default``
ServiceAccount unless the tree says otherwise, and, unless the tree narrows them, every
Secret of the namespace (as Kubernetes lets anyone who may create pods there read them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kube.pod_security import BASELINE, LEVELS
from kube.said import Said, gettext_noop

KEYS = ("security", "serviceAccounts", "secrets")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_NAMES = 200


@dataclass(frozen=True)
class PodPolicy:
    """A leaf's rule for its pods: ``secrets`` None means every Secret of the namespace."""

    security: str = BASELINE
    service_accounts: tuple[str, ...] = ("default",)
    secrets: tuple[str, ...] | None = None


def policy_read(raw: object, field: str) -> tuple[dict[str, Any], dict[str, Said]]:
    """A node's ``pods`` as the tree keeps it, and its refusals by path."""
    if raw is None:
        return {}, {}
    if not isinstance(raw, Mapping):
        return {}, {
            field: Said(gettext_noop("must be an object of security, serviceAccounts and secrets"))
        }
    errors: dict[str, Said] = {}
    kept: dict[str, Any] = {}
    for key in sorted(set(raw) - set(KEYS)):
        errors[f"{field}.{key}"] = Said(gettext_noop("unknown field"))
    if "security" in raw:
        if raw["security"] in LEVELS:
            kept["security"] = raw["security"]
        else:
            errors[f"{field}.security"] = Said(
                gettext_noop(
                    "must be baseline or restricted (the Pod Security Standards' profiles)"
                )
            )
    for key in ("serviceAccounts", "secrets"):
        if key not in raw:
            continue
        names = raw[key]
        if (
            not isinstance(names, list)
            or len(names) > MAX_NAMES
            or not all(isinstance(n, str) and _NAME.match(n) and len(n) <= 253 for n in names)
        ):
            errors[f"{field}.{key}"] = Said(
                gettext_noop("must be a list of at most %(most)s Kubernetes names"), most=MAX_NAMES
            )
        elif key == "serviceAccounts" and not names:
            errors[f"{field}.{key}"] = Said(gettext_noop("must name at least one ServiceAccount"))
        else:
            kept[key] = sorted(set(names))
    return kept, errors


def leaf_policy(policies: Iterable[Mapping[str, Any]]) -> PodPolicy:
    """The leaf's rule from its path's nodes' ``pods``, the leaf's own first: each key the
    nearest node's that sets it."""
    found: dict[str, Any] = {}
    for policy in policies:
        for key in KEYS:
            if key in policy and key not in found:
                found[key] = policy[key]
    return PodPolicy(
        security=found.get("security", BASELINE),
        service_accounts=tuple(found.get("serviceAccounts", ("default",))),
        secrets=tuple(found["secrets"]) if "secrets" in found else None,
    )
