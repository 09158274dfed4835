"""``manage.py probe worker|beat``: the health checks of the worker's and beat's containers
(docker-compose.yml). Live when this host's process said so lately through the broker,
and, for a worker, when the database answers; else exit 1 with the reason."""

from __future__ import annotations

import socket
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from portal.beat import Scheduler
from portal.celery import app as celery_app
from portal.heartbeat import beat_live

from ..support.outages import broker_down, database_down
from ..support.polling import wait_for

pytestmark = pytest.mark.django_db


def probe(*args: str) -> str:
    out = StringIO()
    call_command("probe", *args, stdout=out)
    return out.getvalue()


def tick(tmp_path) -> None:
    """Beat's scheduler, as ``celery beat`` runs it, ticks once."""
    scheduler = Scheduler(app=celery_app, schedule_filename=str(tmp_path / "schedule"))
    try:
        scheduler.tick()
    finally:
        scheduler.close()


def test_it_finds_a_running_worker_live(celery_worker):
    assert wait_for(lambda: "is live" in probe("worker", "--name", celery_worker.hostname))


def test_it_fails_for_a_host_whose_worker_does_not_run():
    with pytest.raises(CommandError, match="no worker celery@elsewhere said it") as error:
        probe("worker", "--name", "celery@elsewhere")
    assert error.value.returncode == 1


def test_a_worker_without_its_database_is_not_live(celery_worker):
    wait_for(lambda: "is live" in probe("worker", "--name", celery_worker.hostname))
    with database_down(), pytest.raises(CommandError, match="the database does not answer"):
        probe("worker", "--name", celery_worker.hostname)


def test_without_the_broker_nothing_is_live(settings):
    with broker_down(settings), pytest.raises(CommandError, match="the broker does not answer"):
        probe("beat")


def test_beat_is_live_once_its_scheduler_ticked(tmp_path, settings):
    assert celery_app.conf.beat_scheduler == "portal.beat:Scheduler"
    with pytest.raises(CommandError, match=f"no beat {socket.gethostname()} said it"):
        probe("beat")
    tick(tmp_path)
    assert beat_live(socket.gethostname())
    assert probe("beat") == f"beat {socket.gethostname()} is live\n"


def test_a_beat_that_stopped_ticking_ages_out(tmp_path, settings):
    settings.WORKER_HEARTBEAT_SECONDS = 0.3  # live for one second after its last tick
    tick(tmp_path)
    assert beat_live(socket.gethostname())
    assert wait_for(lambda: not beat_live(socket.gethostname()), timeout=10)


def test_a_worker_waiting_for_its_broker_is_still_alive(celery_worker, settings, tmp_path):
    """The liveness probe (--alive) reads a file of the container, not Redis nor the
    database: an outage of either restarts no worker, while readiness says it."""
    wait_for(lambda: "is alive" in probe("worker", "--alive"))
    with broker_down(settings):
        with pytest.raises(CommandError, match="the broker does not answer"):
            probe("worker", "--name", celery_worker.hostname)
        assert probe("worker", "--alive") == "worker is alive\n"
    with database_down():
        assert probe("worker", "--alive") == "worker is alive\n"


def test_a_beat_whose_loop_stopped_is_not_alive(tmp_path, settings):
    settings.ALIVE_DIR = str(tmp_path)
    settings.WORKER_HEARTBEAT_SECONDS = 0.3  # alive for one second after its last tick
    with pytest.raises(CommandError, match="longer ago than three heartbeats"):
        probe("beat", "--alive")
    tick(tmp_path)
    assert probe("beat", "--alive") == "beat is alive\n"
    wait_for(lambda: not (tmp_path / "caldera-beat-alive").exists() or _stale(), timeout=3)


def _stale() -> bool:
    try:
        probe("beat", "--alive")
    except CommandError:
        return True
    return False
