"""Validate objects against the operators' own CRD schemas in ``k8s/crds`` (see k8s/SOURCES.md).

The API server validates a custom resource against the CRD's ``openAPIV3Schema`` and
prunes fields the schema does not declare. We are stricter: an undeclared field is an
error, so a typo in a generated object fails a test instead of vanishing in the cluster.
"""

from __future__ import annotations

import copy
from functools import cache

import jsonschema
import yaml

from .paths import REPO

CRDS = REPO / "k8s" / "crds"
SAMPLES = CRDS.parent / "samples"

CRD_FILES = {
    ("ray.io/v1", "RayJob"): "rayjobs.ray.io.yaml",
    ("ray.io/v1", "RayCluster"): "rayclusters.ray.io.yaml",
    ("kubeflow.org/v1", "PyTorchJob"): "pytorchjobs.kubeflow.org.yaml",
    ("batch.volcano.sh/v1alpha1", "Job"): "jobs.batch.volcano.sh.yaml",
    ("scheduling.volcano.sh/v1beta1", "Queue"): "queues.scheduling.volcano.sh.yaml",
    ("scheduling.sigs.k8s.io/v1beta1", "ElasticQuotaTree"): (
        "elasticquotatrees.scheduling.sigs.k8s.io.yaml"
    ),
}


def _strict(schema: dict) -> dict:
    """Forbid undeclared fields wherever the schema declares properties and does not
    ask Kubernetes to preserve unknown ones."""
    if isinstance(schema, dict):
        for key, value in list(schema.items()):
            if key in {"properties", "patternProperties", "definitions"}:
                for sub in value.values():
                    _strict(sub)
            elif isinstance(value, dict):
                _strict(value)
            elif isinstance(value, list):
                for item in value:
                    _strict(item)
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
    return schema


@cache
def schema_for(api_version: str, kind: str) -> dict:
    document = yaml.safe_load((CRDS / CRD_FILES[(api_version, kind)]).read_text())
    version = api_version.split("/")[1]
    (served,) = [v for v in document["spec"]["versions"] if v["name"] == version]
    schema = copy.deepcopy(served["schema"]["openAPIV3Schema"])
    # metadata is validated by the API server's ObjectMeta rules, not the CRD schema; every
    # object has apiVersion and kind even where the CRD (ElasticQuotaTree's) omits them.
    schema["properties"]["metadata"] = {"type": "object"}
    schema["properties"].setdefault("apiVersion", {"type": "string"})
    schema["properties"].setdefault("kind", {"type": "string"})
    return _strict(schema)


def errors(obj: dict) -> list[str]:
    """Every schema violation of ``obj`` as ``path: message``; empty when valid."""
    validator = jsonschema.Draft7Validator(schema_for(obj["apiVersion"], obj["kind"]))
    found = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in found]


def samples(api_version: str, kind: str) -> list[tuple[str, dict]]:
    """Every object of that kind in the sample manifests, with its file name."""
    found = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            if obj and obj.get("apiVersion") == api_version and obj.get("kind") == kind:
                found.append((path.name, obj))
    return found
