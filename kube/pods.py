"""What a pod asks of a node, counted as Kubernetes counts it (``PodRequests`` in
kubernetes/pkg/api/v1/resource, the scheduler's and the ResourceQuota's rule).

- A container asks for its ``requests``; a resource it only limits it asks for at the
  limit, as the API server defaults a missing request to the limit.
- The regular containers run together: their requests add up.
- An init container whose ``restartPolicy`` is ``Always`` is a sidecar: it runs beside the
  regular containers for the pod's life, so it adds to them, and to every init container
  started after it.
- The other init containers run one at a time before the regular ones: the pod needs the
  largest of them (with the sidecars started before it) or the regular total, whichever is
  larger, per resource.
- Pod-level ``resources`` (a pod's own requests, or its limits where it requests nothing)
  stand for the containers' total of the resources they name.
- The runtime class's ``overhead`` adds to all of it.

Every extended resource (``nvidia.com/gpu``, ``metax-tech.com/gpu``, hugepages) counts
the same way. Quantities are read into exact integer base units (``kube.quantity``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .quantity import QuantityError, ResourceList, add, parse_resources
from .schema import render

Where = tuple[str | int, ...]


class PodUnreadable(ValueError):
    """A quantity of the pod that is not one: ``problems`` by path, each with the reason
    (a ``kube.said.Said``)."""

    def __init__(self, problems: dict[str, list[str]]):
        super().__init__("; ".join(f"{k}: {v}" for k, vs in problems.items() for v in vs))
        self.problems = problems


def _refused(problems: dict[str, list[str]], at: Where, error: QuantityError) -> None:
    """A resource list's refusal at its path: the quantity's, or the list's as a whole."""
    name = error.field.lstrip(".")
    problems.setdefault(render((*at, name) if name else at), []).append(error.reason)


def _resources(resources: Any, at: Where, problems: dict[str, list[str]]) -> ResourceList:
    """A ``resources`` block's requests, each resource it only limits at its limit."""
    if not isinstance(resources, Mapping):
        return {}
    asked: ResourceList = {}
    for part in ("limits", "requests"):  # requests last: they win where both are given
        given = resources.get(part)
        for name, value in given.items() if isinstance(given, Mapping) else [(None, given)]:
            try:
                asked |= parse_resources("", {name: value} if name is not None else value)
            except QuantityError as error:
                _refused(problems, (*at, part), error)
    return asked


def _most(a: ResourceList, b: ResourceList) -> ResourceList:
    return {name: max(a.get(name, 0), b.get(name, 0)) for name in a.keys() | b.keys()}


def pod_request(spec: Mapping[str, Any], at: Where = ()) -> ResourceList:
    """What one pod of this ``PodSpec`` asks of a node, per resource, in base units (no
    zero entries). PodUnreadable naming every quantity that is not one, by its path under
    ``at``."""
    problems: dict[str, list[str]] = {}
    regular: ResourceList = {}
    for index, container in enumerate(spec.get("containers") or []):
        if isinstance(container, Mapping):
            where = (*at, "containers", index, "resources")
            regular = add(regular, _resources(container.get("resources"), where, problems))
    sidecars: ResourceList = {}
    init_most: ResourceList = {}
    for index, container in enumerate(spec.get("initContainers") or []):
        if not isinstance(container, Mapping):
            continue
        where = (*at, "initContainers", index, "resources")
        asked = _resources(container.get("resources"), where, problems)
        if container.get("restartPolicy") == "Always":
            regular = add(regular, asked)
            sidecars = add(sidecars, asked)
            running = sidecars
        else:
            running = add(asked, sidecars)
        init_most = _most(init_most, running)
    total = _most(regular, init_most)
    own = _resources(spec.get("resources"), (*at, "resources"), problems)
    total |= own
    overhead = spec.get("overhead")
    if overhead is not None:
        try:
            total = add(total, parse_resources("", overhead))
        except QuantityError as error:
            _refused(problems, (*at, "overhead"), error)
    if problems:
        raise PodUnreadable(problems)
    return {name: units for name, units in total.items() if units}
