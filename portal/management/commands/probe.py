"""``manage.py probe worker|beat``: the health check of a worker's or beat's container.

Exits 0 when the process of this host is live: a worker that beat within its time to live
(``portal.heartbeat``) and reaches the database, or a beat that ticked as recently (a
readiness probe). With ``--alive``, only whether the process runs: it touched its file
lately, whatever Redis and the database do (a liveness probe: restarting a worker that
waits for them cures nothing). Else it exits 1 and says why on standard error, as
Docker's and Kubernetes' checks read it.
"""

from __future__ import annotations

import socket

import redis
from django.core.management.base import BaseCommand, CommandError

from portal.health import database_answers
from portal.heartbeat import alive as process_alive
from portal.heartbeat import alive_file, beat_live, worker_live


class Command(BaseCommand):
    help = "Exit 0 if this host's worker or beat is live, else 1 with the reason."

    def add_arguments(self, parser) -> None:
        parser.add_argument("process", choices=["worker", "beat"])
        parser.add_argument(
            "--alive",
            action="store_true",
            help="only whether the process of this container runs: it touched its file "
            "within three heartbeats (a liveness probe: Redis or the database being away "
            "must not restart it)",
        )
        parser.add_argument(
            "--name",
            default="",
            help="the worker's node name (default: celery@<this host>, as `celery worker` "
            "names itself) or beat's host (default: this host)",
        )

    def handle(self, *args, process: str, name: str, alive: bool, **options) -> None:
        if alive:
            if not process_alive(process):
                raise CommandError(
                    f"the {process} of this container touched {alive_file(process)} "
                    "longer ago than three heartbeats",
                    returncode=1,
                )
            self.stdout.write(f"{process} is alive")
            return
        host = socket.gethostname()
        name = name or (f"celery@{host}" if process == "worker" else host)
        try:
            live = worker_live(name) if process == "worker" else beat_live(name)
        except redis.RedisError as error:
            raise CommandError(f"the broker does not answer: {error}", returncode=1) from None
        if not live:
            raise CommandError(f"no {process} {name} said it runs lately", returncode=1)
        if process == "worker" and not database_answers():
            raise CommandError("the database does not answer", returncode=1)
        self.stdout.write(f"{process} {name} is live")
