"""Reclaim, fair borrowing and in-queue preemption (docs/architecture.md section 5), pure.

Each test is named after the rule it proves. The tree is the seed's shape: the cluster has
64 cpu; algorithm is guaranteed 32 (video 12, text 12); interns are guaranteed nothing.
"""

from datetime import UTC, datetime, timedelta

from kube.quantity import add
from queues.admission import (
    BEST_EFFORT,
    OVER_QUOTA,
    QUEUE_PRIORITY,
    RECLAIM,
    Admitted,
    QueueHeads,
    Releasing,
    plan_admissions,
    within_guarantee,
)
from queues.quota import rollup

from ..support.trees import job, node, request, seed_like

T0 = datetime(2025, 1, 10, 1, 0, tzinfo=UTC)
CLUSTER = request(cpu=64)
VIDEO, TEXT = "root/algorithm/video", "root/algorithm/text"
INTERNS = "root/interns/intern-video"


def running(key, leaf, cpu, priority=0, minute=0):
    return Admitted(key, leaf, request(cpu=cpu), priority, T0 + timedelta(minutes=minute))


def plan(queues, admitted, tree=None, allocatable=CLUSTER, leaving=()):
    usage: dict = {}
    for a in [*admitted, *leaving]:
        usage[a.leaf] = add(usage.get(a.leaf, {}), a.request)
    return plan_admissions(
        tree=tree or seed_like(),
        used=rollup(usage),
        allocatable=allocatable,
        queues=queues,
        admitted=admitted,
        leaving=leaving,
    )


def interns_fill_the_cluster():
    # Four intern jobs of 16 cpu each: the whole idle cluster, admitted minute 0 to 3.
    return [running(100 + i, INTERNS, 16, minute=i) for i in range(4)]


def test_a_job_within_its_guarantee_reclaims_from_borrowers_only_as_many_as_needed():
    result = plan([QueueHeads(VIDEO, [job(1, 12)])], interns_fill_the_cluster())
    # 12 cpu are needed: one 16-cpu intern job is enough, the most recently admitted one.
    assert [p.victim.key for p in result.preempted] == [103]
    (preemption,) = result.preempted
    assert preemption.rule == RECLAIM
    assert preemption.message() == (
        "Preempted: root/algorithm/video reclaimed its guaranteed quota (min) from "
        "root/interns, which used more than its min, for job #1; released cpu 16"
    )
    # The victim holds its 16 cpu until it is gone: the candidate waits for it.
    assert result.admitted == []
    assert result.refused[1] == Releasing((103,), result.refused[1].now)
    assert result.refused[1].message() == (
        "Waiting for 1 job leaving the cluster (#103) to release their quota; until then: "
        "Insufficient quota in root: cpu requested 12, free 0 (used 64 of max 64)"
    )


def test_a_candidate_waits_for_its_leaving_victims_without_preempting_again():
    interns = interns_fill_the_cluster()
    still_leaving = plan([QueueHeads(VIDEO, [job(1, 12)])], interns[:3], leaving=interns[3:])
    assert still_leaving.preempted == [] and still_leaving.admitted == []
    assert still_leaving.refused[1].jobs == (103,)
    gone = plan([QueueHeads(VIDEO, [job(1, 12)])], interns[:3])
    assert gone.preempted == [] and [c.key for c in gone.admitted] == [1]


def test_capacity_being_released_is_set_aside_for_the_candidate_that_waits_for_it():
    # 103 leaves for video's job 1 (12 cpu); text's job 2 (12 cpu) may not count on the
    # 4 cpu left of that release plus nothing else: it reclaims its own victim.
    interns = interns_fill_the_cluster()
    heads = [QueueHeads(VIDEO, [job(1, 12)]), QueueHeads(TEXT, [job(2, 12, seconds=1)])]
    result = plan(heads, interns[:3], leaving=interns[3:])
    assert [p.victim.key for p in result.preempted] == [102]
    assert result.admitted == []
    assert result.refused[1].jobs == (103,)
    assert result.refused[2].jobs == (103, 102)


def test_a_small_job_does_not_take_what_is_set_aside_for_a_waiting_one():
    # 56 of 64 cpu held, 16 of them by a leaving intern job: text's 24-cpu job waits for
    # it. An intern's 8-cpu job fits the 8 idle cpu now, but not once text's job is in.
    interns = interns_fill_the_cluster()
    admitted = [*interns[:2], running(60, VIDEO, 8)]
    heads = [QueueHeads(TEXT, [job(1, 24)]), QueueHeads(INTERNS, [job(2, 8, seconds=1)])]
    result = plan(heads, admitted, leaving=interns[3:])
    assert result.admitted == [] and result.preempted == []
    assert result.refused[1].jobs == (103,)
    assert result.refused[2].message() == (
        "Insufficient quota in root: cpu requested 8, free 0 (used 64 of max 64)"
    )


def test_reclaim_takes_the_lowest_priority_first_then_the_most_recently_admitted():
    admitted = [
        running(100, INTERNS, 16, priority=5, minute=3),
        running(101, INTERNS, 16, priority=0, minute=0),
        running(102, INTERNS, 16, priority=0, minute=1),
        running(103, INTERNS, 16, priority=9, minute=2),
    ]
    result = plan([QueueHeads(VIDEO, [job(1, 12)]), QueueHeads(TEXT, [job(2, 12)])], admitted)
    assert [p.victim.key for p in result.preempted] == [102, 101]
    assert result.admitted == []
    assert [result.refused[k].jobs for k in (1, 2)] == [(102,), (102, 101)]


def test_a_job_that_borrows_does_not_preempt_and_waits_with_the_reason():
    # 16 cpu is above video's min of 12 (and max of 14): no reclaim, only the quota reason.
    result = plan([QueueHeads(TEXT, [job(1, 16)])], interns_fill_the_cluster())
    assert result.preempted == [] and result.admitted == []
    assert result.refused[1].message() == (
        "Insufficient quota in root: cpu requested 16, free 0 (used 64 of max 64)"
    )


def test_a_guarantee_counts_what_the_node_already_uses():
    # Video uses 8 of its 12: a further 8 would take it to 16, beyond its guarantee.
    admitted = [running(50, VIDEO, 8), *interns_fill_the_cluster()[:3]]
    assert not within_guarantee(VIDEO, request(cpu=8), seed_like(), rollup({VIDEO: {"cpu": 8000}}))
    result = plan([QueueHeads(VIDEO, [job(1, 6)])], admitted, allocatable=request(cpu=56))
    assert result.preempted == [] and set(result.refused) == {1}


def test_borrowers_within_their_own_min_are_never_preempted():
    # text uses exactly its min of 12 and infrastructure nothing; only the interns borrow.
    admitted = [
        running(60, TEXT, 12),
        running(61, INTERNS, 4, minute=9),
        *interns_fill_the_cluster()[:3],
    ]
    result = plan([QueueHeads(VIDEO, [job(1, 8)])], admitted)
    # Victim order offers the 4-cpu intern job first, but the 16-cpu one it then needs
    # frees enough alone: only that one goes.
    assert [p.victim.key for p in result.preempted] == [102]
    assert all(p.borrower == "root/interns" for p in result.preempted)


def test_nothing_is_preempted_when_reclaim_cannot_free_enough():
    # The cluster is filled by text within algorithm's guarantee and a small intern job.
    tree = seed_like()
    admitted = [running(60, TEXT, 12), running(61, INTERNS, 2)]
    result = plan(
        [QueueHeads(VIDEO, [job(1, 12)])], admitted, tree=tree, allocatable=request(cpu=20)
    )
    assert result.preempted == [] and result.admitted == []
    assert result.refused[1].where == "cluster"


def test_preempting_a_job_that_holds_none_of_the_short_resource_is_pointless():
    admitted = [
        Admitted(70, INTERNS, request(memory="100Gi"), 0, T0),
        *interns_fill_the_cluster(),
    ]
    result = plan([QueueHeads(VIDEO, [job(1, 12)])], admitted)
    assert 70 not in [p.victim.key for p in result.preempted]


def test_jobs_within_their_guarantee_go_before_borrowers_for_idle_capacity():
    # 12 cpu are idle. The intern job came first and ranks higher, but video is guaranteed.
    intern = QueueHeads(INTERNS, [job(1, 12, priority=10)])
    video = QueueHeads(VIDEO, [job(2, 12, seconds=60)])
    admitted = [running(60, TEXT, 12), running(61, "root/interns/intern-text", 40)]
    result = plan([intern, video], admitted)
    assert [c.key for c in result.admitted] == [2]
    assert result.refused[1].where == "root"


def test_among_borrowers_the_node_that_borrows_least_goes_first():
    # 6 cpu are idle and both leaves would borrow to take them: text already uses 20 of
    # its min of 12, video nothing of its min of 4. Algorithm's share is the same for both.
    tree = seed_like()
    tree[VIDEO] = node(VIDEO, {"cpu": 4}, {"cpu": 24}, ["video"])
    admitted = [running(60, TEXT, 20), running(61, INTERNS, 36)]
    text = QueueHeads(TEXT, [job(1, 6)])  # text: (20 + 6) / 12 = 2.2
    video = QueueHeads(VIDEO, [job(2, 6, seconds=60)])  # video: 6 / 4 = 1.5
    result = plan([text, video], admitted, tree=tree, allocatable=request(cpu=62))
    assert [c.key for c in result.admitted] == [2]


def test_a_department_borrowing_less_goes_before_one_borrowing_more():
    # Departments are compared before leaves. Text's leaf would borrow less than devops'
    # (14/12 against 10/8), but algorithm borrows more than infrastructure (28/32 against
    # 10/16), so devops goes first for the 10 idle cpu.
    tree = seed_like()
    tree["root/infrastructure"] = node("root/infrastructure", {"cpu": 16}, {"cpu": 32})
    tree["root/infrastructure/devops"] = node(
        "root/infrastructure/devops", {"cpu": 8}, {"cpu": 32}, ["devops"]
    )
    admitted = [running(60, VIDEO, 14), running(61, TEXT, 6)]
    text = QueueHeads(TEXT, [job(1, 8)])
    devops = QueueHeads("root/infrastructure/devops", [job(2, 10, seconds=60)])
    result = plan([text, devops], admitted, tree=tree, allocatable=request(cpu=30))
    assert [c.key for c in result.admitted] == [2]
    assert result.refused[1].where == "cluster"


def test_a_queue_with_preemption_lets_a_higher_priority_job_evict_a_lower_one():
    admitted = [running(50, VIDEO, 8, priority=1), running(51, VIDEO, 4, priority=3)]
    heads = QueueHeads(VIDEO, [job(1, 8, priority=5)], preemption=True)
    result = plan([heads], admitted)
    assert [(p.victim.key, p.rule) for p in result.preempted] == [(50, QUEUE_PRIORITY)]
    assert result.admitted == [] and result.refused[1].jobs == (50,)


def test_without_preemption_in_the_queue_a_higher_priority_job_waits():
    admitted = [running(50, VIDEO, 8, priority=1), running(51, VIDEO, 4, priority=3)]
    result = plan([QueueHeads(VIDEO, [job(1, 8, priority=5)])], admitted)
    assert result.preempted == [] and set(result.refused) == {1}


def test_in_queue_preemption_never_evicts_an_equal_or_higher_priority_job():
    admitted = [running(50, VIDEO, 8, priority=5), running(51, VIDEO, 4, priority=7)]
    heads = QueueHeads(VIDEO, [job(1, 8, priority=5)], preemption=True, policy=BEST_EFFORT)
    result = plan([heads], admitted)
    assert result.preempted == [] and set(result.refused) == {1}


def test_a_node_whose_max_was_lowered_below_its_usage_gives_jobs_back():
    tree = seed_like()
    tree["root/interns"] = node("root/interns", {"cpu": 0}, {"cpu": 20})
    result = plan([], interns_fill_the_cluster(), tree=tree)
    # 64 used, max 20: the three most recently admitted go, 16 stays.
    assert [(p.victim.key, p.rule, p.node) for p in result.preempted] == [
        (103, OVER_QUOTA, "root/interns"),
        (102, OVER_QUOTA, "root/interns"),
        (101, OVER_QUOTA, "root/interns"),
    ]
    assert result.preempted[0].message() == (
        "Preempted: the quota of root/interns was lowered below its usage; released cpu 16"
    )


def test_capacity_given_back_by_a_shrink_goes_to_the_waiting_job_once_it_is_free():
    tree = seed_like()
    tree["root/interns"] = node("root/interns", {"cpu": 0}, {"cpu": 48})
    interns = interns_fill_the_cluster()
    result = plan([QueueHeads(TEXT, [job(1, 16)])], interns, tree=tree)
    assert [p.victim.key for p in result.preempted] == [103]
    assert result.admitted == [] and result.refused[1].jobs == (103,)
    freed = plan([QueueHeads(TEXT, [job(1, 16)])], interns[:3], tree=tree)
    assert freed.preempted == [] and [c.key for c in freed.admitted] == [1]
