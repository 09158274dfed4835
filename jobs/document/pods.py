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


class PodIn(Reader):
    """The head of a Ray job or the master of a PyTorch job: one pod."""

    class Meta:
        ref_name = "Pod"

    resources = PodResources()

    def read(self, data, errors, key=""):
        if not isinstance(data, Mapping):
            refuse(errors, key or "body", pod_required())
            return INVALID
        unknown_fields(data, self.fields, key, errors, first_only=True)
        return read_field(self.fields["resources"], data.get("resources"), errors, key, "resources")


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
        group = {
            "name": name,
            "replicas": 0 if replicas is INVALID else replicas,
            "resources": {} if resources is INVALID else resources.given,
        }
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
