"""The Kubernetes objects Caldera creates for a job, one module per runtime.

``build_manifests`` is the only entry point: it returns plain dicts, ready for the
``kubernetes`` client or ``yaml.safe_dump``, in the order they must be created (the
ConfigMaps first, then the job object that mounts them). A job the team sent as a
Kubernetes object is that object with Caldera's additions (``objects``); a job written as
Caldera's document is made by its runtime's module.
"""

from __future__ import annotations

from typing import Any

from jobs.cluster.spec import JobSpec

from . import common, kubeflow, kuberay, volcano
from .objects import with_additions

BUILDERS = {
    ("kuberay", "ray"): kuberay.rayjob,
    ("kubeflow", "pytorch"): kubeflow.pytorchjob,
    ("volcano", "ray"): volcano.ray_job,
    ("volcano", "pytorch"): volcano.pytorch_job,
}


def build_manifests(spec: JobSpec) -> list[dict[str, Any]]:
    """The objects Caldera creates for the job: those the team sent with Caldera's additions
    (``with_additions``), or those its runtime's module makes of Caldera's document."""
    if spec.objects:
        return with_additions(spec)
    try:
        build = BUILDERS[spec.runtime, spec.kind]
    except KeyError:
        raise ValueError(f"no manifests for a {spec.kind} job on {spec.runtime!r}") from None
    objects = []
    if spec.script:
        objects.append(common.script_configmap(spec))
    objects.append(build(spec))
    return objects
