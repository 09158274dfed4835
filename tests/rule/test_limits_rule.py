"""Stop policies and per-person limits in the admission rule (``queues.limits``, rules 0 and 9
of ``queues.admission``), as properties and plain examples.

Hypothesis takes the scenarios of the quota promise's properties, stops some nodes (Hold or
HoldAndDrain), sets perPerson limits on others, and gives every job one of three owners;
every plan must then keep the quota promise (``check_plan``, which also checks that drains
come first and take every job of a drained leaf, and that a stopped leaf decides nothing),
and keep each person within their leaf's limits, counting what they held before the cycle.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube.quantity import add, unpooled
from queues.admission import (
    DRAIN,
    PRIORITY,
    Admitted,
    OverPersonLimit,
    QueueHeads,
    plan_admissions,
)
from queues.limits import (
    HOLD,
    HOLD_AND_DRAIN,
    format_duration,
    limits_of,
    limits_read,
    parse_duration,
    stop_read,
)
from queues.quota import rollup

from ..support.trees import job, request, seed_like
from .test_admission_properties import _leaf_usage, check_plan, run, scenarios

OWNERS = (1, 2, 3)


@st.composite
def limited(draw):
    tree, admitted, queues, allocatable, leaving = draw(scenarios())
    tree = dict(tree)
    stopped = draw(st.none() | st.sampled_from(sorted(tree)))  # most leaves admit
    for path in sorted(tree):
        stop = draw(st.sampled_from([HOLD, HOLD_AND_DRAIN])) if path == stopped else ""
        limits = {}
        if draw(st.booleans()):
            person = {}
            if draw(st.booleans()):
                person["jobs"] = draw(st.integers(1, 2))
            if draw(st.booleans()) or not person:
                person["resources"] = {"cpu": draw(st.integers(1, 8))}
            limits["perPerson"] = person
        tree[path] = replace(tree[path], stop=stop, limits=limits)

    def owned(job):
        return replace(job, owner=draw(st.sampled_from(OWNERS)))

    admitted = [owned(job) for job in admitted]
    leaving = [owned(job) for job in leaving]
    queues = [replace(heads, candidates=[owned(c) for c in heads.candidates]) for heads in queues]
    return tree, admitted, queues, allocatable, leaving


@given(limited())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_stops_and_per_person_limits_keep_the_promise_and_each_person_within_their_limits(
    scenario,
):
    tree, admitted, queues, allocatable, leaving = scenario
    plan = run(tree, admitted, queues, allocatable, leaving)
    check_plan(tree, admitted, queues, allocatable, leaving, plan)
    held: dict[tuple[str, int], tuple[int, dict]] = {}
    for holder in (*admitted, *leaving):
        jobs, resources = held.get((holder.leaf, holder.owner), (0, {}))
        held[(holder.leaf, holder.owner)] = (jobs + 1, add(resources, holder.request))
    leaf_of = {c.key: heads.leaf for heads in queues for c in heads.candidates}
    for candidate in plan.admitted:
        leaf = leaf_of[candidate.key]
        limits = limits_of(tree, leaf)
        jobs, resources = held.get((leaf, candidate.owner), (0, {}))
        jobs, resources = jobs + 1, add(resources, unpooled(candidate.request))
        held[(leaf, candidate.owner)] = (jobs, resources)
        if limits.person_jobs is not None:
            assert jobs <= limits.person_jobs, f"{candidate.key}: owner over perPerson jobs"
        for resource, limit in limits.person_resources.items():
            assert resources.get(resource, 0) <= limit or not candidate.request.get(resource), (
                f"{candidate.key}: owner over perPerson {resource}"
            )
    for key, refusal in plan.refused.items():
        if isinstance(refusal, OverPersonLimit):
            assert limits_of(tree, leaf_of[key]).per_person, f"{key} refused by no limit"


# Examples


def _tree(**changes):
    """The seed-like tree, its nodes changed: ``video={"stop": HOLD}``."""
    tree = seed_like()
    for name, change in changes.items():
        path = next(p for p in tree if p.rsplit("/", 1)[-1] == name.replace("_", "-"))
        tree[path] = replace(tree[path], **change)
    return tree


VIDEO = "root/algorithm/video"
TEXT = "root/algorithm/text"


def _holder(key, leaf, cpu, owner=None):
    return Admitted(key=key, leaf=leaf, request=request(cpu=cpu), priority=0, admitted_at=key,
                    owner=owner)  # fmt: skip


def _plan(tree, queues, holders=()):
    return plan_admissions(
        tree=tree, used=rollup(_leaf_usage(holders)), allocatable=None, queues=queues,
        admitted=holders,
    )  # fmt: skip


def test_a_held_leaf_admits_nothing_and_its_running_jobs_go_on():
    tree = _tree(video={"stop": HOLD})
    plan = _plan(tree, [QueueHeads(VIDEO, [job(1, 1)]), QueueHeads(TEXT, [job(2, 1)])],
                 [_holder(9, VIDEO, 2)])  # fmt: skip
    assert [c.key for c in plan.admitted] == [2]
    assert 1 not in plan.refused and plan.preempted == []


def test_a_drained_subtree_gives_back_every_job_and_admits_nothing():
    tree = _tree(algorithm={"stop": HOLD_AND_DRAIN})
    holders = [
        _holder(7, VIDEO, 2),
        _holder(8, TEXT, 3),
        _holder(9, "root/interns/intern-video", 1),
    ]
    plan = _plan(tree, [QueueHeads(VIDEO, [job(1, 1)]), QueueHeads(TEXT, [job(2, 1)])], holders)
    assert plan.admitted == []
    assert sorted(p.victim.key for p in plan.preempted) == [7, 8]
    assert {p.rule for p in plan.preempted} == {DRAIN}
    assert (
        plan.preempted[0]
        .message()
        .startswith(
            "Preempted: root/algorithm is drained (stopPolicy HoldAndDrain); back in its queue"
        )
    )


def test_a_drain_below_a_hold_drains_and_the_stop_is_named_by_the_node_nearest_the_root():
    tree = _tree(algorithm={"stop": HOLD}, video={"stop": HOLD_AND_DRAIN})
    assert limits_of(tree, VIDEO).stop == HOLD_AND_DRAIN
    assert limits_of(tree, VIDEO).stopped_at == VIDEO
    assert limits_of(tree, TEXT).stop == HOLD
    assert limits_of(tree, TEXT).stopped_at == "root/algorithm"


def test_a_person_at_their_limit_waits_while_another_person_s_job_in_the_leaf_is_admitted():
    tree = _tree(algorithm={"limits": {"perPerson": {"jobs": 1}}})
    ada = [replace(job(1, 1), owner=1), replace(job(2, 1, seconds=1), owner=1)]
    bob = replace(job(3, 1, seconds=2), owner=2)
    plan = _plan(tree, [QueueHeads(VIDEO, [*ada, bob], PRIORITY)], [_holder(9, TEXT, 1, owner=1)])
    # Ada holds a job in text, not in video: the limit counts each leaf apart.
    assert [c.key for c in plan.admitted] == [1, 3]
    refusal = plan.refused[2]
    assert isinstance(refusal, OverPersonLimit)
    assert refusal.message() == (
        "Its owner has 1 job holding quota in root/algorithm/video, the most one person may "
        "have there (perPerson of root/algorithm: 1)"
    )


def test_a_person_s_resource_limit_counts_what_they_hold_and_what_the_cycle_admits():
    tree = _tree(video={"limits": {"perPerson": {"resources": request(cpu=4)}}})
    first, second = replace(job(1, 2), owner=1), replace(job(2, 2, seconds=1), owner=1)
    plan = _plan(tree, [QueueHeads(VIDEO, [first, second])], [_holder(9, VIDEO, 1, owner=1)])
    assert [c.key for c in plan.admitted] == [1]
    assert plan.refused[2].message() == (
        "Its owner holds 3 of cpu in root/algorithm/video and it asks for 2: one person may "
        "hold 4 there (perPerson of root/algorithm/video)"
    )


def test_a_person_s_backing_off_head_does_not_close_a_priority_queue():
    tree = _tree(video={"limits": {"perPerson": {"jobs": 1}}})
    waiting = replace(job(1, 1, due=False), owner=1)
    other = replace(job(2, 1, seconds=1), owner=2)
    plan = _plan(tree, [QueueHeads(VIDEO, [waiting, other], PRIORITY)], [_holder(9, VIDEO, 1, 1)])
    assert [c.key for c in plan.admitted] == [2]


def test_the_tree_s_limits_are_read_with_every_problem_at_once():
    kept, errors = limits_read(
        {"defaultTime": "3h", "maxTime": "2h", "maxRetries": -1, "speed": 1,
         "perPerson": {"jobs": 0, "resources": {"cpu": "lots"}}},
        "spec.root.limits",
    )  # fmt: skip
    assert sorted(errors) == [
        "spec.root.limits.defaultTime",
        "spec.root.limits.maxRetries",
        "spec.root.limits.perPerson.jobs",
        "spec.root.limits.perPerson.resources.cpu",
        "spec.root.limits.speed",
    ]
    assert errors["spec.root.limits.defaultTime"] == "must not be longer than maxTime (2h)"
    assert kept == {"defaultTime": 10800, "maxTime": 7200}
    assert stop_read("Drain", "spec.root.stopPolicy")[1] == {
        "spec.root.stopPolicy": "must be None, Hold or HoldAndDrain"
    }
    assert stop_read(None, "x") == ("", {}) and stop_read("HoldAndDrain", "x")[0] == "HoldAndDrain"


@given(st.integers(1, 365 * 86400))
def test_a_duration_reads_back_as_it_is_written(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


def test_durations_are_read_as_people_write_them():
    assert parse_duration("2h") == 7200
    assert parse_duration("1h30m") == 5400
    assert parse_duration("3600") == 3600
    assert parse_duration(90) == 90
    assert parse_duration("2 hours") is None
    assert parse_duration(True) is None
    assert format_duration(5400) == "1h30m"
