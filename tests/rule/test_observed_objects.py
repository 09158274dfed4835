"""What an informer keeps of a job object (``kinds.observed``) reads as the whole object
does: every status a sync derives from it is the same, whatever the object holds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jobs.cluster import kinds
from jobs.cluster.manifests.common import LABEL_JOB_ID

WORDS = ["", "Running", "Complete", "Failed", "SUCCEEDED", "FAILED", "RUNNING", "Suspended",
         "Succeeded", "Completed", "Aborted", "Pending", "x"]  # fmt: skip
texts = st.sampled_from(WORDS)
conditions = st.lists(
    st.fixed_dictionaries(
        {"type": texts, "status": st.sampled_from(["True", "False"]), "message": texts}
    ),
    max_size=3,
)
statuses = st.fixed_dictionaries(
    {},
    optional={
        "jobDeploymentStatus": texts,
        "jobStatus": texts,
        "message": texts,
        "conditions": conditions,
        "state": st.fixed_dictionaries({}, optional={"phase": texts, "message": texts}),
    },
)
suspends = st.sampled_from([None, True, False])


@st.composite
def job_objects(draw) -> dict:
    labels = draw(st.sampled_from([{}, {LABEL_JOB_ID: "7"}, {LABEL_JOB_ID: "x"}]))
    metadata = {"name": "train-7", "namespace": "video", "labels": labels, "uid": "u",
                "resourceVersion": "12", "managedFields": [{"manager": "caldera"}]}  # fmt: skip
    if draw(st.booleans()):
        metadata["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    suspend = draw(suspends)
    spec: dict = {"entrypoint": "python train.py", "rayClusterSpec": {"headGroupSpec": {}}}
    if suspend is not None:
        spec["suspend"] = suspend
        spec["runPolicy"] = {"suspend": suspend, "cleanPodPolicy": "None"}
    obj = {"apiVersion": "v1", "kind": "Job", "metadata": metadata, "spec": spec}
    if draw(st.booleans()):
        obj["status"] = draw(statuses)
    return obj


@given(st.sampled_from(sorted(kinds.RESOURCES)), job_objects())
def test_what_an_informer_keeps_of_an_object_gives_the_same_status(runtime, obj):
    kept = kinds.observed(runtime, obj)
    assert kinds.object_status(runtime, kept) == kinds.object_status(runtime, obj)
    assert kinds.phase_of(runtime, kept) == kinds.phase_of(runtime, obj)
    assert "managedFields" not in kept["metadata"] and "entrypoint" not in kept.get("spec", {})
