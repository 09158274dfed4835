"""A job's state changes only through jobs.engine.transitions, which checks every move
against TRANSITIONS (docs/architecture.md section 7)."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest
from django.db.models import Q

from jobs.engine import transitions
from jobs.engine.transitions import IllegalTransition, movable, move, step
from jobs.models import PENDING, TRANSITIONS, Job, State

from ..support.jobs import refresh, submit

REPO = Path(__file__).resolve().parents[2]
SET_STATE = re.compile(r"\bSET\s+state\s*=", re.IGNORECASE)


def state_writes(source: str) -> list[str]:
    """Where ``source`` sets a job's state: an assignment to ``<object>.state`` (other than
    ``self.state``, which is an object's own), an ORM ``update(state=...)``, or SQL text
    that says ``SET state =``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            for item in target.elts if isinstance(target, ast.Tuple) else [target]:
                if (
                    isinstance(item, ast.Attribute)
                    and item.attr == "state"
                    and not (isinstance(item.value, ast.Name) and item.value.id == "self")
                ):
                    found.append(f"line {node.lineno}: assigns {ast.unparse(item)}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and any(keyword.arg == "state" for keyword in node.keywords)
        ):
            found.append(f"line {node.lineno}: update(state=...)")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and SET_STATE.search(node.value)
        ):
            found.append(f"line {node.lineno}: SQL that sets state")
    return found


def test_the_reader_finds_each_way_of_setting_a_state():
    source = """
job.state = State.FAILED
job.state, job.finished_at = State.CANCELLED, now
Job.objects.filter(pk=1).update(state=State.QUEUED)
cursor.execute("UPDATE jobs_job SET state = %s WHERE id = %s")
self.state = new  # an object's own attribute, not a job's
"""
    assert len(state_writes(source)) == 4


def test_no_module_but_transitions_sets_a_job_state():
    modules = [
        path
        for package in ("jobs", "queues", "portal", "audit", "hooks")
        for path in (REPO / package).rglob("*.py")
        if "migrations" not in path.parts and path != REPO / "jobs" / "engine" / "transitions.py"
    ]
    assert len(modules) > 50
    writes = {
        str(path.relative_to(REPO)): found
        for path in modules
        if (found := state_writes(path.read_text()))
    }
    assert writes == {}


@pytest.mark.parametrize(("state", "target"), list(itertools.product(State.values, repeat=2)))
def test_step_takes_exactly_the_moves_the_table_allows(state, target):
    job = Job(state=state)
    if target in TRANSITIONS[state]:
        step(job, target)
        assert job.state == target
    else:
        with pytest.raises(IllegalTransition, match=f"a {state} job cannot become {target}"):
            step(job, target)
        assert job.state == state


def test_movable_keeps_the_sources_the_table_allows_and_refuses_when_none():
    assert movable(State.ADMITTED, [*PENDING, State.RUNNING]) == list(PENDING)
    with pytest.raises(IllegalTransition):
        movable(State.QUEUED, PENDING)


@pytest.mark.django_db(transaction=True)
def test_move_is_a_compare_and_swap(member):
    waiting, finished = submit(member), submit(member, name="done")
    Job.objects.filter(pk=finished.pk).update(state=State.SUCCEEDED)  # the test sets it up

    moved = move(State.FAILED, Q(pk__in=[waiting.pk, finished.pk]))

    assert moved == [waiting.pk]
    assert refresh(waiting).state == State.FAILED
    assert refresh(finished).state == State.SUCCEEDED  # a finished job cannot fail


@pytest.mark.django_db(transaction=True)
def test_move_among_leaves_the_other_states_alone(member):
    queued = submit(member)
    assert move(State.CANCELLED, Q(pk=queued.pk), among=[State.BACKOFF]) == []
    assert refresh(queued).state == State.QUEUED
    assert transitions.sources_of(State.CANCELLED) == (
        State.QUEUED,
        State.BACKOFF,
        State.STOPPING,
    )
