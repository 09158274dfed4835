"""Validate objects against the operators' own CRD schemas in ``k8s/crds`` (see k8s/SOURCES.md),
as Caldera itself reads them (``kube.schema``), undeclared fields included: a typo in a
generated object fails a test instead of vanishing in the cluster.
"""

from __future__ import annotations

import yaml

from kube import schema

from .paths import REPO

SAMPLES = REPO / "k8s" / "samples"


def errors(obj: dict) -> list[str]:
    """Every schema violation of ``obj`` as ``path: message``; empty when valid."""
    return [
        f"{path}: {reason}"
        for path, reasons in sorted(schema.object_problems(obj).items())
        for reason in reasons
    ]


def samples(api_version: str, kind: str) -> list[tuple[str, dict]]:
    """Every object of that kind in the sample manifests, with its file name."""
    found = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            if obj and obj.get("apiVersion") == api_version and obj.get("kind") == kind:
                found.append((path.name, obj))
    return found
