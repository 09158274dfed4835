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
    "v1/pods",
]  # access reviews are answered by ``authorize`` and stored nowhere, as a real server does


APPLY_PATCH = "application/apply-patch+yaml"


def leaves(obj: object, prefix: tuple = ()) -> dict[tuple, object]:
    """The fields a manager can own: every key path down to a value that is not a map
    (lists are atomic, as in a CRD whose lists declare no list type)."""
    if isinstance(obj, dict) and obj:
        found = {}
        for key, value in obj.items():
            found |= leaves(value, (*prefix, key))
        return found
    return {prefix: obj} if prefix else {}


def owned(obj: dict) -> dict[tuple, object]:
    """The fields of an object that field managers own: labels, annotations and spec."""
    metadata = obj.get("metadata") or {}
    fields = leaves({"spec": obj.get("spec")}) if obj.get("spec") is not None else {}
    for part in ("labels", "annotations"):
        fields |= leaves({"metadata": {part: metadata.get(part)}}) if metadata.get(part) else {}
    return fields


def nested(path: tuple, value: object) -> dict:
    for key in reversed(path):
        value = {key: value}
    return value


def merged(a: dict, b: dict) -> dict:
    result = dict(a)
    for key, value in b.items():
        both = isinstance(result.get(key), dict) and isinstance(value, dict)
        result[key] = merged(result[key], value) if both else value
    return result


class Server(kmock.KubernetesEmulator):
    """kmock's emulator, with the API server's habits it lacks.

    An access review is answered and stored nowhere (kmock would keep it as an object, and
    a second review without a name would then conflict). Creates pass the admission steps
    the test installs (``Emulator.terminating``, ``Emulator.resource_quota``) before they
    are stored: a refused create stores nothing, as on a real server. Field managers are
    tracked as server-side apply tracks them: an apply removes the fields its manager
    applied before and no longer applies, unless another manager owns them too (a plain
    create or merge patch owns what it wrote, under the client's name); an apply that
    would change another manager's field is a 409 conflict unless forced. An object whose
    pods still run (``Emulator.runs_pods``) deleted in the foreground stays listed, marked
    as being deleted, until its pods are gone (``Emulator.pods_gone``), as the garbage
    collector keeps it. A listing honours its label selector (equality, inequality and
    existence), and a pod's log is served as the API server and the kubelet serve it
    (``_pod_log``).
    """

    def deny(self, check) -> None:
        """``check(request)`` answers any request with the authorizer's refusal, or None
        to let it through; a refused request changes nothing (kmock alone would store a
        create or carry out a delete whatever the answer)."""
        self.__dict__.setdefault("denials", []).append(check)

    def dependents(self) -> set[tuple[str, str, str]]:
        """(plural, namespace, name) of the objects whose pods still run."""
        return self.__dict__.setdefault("running_pods", set())

    def admit(self, check) -> None:
        """``check(request, objects)`` answers a create with a refusal, or None to pass."""
        self.__dict__.setdefault("admission", []).append(check)

    def managers(self, key: tuple) -> dict[str, set[tuple]]:
        """The fields each manager owns of the object at ``key`` (resource, namespace, name)."""
        return self.__dict__.setdefault("owners", {}).setdefault(key, {})

    def restart(self, *, unready: int, refusing: int) -> None:
        """The API server restarts: it answers the next ``unready`` requests 503, as one
        whose handlers are not all installed yet, then refuses the next ``refusing`` as its
        RBAC authorizer does before its caches are filled, whatever the roles."""
        self.__dict__["restarting"] = [unready, refusing]

    def gone(self) -> set[str]:
        """The namespaces deleted (``Emulator.delete_namespace``)."""
        return self.__dict__.setdefault("deleted_namespaces", set())

    def _restarting(self, request) -> kmock.Response | None:
        left = self.__dict__.get("restarting")
        if not left or not any(left) or _DISCOVERY.match(request.url.path):
            return None
        if left[0]:
            left[0] -= 1
            message = "the request was rejected before all known HTTP paths have been installed"
            return status(503, "ServiceUnavailable", message)
        left[1] -= 1
        return rbac_refusal(request, CALDERA_USER)

    def _namespace_gone(self, request) -> kmock.Response | None:
        """A deleted namespace reads 404, and so does a create in it (once authorized)."""
        for namespace in self.gone():
            if (
                request.method.value == "GET"
                and request.url.path == f"/api/v1/namespaces/{namespace}"
            ):
                return status(404, "NotFound", f'namespaces "{namespace}" not found')
            if request.namespace == namespace and request.action == kmock.action.CREATE:
                return status(404, "NotFound", f'namespaces "{namespace}" not found')
        return None

    async def _handle(self, request):
        restarting = self._restarting(request)
        if restarting is not None:
            return await restarting(request)
        checked = request.resource is not None or _NAMESPACE_READ.match(request.url.path)
        for check in self.__dict__.get("denials", []) if checked else ():
            refusal = check(request)
            if refusal is not None:
                return await refusal(request)
        missing = self._namespace_gone(request)
        if missing is not None:
            return await missing(request)
        if request.resource is not None and str(request.resource.plural or "").endswith(
            ("accessreviews", "rulesreviews")
        ):
            return await kmock.KubernetesScaffold._handle(self, request)
        if (
            request.resource is not None
            and request.action == kmock.action.DELETE
            and request.params.get("propagationPolicy") == "Foreground"
            and (request.resource.plural, request.namespace, request.name) in self.dependents()
        ):
            stored = self._objects[(request.resource, request.namespace, request.name)]
            stored.patch({"metadata": {"finalizers": ["foregroundDeletion"]}})
        if request.resource is not None and request.action == kmock.action.CREATE:
            for check in self.__dict__.get("admission", []):
                refusal = check(request, self._objects)
                if refusal is not None:
                    return await refusal(request)
        if request.resource is not None and isinstance(request.data, dict):
            if APPLY_PATCH in request.headers.get("Content-Type", ""):
                return await self._apply(request)
            if request.action in (kmock.action.CREATE, kmock.action.UPDATE):
                self._record(request)
        return await super()._handle(request)

    async def _serve_list(self, request):
        listing = await super()._serve_list(request)
        selector = request.params.get("labelSelector")
        if selector:
            listing["items"] = [
                item
                for item in listing["items"]
                if selects(selector, (item.get("metadata") or {}).get("labels") or {})
            ]
        fields = request.params.get("fieldSelector")
        if fields:
            listing["items"] = [item for item in listing["items"] if has_fields(fields, item)]
        return listing

    async def _serve_watch(self, request):
        """A watch as a real server serves it: it ends, with a clean end of stream, after the
        ``timeoutSeconds`` the client asked for (kmock's would stream until the client
        leaves). Until then a watch of objects nobody writes sends nothing: no bookmarks, as
        a real server whose etcd reports no progress (its default: every 10 minutes)."""
        events = super()._serve_watch(request)
        seconds = request.params.get("timeoutSeconds")
        deadline = asyncio.get_running_loop().time() + int(seconds) if seconds else None
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        event = await anext(events)
                except (StopAsyncIteration, TimeoutError):
                    return
                yield event
        finally:
            await events.aclose()

    async def _serve_fetch(self, request):
        if request.resource.plural == "pods" and request.subresource == "log":
            return self._pod_log(request)
        return await super()._serve_fetch(request)

    def logs(self) -> dict[tuple[str, str, str], str]:
        """What each container has written: (namespace, pod, container) -> text."""
        return self.__dict__.setdefault("written", {})

    def _pod_log(self, request) -> kmock.Response:
        """GET .../pods/{name}/log as a real server answers it: 404 for a pod that is not
        there; 400 without a container name when the pod has several, or naming one it
        does not have; an empty log for a pod on no node yet (the API server has no
        kubelet to ask); the kubelet's 400 for a container that has not started; else the
        last ``tailLines`` lines, then the first ``limitBytes`` bytes of those, as text."""
        name, namespace = request.name, request.namespace
        found = [
            obj
            for (resource, where, named), obj in self._objects.items()
            if resource.plural == "pods" and (where, named) == (namespace, name) and not obj.deleted
        ]
        if not found:
            return status(404, "NotFound", f'pods "{name}" not found')
        pod = found[0].raw
        containers = [c["name"] for c in pod["spec"]["containers"]]
        container = request.params.get("container")
        if not container and len(containers) > 1:
            message = f"a container name must be specified for pod {name}, choose one of: "
            return status(400, "BadRequest", f"{message}[{' '.join(containers)}]")
        container = container or containers[0]
        if container not in containers:
            return status(400, "BadRequest", f"container {container} is not valid for pod {name}")
        if not pod["spec"].get("nodeName"):
            return kmock.Response(status=200, headers=PLAIN_TEXT, payload=b"")
        states = {
            s["name"]: s.get("state") or {}
            for s in (pod.get("status") or {}).get("containerStatuses") or []
        }
        if container not in states:
            message = f'container "{container}" in pod "{name}" is not available'
            return status(400, "BadRequest", message)
        if "waiting" in states[container]:
            reason = states[container]["waiting"].get("reason", "")
            message = f'container "{container}" in pod "{name}" is waiting to start: {reason}'
            return status(400, "BadRequest", message)
        data = self.logs().get((namespace, name, container), "").encode()
        if request.params.get("tailLines") is not None:
            # Lines end with "\n" alone; the last may still lack its end.
            lines = re.findall(rb"[^\n]*\n|[^\n]+\Z", data)
            wanted = int(request.params["tailLines"])
            data = b"".join(lines[len(lines) - wanted :]) if 0 < wanted < len(lines) else data
            data = b"" if wanted == 0 else data
        if request.params.get("limitBytes") is not None:
            data = data[: int(request.params["limitBytes"])]
        return kmock.Response(status=200, headers=PLAIN_TEXT, payload=data)

    def _manager(self, request) -> str:
        """The field manager: as given, else the client's name (its user agent's product)."""
        agent = request.headers.get("User-Agent", "unknown")
        return request.params.get("fieldManager") or agent.split("/")[0]

    def _key(self, request) -> tuple:
        metadata = request.data.get("metadata") or {}
        return (
            request.resource,
            request.namespace or metadata.get("namespace"),
            request.name or metadata.get("name"),
        )

    def _record(self, request) -> None:
        """A create or a merge patch: its manager owns what it wrote; a null gives it up."""
        managers = self.managers(self._key(request))
        written = owned(request.data)
        for fields in managers.values():
            fields -= {field for field in fields if any(field[: len(w)] == w for w in written)}
        managers.setdefault(self._manager(request), set()).update(
            field for field, value in written.items() if value is not None
        )

    async def _apply(self, request):
        key, manager = self._key(request), request.params.get("fieldManager")
        if not manager:
            message = 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value'
            return await invalid(message)(request)
        force = str(request.params.get("force", "")).lower() == "true"
        stored = self._objects[key] if key in self._objects else None
        live = {} if stored is None or stored.deleted else owned(stored.raw)
        applied = owned(request.data)
        managers = self.managers(key)
        others = {name: fields for name, fields in managers.items() if name != manager}
        conflicts = sorted(
            (name, field)
            for name, fields in others.items()
            for field in fields & set(applied)
            if live.get(field) != applied[field]
        )
        if conflicts and not force:
            listed = "; ".join(f'conflict with "{name}": .{".".join(f)}' for name, f in conflicts)
            message = f"Apply failed with {len(conflicts)} conflicts: {listed}"
            return await status(409, "Conflict", message)(request)
        for name, field in conflicts:
            others[name].discard(field)
        kept = set().union(*others.values()) if others else set()
        dropped = managers.get(manager, set()) - set(applied) - kept
        managers[manager] = set(applied)
        change = dict(request.data)
        for field in dropped:
            change = merged(change, nested(field, None))
        created = stored is None or stored.deleted
        if created:
            self._objects[key] = request.data
        else:
            stored.patch(change)
        # A real server answers an apply that creates with 201 Created, one that changes
        # what is there with 200: a client that reads only a 200's body gets nothing.
        code = 201 if created else 200
        return await kmock.Response(status=code, payload=self._objects[key].raw)(request)


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
        # A real server always answers access reviews: until a test gives it an authorizer
        # (``authorize``, ``rbac``, which replace these answers), it allows everything.
        reviews = "post /apis/authorization.k8s.io/v1/self"
        self.server[reviews + "subjectaccessreviews"] << (lambda r: self._access_review(r))
        self.server[reviews + "subjectrulesreviews"] << (lambda r: self._rules_review(r))
        self.authorize()

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

    def runs_pods(self, runtime: str, namespace: str, name: str) -> None:
        """The object has pods: deleted in the foreground, it stays until ``pods_gone``."""
        self.server.dependents().add((kinds.RESOURCES[runtime].plural, namespace, name))

    def pods_gone(self, runtime: str, namespace: str, name: str) -> None:
        """Its pods ended their grace period: the garbage collector lets the object go."""
        resource = kinds.RESOURCES[runtime]
        self.server.dependents().discard((resource.plural, namespace, name))
        self.custom.patch_namespaced_custom_object(
            resource.group, resource.version, namespace, resource.plural, name,
            {"metadata": {"finalizers": None}},
        )  # fmt: skip

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
        first: str = "",
    ) -> None:
        """Record an event as the scheduler or the kubelet would (a repeat: same name, uid
        and a higher count, ``at`` its last time and ``first`` its first; default ``at``)."""
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "type": type,
            "reason": reason,
            "message": message,
            "count": count,
            "firstTimestamp": first or at,
            "lastTimestamp": at,
            "involvedObject": {"kind": involved[0], "name": involved[1], "namespace": namespace},
        }
        self._put_event(namespace, name, body)

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
        self._put_event(namespace, name, body)

    def _put_event(self, namespace: str, name: str, body: dict) -> None:
        """Create the event, or write its repeat over it."""
        try:
            self.core.create_namespaced_event(namespace, body)
        except client.ApiException as error:
            if error.status != 409:
                raise
            self.core.patch_namespaced_event(name, namespace, body)

    def add_pod(
        self,
        namespace: str,
        name: str,
        *,
        labels: dict[str, str],
        containers: tuple[str, ...] = ("main",),
        node: str = "node-1",
        waiting: str = "",
        created: str = "2026-11-23T10:00:00Z",
    ) -> None:
        """A pod as an operator makes it and the kubelet runs it: placed on ``node`` ("":
        not placed yet), its containers running, or all ``waiting`` with that reason."""
        state = {"waiting": {"reason": waiting}} if waiting else {"running": {"startedAt": created}}
        running = bool(node) and not waiting
        self.core.create_namespaced_pod(
            namespace,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name, "namespace": namespace, "labels": labels,
                    "creationTimestamp": created,
                },
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": c, "image": "busybox"} for c in containers],
                },
                "status": {
                    "phase": "Running" if running else "Pending",
                    "containerStatuses": [
                        {"name": c, "image": "busybox", "imageID": "", "restartCount": 0,
                         "ready": running, "state": state}
                        for c in containers
                    ] if node else [],
                },
            },
        )  # fmt: skip

    def write_log(self, namespace: str, pod: str, text: str, *, container: str = "") -> None:
        """What the pod's container (its first, unless named) has written so far."""
        if not container:
            stored = self.core.read_namespaced_pod(pod, namespace)
            container = stored.spec.containers[0].name
        self.server.logs()[(namespace, pod, container)] = text

    def add_namespace(self, name: str, *, phase: str = "Active") -> None:
        """A namespace that reads back (kmock's paths take ``namespaces/<name>`` as the scope
        of a namespaced resource, so a Namespace is served by a reaction; others are 404).
        A namespace being deleted reads back ``Terminating`` and refuses creates."""
        self.server.gone().discard(name)
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name},
            "status": {"phase": phase},
        }
        self.server[f"get /api/v1/namespaces/{name}"] << namespace
        if phase == "Terminating":
            self.terminating(name)

    def delete_namespace(self, name: str) -> None:
        """The namespace controller has deleted the namespace: its objects are gone, and so
        are its Roles and RoleBindings (``rbac``), so a request there is refused by RBAC
        before the namespace is looked up, as a real server answers; an identity allowed
        there by a ClusterRole gets 404 for a create and an empty listing."""
        self.server.gone().add(name)
        for key in [key for key in self.server._objects if key[1] == name]:
            del self.server._objects[key]
        if hasattr(self, "roles"):
            self.roles.by_namespace.pop(name, None)

    def apply_roles(self, documents: list[dict], *, user: str = "") -> None:
        """``kubectl apply`` of these roles and bindings (``manage.py cluster_rbac``), in
        place of those ``rbac`` was given."""
        self.roles = Rbac(documents, user or CALDERA_USER)

    def authorize(self, refused: set[tuple[str, str]] = frozenset()) -> None:
        """Answer access reviews as an authorizer would: allowed, but (verb, resource) pairs
        in ``refused``; a rules review lists only what every signed-in identity has
        (``BASIC_USER_RULES``). A review with a name is refused as a real API server refuses
        it. (``rbac`` authorizes from real roles instead.)"""

        def rules_review(request):
            rules = list(BASIC_USER_RULES)
            return named_review(request) or {**request.data, "status": {"resourceRules": rules}}

        def review(request):
            if named_review(request):
                return named_review(request)
            attributes = request.data["spec"]["resourceAttributes"]
            allowed = (attributes["verb"], attributes["resource"]) not in refused
            return {**request.data, "status": {"allowed": allowed}}

        self._access_review, self._rules_review = review, rules_review

    def rbac(self, documents: list[dict], *, user: str = "") -> None:
        """Authorize as a real API server's RBAC authorizer would from these Roles,
        ClusterRoles and bindings: every request of the backend is allowed only by a rule
        bound to ``user`` (refused otherwise with the server's words), and access and
        rules reviews are answered from the same rules."""
        user = user or CALDERA_USER
        self.roles = Rbac(documents, user)  # replaced by ``apply_roles``, as kubectl apply would
        self.refused: list[str] = []  # what RBAC refused, as "verb path"

        def check(request):
            namespace_read = _NAMESPACE_READ.match(request.url.path)
            if namespace_read:  # a Namespace is cluster-scoped: its name is the object's
                plural, group, verb = "namespaces", "", "get"
                namespace, name = None, namespace_read["name"]
            else:
                plural = request.resource.plural or ""
                if not plural or plural.endswith(("accessreviews", "rulesreviews")):
                    return None  # discovery and self reviews: every identity's
                if request.subresource:  # to RBAC, pods/log is a resource of its own
                    plural = f"{plural}/{request.subresource}"
                verb = VERBS[request.action] if request.method.value != "PUT" else "update"
                if request.method.value == "PATCH":
                    verb = "patch"
                group = request.resource.group or ""
                namespace, name = request.namespace, request.name
            if self.roles.allows(verb, group, plural, namespace, name):
                return None
            self.refused.append(f"{verb} {request.url.path}")
            kind = f"{plural}.{group}" if group else plural
            named = f' "{name}"' if name else ""
            where = (
                f'in the namespace "{namespace}"' if namespace
                else "at the cluster scope"
            )  # fmt: skip
            return status(403, "Forbidden", (
                f'{kind}{named} is forbidden: User "{user}" cannot {verb} resource "{plural}" '
                f'in API group "{group}" {where}'
            ))  # fmt: skip

        def access_review(request):
            if named_review(request):
                return named_review(request)
            attributes = request.data["spec"]["resourceAttributes"]
            resource = "/".join(
                filter(None, (attributes["resource"], attributes.get("subresource")))
            )
            allowed = self.roles.allows(
                attributes["verb"], attributes.get("group", ""), resource,
                attributes.get("namespace"), attributes.get("name"),
            )  # fmt: skip
            return {**request.data, "status": {"allowed": allowed}}

        def rules_review(request):
            rules = self.roles.rules(request.data["spec"]["namespace"])
            return {**request.data, "status": {"resourceRules": rules, "incomplete": False}}

        self.server.deny(check)
        self._access_review, self._rules_review = access_review, rules_review

    def add_node(
        self, name: str, allocatable: dict, *, ready: bool = True, labels=None, **spec
    ) -> None:
        self.core.create_node(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels or {}},
                "spec": spec,
                "status": {
                    "allocatable": allocatable,
                    "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                },
            }
        )

    def deny(self, verb: str, runtime: str, namespace: str, *, times: int) -> None:
        """RBAC does not let Caldera ``verb`` (create, delete, list) the runtime's objects in
        the namespace, for the next ``times`` such requests: refused as a real server words it."""
        resource = kinds.RESOURCES[runtime]
        actions = {
            "create": kmock.action.CREATE,
            "delete": kmock.action.DELETE,
            "list": kmock.action.LIST,
        }
        left = [times]

        def check(request):
            if (
                left[0] <= 0
                or request.resource is None
                or request.action != actions[verb]
                or request.resource.plural != resource.plural
                or request.namespace != namespace
            ):
                return None
            left[0] -= 1
            named = f' "{request.name}"' if request.name else ""
            return status(403, "Forbidden", (
                f"{resource.plural}.{resource.group}{named} is forbidden: User "
                f'"system:serviceaccount:caldera-system:caldera" cannot {verb} resource '
                f'"{resource.plural}" in API group "{resource.group}" in the namespace '
                f'"{namespace}"'
            ))  # fmt: skip

        self.server.deny(check)

    def without_crd(self, runtime: str) -> None:
        """The runtime's CRD is not installed: every request for its resource is answered
        as a real API server answers a path it does not serve, in plain text."""
        resource = kinds.RESOURCES[runtime]
        group = re.escape(f"/apis/{resource.group}/{resource.version}")
        served = f"{group}(/?|/(namespaces/[^/]+/)?{resource.plural}(/.*)?)"
        self.server[re.compile(served)] << page_not_found()

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

    def expire_watches(self, runtime: str, namespace: str) -> None:
        """The open watches of the runtime's objects in the namespace end as a real server
        ends one whose resourceVersion it no longer keeps: an ERROR event carrying a 410
        Status. (Its metadata names the namespace only so that kmock delivers it there.)"""
        plural = kinds.RESOURCES[runtime].plural
        [resource] = [r for r in self.server._buses if r.plural == plural]
        event = {"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {"namespace": namespace},
            "status": "Failure",
            "message": "too old resource version: 1 (5)", "reason": "Expired", "code": 410,
        }}  # fmt: skip
        bus = self.server._buses[resource]
        asyncio.run_coroutine_threadsafe(bus.put(event), self.loop).result(timeout=5)

    def watch_streams(self, runtime: str) -> set:
        """The watches of the runtime's objects (or, ``events``, of the events) that
        receive events now (kmock's bus marks): a watch is there once it streams, not when
        its request arrives."""
        plural = kinds.RESOURCES[runtime].plural if runtime in kinds.RESOURCES else runtime
        return {
            m for r, bus in self.server._buses.items() if r.plural == plural for m in bus._offsets
        }

    def answer_next(self, method: str, path: str, payload, times: int = 1) -> None:
        """Answer the next ``times`` requests of this method to this path with ``payload``
        (an HTTP status, or a coroutine factory for a pause) instead of serving them."""
        criteria = f"{method.lower()} {path}"
        done = len(self.server[criteria])
        self.server[criteria][done : done + times] << payload

    def pause_next(self, method: str, path: str, seconds: float, times: int = 1) -> None:
        self.answer_next(method, path, lambda: asyncio.sleep(seconds), times)


CALDERA_USER = "system:serviceaccount:caldera-system:caldera"
# The ClusterRole system:basic-user as Kubernetes 1.28 and later define it, bound to every
# signed-in identity (the group system:authenticated): a real server allows these and
# lists them in every rules review, whatever the identity's own roles.
BASIC_USER_RULES = [
    {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
     "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
    {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
     "resources": ["selfsubjectreviews"]},
]  # fmt: skip
VERBS = {
    kmock.action.CREATE: "create",
    kmock.action.DELETE: "delete",
    kmock.action.UPDATE: "patch",
    kmock.action.LIST: "list",
    kmock.action.WATCH: "watch",
    kmock.action.FETCH: "get",
}


class Rbac:
    """RBAC's rules for one user from Roles, ClusterRoles and their bindings."""

    def __init__(self, documents: list[dict], user: str):
        _, _, account_namespace, account = user.split(":")
        roles = {
            (doc["kind"], doc["metadata"].get("namespace"), doc["metadata"]["name"]): doc
            for doc in documents
            if doc["kind"] in ("Role", "ClusterRole")
        }
        self.by_namespace: dict[str | None, list[dict]] = {}
        for doc in documents:
            if not doc["kind"].endswith("Binding") or not any(
                subject.get("kind") == "ServiceAccount"
                and (subject.get("name"), subject.get("namespace")) == (account, account_namespace)
                for subject in doc.get("subjects") or []
            ):
                continue
            namespace = doc["metadata"].get("namespace") if doc["kind"] == "RoleBinding" else None
            ref = doc["roleRef"]
            role = roles.get(
                (ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"])
            )
            if role is not None:
                self.by_namespace.setdefault(namespace, []).extend(role.get("rules") or [])

    def rules(self, namespace: str | None) -> list[dict]:
        """The rules that apply in the namespace: its own, the cluster's and those every
        signed-in identity has."""
        return (
            BASIC_USER_RULES
            + self.by_namespace.get(None, [])
            + (self.by_namespace.get(namespace, []) if namespace else [])
        )

    def allows(self, verb: str, group: str, resource: str, namespace, name) -> bool:
        def matches(values, value) -> bool:
            return "*" in values or value in values

        return any(
            matches(rule.get("verbs") or [], verb)
            and matches(rule.get("apiGroups") or [], group)
            and matches(rule.get("resources") or [], resource)
            and (not rule.get("resourceNames") or name in rule["resourceNames"])
            for rule in self.rules(namespace)
        )


PLAIN_TEXT = {"Content-Type": "text/plain"}
_NAMESPACE_READ = re.compile(r"^/api/v1/namespaces/(?P<name>[^/]+)$")  # GET of a Namespace
_DISCOVERY = re.compile(r"^/(api|apis(/[^/]+/[^/]+)?)/?$")  # what every identity may read
_PATH = re.compile(r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/(?P<namespace>[^/]+))?"
                   r"/(?P<plural>[^/?]+)(?:/(?P<name>[^/?]+))?")  # fmt: skip


def rbac_refusal(request, user: str) -> kmock.Response:
    """The RBAC authorizer's 403 for a request, in its words."""
    match = _PATH.match(request.url.path)
    group, namespace, plural, name = (
        (match["group"] or "", match["namespace"], match["plural"], match["name"])
        if match
        else ("", None, request.url.path, None)
    )
    if plural == "namespaces" and name and not namespace:
        namespace, plural, name = None, "namespaces", name
    verb = {"POST": "create", "DELETE": "delete", "PATCH": "patch", "PUT": "update"}.get(
        request.method.value, "get" if name else "list"
    )
    kind = f"{plural}.{group}" if group else plural
    named = f' "{name}"' if name else ""
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return status(403, "Forbidden", (
        f'{kind}{named} is forbidden: User "{user}" cannot {verb} resource "{plural}" '
        f'in API group "{group}" {where}'
    ))  # fmt: skip


def selects(selector: str, labels: dict) -> bool:
    """Whether a label selector (``a=b,c!=d,e,!f``: equality, inequality, existence and
    absence, the forms Caldera sends) selects these labels."""
    for term in filter(None, (part.strip() for part in selector.split(","))):
        if "!=" in term:
            key, value = (side.strip() for side in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (side.strip() for side in re.split("==?", term, maxsplit=1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def has_fields(selector: str, obj: dict) -> bool:
    """Whether the object has the fields of an equality field selector (``type=Warning``,
    ``involvedObject.name=x``), as a real server's listing of events honours them."""
    for term in selector.split(","):
        path, _, value = term.partition("=")
        found: object = obj
        for part in path.strip().split("."):
            found = found.get(part) if isinstance(found, dict) else None
        if str(found if found is not None else "") != value.lstrip("=").strip():
            return False
    return True


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


def named_review(request) -> kmock.Response | None:
    """A real API server stores no review and refuses one that has a name."""
    name = (request.data.get("metadata") or {}).get("name")
    if not name:
        return None
    return invalid(
        f'{request.data.get("kind")}.authorization.k8s.io "{name}" is invalid: '
        f'metadata: Invalid value: {{"name": "{name}"}}: must be empty'
    )


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
