"""The Kubernetes objects of a job as the API answers them."""

from __future__ import annotations

from rest_framework import serializers


class KubernetesObject(serializers.Serializer):
    """A Kubernetes object as Caldera creates it (a RayJob, PyTorchJob, Volcano Job or
    ConfigMap; the CRD schemas in k8s/ say the rest)."""

    apiVersion = serializers.CharField()
    kind = serializers.CharField()
    metadata = serializers.DictField()
    spec = serializers.DictField(required=False)
    # A declared field leaves the class (DRF's metaclass): ``.data`` stays the serializer's.
    data = serializers.DictField(required=False, child=serializers.CharField())  # type: ignore[assignment]
