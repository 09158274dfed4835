"""Informers: a watch per kind (each runtime's job objects, and the Warning events), in
each namespace the tree binds or in every namespace at once, keeps them in memory, so that
a sync reads them from there instead of listing every object again, and what the cluster
sends follows what changed, not how many jobs run.

An informer lists once (its objects and the listing's resourceVersion), then watches from
that version with bookmarks; each event replaces or removes one object. A watch that ends
(the server closes it after ``WATCH_SECONDS``) or sends nothing for ``SILENT_SECONDS``
is resumed from the last version seen (of its last event, bookmark or listing): a watch
of objects nobody writes is quiet, and gets no bookmarks either unless etcd reports its
progress (``--experimental-watch-progress-notify-interval``; every 10 minutes by
default). One answered ``410 Gone`` (the version is too old for the server) lists again;
one that fails lists again after a pause. While an informer is not in step (before its
first listing, after a failure) it has no objects to give, and the sync lists that
namespace itself, as without a watch.

What an informer sees start, finish, fail or go (from its watch, or found by a listing)
calls its ``on_change``: the sync asks for the next sync then, so that a finished job
frees its quota at once, with or without beat's poll.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes.watch.watch import iter_resp_lines
from urllib3.exceptions import ReadTimeoutError

from . import kinds
from .base import FINISHED_PHASES, Phase

log = logging.getLogger(__name__)

# The server ends each watch after WATCH_SECONDS, cleanly, and it is resumed at once. It
# is below SILENT_SECONDS so that a quiet watch ends so, before the client gives up on it.
WATCH_SECONDS = 60
SILENT_SECONDS = 90  # nothing read for this long: the client ends the watch and resumes it
PAUSE_SECONDS = 2.0  # after a failure, before listing again


class Gone(Exception):
    """The server no longer has the version a watch asked for (410): list again.
    ``open_watch`` raises it for a watch answered 410; any other failure it raises is said
    in the log in its own words, and the informer lists again after a pause."""


class Informer:
    """The objects of one kind, in one namespace or in every one, kept in step by a watch
    thread.

    ``list_all()`` lists them (every page) and gives the listing's resourceVersion;
    ``open_watch(version, watch_seconds, silent_seconds)`` opens the watch from a version
    and gives the HTTP response, read as it streams. ``keep`` says which objects are worth
    keeping (of the events, only the Warnings Caldera shows), ``shrink`` how much of each
    (of a job object, what a sync reads of it); ``moved(before, after)``
    whether a change passes on to ``on_change`` (a job object that started or finished).
    ``watch_seconds`` is asked of the server as each watch's ``timeoutSeconds``;
    ``silent_seconds`` is how long the client reads nothing before it resumes the watch.
    """

    def __init__(
        self,
        what: str,
        namespace: str,
        *,
        list_all: Callable[[], tuple[list[dict], str]],
        open_watch: Callable[[str, int, float], urllib3.BaseHTTPResponse],
        keep: Callable[[dict], bool] | None = None,
        shrink: Callable[[dict], dict] | None = None,
        moved: Callable[[dict | None, dict], bool] | None = None,
        watch_seconds: int = WATCH_SECONDS,
        silent_seconds: float = SILENT_SECONDS,
    ):
        self.where = (what, namespace or "every namespace")
        self._list = list_all
        self._open = open_watch
        self._keep = keep or (lambda obj: True)
        self._shrink = shrink or (lambda obj: obj)
        self._moved = moved or (lambda before, after: False)
        self.watch_seconds = watch_seconds
        self.silent_seconds = silent_seconds
        # Called (in the watch's thread) when an object starts, finishes, fails or goes.
        self.on_change: Callable[[], None] | None = None
        self._objects: dict[tuple[str, str], dict] = {}  # (namespace, name) -> object
        self._version = ""
        self._answer: urllib3.BaseHTTPResponse | None = None  # the open watch, to cut on stop
        self._lock = threading.Lock()
        self._in_step = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"watch {what} in {self.where[1]}", daemon=True
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
            # The thread may have closed it a moment ago (its read ended): then there is
            # nothing left to cut, and urllib3 says so with one of these.
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                answer.shutdown()

    def join(self, timeout: float) -> None:
        """After ``stop``, wait for the thread: a call it has in flight ends first."""
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                if not self._in_step.is_set():
                    items, version = self._list()
                    with self._lock:
                        before, self._objects = (
                            self._objects,
                            {_key(item): self._shrink(item) for item in items if self._keep(item)},
                        )
                        self._version = version
                    self._in_step.set()
                    self._listed(before)
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
        if self._stopped.is_set():  # stopped while it listed: open no watch
            return
        answer = self._open(self._version, self.watch_seconds, self.silent_seconds)
        self._answer = answer
        ended = False
        try:
            if self._stopped.is_set():
                return
            for line in iter_resp_lines(answer):
                if self._stopped.is_set():
                    return
                self._apply(json.loads(line))
            ended = True
        except ReadTimeoutError:
            # Nothing more came for silent_seconds (the call itself was answered): nobody
            # wrote, and a server whose etcd reports no progress sends no bookmark. Not a
            # fault: the version still holds, and a server that no longer has it answers
            # the resumed watch 410.
            log.debug("watch of %s in %s: quiet, resuming from %r", *self.where, self._version)
        finally:
            self._answer = None
            if not ended:
                # Back in the pool unread, its connection would keep the server's watch
                # open (until its timeoutSeconds) after this informer stopped.
                answer.close()
            answer.release_conn()

    def _apply(self, event: dict) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone
            raise RuntimeError(obj.get("message") or "the watch answered an error")
        metadata: dict[str, Any] = obj.get("metadata") or {}
        changed = False
        with self._lock:
            if kind in ("ADDED", "MODIFIED") and self._keep(obj):
                before = self._objects.get(_key(obj))
                self._objects[_key(obj)] = kept = self._shrink(obj)
                changed = self._moved(before, kept)
            elif kind in ("ADDED", "MODIFIED", "DELETED"):
                # Deleted, or no longer worth keeping (kept objects can only go so).
                changed = self._objects.pop(_key(obj), None) is not None and kind == "DELETED"
            if metadata.get("resourceVersion"):
                self._version = metadata["resourceVersion"]
        if changed:
            self._changed()

    def _listed(self, before: dict[tuple[str, str], dict]) -> None:
        """A listing replaced the objects: what moved while no watch ran (before the
        first, or between a failed watch and this listing) is passed on as a watch's
        change would be. At the first listing that is every object running or done."""
        gone = set(before) - set(self._objects)
        if gone or any(self._moved(before.get(key), obj) for key, obj in self._objects.items()):
            self._changed()

    def _changed(self) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change()
        except Exception as error:  # noqa: BLE001 - the watch goes on; beat polls anyway
            log.warning("watch of %s in %s: the change was not passed on: %s", *self.where, error)


def _key(obj: dict) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return metadata.get("namespace") or "", metadata.get("name") or ""


def job_moved(runtime: str) -> Callable[[dict | None, dict], bool]:
    """Whether an added or modified job object of the runtime now runs, or has finished,
    as it did not before: what a sync should hear of at once."""

    def moved(before: dict | None, after: dict) -> bool:
        phase = kinds.phase_of(runtime, after)[0]
        if phase not in (Phase.RUNNING, *FINISHED_PHASES):
            return False
        return before is None or kinds.phase_of(runtime, before)[0] != phase

    return moved
