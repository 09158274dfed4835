"""The Kubernetes backend: the operators' objects through the official ``kubernetes`` client.

Every call has an explicit timeout. Transient failures (5xx, 429, timeouts, refused
connections) are retried a bounded number of times with growing pauses, then surface as
``ClusterUnavailable`` so that the caller retries later; nothing is ever concluded from a
call that failed (a listing that failed is not an empty cluster). Creating what exists
(409) and deleting what is gone (404) are success, so every call is idempotent. A
cycle's creates, thousands at a time, go as bare requests through the client's own pool
and credentials (``KubernetesBackend._post``); every other call through its methods.

Objects are read at each sync (what the watches see asks for one, every reconcile asks
for one, and beat drives one every SYNC_BEAT_SECONDS): each runtime's objects carrying the
``caldera.io/job-id`` label in each namespace the tree binds (Caldera may touch nothing
else: ``jobs.cluster.access``), and the Warning events of the namespaces they live in,
kept in memory by watches (``jobs.cluster.watch``, KUBERNETES_WATCH: one per kind and
namespace, or with KUBERNETES_WATCH_SCOPE=cluster one per kind for every namespace), or
listed while a watch is not in step.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any, TypeVar, cast
from urllib.parse import quote, urlsplit

import urllib3
from kubernetes import client, config

from jobs.cluster.manifests import build_manifests
from jobs.cluster.manifests.common import (
    ANNOTATION_DEQUEUED,
    LABEL_JOB_ID,
    script_configmap_name,
)
from jobs.cluster.manifests.common import annotations as object_annotations
from jobs.cluster.spec import JobSpec
from jobs.telemetry import CLUSTER_REQUEST_SECONDS, CLUSTER_REQUESTS
from kube.names import LABEL_MANAGED_BY, MANAGER
from kube.quantity import (
    KUBELET_MAX_PODS,
    PODS,
    QuantityError,
    ResourceList,
    human,
    parse_resources,
    total,
)
from kube.scheduling import ClusterNode, Taint

from . import access, kinds
from .base import (
    WATCHED_REASONS,
    Check,
    ClusterBackend,
    ClusterEvent,
    ClusterUnavailable,
    LogAsked,
    LogUnavailable,
    NamespaceTrouble,
    NamespaceUnavailable,
    ObjectRef,
    ObjectStatus,
    Observation,
    PodLog,
    Refusal,
    Rejected,
)
from .watch import SILENT_SECONDS, WATCH_SECONDS, Gone, Informer, job_moved

log = logging.getLogger(__name__)

T = TypeVar("T")

# Answers worth asking again: the server or something in front of it is struggling.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
# A 403 is the authorizer's (RBAC: `User "..." cannot create resource "rayjobs" in API
# group "ray.io" ...`) or an admission step's: a namespace being deleted, a full
# ResourceQuota, a webhook's denial. The first is Caldera's identity, which no job should
# fail for; the others are about the job's objects and answered per job.
AUTHORIZATION_DENIED = re.compile(r"\bcannot \S+ resource\b")
QUOTA_EXCEEDED = "exceeded quota"
# What the informers of the Warning events are keyed by, beside the runtimes.
EVENTS = "events"
# The events Caldera reads: the Warnings it shows (a scheduler's, an eviction).
WARNINGS = "type=Warning"
# How far the informers watch: a namespace each (the default, with the per-namespace Roles
# alone), or every namespace in one watch per kind (an opt-in ClusterRole that lets Caldera
# list and watch its kinds and the events cluster-wide, jobs.cluster.access.watch_grants).
WATCH_SCOPES = ("namespace", "cluster")
# The NamespaceLifecycle admission step's words for a create in a namespace being deleted.
NAMESPACE_TERMINATING = "because it is being terminated"


class Unauthorized(ClusterUnavailable):
    """The authorizer refused Caldera's identity (a 403 ``cannot <verb> resource``). Where
    a namespace was named, whether it is that namespace's trouble or the whole cluster's
    is told by asking about the namespace itself (``KubernetesBackend._trouble``)."""

    def __init__(self, what: str, message: str):
        super().__init__(f"{what}: {message}")
        self.message = message


@dataclass(frozen=True)
class Settings:
    """How to reach the cluster and how patiently (the KUBERNETES_* settings)."""

    runtimes: tuple[str, ...]
    kubeconfig: str = ""  # a kubeconfig file; empty: in-cluster, else ~/.kube/config
    context: str = ""
    host: str = ""  # an API server URL without credentials (tests, kubectl proxy)
    timeout_seconds: float = 10.0
    attempts: int = 3
    retry_pause_seconds: float = 0.5
    concurrency: int = 8
    list_page: int = 500  # objects per listing request; the rest follow with a continue token
    allocatable_seconds: float = 30.0
    # Keep each namespace's objects in memory through a watch (jobs.cluster.watch) instead
    # of listing them at every sync.
    watch: bool = False
    watch_scope: str = "namespace"  # one of WATCH_SCOPES
    # The server ends each watch after watch_seconds; a watch that sends nothing for
    # watch_silent_seconds is given up by the client. Both end in a resumed watch.
    watch_seconds: int = WATCH_SECONDS
    watch_silent_seconds: float = SILENT_SECONDS
    # A pod log is read while a person waits for the page (JOB_LOG_TIMEOUT_SECONDS): one
    # try, this patient; the page asks again at its next refresh.
    log_timeout_seconds: float = 5.0


def api_client(settings: Settings) -> client.ApiClient:
    """An ApiClient from the settings: a bare URL, a kubeconfig (file and context), or the
    in-cluster ServiceAccount."""
    configuration = client.Configuration()
    if settings.host:
        configuration.host = settings.host
    elif settings.kubeconfig or settings.context:
        config.load_kube_config(
            config_file=settings.kubeconfig or None,
            context=settings.context or None,
            client_configuration=configuration,
        )
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException:
            config.load_kube_config(client_configuration=configuration)
    configuration.retries = False  # retries are ours: bounded, and only for transient errors
    configuration.connection_pool_maxsize = max(settings.concurrency, 1)
    return client.ApiClient(configuration)


class KubernetesBackend(ClusterBackend):
    def __init__(self, settings: Settings, api: client.ApiClient | None = None):
        self.settings = settings
        self.api = api or api_client(settings)
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        # The last node listing: when it was read (or tried) and each node's allocatable.
        self._nodes: tuple[float, list[ClusterNode] | None] | None = None
        self._informers: dict[tuple[str, str], Informer] = {}
        # Once closed, no informer starts again: a sync that runs while the process stops
        # (a task still in flight) lists instead. The lock keeps the two apart.
        self._closed = False
        self._informers_lock = threading.Lock()
        # Where ``_post`` sends: the API server's pool in the client's manager (its TLS)
        # and the path the server's URL starts with; through a proxy, the manager itself
        # and the whole URL, so that it says what the proxy needs.
        host = self.api.configuration.host
        manager = self.api.rest_client.pool_manager
        self._pool: urllib3.PoolManager | urllib3.HTTPConnectionPool
        if isinstance(manager, urllib3.ProxyManager):
            self._pool, self._prefix = manager, host.rstrip("/")
        else:
            self._pool = manager.connection_from_url(host)
            self._prefix = urlsplit(host).path.rstrip("/")

    # -- calls ---------------------------------------------------------------------------

    def _call(
        self,
        what: str,
        fn: Callable[..., T],
        *args,
        timeout: float | None = None,
        attempts: int | None = None,
        operation: str = "",
        **kwargs,
    ) -> T:
        """One API call with the timeout; transient failures retried, then ClusterUnavailable.

        404 and 409 come back as ``client.ApiException`` for the caller to judge. 401, and
        a 403 from the authorizer, say Caldera's credentials or RBAC are wrong, which no job
        should fail for: the cluster is unavailable until an admin fixes them. Other
        refusals (an admission 403 included) are ``Rejected``. ``timeout`` and ``attempts``
        replace the settings' for a call someone waits for (a pod's log); ``operation``
        names the call in the metrics where ``fn`` is not the client's method.
        """
        timeout = timeout or self.settings.timeout_seconds
        attempts = attempts or self.settings.attempts
        pause = self.settings.retry_pause_seconds
        operation = operation or getattr(fn, "func", fn).__name__  # a partial: the call it binds
        for attempt in range(1, attempts + 1):
            started = time.perf_counter()
            try:
                answer = fn(*args, _request_timeout=(timeout, timeout), **kwargs)
            except client.ApiException as error:
                if error.status in (404, 409):
                    _measure(operation, started, "ok")  # an answer for the caller to judge
                    raise
                refusal = _refusal(what, error)
                _measure(
                    operation, started, "refused" if isinstance(refusal, Rejected) else "error"
                )
                if refusal is not None:
                    raise refusal from None
                # The server's own words, for the person who reads the failure: a 500 may
                # be a kubelet out of reach, a 503 a server still starting.
                said = _api_message(error)
                failure = f"{what}: HTTP {error.status}"
                failure += f": {said}" if said != f"HTTP {error.status}" else ""
            except (urllib3.exceptions.HTTPError, OSError) as error:
                _measure(operation, started, "error")
                failure = f"{what}: {type(error).__name__}: {error}"
            else:
                _measure(operation, started, "ok")
                return answer
            if attempt < attempts:
                log.info("%s; attempt %d of %d", failure, attempt, attempts)
                time.sleep(pause * 2 ** (attempt - 1))
        raise ClusterUnavailable(failure)

    def _post(
        self, path: str, body: dict, *, _request_timeout: tuple[float, float]
    ) -> urllib3.BaseHTTPResponse:
        """Create an object: the request the client's generated method sends (to the
        configuration's host, through its pool with its TLS and proxy, with its
        credentials, refreshed when they expire), without its validation of the
        parameters, its copy of the body and its parse of the object sent back, which
        nothing reads. A cycle creates thousands of objects: this is a quarter less of the
        process's time for each (docs/benchmarks.md, "Objects created at the server's
        pace")."""
        headers = {
            **self.api.default_headers,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        self.api.update_params_for_auth(headers, [], ["BearerToken"], path, "POST", None)
        answer = self._pool.urlopen(
            "POST",
            self._prefix + path,
            body=json.dumps(body).encode(),
            headers=headers,
            timeout=urllib3.Timeout(connect=_request_timeout[0], read=_request_timeout[1]),
            redirect=False,
        )
        if answer.status >= 400:
            raise client.ApiException(http_resp=answer)
        return answer

    def _each(self, fn: Callable[[T], object], items: Sequence[T]) -> list[object]:
        """Run ``fn`` over items with up to ``concurrency`` calls in flight: a cycle's
        creates or deletes go out together. Each result is a value or the exception."""
        run = _captured(fn)
        if len(items) <= 1 or self.settings.concurrency <= 1:
            return [run(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.settings.concurrency, len(items))) as pool:
            return list(pool.map(run, items))

    # -- the interface -------------------------------------------------------------------

    def allocatable(self) -> ResourceList | None:
        """The sum of the allocatable resources of the Ready, schedulable nodes (``nodes``);
        None while the nodes cannot be read."""
        nodes = self.nodes()
        return None if nodes is None else total(node.allocatable for node in nodes)

    def nodes(self) -> list[ClusterNode] | None:
        """Each Ready, schedulable node (its allocatable resources, labels, taints), from
        one listing read
        at most every ``allocatable_seconds`` (the admission cycle and every submit ask).

        While the nodes cannot be read, the last shapes read (None if none) are kept for
        that period too, so that submits do not each wait for a cluster that is away.
        """
        now = time.monotonic()
        if self._nodes and now - self._nodes[0] < self.settings.allocatable_seconds:
            return self._nodes[1]
        try:
            response = self._call("list nodes", self.core.list_node, _preload_content=False)
            items = json.loads(_raw(response).data)["items"]
        except (ClusterUnavailable, Rejected, client.ApiException) as error:
            log.warning("cannot read the nodes' allocatable resources: %s", error)
            self._nodes = (now, self._nodes[1] if self._nodes else None)
            return self._nodes[1]
        self._nodes = (now, node_shapes(items))
        return self._nodes[1]

    def apply(self, specs: Sequence[JobSpec], *, now: datetime) -> dict[int, Refusal]:
        """Create each job's objects, or bring existing ones to the spec's suspend flag.

        Returns the jobs the API server refused, with its reason.
        """
        results = self._each(self._apply_one, specs)
        return _outcome(specs, results)

    def remove(self, refs: Sequence[ObjectRef], *, now: datetime) -> None:
        """Delete the objects; those of namespaces in trouble wait (NamespaceUnavailable,
        once the others are done), and any other failure is raised first."""
        results = self._each(self._delete_one, refs)
        troubled: dict[str, NamespaceTrouble] = {}
        for result in results:
            if isinstance(result, NamespaceUnavailable):
                troubled |= result.troubles
        _raise_first(result for result in results if not isinstance(result, NamespaceUnavailable))
        if troubled:
            raise NamespaceUnavailable(troubled)

    def observe(
        self,
        *,
        now: datetime,
        namespaces: Collection[str],
        on_change: Callable[[], None] | None = None,
    ) -> Observation:
        watched = self._watched(sorted(namespaces), on_change) if self.settings.watch else {}
        listed, troubled = self._list_objects(namespaces, watched)
        statuses: list[ObjectStatus] = []
        located: list[tuple[str, str, int]] = []
        for runtime, items in listed.items():
            for item in items:
                status = kinds.object_status(runtime, item)
                if status is not None:
                    statuses.append(status)
                    located.append((status.namespace, status.object_name, status.job_id))
        events = self._events(located, watched, now=now)
        # A real cluster does not say when it will change next: beat's schedule polls it.
        return Observation(statuses=statuses, events=events, troubled=troubled)

    def namespace_troubles(self, namespaces: Collection[str]) -> dict[str, NamespaceTrouble]:
        """The namespaces that are not found, are being deleted, or where Caldera may not
        create its objects, read one by one. A namespace whose Role lets Caldera list but
        not create lists fine, so whether it may create is asked of the API server (an
        access review per kind): else its jobs would be let go at each sync and refused
        again at each create."""
        found = {}
        for namespace in sorted(namespaces):
            trouble = self._trouble(namespace, "") or self._may_not_create(namespace)
            if trouble is not None:
                found[namespace] = trouble
        return found

    def _may_not_create(self, namespace: str) -> NamespaceTrouble | None:
        refused = []
        for grant in access.leaf_grants(self.settings.runtimes):
            if "create" not in grant.verbs:
                continue
            attributes = {"group": grant.group, "resource": grant.resource, "verb": "create"}
            try:
                status = self._review(
                    "SelfSubjectAccessReview",
                    {"resourceAttributes": attributes | {"namespace": namespace}},
                )
            except client.ApiException as error:
                raise ClusterUnavailable(
                    f"review create in {namespace}: {_api_message(error)}"
                ) from None
            except Rejected as error:
                raise ClusterUnavailable(f"review create in {namespace}: {error}") from None
            if status.get("allowed") is not True:
                refused.append(_shown(grant.group, grant.resource))
        if not refused:
            return None
        return NamespaceTrouble(
            f"Caldera may not create {', '.join(refused)} in namespace {namespace} "
            f"({access.RBAC_FIX})"
        )

    def _refused_in(self, namespace: str, refusal: Unauthorized) -> NamespaceTrouble:
        """The authorizer refused Caldera in the namespace: the namespace's trouble when
        ``_trouble`` can tell it (it is gone, being deleted, there without a Role for
        Caldera, or not yet readable by Caldera's roles); else the refusal is raised as it
        is, the whole cluster's."""
        try:
            trouble = self._trouble(namespace, refusal.message)
        except ClusterUnavailable:
            raise refusal from None
        return trouble or NamespaceTrouble(refusal.message)

    def _trouble(self, namespace: str, refused: str) -> NamespaceTrouble | None:
        """What is wrong with the namespace, read from the namespace itself: not found,
        being deleted, or, when the server ``refused`` Caldera there though it is there, no
        Role for Caldera. None when it is fine. The read itself refused while Caldera's
        identity holds its cluster role (a leaf added since ``manage.py cluster_rbac`` was
        applied: the tree's ClusterRole names the namespaces it may read) is that
        namespace's trouble too. ClusterUnavailable when the read fails otherwise: the
        trouble is then the cluster's (an API server restarting refuses all)."""
        said = f" (the server said: {refused})" if refused else ""
        try:
            answer = self._call(
                f"get namespace {namespace}",
                self.core.read_namespace,
                namespace,
                _preload_content=False,
            )
        except Unauthorized as error:
            if not self._identity_holds():
                raise
            return NamespaceTrouble(
                f"Caldera may not read namespace {namespace}: its roles do not name it yet "
                f"({access.RBAC_FIX}; the server said: {error.message})"
            )
        except client.ApiException as error:
            if error.status != 404:
                raise ClusterUnavailable(
                    f"get namespace {namespace}: {_api_message(error)}"
                ) from None
            return NamespaceTrouble(f"namespace {namespace} is not found{said}", gone=True)
        except Rejected as error:
            raise ClusterUnavailable(f"get namespace {namespace}: {error}") from None
        phase = (json.loads(_raw(answer).data).get("status") or {}).get("phase")
        if phase == "Terminating":
            return NamespaceTrouble(f"namespace {namespace} is being deleted{said}")
        if refused:
            return NamespaceTrouble(
                f"Caldera has no Role in namespace {namespace} ({access.RBAC_FIX}){said}"
            )
        return None

    def _identity_holds(self) -> bool:
        """Whether the server still grants Caldera's identity what it needs whatever the
        tree (listing nodes: deploy/kubernetes/rbac.yaml's ClusterRole), asked in an access
        review: then a refusal about one namespace is that namespace's, not the cluster's."""
        nodes = {"group": "", "resource": "nodes", "verb": "list"}
        try:
            status = self._review("SelfSubjectAccessReview", {"resourceAttributes": nodes})
        except (ClusterUnavailable, Rejected, client.ApiException):
            return False
        return status.get("allowed") is True

    # -- the pieces ----------------------------------------------------------------------

    def _list_objects(
        self, namespaces: Collection[str], watched: dict[tuple[str, str], list[dict] | None]
    ) -> tuple[dict[str, list[dict]], dict[str, NamespaceTrouble]]:
        """Every object Caldera created in these namespaces, per runtime: from the
        informers when they are in step (``watched``), else listed, each (runtime,
        namespace) in pages of ``list_page``, several at a time; and the namespaces that
        could not be listed for their own trouble, whose objects are left out (none are
        left in a namespace that is gone). ClusterUnavailable if any other page fails (an
        expired continue token included)."""
        where = [(runtime, ns) for runtime in self.settings.runtimes for ns in sorted(namespaces)]
        listed: dict[str, list[dict]] = {runtime: [] for runtime in self.settings.runtimes}
        found = {key: watched.get(key) for key in where}
        unwatched = [key for key in where if found[key] is None]
        pages = self._each(self._list_namespace, unwatched)
        troubled: dict[str, NamespaceTrouble] = {}
        for page in pages:
            if isinstance(page, NamespaceUnavailable):
                troubled |= page.troubles
        _raise_first(page for page in pages if not isinstance(page, NamespaceUnavailable))
        for (runtime, namespace), page in zip(unwatched, pages, strict=True):
            if namespace not in troubled:  # a listing: the other failures were raised above
                found[(runtime, namespace)] = cast(tuple[list[dict], str], page)[0]
        for runtime, namespace in where:
            if namespace not in troubled:  # in step, or listed just now
                listed[runtime] += cast(list[dict], found[(runtime, namespace)])
        return listed, troubled

    def _watched(
        self, namespaces: list[str], on_change: Callable[[], None] | None
    ) -> dict[tuple[str, str], list[dict] | None]:
        """What the informers hold, per (runtime or EVENTS, namespace): None while the one
        that would hold it is not in step. Informers are started for what is new and
        stopped for what is no longer asked about: one per kind and namespace, or with
        the cluster scope one per kind for every namespace. Each informer of job objects
        calls ``on_change`` when it sees an object start, finish, fail or go."""
        with self._informers_lock:
            return self._watched_locked(namespaces, on_change)

    def _watched_locked(
        self, namespaces: list[str], on_change: Callable[[], None] | None
    ) -> dict[tuple[str, str], list[dict] | None]:
        if self._closed:
            return {}
        kinds_ = [*self.settings.runtimes, EVENTS]
        if not namespaces:
            wanted = []
        elif self.settings.watch_scope == "cluster":
            wanted = [(what, "") for what in kinds_]
        else:
            wanted = [(what, ns) for what in kinds_ for ns in namespaces]
        for key in set(self._informers) - set(wanted):
            self._informers.pop(key).stop()
        asked = set(namespaces)
        found: dict[tuple[str, str], list[dict] | None] = {}
        for key in wanted:
            informer = self._informers.get(key)
            if informer is None:
                informer = self._informers[key] = self._informer(*key)
            if key[0] != EVENTS:
                informer.on_change = on_change
            items = informer.items()
            if key[1]:
                found[key] = items
                continue
            for namespace in namespaces:  # every namespace's, from one watch
                found[(key[0], namespace)] = None if items is None else []
            for item in items or ():
                namespace = (item.get("metadata") or {}).get("namespace") or ""
                if namespace in asked:
                    cast(list, found[(key[0], namespace)]).append(item)
        return found

    def _informer(self, what: str, namespace: str) -> Informer:
        """An informer of a runtime's job objects or of the Warning events (``EVENTS``),
        in the namespace or ("") in every one. It lists and watches through a client of its
        own, so that its long watch and its listings never wait for, or crowd, the pool of
        connections the sync's calls share."""
        api = api_client(replace(self.settings, concurrency=1))
        if what == EVENTS:
            core = client.CoreV1Api(api)
            if namespace:
                listing: Callable[..., object] = partial(core.list_namespaced_event, namespace)
            else:
                listing = core.list_event_for_all_namespaces
            selector: dict[str, str] = {"field_selector": WARNINGS}
            keep: Callable[[dict], bool] | None = _shown_warning
            shrink: Callable[[dict], dict] | None = None
            moved = None
        else:
            resource = kinds.RESOURCES[what]
            custom = client.CustomObjectsApi(api)
            group = (resource.group, resource.version)
            if namespace:
                listing = partial(
                    custom.list_namespaced_custom_object, *group, namespace, resource.plural
                )
            else:
                listing = partial(custom.list_cluster_custom_object, *group, resource.plural)
            selector, keep, moved = {"label_selector": LABEL_JOB_ID}, None, job_moved(what)
            shrink = partial(kinds.observed, what)
        shown = f"{what} in {namespace or 'every namespace'}"
        timeout = self.settings.timeout_seconds

        def open_watch(version: str, seconds: int, silent: float) -> urllib3.BaseHTTPResponse:
            try:
                return _raw(
                    listing(
                        **selector,
                        watch=True,
                        resource_version=version,
                        allow_watch_bookmarks=True,
                        timeout_seconds=seconds,
                        _preload_content=False,
                        _request_timeout=(timeout, silent),
                    )
                )
            except client.ApiException as error:
                if error.status == 410:
                    raise Gone from None
                # The server's words on one line, not the client's dump of its headers.
                said = f"watch {shown}: HTTP {error.status}: {_api_message(error)}"
                raise ClusterUnavailable(said) from None

        return Informer(
            what,
            namespace,
            list_all=partial(self._pages, f"list {shown}", listing, trim=shrink, **selector),
            open_watch=open_watch,
            keep=keep,
            shrink=shrink,
            moved=moved,
            watch_seconds=self.settings.watch_seconds,
            silent_seconds=self.settings.watch_silent_seconds,
        )

    def close(self) -> None:
        """Stop the informers' watches, and wait (``timeout_seconds`` in all) for their
        threads, so that no request of theirs is still in flight when this returns. No
        informer starts after it."""
        with self._informers_lock:
            self._closed = True
            informers = list(self._informers.values())
            self._informers.clear()
        for informer in informers:
            informer.stop()
        deadline = time.monotonic() + self.settings.timeout_seconds
        for informer in informers:
            informer.join(max(deadline - time.monotonic(), 0))

    def _list_namespace(self, where: tuple[str, str]) -> tuple[list[dict], str]:
        """One runtime's objects in one namespace, and the listing's resourceVersion. A
        refusal of the authorizer is diagnosed: the namespace's own trouble, or the
        cluster's. (An informer's listing is not: after an API server's restart its
        authorizer refuses for a few seconds while its caches fill, and an informer, which
        only lists again shortly, must neither conclude that a Role is missing nor ask the
        server more.)"""
        runtime, namespace = where
        resource = kinds.RESOURCES[runtime]
        try:
            return self._pages(
                f"list {resource.plural} in {namespace}",
                self.custom.list_namespaced_custom_object,
                resource.group,
                resource.version,
                namespace,
                resource.plural,
                label_selector=LABEL_JOB_ID,
                trim=partial(kinds.observed, runtime),
            )
        except Unauthorized as error:
            # Refused in this namespace: its own trouble (it is gone, or has no Role for
            # Caldera) when the namespace itself can be read, else the cluster's.
            trouble = self._refused_in(namespace, error)
            raise NamespaceUnavailable({namespace: trouble}) from None
        except client.ApiException as error:
            # Not being allowed to list (or the CRD missing) never reads as "gone".
            reason = _api_message(error)
            if error.status == 404 and "page not found" in reason:
                reason = f"the {resource.kind} CRD is not installed ({reason})"
            raise ClusterUnavailable(f"list {resource.plural}: {reason}") from None
        except Rejected as error:
            raise ClusterUnavailable(f"list {resource.plural}: {error}") from None

    def _pages(
        self,
        what: str,
        fn: Callable[..., object],
        *args,
        trim: Callable[[dict], dict] | None = None,
        **kwargs,
    ) -> tuple[list[dict], str]:
        """Every item of a listing, in pages of ``list_page`` (the rest follow with the
        continue token), and the listing's resourceVersion. ``trim`` keeps the part of
        each item that is wanted, page by page: 60,000 whole job objects held at once
        would be most of a sync's memory."""
        items: list[dict] = []
        token = ""
        while True:
            pages: dict[str, Any] = {"_continue": token} if token else {}
            answer = self._call(
                what, fn, *args, limit=self.settings.list_page, _preload_content=False,
                **pages, **kwargs,
            )  # fmt: skip
            document = json.loads(_raw(answer).data)
            page = document.get("items") or []
            items += map(trim, page) if trim else page
            token = (document.get("metadata") or {}).get("continue") or ""
            if not token:
                return items, (document.get("metadata") or {}).get("resourceVersion") or ""

    def _events(
        self,
        located: list[tuple[str, str, int]],
        watched: dict[tuple[str, str], list[dict] | None],
        *,
        now: datetime,
    ) -> list[ClusterEvent]:
        """The Warnings Caldera shows of the objects located, per namespace where there
        are any: from the informers in step, else listed (several namespaces at a time). A
        namespace whose events cannot be read is left out, and said in the log."""
        index = kinds.ObjectIndex(located)
        namespaces = sorted({namespace for namespace, _, _ in located})
        unwatched = [ns for ns in namespaces if watched.get((EVENTS, ns)) is None]
        found = {ns: watched[(EVENTS, ns)] for ns in namespaces if ns not in unwatched}
        for namespace, listed in zip(
            unwatched, self._each(self._list_events, unwatched), strict=True
        ):
            if isinstance(listed, client.ApiException):
                log.warning("cannot read the events of %s: %s", namespace, _api_message(listed))
            elif isinstance(listed, Rejected):
                log.warning("cannot read the events of %s: %s", namespace, listed)
            elif isinstance(listed, BaseException):  # the cluster is away: the sync waits
                raise listed
            else:
                found[namespace] = cast(tuple[list[dict], str], listed)[0]
        events = []
        for namespace, items in found.items():
            for event in items or ():
                if not _shown_warning(event):
                    continue
                involved = event.get("involvedObject") or {}
                job_id = index.job_of(namespace, involved.get("name") or "")
                if job_id is not None:
                    events.append(kinds.cluster_event(event, job_id, now=now))
        return events

    def _list_events(self, namespace: str) -> tuple[list[dict], str]:
        return self._pages(
            f"list events in {namespace}",
            self.core.list_namespaced_event,
            namespace,
            field_selector=WARNINGS,
        )

    def _apply_one(self, spec: JobSpec) -> None:
        """Create the job's objects. A create refused for its namespace's trouble (not
        found, being deleted, no Role for Caldera there: authorization runs before the
        namespace is looked up, so a namespace deleted with its Role answers 403, not 404)
        is the namespace's ``Rejected``; any other refusal is the job's."""
        resource = kinds.RESOURCES[spec.runtime]
        for manifest in build_manifests(spec):
            is_job = manifest["kind"] == resource.kind
            try:
                if is_job:
                    self._call(
                        f"create {resource.kind} {spec.object_name}",
                        self._post,
                        resource.collection(spec.namespace),
                        manifest,
                        operation="create_namespaced_custom_object",
                    )
                else:
                    self._call(
                        f"create ConfigMap {manifest['metadata']['name']}",
                        self._post,
                        f"/api/v1/namespaces/{quote(spec.namespace, safe='')}/configmaps",
                        manifest,
                        operation="create_namespaced_config_map",
                    )
            except Unauthorized as error:
                trouble = self._refused_in(spec.namespace, error)
                raise Rejected(403, trouble.reason, namespace=spec.namespace) from None
            except Rejected as error:
                if NAMESPACE_TERMINATING not in error.message:
                    raise
                raise Rejected(403, error.message, namespace=spec.namespace) from None
            except client.ApiException as error:
                if error.status == 409:
                    if is_job:
                        self._bring_to_spec(spec, resource)
                    continue
                message = _api_message(error)
                if error.status == 404 and f'namespaces "{spec.namespace}" not found' in message:
                    raise Rejected(404, message, namespace=spec.namespace) from None
                raise Rejected(error.status, message) from None

    def _bring_to_spec(self, spec: JobSpec, resource: kinds.Resource) -> None:
        """The object exists: a suspended one is released at dequeue (and suspended again
        if the job went back to its queue), with the dequeue time on it."""
        patch = resource.suspend_patch(spec.suspend)
        if patch is None:
            return
        # A merge patch keeps what it does not name: a job back in its queue has no dequeue
        # time, and null is how a merge patch removes the one the object still carries.
        patch["metadata"] = {"annotations": {ANNOTATION_DEQUEUED: None} | object_annotations(spec)}
        try:
            self._call(
                f"patch {resource.kind} {spec.object_name}",
                self.custom.patch_namespaced_custom_object,
                resource.group,
                resource.version,
                spec.namespace,
                resource.plural,
                spec.object_name,
                patch,
            )
        except Unauthorized as error:  # a Role without patch: the namespace's trouble
            trouble = self._refused_in(spec.namespace, error)
            raise Rejected(403, trouble.reason, namespace=spec.namespace) from None
        except client.ApiException as error:
            # 404: deleted since the create; the next sync finds it missing and creates it.
            if error.status != 404:
                raise Rejected(error.status, _api_message(error)) from None

    def _delete_one(self, ref: ObjectRef) -> None:
        """Delete the job object, then its ConfigMaps (those the team sent with it, or the
        one of a document's script). The job object goes in the foreground: it stays
        listed, marked as being deleted, until the garbage collector has removed what it
        owns (its pods, which end their grace period first), so the sync sees it gone only
        once the cluster has let go of its resources."""
        resource = kinds.RESOURCES[ref.runtime]
        config_maps = (
            ref.config_maps if ref.config_maps is not None else (script_configmap_name(ref.name),)
        )
        calls: list[tuple[str, Callable[..., object], tuple[str, ...], str]] = [
            (
                f"delete {resource.kind} {ref.name}",
                self.custom.delete_namespaced_custom_object,
                (resource.group, resource.version, ref.namespace, resource.plural, ref.name),
                "Foreground",
            ),
            *(
                (
                    f"delete ConfigMap {name}",
                    self.core.delete_namespaced_config_map,
                    (name, ref.namespace),
                    "Background",
                )
                for name in config_maps
            ),
        ]
        for what, fn, args, policy in calls:
            try:
                self._call(what, fn, *args, propagation_policy=policy)
            except Unauthorized as error:
                trouble = self._refused_in(ref.namespace, error)
                if trouble.gone:
                    return  # its objects went with the namespace
                raise NamespaceUnavailable({ref.namespace: trouble}) from None
            except client.ApiException as error:
                if error.status != 404:
                    raise Rejected(error.status, _api_message(error)) from None

    # -- a job's log -----------------------------------------------------------------------

    def pod_log(
        self,
        ref: ObjectRef,
        *,
        job_id: int,
        head: str,
        tail_lines: int | None,
        limit_bytes: int,
        now: datetime,
    ) -> PodLog:
        """The log of the job's main pod, found by its labels (``kinds.main_pod_selector``),
        read from its first container (the head's or master's own; KubeRay puts its
        autoscaler after it). One try of each call within ``log_timeout_seconds``: a person
        waits for the answer, and the page asks again.

        One line and one byte more than asked for are read, so that whether the log goes
        on beyond what is shown is known rather than guessed."""
        what = f"the {head} pod of {ref.name} in {ref.namespace}"
        patience: dict[str, Any] = {"timeout": self.settings.log_timeout_seconds, "attempts": 1}
        selector = kinds.main_pod_selector(
            ref.runtime, object_name=ref.name, job_id=job_id, head=head
        )
        try:
            listed = self._call(
                f"list {what}",
                self.core.list_namespaced_pod,
                ref.namespace,
                label_selector=selector,
                _preload_content=False,
                **patience,
            )
        except (client.ApiException, Rejected) as error:
            reason = error.message if isinstance(error, Rejected) else _api_message(error)
            raise LogUnavailable(f"The pods of {ref.name} cannot be listed: {reason}.") from None
        pod = kinds.main_pod(json.loads(_raw(listed).data).get("items") or [])
        if pod is None:
            raise LogUnavailable(f"{what.capitalize()} is not there.", missing=True)
        name = pod["metadata"]["name"]
        spec = pod.get("spec") or {}
        if not spec.get("nodeName"):
            # The API server answers such a pod's log with nothing at all, not an error.
            raise LogUnavailable(
                f"Pod {name} has no log yet: it waits for the scheduler to place it on a node."
            )
        window: dict[str, Any] = {"limit_bytes": limit_bytes + 1}
        if tail_lines is not None:
            window["tail_lines"] = tail_lines + 1
        try:
            answer = self._call(
                f"read the log of pod {name} in {ref.namespace}",
                self.core.read_namespaced_pod_log,
                name,
                ref.namespace,
                container=(spec.get("containers") or [{}])[0].get("name"),
                _preload_content=False,
                **window,
                **patience,
            )
        except client.ApiException as error:  # 404: deleted since it was listed
            reason = _api_message(error)
            raise LogUnavailable(f"Pod {name} is gone: {reason}.", missing=True) from None
        except Rejected as error:  # 400: its container is waiting to start, ...
            reason = error.message
            raise LogUnavailable(f"The log of pod {name} cannot be read: {reason}.") from None
        log = log_window(name, _raw(answer).data, tail_lines=tail_lines, limit_bytes=limit_bytes)
        return replace(log, exit_code=kinds.exit_code(pod))

    def pod_logs(
        self,
        asked: Sequence[LogAsked],
        *,
        tail_lines: int,
        limit_bytes: int,
        now: datetime,
    ) -> dict[int, PodLog | LogUnavailable | ClusterUnavailable]:
        """Each log as ``pod_log`` reads one, up to ``concurrency`` of them at a time. An
        error other than the two a log read answers (a bug) is raised, once all are read."""

        def read(one: LogAsked) -> PodLog:
            return self.pod_log(
                one.ref,
                job_id=one.job_id,
                head=one.head,
                tail_lines=tail_lines,
                limit_bytes=limit_bytes,
                now=now,
            )

        results = self._each(read, asked)
        _raise_first(
            result
            for result in results
            if isinstance(result, Exception)
            and not isinstance(result, (LogUnavailable, ClusterUnavailable))
        )
        return {
            one.job_id: result
            for one, result in zip(asked, results, strict=True)
            if isinstance(result, (PodLog, LogUnavailable, ClusterUnavailable))
        }

    # -- the quota tree, for the cluster's own schedulers -------------------------------

    def publish_quota(self, *, tree: dict | None, queues: list[dict] | None) -> None:
        """Write the ElasticQuotaTree and/or one Volcano Queue per leaf (None: leave that
        kind alone). Each object is created, or applied over what is there (server-side
        apply, field manager ``caldera``); Volcano Queues Caldera wrote for leaves that are
        gone are deleted."""
        if tree is not None:
            self._put(kinds.QUOTA_TREE, tree)
        if queues is not None:
            for queue in queues:
                self._put(kinds.VOLCANO_QUEUE, queue)
            self._delete_stale_queues({queue["metadata"]["name"] for queue in queues})

    def _put(self, resource: kinds.Resource, obj: dict) -> None:
        """Write the object by server-side apply as ``caldera``, which creates it if it is
        missing and removes what Caldera applied before and no longer applies. An object
        first written by a plain create (as Caldera did before) is owned by that create's
        manager too, so keys of its resource lists that the tree no longer has are then
        removed by a merge patch."""
        name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
        where = (resource.group, resource.version) + ((namespace,) if namespace else ())
        scope = "namespaced" if namespace else "cluster"
        patch = getattr(self.custom, f"patch_{scope}_custom_object")
        try:
            # An apply that creates answers 201, and the client deserializes only a 200's
            # body (it gives None for a 201): the answer is read here, whatever its status.
            answer = self._call(
                f"apply {resource.kind} {name}",
                patch,
                *where,
                resource.plural,
                name,
                obj,
                field_manager=MANAGER,
                force=True,
                _content_type="application/apply-patch+yaml",
                _preload_content=False,
            )
            stale = stale_keys(json.loads(answer.data), obj)
            if stale:
                self._call(
                    f"patch {resource.kind} {name}", patch, *where, resource.plural, name, stale
                )
        except client.ApiException as error:
            raise Rejected(error.status, _api_message(error)) from None

    def _delete_stale_queues(self, keep: set[str]) -> None:
        resource = kinds.VOLCANO_QUEUE
        try:
            listed = _custom(
                self._call(
                    "list Volcano queues",
                    self.custom.list_cluster_custom_object,
                    resource.group,
                    resource.version,
                    resource.plural,
                    label_selector=f"{LABEL_MANAGED_BY}={MANAGER}",
                )
            )
        except client.ApiException as error:
            raise Rejected(error.status, _api_message(error)) from None
        for item in listed.get("items") or []:
            name = item["metadata"]["name"]
            if name in keep:
                continue
            try:
                self._call(
                    f"delete Queue {name}",
                    self.custom.delete_cluster_custom_object,
                    resource.group,
                    resource.version,
                    resource.plural,
                    name,
                )
            except client.ApiException as error:
                if error.status != 404:
                    # Volcano deletes only closed queues; the admin closes it (vcctl).
                    log.warning("Volcano queue %s stays: %s", name, _api_message(error))

    # -- is the cluster ready for Caldera? (manage.py cluster_check) ------------------

    def _crd_check(self, runtime: str) -> Check:
        """Whether the API server serves the runtime's resource (its discovery document,
        which every identity may read)."""
        resource = kinds.RESOURCES[runtime]
        what = f"{runtime}: {resource.kind} ({resource.group}/{resource.version}) is served"
        try:
            served = self._call(
                f"discover {resource.group}/{resource.version}",
                self.custom.get_api_resources,
                resource.group,
                resource.version,
                _preload_content=False,
            )
        except client.ApiException as error:
            reason = "its CRD is not installed" if error.status == 404 else _api_message(error)
            return Check(what, False, reason)
        except (Rejected, ClusterUnavailable) as error:
            return Check(what, False, str(error))
        if resource.plural not in {
            r.get("name") for r in json.loads(_raw(served).data)["resources"]
        }:
            return Check(what, False, "its CRD is not installed")
        return Check(what, True)

    def _review(self, kind: str, spec: dict) -> dict:
        """A self-subject review's status. No metadata: a review is not stored, and a real
        API server refuses one that has a name (422, "metadata: Invalid value: ...: must
        be empty")."""
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec}
        api = client.AuthorizationV1Api(self.api)
        creates: dict[str, Callable[..., object]] = {
            "SelfSubjectAccessReview": api.create_self_subject_access_review,
            "SelfSubjectRulesReview": api.create_self_subject_rules_review,
        }
        answer = self._call(f"review {kind}", creates[kind], body, _preload_content=False)
        return json.loads(_raw(answer).data).get("status") or {}

    def _permission_check(self, where: str, namespace: str | None, grants) -> Check:
        """Whether Caldera's identity may do all it does ``where``, one access review per
        verb; the check names what it may not do."""
        verbs = "; ".join(
            f"{', '.join(grant.verbs)} {_shown(grant.group, grant.resource)}" for grant in grants
        )
        what = f"may {verbs} {where}"
        refused = []
        try:
            for grant in grants:
                for verb in grant.verbs:
                    for name in grant.names or (None,):
                        # A subresource (pods/log) is its own attribute in a review.
                        resource, _, subresource = grant.resource.partition("/")
                        attributes = {"group": grant.group, "resource": resource, "verb": verb}
                        attributes |= {"subresource": subresource} if subresource else {}
                        attributes |= {"namespace": namespace} if namespace else {}
                        attributes |= {"name": name} if name else {}
                        status = self._review(
                            "SelfSubjectAccessReview", {"resourceAttributes": attributes}
                        )
                        if status.get("allowed") is not True:
                            shown = f"{verb} {_shown(grant.group, grant.resource)}"
                            refused.append(shown + (f" ({name})" if name else ""))
        except client.ApiException as error:
            return Check(what, False, _api_message(error))
        except (Rejected, ClusterUnavailable) as error:
            return Check(what, False, str(error))
        if refused:
            return Check(what, False, f"not allowed: {', '.join(refused)}; {access.RBAC_FIX}")
        return Check(what, True)

    def _excess_check(self, namespace: str, wanted) -> Check:
        """What the identity is granted in the namespace (a rules review: its own roles and
        the cluster's) beyond what Caldera uses there: a warning naming each grant."""
        what = f"nothing granted in {namespace} beyond what Caldera uses"
        try:
            status = self._review("SelfSubjectRulesReview", {"namespace": namespace})
        except client.ApiException as error:
            return Check(
                what, True, f"the granted rules cannot be read: {_api_message(error)}", warning=True
            )
        except (Rejected, ClusterUnavailable) as error:
            return Check(what, True, f"the granted rules cannot be read: {error}", warning=True)
        extra = access.beyond(status.get("resourceRules") or [], wanted)
        if not extra:
            return Check(what, True)
        return Check(what, True, f"also granted: {', '.join(extra)}", warning=True)

    def checks(self, *, namespaces: Iterable[str], publish: Sequence[str]) -> list[Check]:
        """What Caldera needs from the cluster, asked of its API server: each runtime's CRD,
        each permission of Caldera's identity where it needs it (``jobs.cluster.access``),
        what it is granted beyond that, each namespace the quota tree binds, the nodes."""
        namespaces = sorted(set(namespaces))
        checks = [self._crd_check(runtime) for runtime in self.settings.runtimes]
        runtimes = self.settings.runtimes
        needs: list[tuple[str, str | None, list[access.Grant]]]
        scope = self.settings.watch_scope if self.settings.watch else "namespace"
        needs = [("at the cluster scope", None, [*access.BASE_GRANTS, *access.tree_grants(
            namespaces, publish), *access.watch_grants(runtimes, scope)])]  # fmt: skip
        needs += [(f"in {ns}", ns, access.leaf_grants(runtimes)) for ns in namespaces]
        if access.quota_grants(publish):
            quota = access.QUOTA_NAMESPACE
            needs.append((f"in {quota}", quota, access.quota_grants(publish)))
        for where, namespace, grants in needs:
            checks.append(self._permission_check(where, namespace, grants))
        outside = next(ns for ns in ("default", "kube-public") if ns not in namespaces)
        for namespace in [*namespaces, access.QUOTA_NAMESPACE, outside]:
            wanted = access.wanted_in(
                namespace,
                namespaces=namespaces,
                runtimes=runtimes,
                publish=publish,
                watch_scope=scope,
            )
            checks.append(self._excess_check(namespace, wanted))
        for namespace in sorted(set(namespaces)):
            what = f"namespace {namespace} exists"
            try:
                found = self._call(
                    f"get namespace {namespace}",
                    self.core.read_namespace,
                    namespace,
                    _preload_content=False,
                )
                phase = (json.loads(_raw(found).data).get("status") or {}).get("phase")
                if phase == "Terminating":
                    reason = "it is being deleted (Terminating): jobs of its queue would be refused"
                    checks.append(Check(what, False, reason))
                else:
                    checks.append(Check(what, True))
            except client.ApiException as error:
                reason = (
                    "not found: jobs of its queue wait, then fail; create it, then "
                    + access.RBAC_FIX
                    if error.status == 404
                    else ""
                )
                checks.append(Check(what, False, reason or _api_message(error)))
            except (Rejected, ClusterUnavailable) as error:
                checks.append(Check(what, False, str(error)))
        self._nodes = None  # read the nodes now, not from the cache
        allocatable = self.allocatable()
        checks.append(
            Check(
                "the nodes' allocatable resources can be read",
                bool(allocatable),
                ", ".join(
                    f"{name} {human(name, units)}"
                    for name, units in sorted((allocatable or {}).items())
                ),
            )
        )
        return checks


def _shown(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource


def stale_keys(stored: dict, wanted: dict) -> dict | None:
    """A merge patch removing the keys of the maps nested in ``wanted``'s spec (resource
    lists: ``spec.capability``, ``spec.root.max``) that ``stored`` still has; None when
    there are none. Keys directly under ``spec`` are left alone: a webhook may set them."""

    def stale(have: object, want: object, depth: int) -> dict:
        if not (isinstance(have, dict) and isinstance(want, dict)):
            return {}
        found: dict[str, Any] = {}
        for key, value in have.items():
            if key not in want:
                if depth >= 2:
                    found[key] = None
            elif inner := stale(value, want[key], depth + 1):
                found[key] = inner
        return found

    spec = stale(stored.get("spec"), wanted.get("spec"), 1)
    return {"spec": spec} if spec else None


def node_shapes(nodes: Iterable[dict]) -> list[ClusterNode]:
    """Each node that is Ready and takes new pods: its allocatable resources, its labels
    and its taints (what kube-scheduler's filters read)."""
    usable = []
    for node in nodes:
        metadata = node.get("metadata") or {}
        spec, status = node.get("spec") or {}, node.get("status") or {}
        if spec.get("unschedulable"):
            continue
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        if conditions and conditions.get("Ready") != "True":
            continue
        try:
            allocatable = parse_resources("allocatable", status.get("allocatable") or {})
        except QuantityError as error:
            log.warning("node %s: %s", metadata.get("name"), error)
            continue
        taints = tuple(
            Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
            for t in spec.get("taints") or []
            if isinstance(t, dict)
        )
        usable.append(
            ClusterNode(
                name=str(metadata.get("name") or ""),
                # A kubelet always reports its pods; one that did not would hold its default.
                allocatable={PODS: KUBELET_MAX_PODS} | allocatable,
                labels={str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
                taints=taints,
            )
        )
    return usable


def log_window(pod: str, data: bytes, *, tail_lines: int | None, limit_bytes: int) -> PodLog:
    """A log read with one line and one byte more than asked for, cut to what was asked:
    a byte past ``limit_bytes`` says the log was cut there; a line past ``tail_lines``
    (which the server gives first) says earlier lines were left out. The text is decoded
    as UTF-8, a character cut in two at the limit replaced. Lines end with a newline alone,
    as the kubelet counts them (a progress bar's carriage returns stay inside a line)."""
    truncated = len(data) > limit_bytes
    data = data[:limit_bytes]
    if tail_lines is not None and not truncated:
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        start = -1
        for _ in range(lines - tail_lines):
            start = data.index(b"\n", start + 1)
        truncated = start >= 0
        data = data[start + 1 :]
    return PodLog(pod=pod, text=data.decode("utf-8", errors="replace"), truncated=truncated)


def _shown_warning(event: dict) -> bool:
    """Whether an event is one of the Warnings Caldera shows (and keeps, watched)."""
    return event.get("type") == "Warning" and event.get("reason") in WATCHED_REASONS


def _measure(operation: str, started: float, result: str) -> None:
    """One call to the API server, counted by its result and timed (jobs.telemetry)."""
    CLUSTER_REQUESTS.labels(operation, result).inc()
    CLUSTER_REQUEST_SECONDS.labels(operation).observe(time.perf_counter() - started)


def _refusal(what: str, error: client.ApiException) -> Exception | None:
    """What an API error means for the caller; None for a transient one, tried again."""
    if error.status == 403 and _admission_denied(error):
        message = _api_message(error)
        return Rejected(403, message, retry=QUOTA_EXCEEDED in message)
    if error.status == 403:
        return Unauthorized(what, _api_message(error))
    if error.status == 401:
        return ClusterUnavailable(f"{what}: {_api_message(error)}")
    if error.status not in TRANSIENT_STATUSES:
        return Rejected(error.status, _api_message(error))
    return None


def _admission_denied(error: client.ApiException) -> bool:
    """A 403 that an admission step gave, with its reason (not the authorizer's)."""
    message = _api_message(error)
    return "forbidden" in message and not AUTHORIZATION_DENIED.search(message)


def _api_message(error: client.ApiException) -> str:
    """What the server said: a Status's message, else a short plain-text body (a real API
    server answers an unknown resource with ``404 page not found``), else the HTTP reason.
    Never the client's rendering of the exception, with its headers."""
    try:
        return json.loads(error.body or "")["message"]
    except (TypeError, ValueError, KeyError):
        pass
    body = error.body.decode(errors="replace") if isinstance(error.body, bytes) else error.body
    if isinstance(body, str) and body.strip() and len(body) <= 200 and "\n" not in body.strip():
        return body.strip()
    return error.reason or f"HTTP {error.status}"


def _raw(answer: object) -> urllib3.BaseHTTPResponse:
    """The answer to a call made with ``_preload_content=False``: the HTTP response itself,
    not the model the client's annotations name."""
    return cast(urllib3.BaseHTTPResponse, answer)


def _custom(answer: object) -> dict[str, Any]:
    """The answer of the custom objects API: the JSON document, which the client's
    annotations call ``object``."""
    return cast(dict[str, Any], answer)


def _captured(fn: Callable[[T], object]) -> Callable[[T], object]:
    """Return exceptions instead of raising them, so one failure does not hide the others."""

    def run(item: T) -> object:
        try:
            return fn(item)
        except Exception as error:  # noqa: BLE001 - sorted out by the caller
            return error

    return run


def _raise_first(results: Iterable[object]) -> None:
    for result in results:
        if isinstance(result, Exception):
            raise result


def _outcome(specs: Sequence[JobSpec], results: Sequence[object]) -> dict[int, Refusal]:
    """Refusals by job; a transient failure (after the others were done) is raised."""
    refused: dict[int, Refusal] = {}
    unavailable = None
    for spec, result in zip(specs, results, strict=True):
        if isinstance(result, Rejected):
            refused[spec.id] = Refusal(
                f"The cluster refused the job's objects ({result})",
                retry=result.retry,
                namespace=result.namespace,
            )
        elif isinstance(result, ClusterUnavailable):
            unavailable = result
        elif isinstance(result, Exception):
            raise result
    if unavailable is not None and not refused:
        raise unavailable
    if unavailable is not None:
        log.warning("some objects were not created, the sync creates them: %s", unavailable)
    return refused
