"""POST /api/v1/quota-tree/preview/: what a new tree would do, before it is applied, by the
admission rule itself; the preview and the save are compared on the same state."""

from __future__ import annotations

import psycopg
import pytest
from django.db import OperationalError, connection

from audit.models import AuditEntry
from jobs.engine.admission.cycle import admission_cycle
from jobs.engine.locks import ADMISSION, is_contention
from jobs.models import Job, JobEvent, State
from jobs.services import tree_apply_previewed
from queues.models import QuotaNode
from queues.services import tree_export, tree_find

from ..support.jobs import RAY_JOB, submit_document

pytestmark = pytest.mark.django_db

PREVIEW = "/api/v1/quota-tree/preview/"
# A job of 4 cpu: three fill root/algorithm/video's min (12), a fourth passes its max (14).
SMALL = {**RAY_JOB, "workers": [], "head": {"resources": {"cpu": "4", "memory": "2Gi"}}}


@pytest.fixture
def video(tree, member):
    """Three of alice's jobs admitted in video, a fourth waiting behind them."""
    admitted = [submit_document(member, SMALL, name=f"held-{n}") for n in range(3)]
    admission_cycle()
    waiting = submit_document(member, SMALL, name="waiting")
    admission_cycle()
    assert Job.objects.filter(state=State.ADMITTED).count() == 3
    return {"admitted": admitted, "waiting": waiting}


def with_video_cpu(*, max: str, min: str | None = None) -> dict:
    document = tree_export()
    video = tree_find(document, "root/algorithm/video")
    video["max"]["cpu"] = max
    if min is not None:
        video["min"]["cpu"] = min
    return document


def test_a_lowered_max_names_exactly_the_jobs_the_save_then_preempts(api, staff, video):
    document = with_video_cpu(min="4", max="8")

    preview = api(staff).post(PREVIEW, document, format="json")

    assert preview.status_code == 200, preview.content
    answer = preview.json()
    assert answer["changes"] == [
        {"node": "root/algorithm/video", "field": "min", "resource": "cpu", "before": "12",
         "after": "4"},
        {"node": "root/algorithm/video", "field": "max", "resource": "cpu", "before": "14",
         "after": "8"},
    ]  # fmt: skip
    preempted = {(job["job"], job["by_the_change"]) for job in answer["preempted"]}
    assert preempted == {(video["admitted"][2].pk, True)}  # the newest: 12 -> 8 cpu
    only = answer["preempted"][0]
    assert (only["owner"], only["queue"]) == ("alice", "root-algorithm-video")
    assert "lowered below its usage" in only["why"]
    assert answer["admitted"] == []
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 14_000  # unwritten

    assert api(staff).put("/api/v1/quota-tree/", document, format="json").status_code == 200
    admission_cycle()

    saved = set(
        JobEvent.objects.filter(reason=JobEvent.Reason.PREEMPTED).values_list("job", flat=True)
    )
    assert saved == {job for job, _ in preempted}


def test_a_raised_max_names_the_jobs_the_next_cycle_admits(api, staff, video):
    answer = api(staff).post(PREVIEW, with_video_cpu(max="16"), format="json").json()

    assert [(job["job"], job["name"], job["by_the_change"]) for job in answer["admitted"]] == [
        (video["waiting"].pk, "waiting", True)
    ]
    assert answer["preempted"] == []


def test_the_tree_as_it_is_changes_nothing(api, staff, video):
    answer = api(staff).post(PREVIEW, tree_export(), format="json").json()

    assert answer == {
        "changes": [],
        "preempted": [],
        "admitted": [],
        "unrunnable": [],
        "unrunnable_count": 0,
        "queues": [],
    }


def test_a_tree_the_save_would_refuse_is_refused_in_its_words(api, staff, video):
    document = tree_export()
    tree_find(document, "root/algorithm/video")["min"]["cpu"] = "20"

    refused = api(staff).post(PREVIEW, document, format="json")

    assert refused.status_code == 400
    saved = api(staff).put("/api/v1/quota-tree/", document, format="json")
    assert refused.json() == saved.json()


def test_only_staff_preview_a_tree(api, member, video):
    assert api(member).post(PREVIEW, tree_export(), format="json").status_code == 403


@pytest.mark.django_db(transaction=True)  # the fixture's cycles committed, and their lock gone
def test_a_confirmed_preview_is_applied_only_once_no_admission_cycle_runs(staff, video):
    """The apply waits for the admission cycle's lock: while a cycle holds it, the change
    waits and, past its wait, is refused as contention with nothing written; once the
    cycle is done, it applies and its audit keeps the preview."""
    document = with_video_cpu(min="4", max="8")
    newest = video["admitted"][2].pk
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    cycle = psycopg.connect(**params)  # another worker's cycle, in its transaction
    try:
        cycle.execute("SELECT pg_advisory_xact_lock(%s)", [ADMISSION])
        with pytest.raises(OperationalError) as refused:
            tree_apply_previewed(
                document=document, previewed={newest}, actor=staff, source="api",
                wait_seconds=0.2,
            )  # fmt: skip
        assert is_contention(refused.value)
        assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 14_000
    finally:
        cycle.close()

    applied = tree_apply_previewed(document=document, previewed={newest}, actor=staff, source="api")
    assert [job.job for job in applied.preview.preempted] == [newest] and not applied.grown
    assert [change.path for change in applied.changes or []] == ["root/algorithm/video"]
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 8_000


def test_a_confirmed_preview_that_no_longer_holds_is_not_applied(staff, video):
    document = with_video_cpu(min="4", max="8")
    applied = tree_apply_previewed(document=document, previewed=set(), actor=staff, source="api")
    assert applied.changes is None
    assert [job.job for job in applied.grown] == [video["admitted"][2].pk]
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 14_000
    assert not AuditEntry.objects.filter(object_type=AuditEntry.ObjectType.QUOTA_TREE).exists()


def test_a_max_below_a_waiting_jobs_ask_names_it_as_never_starting(api, staff, video):
    # video's max to 3 cpu: the waiting 4-cpu job could never run there any more.
    document = with_video_cpu(min="3", max="3")

    answer = api(staff).post(PREVIEW, document, format="json").json()

    assert answer["unrunnable_count"] == 1
    [job] = answer["unrunnable"]
    assert job["job"] == video["waiting"].pk and job["by_the_change"] is True
    assert job["why"].startswith(
        "can never be admitted while it stays so: Insufficient quota in root/algorithm/video: "
        "cpu requested 4"
    ), job["why"]


def test_a_raised_max_says_when_each_queues_first_waiting_job_starts_before_and_after(
    api, staff, video
):
    answer = api(staff).post(PREVIEW, with_video_cpu(max="16"), format="json").json()

    [head] = answer["queues"]
    assert (head["queue"], head["job"]) == ("root-algorithm-video", video["waiting"].pk)
    # Now it waits for a running job to end; with 16 cpu it fits at the next cycle.
    assert head["before"]["basis"].startswith("about ")
    assert head["after"]["basis"] == "now: it fits, and is dequeued at the next admission cycle"
    assert [job["job"] for job in answer["admitted"]] == [video["waiting"].pk]
