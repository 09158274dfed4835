"""A small Kubernetes API server for the cluster benchmark: only the requests the backend
makes for RayJobs (create, list in pages and watch from a resourceVersion, by namespace or
in every namespace, patch, delete), their ConfigMaps, events and nodes, stored in dicts by
namespace, in a process of its own. A watch waits on its own namespace's changes (or its
kind's, watching every namespace), so thousands of watches cost nothing while nobody
writes; ``/connections`` on the control port counts the watches open.

kmock, the tests' emulator, answers every request by walking every object it holds, which
at 10,000 jobs costs more than Caldera's own work; this one costs what a dict costs, so
the figures are Caldera's (``bench/cluster.py`` states its listing time beside them).
"""

from __future__ import annotations

import bisect
import json
import re
import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

OBJECT = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?$"
)


class Store:
    def __init__(self):
        self.lock = threading.Lock()
        self.objects: dict[tuple[str, str], dict[str, dict]] = {}  # (plural, ns) -> name -> obj
        # The changes, numbered, for the watches: per (plural, namespace), and per (plural,
        # "*") for those of every namespace; each with its versions, to start from one.
        self.events: dict[tuple[str, str], list[tuple[int, str, dict]]] = {}
        self.versions: dict[tuple[str, str], list[int]] = {}
        self.conditions: dict[tuple[str, str], threading.Condition] = {}
        self.watches = 0
        self.version = 0

    def bucket(self, plural: str, namespace: str) -> dict[str, dict]:
        return self.objects.setdefault((plural, namespace or ""), {})

    def condition(self, key: tuple[str, str]) -> threading.Condition:
        """Under the lock: what the watches of one key wait on."""
        return self.conditions.setdefault(key, threading.Condition(self.lock))

    def record(self, plural: str, namespace: str, kind: str, obj: dict) -> None:
        """Under the lock: a change, numbered, for the watches of its namespace and those of
        every namespace."""
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        copy = json.loads(json.dumps(obj))
        for key in ((plural, namespace or ""), (plural, "*")):
            self.events.setdefault(key, []).append((self.version, kind, copy))
            self.versions.setdefault(key, []).append(self.version)
            if key in self.conditions:
                self.conditions[key].notify_all()


STORE = Store()
NODES: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in two writes: without this, delayed ACKs add 40 ms.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args) -> None:  # quiet
        pass

    def _answer(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _route(self):
        url = urlparse(self.path)
        return OBJECT.match(url.path), {k: v[-1] for k, v in parse_qs(url.query).items()}

    def do_GET(self) -> None:
        match, query = self._route()
        if match is None:
            return self._answer(404, {"kind": "Status", "code": 404, "message": "not found"})
        plural, namespace = match["plural"], match["namespace"] or ""
        if plural == "nodes":
            return self._answer(200, {"kind": "NodeList", "metadata": {}, "items": NODES})
        if query.get("watch") in ("true", "True", "1"):
            return self._watch(plural, namespace or "*", int(query.get("resourceVersion") or 0),
                               float(query.get("timeoutSeconds") or 60))  # fmt: skip
        with STORE.lock:
            if match["namespace"]:
                items = list(STORE.bucket(plural, namespace).values())
            else:  # every namespace's
                items = [
                    item
                    for (kind, _), bucket in STORE.objects.items()
                    if kind == plural
                    for item in bucket.values()
                ]
            version = STORE.version
        if match["name"]:
            found = [i for i in items if i["metadata"]["name"] == match["name"]]
            return self._answer(200, found[0]) if found else self._answer(404, {"code": 404})
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(items)
        page = items[start : start + limit]
        metadata = {"resourceVersion": str(version)}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        self._answer(200, {"kind": "List", "metadata": metadata, "items": page})

    def _watch(self, plural: str, namespace: str, since: int, seconds: float) -> None:
        """Stream the changes after ``since`` as JSON lines until ``seconds`` pass."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        deadline = time.monotonic() + seconds
        key = (plural, namespace)
        with STORE.lock:
            STORE.watches += 1
        try:
            self._stream(key, since, deadline)
        finally:
            with STORE.lock:
                STORE.watches -= 1

    def _stream(self, key: tuple[str, str], since: int, deadline: float) -> None:
        while time.monotonic() < deadline:
            with STORE.lock:
                log = STORE.events.get(key, [])
                fresh = log[bisect.bisect_right(STORE.versions.get(key, []), since) :]
                if not fresh:
                    STORE.condition(key).wait(
                        timeout=max(0.0, min(5.0, deadline - time.monotonic()))
                    )
                    fresh = None
            if fresh is None:
                if self._client_gone():
                    return
                continue
            since = fresh[-1][0]
            lines = b"".join(
                json.dumps({"type": kind, "object": obj}).encode() + b"\n" for _, kind, obj in fresh
            )
            try:
                self.wfile.write(lines)
                self.wfile.flush()
            except OSError:
                return

    def _client_gone(self) -> bool:
        """Whether the client closed the watch (a stopped informer): its end is readable,
        with nothing to read."""
        poll = select.poll()  # not select(): thousands of watches pass its 1,024 descriptors
        poll.register(self.connection, select.POLLIN)
        try:
            return bool(poll.poll(0)) and not self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True

    def do_POST(self) -> None:
        match, _ = self._route()
        obj = self._body()
        plural, namespace = match["plural"], match["namespace"] or ""
        name = obj["metadata"]["name"]
        with STORE.lock:
            bucket = STORE.bucket(plural, namespace)
            if name in bucket:
                return self._answer(409, {"kind": "Status", "code": 409, "reason": "AlreadyExists"})
            obj["metadata"]["namespace"] = namespace
            bucket[name] = obj
            STORE.record(plural, namespace, "ADDED", obj)
        self._answer(201, obj)

    def do_PATCH(self) -> None:
        match, _ = self._route()
        change = self._body()
        with STORE.lock:
            obj = STORE.bucket(match["plural"], match["namespace"] or "").get(match["name"])
            if obj is None:
                return self._answer(404, {"kind": "Status", "code": 404})
            for key, value in change.items():
                if isinstance(value, dict) and isinstance(obj.get(key), dict):
                    obj[key] = {**obj[key], **value}
                else:
                    obj[key] = value
            STORE.record(match["plural"], match["namespace"], "MODIFIED", obj)
        self._answer(200, obj)

    def do_DELETE(self) -> None:
        match, _ = self._route()
        with STORE.lock:
            gone = STORE.bucket(match["plural"], match["namespace"] or "").pop(match["name"], None)
            if gone is not None:
                STORE.record(match["plural"], match["namespace"], "DELETED", gone)
        if gone is None:
            return self._answer(404, {"kind": "Status", "code": 404})
        self._answer(200, {"kind": "Status", "status": "Success"})


def all_running() -> None:
    """Every RayJob reports running, as KubeRay would once its cluster is up."""
    with STORE.lock:
        for (plural, namespace), bucket in STORE.objects.items():
            if plural == "rayjobs":
                for obj in bucket.values():
                    obj["status"] = {"jobDeploymentStatus": "Running"}
                    STORE.record(plural, namespace, "MODIFIED", obj)


class Control(BaseHTTPRequestHandler):
    """POST /running: every RayJob running (the benchmark's hand on the cluster); GET
    /connections: how many watches are open."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        with STORE.lock:
            data = json.dumps({"watches": STORE.watches}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        all_running()
        self.send_response(204)
        self.end_headers()


def serve(port: int, control: int, nodes: int) -> None:
    for n in range(nodes):
        NODES.append(
            {
                "metadata": {"name": f"node-{n}"},
                "spec": {},
                "status": {
                    "allocatable": {"cpu": "100000", "memory": "1Ti", "pods": "20000"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    threading.Thread(
        target=ThreadingHTTPServer(("127.0.0.1", control), Control).serve_forever, daemon=True
    ).start()
    Server(("127.0.0.1", port), Handler).serve_forever()


class Server(ThreadingHTTPServer):
    # Thousands of informers connect at once at a platform's scale: a backlog of 5 (the
    # socketserver default) would drop their connections for seconds.
    request_queue_size = 4096
    daemon_threads = True


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
