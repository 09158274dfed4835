"""Informers: one watch per (runtime, namespace) keeps Caldera's job objects in memory, so
that a sync reads them from there instead of listing every object again, and what the
cluster sends follows what changed, not how many jobs run.

An informer lists once (its objects and the listing's resourceVersion), then watches from
that version with bookmarks; each event replaces or removes one object. A watch that ends
(the server closes it after ``WATCH_SECONDS``) is resumed from the last version seen; one
answered ``410 Gone`` (the version is too old for the server) lists again; one that
fails or stays silent longer than the server's bookmarks allow lists again after a pause.
While an informer is not in step (before its first listing, after a failure) it has no
objects to give, and the sync lists that namespace itself, as without a watch.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from jobs.manifests.common import LABEL_JOB_ID

from . import kinds

log = logging.getLogger(__name__)

WATCH_SECONDS = 240  # the server ends each watch after this; it is resumed at once
SILENT_SECONDS = 90  # a real server sends a bookmark about every minute: silence is a fault
PAUSE_SECONDS = 2.0  # after a failure, before listing again


class Gone(Exception):
    """The server no longer has the version a watch asked for (410): list again."""


class Informer:
    """The objects of one runtime in one namespace, kept in step by a watch thread."""

    def __init__(
        self,
        custom: client.CustomObjectsApi,
        runtime: str,
        namespace: str,
        *,
        list_namespace: Callable[[tuple[str, str]], tuple[list[dict], str]],
    ):
        self.custom = custom
        self.resource = kinds.RESOURCES[runtime]
        self.where = (runtime, namespace)
        self._list = list_namespace
        self._objects: dict[str, dict] = {}
        self._version = ""
        self._answer = None  # the open watch, to cut on stop
        self._lock = threading.Lock()
        self._in_step = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"watch {runtime} in {namespace}", daemon=True
        )
        self._thread.start()

    def items(self) -> list[dict] | None:
        """The objects as the watch last saw them; None while not in step."""
        if not self._in_step.is_set() or not self._thread.is_alive():
            return None
        with self._lock:
            return list(self._objects.values())

    def stop(self) -> None:
        """End the watch: its connection is cut, so the thread ends now."""
        self._stopped.set()
        self._in_step.clear()
        answer = self._answer
        if answer is not None:
            answer.shutdown()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                if not self._in_step.is_set():
                    items, version = self._list(self.where)
                    with self._lock:
                        self._objects = {item["metadata"]["name"]: item for item in items}
                        self._version = version
                    self._in_step.set()
                self._watch()
            except Gone:
                log.info("watch of %s in %s: 410 Gone, listing again", *self.where)
                self._in_step.clear()
            except Exception as error:  # noqa: BLE001 - any failure: list again, later
                if self._stopped.is_set():
                    return
                log.warning("watch of %s in %s failed: %s", *self.where, error)
                self._in_step.clear()
                self._stopped.wait(PAUSE_SECONDS)

    def _watch(self) -> None:
        resource, namespace = self.resource, self.where[1]
        try:
            answer = self.custom.list_namespaced_custom_object(
                resource.group,
                resource.version,
                namespace,
                resource.plural,
                label_selector=LABEL_JOB_ID,
                watch=True,
                resource_version=self._version,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS,
                _preload_content=False,
                _request_timeout=(10, SILENT_SECONDS),
            )
        except client.ApiException as error:
            if error.status == 410:
                raise Gone from None
            raise
        self._answer = answer
        try:
            if self._stopped.is_set():
                return
            for line in iter_resp_lines(answer):
                if self._stopped.is_set():
                    return
                self._apply(json.loads(line))
        finally:
            self._answer = None
            answer.release_conn()

    def _apply(self, event: dict) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone
            raise RuntimeError(obj.get("message") or "the watch answered an error")
        metadata = obj.get("metadata") or {}
        with self._lock:
            if kind in ("ADDED", "MODIFIED"):
                self._objects[metadata["name"]] = obj
            elif kind == "DELETED":
                self._objects.pop(metadata.get("name"), None)
            if metadata.get("resourceVersion"):
                self._version = metadata["resourceVersion"]
