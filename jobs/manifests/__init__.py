"""The Kubernetes objects Caldera creates for a job, one module per runtime.

``build_manifests`` is the only entry point: it returns plain dicts, ready for the
``kubernetes`` client or ``yaml.safe_dump``, in the order they must be created (the
ConfigMap holding the script first, then the job object that mounts it).
"""

from __future__ import annotations

from ..spec import JobSpec
from . import common, kubeflow, kuberay

BUILDERS = {
    "kuberay": kuberay.rayjob,
    "kubeflow": kubeflow.pytorchjob,
}


def build_manifests(spec: JobSpec) -> list[dict]:
    try:
        build = BUILDERS[spec.runtime]
    except KeyError:
        raise ValueError(f"no manifests for runtime {spec.runtime!r}") from None
    objects = []
    if spec.script:
        objects.append(common.script_configmap(spec))
    objects.append(build(spec))
    return objects
