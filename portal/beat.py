"""Beat's scheduler (CELERY_BEAT_SCHEDULER), loaded by ``celery beat`` once Django is set up.

Beat can run as two replicas (deploy/kubernetes/beat.yaml): a lease in PostgreSQL
(``jobs.engine.locks``) says which one sends the schedule, so that the death of one
process stalls nothing for longer than BEAT_LEASE_SECONDS.
"""

from __future__ import annotations

import logging
import socket
import time

import redis
from celery.beat import PersistentScheduler
from django.conf import settings
from django.db import DatabaseError, connection

from jobs.engine.locks import BEAT, Lease, lease_take

from .heartbeat import beat_ticked, mark_alive

log = logging.getLogger(__name__)


class Scheduler(PersistentScheduler):
    """Beat's scheduler (CELERY_BEAT_SCHEDULER): the file-backed one, run by whichever beat
    holds the ``beat`` lease, so that beat can run as two replicas: one sends the
    schedule, the other waits and takes over within BEAT_LEASE_SECONDS of the first's
    death. The leader renews its lease every third of that; one that cannot (the
    database away) stops sending before its lease can have expired, so that two never
    lead at once for long (and duplicate sends are harmless: every task is idempotent).

    Each beat also says it ticks, at most once a WORKER_HEARTBEAT_SECONDS, leader or not,
    so that a beat whose loop stopped reads as not live. A broker outage only skips the
    mark, as the workers' beats."""

    marked_at = 0.0
    failing = False
    lease: Lease | None = None
    renewed_at = 0.0  # monotonic: when the lease was last taken or renewed

    def tick(self, *args, **kwargs):
        self._mark_live()
        seconds = settings.BEAT_LEASE_SECONDS
        if not self.leading():
            return seconds / 5  # a stand-by looks again soon: it takes over within seconds
        return min(super().tick(*args, **kwargs), seconds / 3)

    def leading(self) -> bool:
        """Whether this beat holds the lease now: taken when free, renewed every third of
        its time, and given up once it may have expired."""
        now, seconds = time.monotonic(), settings.BEAT_LEASE_SECONDS
        if self.lease is not None and now - self.renewed_at < seconds / 3:
            return True
        try:
            connection.close_if_unusable_or_obsolete()
            if self.lease is None:
                self.lease = lease_take(BEAT, seconds=seconds)
                if self.lease is not None:
                    log.info("beat leads: it sends the schedule (%s)", self.lease.holder)
            elif not self.lease.renew():
                log.warning("beat's lease expired: another beat leads now")
                self.lease = None
            if self.lease is not None:
                self.renewed_at = now
        except DatabaseError as error:
            log.warning("beat's lease not taken or renewed (the database away?): %s", error)
            connection.close()
            if self.lease is not None and now - self.renewed_at >= seconds * 2 / 3:
                log.warning("beat stops sending: its lease may have expired")
                self.lease = None
        return self.lease is not None

    def close(self) -> None:
        """A beat that stops gives its lease back: the stand-by takes over at once."""
        if self.lease is not None:
            try:
                self.lease.give_back(done=True)
            except DatabaseError as error:
                log.warning("beat's lease not given back (it expires by itself): %s", error)
            self.lease = None
        super().close()

    def _mark_live(self) -> None:
        if time.monotonic() - self.marked_at >= settings.WORKER_HEARTBEAT_SECONDS:
            mark_alive("beat")
            self.marked_at = time.monotonic()
            try:
                beat_ticked(socket.gethostname())
                self.failing = False
            except redis.RedisError as error:
                if not self.failing:
                    log.warning("beat's liveness not written (Redis down?): %s", error)
                self.failing = True
