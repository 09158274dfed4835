"""The Kubernetes objects Caldera creates for a job, one module per runtime.

``build_manifests`` is the only entry point: it returns plain dicts, ready for the
``kubernetes`` client or ``yaml.safe_dump``, in the order they must be created (the
ConfigMap holding the script first, then the job object that mounts it).
"""

from __future__ import annotations

from typing import Any

from jobs.cluster.spec import JobSpec

from . import common, kubeflow, kuberay, volcano

BUILDERS = {
    ("kuberay", "ray"): kuberay.rayjob,
    ("kubeflow", "pytorch"): kubeflow.pytorchjob,
    ("volcano", "ray"): volcano.ray_job,
    ("volcano", "pytorch"): volcano.pytorch_job,
}


def build_manifests(spec: JobSpec) -> list[dict[str, Any]]:
    try:
        build = BUILDERS[spec.runtime, spec.kind]
    except KeyError:
        raise ValueError(f"no manifests for a {spec.kind} job on {spec.runtime!r}") from None
    objects = []
    if spec.script:
        objects.append(common.script_configmap(spec))
    objects.append(build(spec))
    return objects
