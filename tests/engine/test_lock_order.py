"""Bulk actions and admission cycles against each other: one lock order, no deadlock.

Every writer locks several jobs by id, ascending (``jobs.engine.locks``). Before that, a bulk
action by ``ids`` locked its jobs in the order given while the cycle locked its own in the
order its statements scanned them, and PostgreSQL killed one side with ``deadlock
detected``; the person was then told the database was down. These tests run both paths in
threads of their own, each on its own connection, and read PostgreSQL's own count of
deadlocks. A transaction that keeps losing to others' locks answers 503 "busy".
"""

from __future__ import annotations

import copy
import threading
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from jobs.document.schema import job_parse
from jobs.engine.admission.cycle import admission_cycle
from jobs.models import JOBS, PENDING, Job
from jobs.services import job_submit

from ..support.database import server_url
from ..support.jobs import RAY_JOB
from ..support.polling import wait_for

BULK = "/api/v1/jobs/bulk/"
ROUNDS = 25
SMALL = {"cpu": "1", "memory": "1Gi"}


def submit_small(user, count: int) -> list[int]:
    """``count`` one-pod-and-one-worker jobs of 2 cpu into video (max 14): the cycle admits
    some and puts the rest into backoff, locking both kinds of rows."""
    document = copy.deepcopy(RAY_JOB)
    document["head"] = {"resources": SMALL}
    document["workers"] = [{"name": "w", "replicas": 1, "resources": SMALL}]
    return [
        job_submit(user=user, draft=job_parse({**document, "name": f"contend-{n}"})).pk
        for n in range(count)
    ]


def deadlocks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def others_gone() -> bool:
    """The threads' connections have ended, so their backends have reported their counts."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] == 0


def in_thread(work, failures: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as error:  # the test reads it
            failures.append(error)
        finally:
            connection.close()

    return threading.Thread(target=run)


@pytest.mark.django_db(transaction=True)
def test_bulk_actions_and_admission_cycles_never_deadlock(api, manager):
    ids = submit_small(manager, 60)
    client = api(manager)
    before = deadlocks()
    failures: list[BaseException] = []
    start = timezone.now()

    def cycles() -> None:
        for round in range(ROUNDS):
            # Later each round, so the backed-off jobs are due again and locked again.
            admission_cycle(now=start + timedelta(hours=round))

    def bulk_actions(by_ids: bool) -> None:
        for round in range(ROUNDS):
            # Newest first by ids (the order a bulk action by ids used to lock them in),
            # or everything the filter matches, oldest first.
            chosen = (
                {"ids": ids[::-1]}
                if by_ids
                else {"filter": {"state": "queued,backoff", "queue": "root/algorithm/video"}}
            )
            body = {**chosen, "action": "priority", "priority": round % 7}
            answer = client.post(BULK, body, format="json")
            assert answer.status_code == 200, answer.content

    threads = [
        in_thread(cycles, failures),
        in_thread(lambda: bulk_actions(by_ids=True), failures),
        in_thread(lambda: bulk_actions(by_ids=False), failures),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    wait_for(others_gone)
    assert deadlocks() == before
    assert Job.objects.filter(pk__in=ids).count() == 60


@pytest.mark.django_db(transaction=True)
def test_a_bulk_action_that_keeps_losing_to_a_lock_answers_busy_and_changes_nothing(api, manager):
    ids = submit_small(manager, 3)
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '50ms'")  # this test's requests wait no longer
    other = psycopg.connect(server_url(connection.settings_dict["NAME"]))
    try:
        other.execute(f"SELECT id FROM {JOBS} WHERE id = %s FOR UPDATE", [ids[1]])

        answer = api(manager).post(
            BULK, {"ids": ids, "action": "priority", "priority": 5}, format="json"
        )

        assert answer.status_code == 503
        assert answer.json()["reason"] == "busy"
        assert "try again" in answer.json()["detail"]
        assert "not answering" not in answer.json()["detail"]
        assert answer["Retry-After"] == "1"
        assert set(Job.objects.filter(pk__in=ids).values_list("priority", flat=True)) == {0}
    finally:
        other.close()

    answer = api(manager).post(
        BULK, {"ids": ids, "action": "priority", "priority": 5}, format="json"
    )

    assert answer.status_code == 200
    assert set(
        Job.objects.filter(pk__in=ids, state__in=PENDING).values_list("priority", flat=True)
    ) == {5}
