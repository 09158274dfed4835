"""The simulated cluster resized for a test, as an operator would resize the cluster."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.test import override_settings

from jobs.cluster import get_backend


@contextmanager
def simulated_nodes(text: str) -> Iterator[None]:
    """The simulated cluster's nodes replaced (SIMULATED_CLUSTER_NODES) while it lasts."""
    with override_settings(SIMULATED_CLUSTER_NODES=text):
        get_backend.cache_clear()
        try:
            yield
        finally:
            get_backend.cache_clear()
