"""What a pod asks of a node (``kube.pods.pod_request``), against Kubernetes' rule as its
documentation states it (kubernetes.io "Resource Management for Pods and Containers",
"Init Containers", "Sidecar Containers", "Pod Overhead"), for generated pod templates:

- a container's request of a resource is its request, or its limit where it requests none;
- the app containers and the sidecars (init containers that always restart) run together;
- an init container runs alone after the sidecars started before it, so the pod's
  effective init request is the largest of those moments;
- the pod asks for the larger of the two, plus its overhead."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kube.pods import pod_request

RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


def spelled(resource: str, units: int) -> st.SearchStrategy[object]:
    """Ways a manifest writes ``units`` of ``resource``."""
    if resource == "cpu":
        options: list[object] = [f"{units}m"]
        if units % 1000 == 0:
            options += [str(units // 1000), units // 1000]
        return st.sampled_from(options)
    options = [str(units), units]
    if units % 1024**2 == 0:
        options.append(f"{units // 1024**2}Mi")
    return st.sampled_from(options)


units = st.integers(min_value=0, max_value=64) | st.integers(min_value=0, max_value=2**20)


@st.composite
def resource_list(draw) -> dict[str, tuple[int, object]]:
    chosen = draw(st.lists(st.sampled_from(RESOURCES), unique=True, max_size=3))
    found = {}
    for resource in chosen:
        amount = draw(units) * (1024**2 if resource == "memory" else 1)
        found[resource] = (amount, draw(spelled(resource, amount)))
    return found


@st.composite
def container(draw, *, init: bool = False) -> dict:
    requests, limits = draw(resource_list()), draw(resource_list())
    body: dict = {"name": "c", "resources": {}}
    if requests:
        body["resources"]["requests"] = {k: v[1] for k, v in requests.items()}
    if limits:
        body["resources"]["limits"] = {k: v[1] for k, v in limits.items()}
    if init and draw(st.booleans()):
        body["restartPolicy"] = "Always"
    body["_asked"] = {
        r: requests[r][0] if r in requests else limits[r][0] for r in requests | limits
    }
    return body


@st.composite
def pod(draw) -> dict:
    spec = {
        "containers": draw(st.lists(container(), min_size=1, max_size=4)),
        "initContainers": draw(st.lists(container(init=True), max_size=4)),
    }
    overhead = draw(resource_list())
    if overhead:
        spec["overhead"] = {k: v[1] for k, v in overhead.items()}
        spec["_overhead"] = {k: v[0] for k, v in overhead.items()}
    return spec


def by_the_documentation(spec: dict) -> dict[str, int]:
    wanted = {}
    for resource in RESOURCES:

        def asked(c: dict, resource: str = resource) -> int:
            return c["_asked"].get(resource, 0)

        sidecars = [c for c in spec["initContainers"] if c.get("restartPolicy") == "Always"]
        running = sum(asked(c) for c in spec["containers"]) + sum(asked(c) for c in sidecars)
        moments = []
        for index, c in enumerate(spec["initContainers"]):
            before = [
                s for s in spec["initContainers"][:index] if s.get("restartPolicy") == "Always"
            ]
            moments.append(asked(c) + sum(asked(s) for s in before))
        total = max([running, *moments]) + spec.get("_overhead", {}).get(resource, 0)
        if total:
            wanted[resource] = total
    return wanted


def without_answers(spec: dict) -> dict:
    clean = {k: v for k, v in spec.items() if not k.startswith("_")}
    for part in ("containers", "initContainers"):
        clean[part] = [{k: v for k, v in c.items() if k != "_asked"} for c in spec[part]]
    return clean


@given(pod())
def test_a_pod_asks_what_kubernetes_counts_for_it(spec):
    assert pod_request(without_answers(spec)) == by_the_documentation(spec)


def test_the_seed_s_master_asks_its_requests_under_its_limits():
    master = {
        "containers": [
            {
                "resources": {
                    "requests": {"memory": "16Gi", "cpu": "4", "nvidia.com/gpu": 1},
                    "limits": {"memory": "32Gi", "cpu": "8", "nvidia.com/gpu": 1},
                }
            }
        ]
    }
    assert pod_request(master) == {"cpu": 4000, "memory": 16 * 1024**3, "nvidia.com/gpu": 1}


def test_pod_level_resources_stand_for_the_containers_of_what_they_name():
    spec = {
        "resources": {"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}},
        "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}],
    }
    assert pod_request(spec) == {"cpu": 2000, "memory": 1024**3}
