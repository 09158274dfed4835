"""Cluster backends, chosen by the CLUSTER_BACKEND setting."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from .base import (
    FINISHED_PHASES,
    SCHEDULING_FAILURES,
    WATCHED_REASONS,
    ClusterBackend,
    ClusterUnavailable,
    LogAsked,
    LogUnavailable,
    NamespaceTrouble,
    NamespaceUnavailable,
    ObjectRef,
    ObjectStatus,
    Phase,
    PodLog,
    Refusal,
    Rejected,
)
from .kubernetes import KubernetesBackend, Settings
from .simulated import SimulatedBackend, parse_nodes

__all__ = [
    "FINISHED_PHASES",
    "SCHEDULING_FAILURES",
    "WATCHED_REASONS",
    "ClusterBackend",
    "ClusterUnavailable",
    "LogAsked",
    "LogUnavailable",
    "NamespaceTrouble",
    "NamespaceUnavailable",
    "ObjectRef",
    "ObjectStatus",
    "Phase",
    "PodLog",
    "Refusal",
    "Rejected",
    "get_backend",
]


@cache
def get_backend() -> ClusterBackend:
    if settings.CLUSTER_BACKEND == "simulated":
        return SimulatedBackend(
            parse_nodes(settings.SIMULATED_CLUSTER_NODES),
            cycle_seconds=settings.SIMULATED_SCHEDULING_CYCLE_SECONDS,
        )
    if settings.CLUSTER_BACKEND == "kubernetes":
        return KubernetesBackend(
            Settings(
                runtimes=tuple(settings.CLUSTER_RUNTIMES),
                kubeconfig=settings.KUBERNETES_CONFIG,
                context=settings.KUBERNETES_CONTEXT,
                host=settings.KUBERNETES_HOST,
                timeout_seconds=settings.KUBERNETES_TIMEOUT_SECONDS,
                attempts=settings.KUBERNETES_ATTEMPTS,
                watch=settings.KUBERNETES_WATCH,
                watch_scope=settings.KUBERNETES_WATCH_SCOPE,
                log_timeout_seconds=settings.JOB_LOG_TIMEOUT_SECONDS,
            )
        )
    raise ValueError(f"CLUSTER_BACKEND={settings.CLUSTER_BACKEND!r} is not a known backend")
