"""The admission rule (queues.admission.plan_admissions): a pure function, no database."""

from queues.admission import BEST_EFFORT, PRIORITY, QueueHeads, plan_admissions
from queues.quota import rollup

from ..support.trees import job, node, request, seed_like


def plan(queues, used=None, allocatable=None, tree=None):
    return plan_admissions(
        tree=tree or seed_like(), used=rollup(used or {}), allocatable=allocatable, queues=queues
    )


def test_the_first_rayjob_is_dequeued_and_the_second_refused_with_the_quota_reason():
    result = plan([QueueHeads("root/algorithm/video", [job(1, 12), job(2, 12, seconds=1)])])
    assert [c.key for c in result.admitted] == [1]
    assert result.refused[2].message() == (
        "Insufficient quota in root/algorithm/video: cpu requested 12, free 2 (used 12 of max 14)"
    )


def test_under_priority_policy_a_head_that_does_not_fit_blocks_the_queue():
    heads = QueueHeads("root/algorithm/video", [job(1, 8), job(2, 2)], policy=PRIORITY)
    result = plan([heads], used={"root/algorithm/video": request(cpu=8)})
    assert result.admitted == []
    assert set(result.refused) == {1}


def test_under_priority_policy_a_head_that_can_never_be_admitted_blocks_nobody():
    # 16 cpu is above video's max of 14 (an admin lowered it after the job was queued).
    heads = QueueHeads("root/algorithm/video", [job(1, 16), job(2, 2)], policy=PRIORITY)
    result = plan([heads])
    assert [c.key for c in result.admitted] == [2]
    assert set(result.refused) == {1}


def test_a_backing_off_head_that_can_never_be_admitted_blocks_nobody():
    heads = QueueHeads("root/algorithm/video", [job(1, 16, due=False), job(2, 2)])
    assert [c.key for c in plan([heads]).admitted] == [2]


def test_under_best_effort_a_head_that_does_not_fit_is_set_aside():
    result = plan([QueueHeads("root/algorithm/video", [job(1, 16), job(2, 2)], policy=BEST_EFFORT)])
    assert [c.key for c in result.admitted] == [2]
    assert set(result.refused) == {1}


def test_a_backing_off_head_blocks_a_priority_queue_until_it_is_due():
    result = plan([QueueHeads("root/algorithm/video", [job(1, 2, due=False), job(2, 2)])])
    assert result.admitted == [] and result.refused == {}


def test_a_backing_off_job_is_skipped_under_best_effort():
    heads = QueueHeads(
        "root/algorithm/video", [job(1, 2, due=False), job(2, 2)], policy=BEST_EFFORT
    )
    assert [c.key for c in plan([heads]).admitted] == [2]


def test_queue_order_is_given_and_followed_within_a_queue():
    # Candidates arrive in queue order (priority, then enqueue time); the rule keeps it.
    heads = QueueHeads(
        "root/algorithm/text", [job(3, 4, priority=5), job(1, 4), job(2, 4, seconds=1)]
    )
    assert [c.key for c in plan([heads]).admitted] == [3, 1, 2]


def test_round_robin_no_leaf_gets_two_admissions_while_another_fitting_head_waits():
    # The cluster has room for three 8-cpu jobs: text's two jobs cannot both go before video's.
    video = QueueHeads("root/algorithm/video", [job(10, 8, seconds=5)])
    text = QueueHeads(
        "root/algorithm/text", [job(20, 8), job(21, 8, seconds=1), job(22, 8, seconds=2)]
    )
    busy = {"root/interns/intern-video": request(cpu=30)}
    result = plan([text, video], used=busy, allocatable=request(cpu=54))
    assert [c.key for c in result.admitted] == [20, 10, 21]
    assert result.refused[22].where == "cluster"


def test_higher_ranked_heads_go_first_across_queues():
    video = QueueHeads("root/algorithm/video", [job(10, 8, priority=10, seconds=5)])
    text = QueueHeads("root/algorithm/text", [job(20, 8)])
    busy = {"root/interns/intern-video": request(cpu=48)}
    result = plan([text, video], used=busy, allocatable=request(cpu=60))
    assert [c.key for c in result.admitted] == [10]
    assert result.refused[20].where == "cluster"


def test_admissions_in_one_cycle_count_against_the_ancestors():
    # algorithm's max is 48: video's 14 and text's 30 admitted in this cycle leave 4.
    tree = seed_like()
    tree["root/algorithm/text"] = node("root/algorithm/text", {"cpu": 12}, {"cpu": 40}, ["text"])
    video = QueueHeads("root/algorithm/video", [job(10, 14)])
    text = QueueHeads("root/algorithm/text", [job(20, 30), job(21, 5, seconds=1)])
    result = plan([video, text], tree=tree)
    assert [c.key for c in result.admitted] == [10, 20]
    assert result.refused[21].where == "root/algorithm"
    assert "used 44 of max 48" in result.refused[21].message()


def test_it_asks_for_another_cycle_when_a_queue_ran_out_of_read_candidates():
    heads = QueueHeads("root/algorithm/text", [job(1, 1), job(2, 1)], exhausted=False)
    result = plan([heads])
    assert [c.key for c in result.admitted] == [1, 2]
    assert result.more is True
    assert plan([QueueHeads("root/algorithm/text", [job(1, 1)])]).more is False
