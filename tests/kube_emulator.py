"""A Kubernetes API server for the tests: kmock's emulator on a real port, in its own thread.

The Kubernetes backend talks to it over HTTP with the official client, as it would to a
cluster. The test plays the operators and the scheduler through the same API: it writes
the status an operator would, the events a scheduler would, the nodes a kubelet would.
Failures are injected as the server's answers (an HTTP status, a pause) to the next
matching requests.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import kmock
from kubernetes import client

from jobs.cluster import kinds

RESOURCES = [
    *(f"{r.group}/{r.version}/{r.plural}" for r in kinds.RESOURCES.values()),
    "v1/configmaps",
    "v1/events",
    "v1/nodes",
]  # access reviews are answered by ``authorize`` and stored nowhere, as a real server does


class Server(kmock.KubernetesEmulator):
    """kmock's emulator, with the API server's habits it lacks.

    An access review is answered and stored nowhere (kmock would keep it as an object, and
    a second review without a name would then conflict). Creates pass the admission steps
    the test installs (``Emulator.terminating``, ``Emulator.resource_quota``) before they
    are stored: a refused create stores nothing, as on a real server.
    """

    def admit(self, check) -> None:
        """``check(request, objects)`` answers a create with a refusal, or None to pass."""
        self.__dict__.setdefault("admission", []).append(check)

    async def _handle(self, request):
        if request.resource is not None and str(request.resource.plural or "").endswith(
            "accessreviews"
        ):
            return await kmock.KubernetesScaffold._handle(self, request)
        if request.resource is not None and request.action == kmock.action.CREATE:
            for check in self.__dict__.get("admission", []):
                refusal = check(request, self._objects)
                if refusal is not None:
                    return await refusal(request)
        return await super()._handle(request)


class Emulator:
    def __init__(self, server: Server, url: str, loop: asyncio.AbstractEventLoop):
        self.server = server
        self.url = url
        self.loop = loop
        configuration = client.Configuration()
        configuration.host = url
        self.api = client.ApiClient(configuration)
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)

    # -- what is stored ------------------------------------------------------------------

    def objects(self, runtime: str) -> list[dict]:
        resource = kinds.RESOURCES[runtime]
        answer = self.custom.list_cluster_custom_object(
            resource.group, resource.version, resource.plural
        )
        return answer["items"]

    def get(self, runtime: str, namespace: str, name: str) -> dict:
        resource = kinds.RESOURCES[runtime]
        return self.custom.get_namespaced_custom_object(
            resource.group, resource.version, namespace, resource.plural, name
        )

    def configmaps(self, namespace: str) -> list[str]:
        return [
            item.metadata.name for item in self.core.list_namespaced_config_map(namespace).items
        ]

    def requests(self, method: str, path_part: str = "") -> list:
        """The requests the server received with this method (and part of the path)."""
        return [
            request
            for request in list(self.server)
            if request.method.value == method.upper() and path_part in str(request.url)
        ]

    # -- playing the operators, the scheduler and the kubelet ------------------------------

    def set_status(self, runtime: str, namespace: str, name: str, status: dict) -> None:
        resource = kinds.RESOURCES[runtime]
        self.custom.patch_namespaced_custom_object(
            resource.group, resource.version, namespace, resource.plural, name, {"status": status}
        )

    def warn(
        self,
        namespace: str,
        name: str,
        *,
        reason: str,
        message: str,
        involved: tuple[str, str],
        uid: str,
        count: int = 1,
        type: str = "Warning",
        at: str = "2026-11-23T10:00:00Z",
    ) -> None:
        """Record an event as the scheduler or the kubelet would (a repeat: same name, uid
        and a higher count)."""
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "type": type,
            "reason": reason,
            "message": message,
            "count": count,
            "lastTimestamp": at,
            "involvedObject": {"kind": involved[0], "name": involved[1], "namespace": namespace},
        }
        try:
            self.core.create_namespaced_event(namespace, body)
        except client.ApiException as error:
            if error.status != 409:
                raise
            self.core.patch_namespaced_event(name, namespace, body)

    def warn_series(
        self,
        namespace: str,
        name: str,
        *,
        reason: str,
        message: str,
        involved: tuple[str, str],
        uid: str,
        count: int,
        first: str,
        last: str,
    ) -> None:
        """Record a Warning as the scheduler does through ``events.k8s.io/v1``, read back
        through core/v1 as a real server shows it: ``eventTime`` is the first occurrence,
        repeats are ``series`` (``count``, ``lastObservedTime``), and there is no ``count``
        or ``lastTimestamp``."""
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "type": "Warning",
            "reason": reason,
            "message": message,
            "eventTime": first,
            "reportingComponent": "default-scheduler",
            "action": "Scheduling",
            "involvedObject": {"kind": involved[0], "name": involved[1], "namespace": namespace},
        }
        if count > 1:
            body["series"] = {"count": count, "lastObservedTime": last}
        try:
            self.core.create_namespaced_event(namespace, body)
        except client.ApiException as error:
            if error.status != 409:
                raise
            self.core.patch_namespaced_event(name, namespace, body)

    def add_namespace(self, name: str, *, phase: str = "Active") -> None:
        """A namespace that reads back (kmock's paths take ``namespaces/<name>`` as the scope
        of a namespaced resource, so a Namespace is served by a reaction; others are 404).
        A namespace being deleted reads back ``Terminating`` and refuses creates."""
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name},
            "status": {"phase": phase},
        }
        self.server[f"get /api/v1/namespaces/{name}"] << namespace
        if phase == "Terminating":
            self.terminating(name)

    def authorize(self, refused: set[tuple[str, str]] = frozenset()) -> None:
        """Answer access reviews as an authorizer would: allowed, but (verb, resource) pairs
        in ``refused``. A review with a name is refused as a real API server refuses it."""

        def review(request):
            name = (request.data.get("metadata") or {}).get("name")
            if name:
                return invalid(
                    f'SelfSubjectAccessReview.authorization.k8s.io "{name}" is invalid: '
                    f'metadata: Invalid value: {{"name": "{name}"}}: must be empty'
                )
            attributes = request.data["spec"]["resourceAttributes"]
            allowed = (attributes["verb"], attributes["resource"]) not in refused
            return {**request.data, "status": {"allowed": allowed}}

        self.server["post /apis/authorization.k8s.io/v1/selfsubjectaccessreviews"] << review

    def add_node(self, name: str, allocatable: dict, *, ready: bool = True, **spec) -> None:
        self.core.create_node(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "spec": spec,
                "status": {
                    "allocatable": allocatable,
                    "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                },
            }
        )

    def without_crd(self, runtime: str) -> None:
        """The runtime's CRD is not installed: every request for its resource is answered
        as a real API server answers a path it does not serve, in plain text."""
        resource = kinds.RESOURCES[runtime]
        group = re.escape(f"/apis/{resource.group}/{resource.version}/")
        self.server[re.compile(f"{group}(namespaces/[^/]+/)?{resource.plural}(/.*)?")] << (
            page_not_found()
        )

    def terminating(self, namespace: str) -> None:
        """The namespace is being deleted: the NamespaceLifecycle admission step refuses
        every create in it, word for word as a real server does."""

        def check(request, objects):
            if request.namespace != namespace:
                return None
            return forbidden(
                request,
                f"unable to create new content in namespace {namespace} "
                "because it is being terminated",
            )

        self.server.admit(check)

    def resource_quota(self, namespace: str, name: str, runtime: str, limit: int) -> None:
        """A ResourceQuota ``name`` in the namespace with ``count/<plural>.<group>: limit``:
        a create past it is refused as the ResourceQuota admission step words it."""
        resource = kinds.RESOURCES[runtime]
        counted = f"count/{resource.plural}.{resource.group}"

        def check(request, objects):
            if request.namespace != namespace or request.resource.plural != resource.plural:
                return None
            used = sum(
                1
                for (kind, where, _name), obj in objects.items()
                if kind.plural == resource.plural and where == namespace and not obj.deleted
            )
            if used < limit:
                return None
            return forbidden(
                request,
                f"exceeded quota: {name}, requested: {counted}=1, used: {counted}={used}, "
                f"limited: {counted}={limit}",
            )

        self.server.admit(check)

    # -- failures ------------------------------------------------------------------------

    def answer_next(self, method: str, path: str, payload, times: int = 1) -> None:
        """Answer the next ``times`` requests of this method to this path with ``payload``
        (an HTTP status, or a coroutine factory for a pause) instead of serving them."""
        criteria = f"{method.lower()} {path}"
        done = len(self.server[criteria])
        self.server[criteria][done : done + times] << payload

    def pause_next(self, method: str, path: str, seconds: float, times: int = 1) -> None:
        self.answer_next(method, path, lambda: asyncio.sleep(seconds), times)


def status(code: int, reason: str, message: str) -> kmock.Response:
    """A refusal as the API server words it: a ``Status`` object with the code."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return kmock.Response(status=code, payload=body)


def forbidden(request, reason: str) -> kmock.Response:
    """An admission step's 403 for the object a create asked for."""
    resource = request.resource
    kind = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
    name = ((request.data or {}).get("metadata") or {}).get("name", "")
    return status(403, "Forbidden", f'{kind} "{name}" is forbidden: {reason}')


def invalid(message: str) -> kmock.Response:
    return status(422, "Invalid", message)


def page_not_found() -> kmock.Response:
    """What a real API server answers for a path it does not serve (an uninstalled CRD):
    not a Status, but plain text."""
    return kmock.Response(
        status=404,
        headers={"Content-Type": "text/plain; charset=utf-8"},
        payload=b"404 page not found\n",
    )


@contextmanager
def emulator() -> Iterator[Emulator]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kube-emulator", daemon=True)
    thread.start()

    async def start():
        server = Server()
        await server.__aenter__()
        for resource in RESOURCES:
            server.resources[resource] = {}
        http = kmock.Server(server)
        await http.__aenter__()
        return server, http

    server, http = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
    emu = Emulator(server, str(http.url).rstrip("/"), loop)
    try:
        yield emu
    finally:
        emu.api.close()

        async def stop():
            await http.__aexit__(None, None, None)
            await server.__aexit__(None, None, None)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
