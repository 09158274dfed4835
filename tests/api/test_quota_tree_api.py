"""PUT/GET /api/v1/quota-tree/, departments and members: the tree applied like kubectl apply."""

import copy
from datetime import timedelta

import pytest

from audit.models import AuditEntry
from jobs.models import Job
from queues.models import Department, Membership, Queue, QuotaNode

from ..support.jobs import RAY_JOB
from ..support.trees import seed_tree_document

pytestmark = pytest.mark.django_db


def video(document):
    algorithm = document["spec"]["root"]["children"][0]
    return next(child for child in algorithm["children"] if child["name"] == "video")


def test_it_applies_the_seed_tree_and_creates_one_queue_per_leaf(api, staff):
    response = api(staff).put("/api/v1/quota-tree/", seed_tree_document(), format="json")
    assert response.status_code == 200, response.json()
    assert set(Queue.objects.filter(active=True).values_list("name", flat=True)) == {
        "root-algorithm-video",
        "root-algorithm-text",
        "root-infrastructure-devops",
        "root-interns-intern-text",
        "root-interns-intern-video",
    }
    node = QuotaNode.objects.get(path="root/algorithm/video")
    assert node.min == {"cpu": 12000, "memory": 12 * 2**30, "nvidia.com/gpu": 2}
    assert node.namespaces == ["video"]


def test_get_returns_the_same_shape_that_was_put(api, staff):
    document = seed_tree_document()
    api(staff).put("/api/v1/quota-tree/", document, format="json")
    exported = api(staff).get("/api/v1/quota-tree/").json()
    assert exported["apiVersion"] == "scheduling.sigs.k8s.io/v1beta1"
    assert exported["kind"] == "ElasticQuotaTree"
    assert video(exported) == {
        "name": "video",
        "min": {"cpu": "12", "memory": "12Gi", "nvidia.com/gpu": "2"},
        "max": {"cpu": "14", "memory": "14Gi", "nvidia.com/gpu": "4"},
        "namespaces": ["video"],
    }
    # Applying the export again changes nothing.
    api(staff).put("/api/v1/quota-tree/", exported, format="json")
    assert api(staff).get("/api/v1/quota-tree/").json() == exported


def test_it_updates_nodes_and_retires_dropped_ones_with_their_queues(api, staff, tree):
    document = seed_tree_document()
    video(document)["max"]["cpu"] = "13"
    interns = document["spec"]["root"]["children"][2]
    interns["children"] = [c for c in interns["children"] if c["name"] != "intern-text"]
    response = api(staff).put("/api/v1/quota-tree/", document, format="json")
    assert response.status_code == 200, response.json()
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 13000
    assert not QuotaNode.objects.get(path="root/interns/intern-text").active
    assert not Queue.objects.get(name="root-interns-intern-text").active


def test_it_refuses_to_retire_a_node_with_queued_jobs_and_stores_nothing(api, staff, member):
    api(member).post("/api/v1/jobs/", RAY_JOB, format="json")
    document = seed_tree_document()
    document["spec"]["root"]["children"][0]["children"] = [
        c for c in document["spec"]["root"]["children"][0]["children"] if c["name"] != "video"
    ]
    document["spec"]["root"]["children"][0]["max"]["cpu"] = "40"
    response = api(staff).put("/api/v1/quota-tree/", document, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "spec.root": [
            "cannot retire root/algorithm/video: it has 1 queued or admitted jobs; "
            "cancel or finish them first"
        ]
    }
    assert QuotaNode.objects.get(path="root/algorithm/video").active
    assert QuotaNode.objects.get(path="root/algorithm").max["cpu"] == 48000


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (
            lambda d: video(d)["min"].update(cpu="16"),
            "spec.root",
            "root/algorithm/video: min cpu 16 is above max 14",
        ),
        (
            lambda d: video(d)["max"].update(cpu="lots"),
            "spec.root.children[0].children[0].max.cpu",
            "'lots' is not a Kubernetes quantity",
        ),
        (
            lambda d: video(d)["max"].update(cpu="-2"),
            "spec.root.children[0].children[0].max.cpu",
            "'-2' is negative",
        ),
        (
            lambda d: video(d).update(name="Video!"),
            "spec.root.children[0].children[0].name",
            "not a valid node name",
        ),
        (lambda d: d.update(kind="Queue"), "kind", "must be ElasticQuotaTree"),
        (lambda d: d["spec"].pop("root"), "spec.root", "is required"),
        (
            lambda d: video(d).update(namespaces=["text"]),
            "spec.root",
            "namespace text is bound to both",
        ),
    ],
)
def test_bad_trees_get_400_naming_the_field_and_nothing_is_stored(
    api, staff, tree, change, field, message
):
    before = list(QuotaNode.objects.values_list("path", "min", "max", "active").order_by("path"))
    document = copy.deepcopy(seed_tree_document())
    change(document)
    response = api(staff).put("/api/v1/quota-tree/", document, format="json")
    assert response.status_code == 400
    assert any(message in reason for reason in response.json()[field]), response.json()
    assert (
        list(QuotaNode.objects.values_list("path", "min", "max", "active").order_by("path"))
        == before
    )


def test_only_staff_may_put_the_tree(api, member):
    response = api(member).put("/api/v1/quota-tree/", seed_tree_document(), format="json")
    assert response.status_code == 403


def test_anonymous_requests_are_refused(client):
    assert client.get("/api/v1/quota-tree/").status_code in (401, 403)


def test_staff_create_departments_and_add_members(api, staff, tree):
    response = api(staff).post(
        "/api/v1/departments/", {"name": "algorithm", "quota_node": "root/algorithm"}, format="json"
    )
    assert response.status_code == 201, response.json()
    response = api(staff).post(
        "/api/v1/departments/algorithm/members/",
        {"username": "alice", "role": "member"},
        format="json",
    )
    assert response.status_code == 201
    membership = Membership.objects.get(user__username="alice")
    assert (membership.department.name, membership.role) == ("algorithm", "member")
    # A user created this way signs in with a token until an admin sets a password.
    assert not membership.user.has_usable_password()


def test_department_errors_name_the_field(api, staff, tree):
    response = api(staff).post(
        "/api/v1/departments/", {"name": "algorithm", "quota_node": "root/nowhere"}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {"quota_node": ["'root/nowhere' is not a node of the quota tree"]}
    response = api(staff).post("/api/v1/departments/x/members/", {"username": "a"}, format="json")
    assert response.status_code == 404
    assert not Department.objects.exists()


def test_members_may_not_create_departments(api, member):
    response = api(member).post(
        "/api/v1/departments/", {"name": "mine", "quota_node": "root/algorithm"}, format="json"
    )
    assert response.status_code == 403
    assert not Job.objects.exists()


def test_weights_and_a_half_life_are_applied_exported_and_audited(api, staff, tree):
    document = copy.deepcopy(seed_tree_document())
    document["spec"]["fairSharing"] = {"halfLife": "168h"}
    document["spec"]["root"]["children"][0]["weight"] = 3
    response = api(staff).put("/api/v1/quota-tree/", document, format="json")
    assert response.status_code == 200, response.json()
    exported = response.json()
    assert exported["spec"]["fairSharing"] == {"halfLife": "7d"}
    algorithm = exported["spec"]["root"]["children"][0]
    assert algorithm["name"] == "algorithm" and algorithm["weight"] == 3
    assert "weight" not in exported["spec"]["root"]["children"][1]  # 1, the default
    root = QuotaNode.objects.get(path="root")
    assert root.half_life == timedelta(days=7)
    assert QuotaNode.objects.get(path="root/algorithm").weight == 3.0
    entry = AuditEntry.objects.filter(object_key="root/algorithm").latest("id")
    assert entry.before.get("weight") is None and entry.after["weight"] == 3.0
    assert AuditEntry.objects.filter(object_key="root").latest("id").after["halfLife"] == "7d"
    # Read back and applied again, it changes nothing.
    assert api(staff).put("/api/v1/quota-tree/", exported, format="json").json() == exported


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda d: d["spec"].update(fairSharing={"halfLife": "7"}), "spec.fairSharing.halfLife",
         "must be a duration from 1h to 365d"),
        (lambda d: d["spec"].update(fairSharing={"halfLife": "10m"}),
         "spec.fairSharing.halfLife", "must be a duration from 1h to 365d"),
        (lambda d: d["spec"].update(fairSharing={"window": "7d"}), "spec.fairSharing",
         "one field, halfLife"),
        (lambda d: d["spec"]["root"]["children"][0].update(weight=0),
         "spec.root.children[0].weight", "must be a number above 0"),
        (lambda d: d["spec"]["root"]["children"][0].update(weight="2"),
         "spec.root.children[0].weight", "must be a number above 0"),
        (lambda d: d["spec"]["root"]["children"][0].update(weight=5000),
         "spec.root.children[0].weight", "at most 1000"),
    ],
)  # fmt: skip
def test_a_bad_half_life_or_weight_is_refused_by_name(api, staff, tree, change, field, message):
    document = copy.deepcopy(seed_tree_document())
    change(document)
    response = api(staff).put("/api/v1/quota-tree/", document, format="json")
    assert response.status_code == 400
    assert any(message in reason for reason in response.json()[field]), response.json()
    assert QuotaNode.objects.get(path="root").half_life is None
