"""The pods of a job document: the head of a Ray job or the master of a PyTorch job (one
pod), and its worker groups (``workers``, sets of identical pods)."""

from __future__ import annotations

from collections.abc import Mapping

from django.utils.translation import gettext as _
from rest_framework import serializers
from rest_framework.fields import empty

from jobs.document.fields import (
    INVALID,
    RESOURCES_EXAMPLE,
    Integer,
    PodResources,
    Reader,
    Resources,
    path,
    read_field,
    refuse,
    unknown_fields,
)
from jobs.document.validation import DNS_LABEL, MAX_REPLICAS
from jobs.models import Job

GROUP_NAME_MAX = 30


def pod_required() -> str:
    """The reason a pod is missing, in the active language (a form says it in a person's
    words instead)."""
    return _('is required: {"resources": %(example)s}') % {"example": RESOURCES_EXAMPLE}


LIMITS_HELP = (
    "optional: what a pod may use beyond its resources, which are its requests (and its "
    'limits where this does not say): {"memory": "32Gi"}. Each at least its request; an '
    "extended resource (a GPU) is never above it. Quota counts the requests"
)


def limits_read(data: object, requested: Resources | object, errors: dict, key: str) -> dict:
    """A pod's ``limits`` as the job keeps them ({} when not given): each a quantity of a
    resource it requests, at least the request; an extended resource's equal to it, as
    Kubernetes requires."""
    if data is None or data == {}:
        return {}
    reader = PodResources()
    try:
        limits = reader.run_validation(data)
    except serializers.ValidationError as error:
        detail = error.detail
        if isinstance(detail, Mapping):
            for name, reasons in detail.items():
                for reason in reasons:
                    refuse(errors, path(key, name), str(reason))
        else:
            for reason in detail:
                refuse(errors, key, str(reason))
        return {}
    if not isinstance(requested, Resources):
        return limits.given
    for name, units in limits.units.items():
        asked = requested.units.get(name)
        if asked is None:
            refuse(
                errors,
                path(key, name),
                _("needs its request in resources too: a pod asks for its requests"),
            )
        elif name not in ("cpu", "memory") and units != asked:
            refuse(
                errors,
                path(key, name),
                _("an extended resource's limit is its request (%(request)s)")
                % {"request": requested.given[name]},
            )
        elif units < asked:
            refuse(
                errors,
                path(key, name),
                _("is below the request (%(request)s)") % {"request": requested.given[name]},
            )
    return limits.given


class PodIn(Reader):
    """The head of a Ray job or the master of a PyTorch job: one pod."""

    class Meta:
        ref_name = "Pod"

    resources = PodResources()
    limits = PodResources(required=False, help_text=LIMITS_HELP)

    def read(self, data, errors, key=""):
        if not isinstance(data, Mapping):
            refuse(errors, key or "body", pod_required())
            return INVALID
        unknown_fields(data, self.fields, key, errors, first_only=True)
        resources = read_field(
            self.fields["resources"], data.get("resources"), errors, key, "resources"
        )
        limits = limits_read(data.get("limits"), resources, errors, path(key, "limits"))
        if resources is INVALID:
            return INVALID
        return Resources(resources.given, resources.units, limits)


class WorkerGroupIn(Reader):
    """One entry of ``workers``: a set of identical pods."""

    class Meta:
        ref_name = "WorkerGroup"

    name = serializers.CharField(
        required=False,
        max_length=GROUP_NAME_MAX,
        help_text="a DNS-1123 label; default group-<i> (Ray), worker (PyTorch)",
    )
    replicas = Integer(default=1, min_value=0, max_value=MAX_REPLICAS, strings=False, nulls=False)
    max_replicas = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_REPLICAS,
        help_text="Ray on kuberay only: the group autoscales (KubeRay's autoscaler) between "
        "replicas and max_replicas pods. Quota counts its replicas, the pods it starts "
        "with, and the autoscaler beside the head (500m CPU, 512Mi); the cluster places the "
        "pods it adds as it has room. Absent: a fixed number of pods. "
        "Returned only when given.",
    )
    resources = PodResources()
    limits = PodResources(required=False, help_text=LIMITS_HELP)

    def read(self, data, errors, key="", *, index: int = 0, kind: str = "", runtime: str = ""):
        """The group as a job holds it (``{"name", "replicas", "resources"}`` and
        ``max_replicas`` when given) and its pods' Resources; INVALID when it is not an
        object. A default name follows the kind, and autoscaling the runtime."""
        if not isinstance(data, Mapping):
            refuse(errors, key or "body", _("must be an object with name, replicas and resources"))
            return INVALID
        unknown_fields(data, self.fields, key, errors, first_only=True)
        name = data.get("name") or ("worker" if kind == Job.Kind.PYTORCH else f"group-{index}")
        if not isinstance(name, str) or not DNS_LABEL.match(name) or len(name) > GROUP_NAME_MAX:
            refuse(
                errors,
                path(key, "name"),
                _("%(name)s must be a DNS-1123 label of at most %(limit)s characters")
                % {"name": repr(name), "limit": GROUP_NAME_MAX},
            )
        replicas = read_field(
            self.fields["replicas"], data.get("replicas", empty), errors, key, "replicas"
        )
        max_replicas = self._max_replicas(
            data.get("max_replicas"),
            None if replicas is INVALID else replicas,
            path(key, "max_replicas"),
            errors,
            kind,
            runtime,
        )
        resources = read_field(
            self.fields["resources"], data.get("resources"), errors, key, "resources"
        )
        limits = limits_read(data.get("limits"), resources, errors, path(key, "limits"))
        group = {
            "name": name,
            "replicas": 0 if replicas is INVALID else replicas,
            "resources": {} if resources is INVALID else resources.given,
        }
        if limits:
            group["limits"] = limits
        if max_replicas is not None:
            group["max_replicas"] = max_replicas
        return group, ({} if resources is INVALID else resources.units)

    @staticmethod
    def _max_replicas(value, replicas, key, errors, kind, runtime) -> int | None:
        """A group's autoscaling maximum, or None (absent, or refused with its reason).
        ``replicas`` is the group's minimum, None when it was refused itself."""
        if value is None:
            return None
        if kind != Job.Kind.RAY or runtime != Job.Runtime.KUBERAY:
            if runtime == Job.Runtime.VOLCANO:
                reason = _(
                    "autoscaling needs Ray on KubeRay; a Volcano Job has a fixed number of pods"
                )
            elif kind == Job.Kind.PYTORCH:
                reason = _(
                    "autoscaling needs Ray on KubeRay; a PyTorchJob has a fixed number of pods"
                )
            else:
                reason = _("autoscaling needs Ray on KubeRay")
            refuse(errors, key, reason)
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            refuse(errors, key, _("must be an integer, got %(value)s") % {"value": repr(value)})
            return None
        low = 0 if replicas is None else replicas
        if not low <= value <= MAX_REPLICAS:
            bounds = {"high": MAX_REPLICAS, "value": value}
            if replicas is None:
                reason = _("must be between %(low)s and %(high)s, got %(value)s") % (
                    bounds | {"low": 0}
                )
            else:
                reason = _(
                    "must be between replicas (%(replicas)s) and %(high)s, got %(value)s"
                ) % (bounds | {"replicas": replicas})
            refuse(errors, key, reason)
            return None
        return value
