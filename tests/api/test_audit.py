"""The audit history: every change to the tree, queues, departments and memberships, with
who made it, through what, and the values before and after; nothing for a refused change."""

from __future__ import annotations

import copy

import pytest
from django.db import transaction
from django.db.transaction import TransactionManagementError
from django.urls import reverse

from audit.models import AuditEntry
from audit.services import audit_record, describe_changes
from queues import departments
from queues.models import Department, Membership, Queue

from ..support.jobs import RAY_JOB
from ..support.trees import seed_tree_document

pytestmark = pytest.mark.django_db
# The entries of changes to the tree and its people (the API clients' tokens record their
# own first use from an address).
CHANGES = AuditEntry.objects.exclude(object_type=AuditEntry.ObjectType.ACCESS_TOKEN)


def entries(**filters) -> list[tuple]:
    """(type, key, action) of the entries beyond the fixtures' own (made by commands)."""
    rows = CHANGES.exclude(source="command").filter(**filters).order_by("id")
    return list(rows.values_list("object_type", "object_key", "action"))


def video(document: dict) -> dict:
    return document["spec"]["root"]["children"][0]["children"][0]


@pytest.fixture
def admin_client(client, staff, tree):
    client.force_login(staff)
    return client


def test_it_records_an_updated_node_with_its_values_before_and_after(api, staff, tree):
    document = seed_tree_document()
    video(document)["max"].update(cpu=20, memory="16Gi")
    response = api(staff).put("/api/v1/quota-tree/", document, format="json")
    assert response.status_code == 200
    (entry,) = CHANGES.filter(source="api")
    assert (entry.actor, entry.action, entry.object_type, entry.object_key) == (
        staff,
        "updated",
        "quota node",
        "root/algorithm/video",
    )
    assert entry.before == {
        "min": {"cpu": "12", "memory": "12Gi", "nvidia.com/gpu": "2"},
        "max": {"cpu": "14", "memory": "14Gi", "nvidia.com/gpu": "4"},
        "namespaces": ["video"],
    }
    assert entry.after["max"] == {"cpu": "20", "memory": "16Gi", "nvidia.com/gpu": "4"}
    assert describe_changes(entry.before, entry.after) == [
        "max cpu: 14 → 20",
        "max memory: 14Gi → 16Gi",
    ]


def test_applying_the_same_tree_again_records_nothing(api, staff, tree):
    response = api(staff).put("/api/v1/quota-tree/", seed_tree_document(), format="json")
    assert response.status_code == 200
    assert entries() == []


def test_it_records_created_and_retired_nodes_with_their_queues(api, staff, tree):
    document = seed_tree_document()
    algorithm, _, interns = document["spec"]["root"]["children"]
    algorithm["children"].append({"name": "speech", "max": {"cpu": "8"}, "namespaces": ["speech"]})
    interns["children"] = [kid for kid in interns["children"] if kid["name"] != "intern-text"]
    assert api(staff).put("/api/v1/quota-tree/", document, format="json").status_code == 200
    assert entries() == [
        ("quota node", "root/algorithm/speech", "created"),
        ("quota node", "root/interns/intern-text", "retired"),
        ("queue", "root-algorithm-speech", "created"),
        ("queue", "root-interns-intern-text", "retired"),
    ]
    created = AuditEntry.objects.get(object_key="root/algorithm/speech", source="api")
    assert created.before is None
    assert created.after == {"min": {}, "max": {"cpu": "8"}, "namespaces": ["speech"]}
    retired = AuditEntry.objects.get(object_key="root/interns/intern-text", source="api")
    assert retired.after is None and retired.before["max"]["cpu"] == "64"


def test_a_refused_tree_records_nothing(api, staff, member):
    api(member).post("/api/v1/jobs/", RAY_JOB, format="json")
    document = seed_tree_document()
    video(document)["max"]["cpu"] = "13"
    algorithm = document["spec"]["root"]["children"][0]
    algorithm["children"] = [kid for kid in algorithm["children"] if kid["name"] != "text"]
    algorithm["children"][0]["min"]["cpu"] = "99"  # min above max: refused by the parser
    assert api(staff).put("/api/v1/quota-tree/", document, format="json").status_code == 400
    document = seed_tree_document()
    video(document)["max"]["cpu"] = "13"
    algorithm = document["spec"]["root"]["children"][0]
    algorithm["children"] = [kid for kid in algorithm["children"] if kid["name"] != "video"]
    # Refused after the tree was read under its lock: video has a queued job.
    assert api(staff).put("/api/v1/quota-tree/", document, format="json").status_code == 400
    assert entries() == []


def test_departments_and_memberships_from_the_api_are_recorded(api, staff, tree):
    client = api(staff)
    body = {"name": "research", "quota_node": "root/interns"}
    assert client.post("/api/v1/departments/", body, format="json").status_code == 201
    members = "/api/v1/departments/research/members/"
    assert client.post(members, {"username": "rita"}, format="json").status_code == 201
    client.post(members, {"username": "rita", "role": "member"}, format="json")  # no change
    client.post(members, {"username": "rita", "role": "manager"}, format="json")
    assert client.delete(members + "rita/").status_code == 204
    assert client.delete(members + "rita/").status_code == 404
    assert not Membership.objects.filter(user__username="rita").exists()
    rows = CHANGES.filter(source="api", actor=staff).order_by("id")
    research = {"name": "research", "quota_node": "root/interns"}
    assert list(rows.values_list("object_type", "object_key", "action", "before", "after")) == [
        ("department", "research", "created", None, research),
        ("membership", "research/rita", "created", None, {"role": "member"}),
        ("membership", "research/rita", "updated", {"role": "member"}, {"role": "manager"}),
        ("membership", "research/rita", "deleted", {"role": "manager"}, None),
    ]


def test_only_staff_remove_members(api, member, manager):
    response = api(member).delete("/api/v1/departments/algorithm/members/bob/")
    assert response.status_code == 403
    assert Membership.objects.filter(user=manager).exists()


def test_a_department_refused_by_the_api_records_nothing(api, staff, departments):
    body = {"name": "algorithm", "quota_node": "root/nowhere"}
    assert api(staff).post("/api/v1/departments/", body, format="json").status_code == 400
    assert entries() == []


def test_queue_settings_changed_in_the_admin_are_recorded(admin_client, staff):
    queue = Queue.objects.get(name="root-algorithm-video")
    url = reverse("admin:queues_queue_change", args=[queue.pk])
    form = {"policy": "BestEffort", "preemption": "on", "backoff_max_seconds": "30"}
    assert admin_client.post(url, form).status_code == 302
    (entry,) = AuditEntry.objects.filter(source="admin", actor=staff)
    assert (entry.object_type, entry.object_key, entry.action) == (
        "queue",
        "root-algorithm-video",
        "updated",
    )
    assert describe_changes(entry.before, entry.after) == [
        "policy: Priority → BestEffort",
        "preemption: no → yes",
        "backoff_max_seconds: — → 30.0",
    ]


def test_a_queue_saved_unchanged_records_nothing(admin_client):
    queue = Queue.objects.get(name="root-algorithm-video")
    url = reverse("admin:queues_queue_change", args=[queue.pk])
    assert admin_client.post(url, {"policy": "Priority"}).status_code == 302
    assert entries() == []


def test_a_department_moved_in_the_admin_is_recorded(admin_client, staff, departments, tree):
    department = departments["interns"]
    url = reverse("admin:queues_department_change", args=[department.pk])
    form = {
        "name": "interns",
        "quota_node": tree["root/interns/intern-text"].pk,
        "membership_set-TOTAL_FORMS": "0",
        "membership_set-INITIAL_FORMS": "0",
    }
    assert admin_client.post(url, form).status_code == 302
    (entry,) = AuditEntry.objects.filter(source="admin", actor=staff)
    assert entry.action == "updated" and entry.object_key == "interns"
    assert describe_changes(entry.before, entry.after) == [
        "quota_node: root/interns → root/interns/intern-text"
    ]


def test_a_service_refuses_to_audit_outside_a_transaction(transactional_db):
    # The entry must commit with its change, or not at all.
    with pytest.raises(TransactionManagementError):
        audit_record(
            action="created", object_type="queue", object_key="q", source="command", after={}
        )
    with transaction.atomic():
        assert audit_record(
            action="created", object_type="queue", object_key="q", source="command", after={}
        )


def test_a_change_rolled_back_takes_its_entry_with_it(tree):
    with pytest.raises(RuntimeError), transaction.atomic():
        departments.department_create(name="gone", quota_node=tree["root"])
        raise RuntimeError
    assert not Department.objects.filter(name="gone").exists()
    assert not AuditEntry.objects.filter(object_key="gone").exists()


# The history in the admin.


def test_the_admin_lists_entries_readably_and_filters_them(admin_client, api, staff):
    document = copy.deepcopy(seed_tree_document())
    video(document)["max"]["cpu"] = "20"
    api(staff).put("/api/v1/quota-tree/", document, format="json")
    url = reverse("admin:audit_auditentry_changelist")
    response = admin_client.get(url, {"source__exact": "api", "object_type__exact": "quota node"})
    assert [e.object_key for e in response.context["cl"].result_list] == ["root/algorithm/video"]
    assert ">max cpu: 14 → 20</div>" in response.content.decode()
    response = admin_client.get(url, {"actor__id__exact": staff.pk, "action__exact": "updated"})
    assert response.context["cl"].result_count == 1
    response = admin_client.get(url, {"object_type__exact": "queue", "q": "intern"})
    assert {e.object_key for e in response.context["cl"].result_list} == {
        "root-interns-intern-text",
        "root-interns-intern-video",
    }


def test_an_entrys_page_shows_before_and_after_and_cannot_be_changed(admin_client, staff, tree):
    entry = AuditEntry.objects.get(object_type="quota node", object_key="root/algorithm/video")
    url = reverse("admin:audit_auditentry_change", args=[entry.pk])
    html = admin_client.get(url).content.decode()
    assert ">min cpu: 12</div>" in html  # a creation lists its values
    assert "<pre>max:\n  cpu: &#x27;14&#x27;\n  memory: 14Gi\n" in html
    assert "namespaces:\n- video\n</pre>" in html
    admin_client.post(url, {"object_key": "forged"})
    entry.refresh_from_db()
    assert entry.object_key == "root/algorithm/video"
    assert admin_client.get(reverse("admin:audit_auditentry_add")).status_code == 403
    delete = reverse("admin:audit_auditentry_delete", args=[entry.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403


@pytest.mark.parametrize(
    ("admin_name", "lookup", "expected"),
    [
        ("quotanode", {"path": "root/algorithm/video"}, {("quota node", "root/algorithm/video")}),
        ("queue", {"name": "root-algorithm-video"}, {("queue", "root-algorithm-video")}),
        (
            "department",
            {"name": "algorithm"},
            {("department", "algorithm"), ("membership", "algorithm/alice")},
        ),
    ],
)
def test_each_change_page_links_to_the_objects_history(
    admin_client, member, admin_name, lookup, expected
):
    from django.apps import apps

    obj = apps.get_model("queues", admin_name).objects.get(**lookup)
    change = admin_client.get(reverse(f"admin:queues_{admin_name}_change", args=[obj.pk]))
    history = reverse(f"admin:queues_{admin_name}_history", args=[obj.pk])
    assert history in change.content.decode()
    response = admin_client.get(history, follow=True)
    assert response.redirect_chain[0][0].startswith(reverse("admin:audit_auditentry_changelist"))
    shown = {(e.object_type, e.object_key) for e in response.context["cl"].result_list}
    assert shown == expected
