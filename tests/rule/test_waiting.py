"""Why a job waits (jobs/reads/waiting.py) on hand-built trees: the rule's own answer in words,
the path table with the first node that blocks, and the job behind the head told what the
head waits for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs.engine.admission.cycle import admission_cycle
from jobs.models import Job, JobEvent, State
from jobs.reads.estimate import estimates_refresh
from jobs.reads.waiting import Holding, Place, explain
from queues.admission import BEST_EFFORT, PRIORITY, Admitted
from queues.quota import Node, Standing, lent_by_node, path_standing, rollup

from ..support.jobs import RAY_JOB, submit_document

CORES = 1000
NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
TREE = {
    n.path: n
    for n in [
        Node("root", {"cpu": 20 * CORES}, {"cpu": 20 * CORES}),
        Node("root/a", {"cpu": 10 * CORES}, {"cpu": 20 * CORES}),
        Node("root/a/x", {"cpu": 6 * CORES}, {"cpu": 14 * CORES}),
        Node("root/a/y", {"cpu": 4 * CORES}, {"cpu": 14 * CORES}),
        Node("root/b", {"cpu": 10 * CORES}, {"cpu": 20 * CORES}),
        Node("root/b/z", {"cpu": 10 * CORES}, {"cpu": 20 * CORES}),
    ]
}


def running(key: int, leaf: str, cores: int, minutes_ago: int = 10) -> Admitted:
    return Admitted(key, leaf, {"cpu": cores * CORES}, 0, NOW - timedelta(minutes=minutes_ago))


def holding(admitted=(), leaving=(), allocatable=None) -> Holding:
    leaves: dict[str, dict] = {}
    for job in [*admitted, *leaving]:
        leaves.setdefault(job.leaf, {"cpu": 0})["cpu"] += job.request["cpu"]
    return Holding(TREE, rollup(leaves), allocatable, list(admitted), list(leaving))


def pending(pk: int, cores: int, **fields) -> Job:
    return Job(pk=pk, state=State.QUEUED, request={"cpu": cores * CORES}, priority=0, **fields)


def at(position: int, leaf: str = "root/a/x", policy: str = PRIORITY) -> Place:
    return Place(leaf=leaf, position=position, policy=policy, queue_name=leaf.rsplit("/")[-1])


def row(told, where: str) -> Standing:
    return next(r for r in told.path if r.where == where)


def test_a_head_that_fits_is_dequeued_at_the_next_cycle():
    told = explain(pending(1, 2), place=at(1), holding=holding([running(9, "root/a/x", 4)]))
    assert told.reason == "next"
    assert told.summary == "It fits now: it is dequeued at the next admission cycle"
    assert [r.where for r in told.path] == ["root/a/x", "root/a", "root"]
    assert told.blocking is None and not any(blocks for _row, blocks in told.rows())


def test_the_first_node_that_blocks_is_named_with_its_numbers_and_marked():
    now = holding([running(9, "root/a/x", 12)])
    told = explain(pending(1, 4), place=at(1), holding=now)
    assert told.reason == "quota"
    assert told.summary == "It waits for cpu in root/a/x: used 12 of max 14; it asks for 4"
    leaf = row(told, "root/a/x")
    assert (leaf.min, leaf.max, leaf.used, leaf.borrowed, leaf.free) == (
        6 * CORES, 14 * CORES, 12 * CORES, 6 * CORES, 2 * CORES,
    )  # fmt: skip
    assert [blocks for _row, blocks in told.rows()] == [True, False, False]


def test_the_cluster_blocks_when_the_tree_would_not():
    now = holding([running(9, "root/b/z", 6)], allocatable={"cpu": 8 * CORES})
    told = explain(pending(1, 4), place=at(1), holding=now)
    assert told.reason == "cluster"
    assert told.summary == "It waits for cpu in the cluster: used 6 of 8 allocatable; it asks for 4"
    assert told.path[-1].where == "cluster" and told.blocks(told.path[-1])
    assert told.path[-1].borrowed == 0  # the cluster guarantees nothing, lends nothing


def test_a_job_behind_the_head_is_told_what_the_head_waits_for():
    now = holding([running(9, "root/a/x", 12)])
    head = explain(pending(1, 4), place=at(1), holding=now)
    told = explain(pending(5, 1), place=at(4), holding=now, head=head)
    assert told.reason == "behind" and told.ahead == 3 and told.head_id == 1
    assert told.summary == (
        "3 jobs ahead; the first job ahead, #1, waits for cpu in root/a/x: used 12 of max 14; "
        "it asks for 4; this job alone would fit now"
    )
    assert told.blocking is None  # its own 1 core would fit: only the head holds it back


def test_under_best_effort_a_job_behind_is_tried_for_itself():
    now = holding([running(9, "root/a/x", 12)])
    head = explain(pending(1, 4), place=at(1, policy=BEST_EFFORT), holding=now)
    told = explain(pending(5, 1), place=at(3, policy=BEST_EFFORT), holding=now, head=head)
    assert told.reason == "next"
    assert told.summary.startswith("2 jobs ahead, tried anyway (best effort); it fits now")


def test_reclaim_names_the_borrower_and_the_jobs_it_preempts():
    # root/b borrows: 16 of its min 10; root/a is within its guarantee with 4 more, but the
    # root (max 20) holds 18.
    now = holding([running(7, "root/b/z", 8), running(8, "root/b/z", 8), running(9, "root/a/x", 2)])
    told = explain(pending(1, 4), place=at(1), holding=now)
    assert told.reason == "reclaim"
    assert told.summary == (
        "It reclaims cpu for root/a/x: the next cycle preempts 1 z job (#8) of root/b, "
        "which uses more than its min"
    )
    assert told.leaving == (8,)
    assert row(told, "root").used == 18 * CORES and told.blocks(row(told, "root"))


def test_a_job_that_fits_once_jobs_leave_waits_for_them_by_name():
    now = holding([running(9, "root/a/x", 6)], leaving=[running(7, "root/a/y", 4)])
    now = Holding(
        {**TREE, "root/a": Node("root/a", {"cpu": 10 * CORES}, {"cpu": 12 * CORES})},
        now.used, None, now.admitted, now.leaving,
    )  # fmt: skip
    told = explain(pending(1, 4), place=at(1), holding=now)
    assert told.reason == "releasing" and told.leaving == (7,)
    assert told.summary == (
        "It waits for 1 y job (#7) to leave the cluster; until then it waits for cpu in "
        "root/a: used 10 of max 12; it asks for 4"
    )


def test_a_job_backing_off_says_until_when_and_what_it_meets_now():
    later = NOW + timedelta(seconds=40)
    job = pending(1, 4, next_attempt_at=later, backoff_reason="Insufficient quota ...")
    job.state = State.BACKOFF
    told = explain(job, place=at(1), holding=holding([running(9, "root/a/x", 12)]), due=False)
    assert told.reason == "backoff" and told.next_attempt_at == later
    assert told.summary.startswith(
        f"It backs off until {timezone.localtime(later):%H:%M:%S} (sooner if capacity frees) "
        "after: Insufficient quota ...; tried now, it waits for cpu in root/a/x"
    )
    assert explain(job, place=at(1), holding=holding(), due=True).reason == "next"


def test_a_closed_queue_is_named():
    told = explain(pending(1, 1), place=Place("root/a/x", 1, PRIORITY, open=False,
                                              queue_name="x"), holding=holding())  # fmt: skip
    assert (told.reason, told.summary) == (
        "closed", "It waits for its queue x to open: it admits nothing until then"
    )  # fmt: skip


def test_a_dequeued_job_quotes_the_clusters_gang_failure_and_its_deadline(settings):
    settings.START_TIMEOUT_SECONDS = 300
    job = pending(1, 4, start_clock_at=NOW)
    job.state = State.ADMITTED
    failure = JobEvent(reason="GangFailedScheduling", message="0/4 nodes are available", cycle=3)
    told = explain(job, place=None, holding=holding(), last_failure=failure)
    deadline = NOW + timedelta(seconds=300)
    assert told.reason == "starting" and told.start_deadline == deadline
    assert told.summary == (
        "It is dequeued and holds its quota; the cluster is placing its pods. The cluster's "
        "last word (scheduling cycle 3): 0/4 nodes are available. If they are not all "
        f"running by {timezone.localtime(deadline):%H:%M:%S}, it leaves the cluster and "
        "waits in its queue again"
    )


@pytest.mark.parametrize("state", [State.RUNNING, State.SUCCEEDED, State.PREEMPTED])
def test_jobs_that_do_not_wait_have_no_explanation(state):
    job = pending(1, 1)
    job.state = state
    assert explain(job, place=at(1), holding=holding()) is None


def test_siblings_lend_what_they_leave_unused_in_proportion():
    used = rollup({"root/b/z": {"cpu": 15 * CORES}, "root/a/x": {"cpu": 1 * CORES}})
    lent = lent_by_node(TREE, used)
    # root/b borrows 5 above its min; root/a leaves 9 of its min unused and lends 5 of it.
    assert lent["root/a"] == {"cpu": 5 * CORES}
    assert "root/b" not in lent and "root" not in lent
    # Below root/a nothing is borrowed: x uses 1 of its 6, y nothing of its 4; no lending.
    assert "root/a/x" not in lent and "root/a/y" not in lent
    two = {**TREE, "root/c": Node("root/c", {"cpu": 10 * CORES}, {"cpu": 20 * CORES})}
    used = rollup({"root/b/z": {"cpu": 13 * CORES}})  # 3 borrowed, a and c leave 10 each
    assert lent_by_node(two, used)["root/a"] == lent_by_node(two, used)["root/c"]
    assert lent_by_node(two, used)["root/a"] == {"cpu": 1500}


def test_the_path_lists_only_what_the_job_asks_for():
    rows = path_standing(
        leaf="root/a/x", request={"cpu": CORES, "memory": 0}, tree=TREE, used={},
        allocatable={"cpu": 32 * CORES},
    )  # fmt: skip
    assert [(r.where, r.resource) for r in rows] == [
        ("root/a/x", "cpu"), ("root/a", "cpu"), ("root", "cpu"), ("cluster", "cpu"),
    ]  # fmt: skip


# The same explanation, read from the database, on the job page, the queue page and the API.


@pytest.fixture
def video_full(member, other_member):
    """alice's first job holds 12 of root/algorithm/video's 14 cpu; her second (12 cpu)
    backs off; carol's (1 job behind it) waits."""
    first = submit_document(member, RAY_JOB, name="first")
    second = submit_document(member, RAY_JOB, name="second")
    admission_cycle()
    third = submit_document(other_member, RAY_JOB, name="third", run_seconds=None)
    estimates_refresh()  # what beat does every ESTIMATE_SECONDS
    return first, second, third


@pytest.mark.django_db
def test_the_api_answers_the_pages_explanation_and_estimate(api, member, video_full):
    first, second, third = video_full
    answer = api(member).get(f"/api/v1/jobs/{second.pk}/").json()
    waiting = answer["waiting"]
    assert waiting["reason"] == "backoff" and waiting["ahead"] == 0
    assert (
        "tried now, it waits for cpu in root/algorithm/video: used 12 of max 14"
        in (waiting["summary"])
    )
    leaf_cpu = waiting["path"][0]
    assert leaf_cpu == {
        "node": "root/algorithm/video", "resource": "cpu", "min": "12", "max": "14",
        "used": "12", "borrowed": "0", "lent": "0", "free": "2", "blocks": True,
    }  # fmt: skip
    assert [row["blocks"] for row in waiting["path"]].count(True) == 1
    # Declared 600 s, the first ends 10 minutes after its dequeue; the second starts then.
    first.refresh_from_db()
    expected = first.dequeued_at + timedelta(seconds=600)
    assert datetime.fromisoformat(answer["estimated_start_at"]) == expected
    assert answer["estimate_basis"].startswith("about 10 min: 1 running job expected to end")

    behind = api(member).get(f"/api/v1/jobs/{third.pk}/").json()
    assert behind["waiting"]["reason"] == "behind"
    assert behind["waiting"]["head"]["id"] == second.pk
    assert behind["waiting"]["summary"].startswith(
        f"1 job ahead; the first job ahead, #{second.pk}, backs off until"
    )
    # The third declares no run time: the second is expected to run its declared 600 s.
    assert datetime.fromisoformat(behind["estimated_start_at"]) == expected + timedelta(seconds=600)
    running = api(member).get(f"/api/v1/jobs/{first.pk}/").json()
    assert running["waiting"]["reason"] == "starting" and running["estimated_start_at"] is None


@pytest.mark.django_db
def test_the_job_page_shows_the_path_with_the_blocking_row_marked(client, member, video_full):
    _first, second, _third = video_full
    client.force_login(member)
    page = client.get(f"/jobs/{second.pk}/").content.decode()
    assert '<table class="path"' in page
    blocking = page.split('<tr class="blocks">', 1)[1].split("</tr>", 1)[0]
    assert "root/algorithm/video" in blocking and "blocks it" in blocking
    assert page.count('<tr class="blocks">') == 1
    assert "Expected start" in page and "1 running job expected to end by" in page
