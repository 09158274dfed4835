"""The admin site edits the quota tree through the same checks as the API."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audit.models import AuditEntry
from jobs.document.schema import job_parse
from jobs.engine.admission.cycle import admission_cycle
from jobs.services import job_submit
from queues import exchange
from queues.departments import department_create, membership_set
from queues.models import Department, Membership, Queue, QuotaNode
from queues.services import tree_apply

from ..support import k8s_schema
from ..support.jobs import RAY_JOB
from ..support.trees import pooled_tree_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, staff, tree):
    client.force_login(staff)
    return client


def node_form(**changes) -> dict:
    """The video leaf's page as the browser posts it: its values, and no children."""
    form = {
        "min_text": "cpu: 12\nmemory: 12Gi\nnvidia.com/gpu: 2",
        "max_text": "cpu: 14\nmemory: 14Gi\nnvidia.com/gpu: 4",
        "namespaces_text": "video",
        "children-TOTAL_FORMS": "0",
        "children-INITIAL_FORMS": "0",
    }
    form.update(changes)
    return form


def video_url() -> str:
    node = QuotaNode.objects.get(path="root/algorithm/video")
    return reverse("admin:queues_quotanode_change", args=[node.pk])


def test_the_node_list_is_indented_by_depth_without_a_style_attribute(admin_client):
    html = admin_client.get(reverse("admin:queues_quotanode_changelist")).content.decode()

    # The Content-Security-Policy refuses style attributes: the stylesheet indents.
    assert ' style="' not in html
    assert '<span class="quota-node" data-depth="2" title="root/algorithm/video">' in html
    assert "caldera-admin.css" in html


def test_an_admin_raises_a_leafs_max(admin_client):
    response = admin_client.post(video_url(), node_form(max_text="cpu: 20\nmemory: 14Gi"))
    assert response.status_code == 302
    node = QuotaNode.objects.get(path="root/algorithm/video")
    assert node.max == {"cpu": 20_000, "memory": 14 * 2**30}


def test_a_max_above_the_parents_max_is_shown_in_place_and_nothing_is_saved(admin_client):
    before = QuotaNode.objects.get(path="root/algorithm/video").max
    response = admin_client.post(video_url(), node_form(max_text="cpu: 100"))
    assert response.status_code == 200
    errors = " ".join(response.context["adminform"].form.non_field_errors())
    assert "root/algorithm/video" in errors and "cpu" in errors
    assert QuotaNode.objects.get(path="root/algorithm/video").max == before


def test_a_bad_quantity_is_shown_beside_its_field(admin_client):
    response = admin_client.post(video_url(), node_form(min_text="cpu: lots"))
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert any("'lots' is not a Kubernetes quantity" in e for e in form.errors["min_text"])


def test_a_line_that_is_not_resource_colon_quantity_is_refused(admin_client):
    response = admin_client.post(video_url(), node_form(max_text="cpu 14"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["max_text"] == ["line 1: write 'resource: quantity', got 'cpu 14'"]


def test_the_tree_page_applies_yaml_and_adds_a_leaf_with_its_queue(admin_client):
    url = reverse("admin:queues_quotanode_tree")
    document = yaml.safe_load(admin_client.get(url).context["document"])
    algorithm = document["spec"]["root"]["children"][0]
    assert algorithm["name"] == "algorithm"
    algorithm["children"].append(
        {"name": "speech", "min": {"cpu": "0"}, "max": {"cpu": "8"}, "namespaces": ["speech"]}
    )
    response = admin_client.post(url, {"document": yaml.safe_dump(document)})
    assert response.status_code == 302
    assert Queue.objects.get(name="root-algorithm-speech").active


def test_the_tree_page_shows_errors_and_writes_nothing(admin_client):
    url = reverse("admin:queues_quotanode_tree")
    nodes = QuotaNode.objects.filter(active=True).count()
    response = admin_client.post(url, {"document": "spec: {root: {name: root, min: {cpu: x}}}"})
    assert response.status_code == 200
    assert "spec.root.min.cpu" in response.content.decode()
    response = admin_client.post(url, {"document": "spec: [unclosed"})
    assert "not valid YAML" in response.content.decode()
    assert QuotaNode.objects.filter(active=True).count() == nodes


def test_an_admin_sets_a_queues_policy(admin_client):
    queue = Queue.objects.get(name="root-algorithm-video")
    url = reverse("admin:queues_queue_change", args=[queue.pk])
    assert admin_client.post(url, {"policy": "BestEffort"}).status_code == 302
    queue.refresh_from_db()
    assert queue.policy == "BestEffort"


def test_jobs_are_shown_but_not_changed_in_the_admin(admin_client, member):
    job = job_submit(user=member, draft=job_parse(dict(RAY_JOB)))
    url = reverse("admin:jobs_job_change", args=[job.pk])
    response = admin_client.get(url)
    assert response.status_code == 200
    assert "Enqueued in root-algorithm-video" in response.content.decode()
    admin_client.post(url, {"state": "succeeded"})
    job.refresh_from_db()
    assert job.state == "queued"


def test_members_cannot_open_the_admin(client, member):
    client.force_login(member)
    response = client.get(reverse("admin:queues_quotanode_tree"))
    assert response.status_code == 302


# The tree as a tree: indentation, usage, children edited inline.


def page_data(response) -> dict:
    """A change page's forms as the browser posts them when nothing is touched."""
    data = {}
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        for name in management.fields:
            data[management.add_prefix(name)] = management[name].value()
        forms += inline.formset.forms
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            if value is not None and value is not False:
                data[form.add_prefix(name)] = value
    return data


def node_url(path: str) -> str:
    return reverse("admin:queues_quotanode_change", args=[QuotaNode.objects.get(path=path).pk])


def child(data: dict, name: str) -> str:
    """The form prefix of the child row named ``name`` (``children-1``)."""
    (key,) = [k for k, v in data.items() if re.fullmatch(r"children-\d+-name", k) and v == name]
    return key.removesuffix("-name")


def add_child(data: dict, **values: str) -> dict:
    """Fill the page's empty child row (the last one) with ``values``."""
    last = int(data["children-TOTAL_FORMS"]) - 1
    data.update({f"children-{last}-{field}": value for field, value in values.items()})
    return data


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def row_cells(html: str, path: str) -> dict[str, str]:
    """The text of each cell of the changelist row of ``path``, by column."""
    (row,) = [r for r in html.split("<tr") if f'title="{path}"' in r]
    cells = re.findall(r'<t[dh] class="field-(\w+)[^"]*">(.*?)</t[dh]>', row, re.S)
    return {name: text_of(cell) for name, cell in cells}


def test_the_changelist_shows_the_tree_indented_with_min_max_and_live_usage(admin_client, member):
    job_submit(user=member, draft=job_parse(dict(RAY_JOB)))  # 12 cpu, 12G into video
    assert len(admission_cycle().admitted) == 1
    response = admin_client.get(reverse("admin:queues_quotanode_changelist"))
    assert response.status_code == 200
    paths = [node.path for node in response.context["cl"].result_list]
    assert paths == sorted(paths) and paths[:3] == ["root", "root/algorithm", "root/algorithm/text"]
    html = response.content.decode()
    assert '<span class="quota-node" data-depth="0" title="root">root</span>' in html
    assert (
        '<span class="quota-node" data-depth="2" title="root/algorithm/video">video</span>'
    ) in html
    video = row_cells(html, "root/algorithm/video")
    assert video["min_column"] == "cpu 12 memory 12Gi nvidia.com/gpu 2"
    assert video["max_column"] == "cpu 14 memory 14Gi nvidia.com/gpu 4"
    assert video["used_column"] == "cpu 12 memory 12G nvidia.com/gpu 0"
    # Usage is the subtree's: the parents count the job, the sibling does not.
    assert row_cells(html, "root/algorithm")["used_column"].startswith("cpu 12 ")
    assert row_cells(html, "root")["used_column"].startswith("cpu 12 ")
    assert row_cells(html, "root/algorithm/text")["used_column"].startswith("cpu 0 ")


def test_a_nodes_page_shows_its_usage_and_lists_its_children(admin_client, member):
    job_submit(user=member, draft=job_parse(dict(RAY_JOB)))
    admission_cycle()
    response = admin_client.get(node_url("root/algorithm"))
    html = text_of(response.content.decode())
    assert "cpu: 12 of max 48 (min 32)" in html
    data = page_data(response)
    assert data[child(data, "text") + "-max_text"] == "cpu: 24\nmemory: 96Gi\nnvidia.com/gpu: 8"
    assert data[child(data, "video") + "-namespaces_text"] == "video"


def test_an_admin_edits_a_child_and_adds_one_in_a_single_save(admin_client, staff):
    url = node_url("root/algorithm")
    data = page_data(admin_client.get(url))
    data[child(data, "text") + "-max_text"] = "cpu: 20\nmemory: 96Gi\nnvidia.com/gpu: 8"
    add_child(data, name="speech", min_text="cpu: 0", max_text="cpu: 8", namespaces_text="speech")
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["errors"]
    assert QuotaNode.objects.get(path="root/algorithm/text").max["cpu"] == 20_000
    speech = QuotaNode.objects.get(path="root/algorithm/speech")
    assert speech.parent.path == "root/algorithm" and speech.namespaces == ["speech"]
    assert Queue.objects.get(name="root-algorithm-speech").active
    entries = AuditEntry.objects.filter(source="admin", actor=staff)
    assert sorted(entries.values_list("object_type", "object_key", "action")) == [
        ("queue", "root-algorithm-speech", "created"),
        ("quota node", "root/algorithm/speech", "created"),
        ("quota node", "root/algorithm/text", "updated"),
    ]


def test_a_parent_and_its_children_are_checked_together_not_one_by_one(admin_client):
    # Lowering algorithm's min to 20 cpu is only valid with its children's min lowered too.
    url = node_url("root/algorithm")
    data = page_data(admin_client.get(url))
    data["min_text"] = "cpu: 20\nmemory: 64Gi\nnvidia.com/gpu: 8"
    for name in ("video", "text"):
        data[child(data, name) + "-min_text"] = "cpu: 10\nmemory: 12Gi\nnvidia.com/gpu: 2"
    assert admin_client.post(url, data).status_code == 302
    assert QuotaNode.objects.get(path="root/algorithm").min["cpu"] == 20_000
    assert QuotaNode.objects.get(path="root/algorithm/video").min["cpu"] == 10_000


def test_a_childs_broken_rule_is_shown_on_its_row_and_nothing_is_saved(admin_client):
    url = node_url("root/algorithm")
    data = page_data(admin_client.get(url))
    data[child(data, "text") + "-max_text"] = "cpu: 100"
    add_child(data, name="speech", min_text="cpu: 0", max_text="cpu: 8")
    before = list(QuotaNode.objects.values_list("path", "min", "max", "active"))

    def rows(response) -> dict:
        formset = response.context["inline_admin_formsets"][0].formset
        return {form["name"].value(): form for form in formset.forms if form["name"].value()}

    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert rows(response)["text"].non_field_errors() == [
        "root/algorithm/text: max cpu 100 is above its parent root/algorithm's max 48"
    ]
    formset = response.context["inline_admin_formsets"][0].formset
    assert formset.non_form_errors() == [
        "Nothing was saved: the change would break the rules of the tree at root/algorithm "
        "(see the messages in place)."
    ]
    assert "is above its parent root/algorithm&#x27;s max 48" in response.content.decode()
    data[child(data, "video") + "-min_text"] = "cpu: lots"
    data[child(data, "speech") + "-name"] = "Speech!"
    response = admin_client.post(url, data)
    assert rows(response)["video"].errors["min_text"] == [
        "cpu: 'lots' is not a Kubernetes quantity (examples: 500m, 2, 1.5, 4Gi, 4G)"
    ]
    assert rows(response)["Speech!"].errors["name"] == [
        "'Speech!' is not a valid node name (lowercase letters, digits, '-', '.', '_')"
    ]
    assert list(QuotaNode.objects.values_list("path", "min", "max", "active")) == before
    assert not AuditEntry.objects.filter(source="admin").exists()


def test_childrens_min_above_the_parents_is_shown_on_the_parent(admin_client):
    url = node_url("root/algorithm")
    data = page_data(admin_client.get(url))
    data[child(data, "text") + "-min_text"] = "cpu: 24\nmemory: 24Gi\nnvidia.com/gpu: 4"
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert response.context["adminform"].form.non_field_errors() == [
        "root/algorithm: children's min cpu sum to 36, above its own min 32"
    ]
    assert QuotaNode.objects.get(path="root/algorithm/text").min["cpu"] == 12_000


def test_a_new_child_of_a_leaf_must_take_over_its_namespaces(admin_client):
    url = video_url()
    data = page_data(admin_client.get(url))
    add_child(data, name="clips", min_text="cpu: 2", max_text="cpu: 4", namespaces_text="clips")
    response = admin_client.post(url, data)
    assert response.context["adminform"].form.non_field_errors() == [
        "root/algorithm/video: only leaves bind namespaces, but it has children and "
        "namespaces video"
    ]
    data["namespaces_text"] = ""
    assert admin_client.post(url, data).status_code == 302
    assert not Queue.objects.get(name="root-algorithm-video").active
    assert Queue.objects.get(name="root-algorithm-video-clips").active


def test_deleting_a_child_retires_it_unless_its_queue_holds_jobs(admin_client, member):
    job_submit(user=member, draft=job_parse(dict(RAY_JOB)))  # queued in video
    url = node_url("root/algorithm")
    data = page_data(admin_client.get(url))
    data[child(data, "video") + "-DELETE"] = "on"
    response = admin_client.post(url, data)
    assert response.status_code == 200
    formset = response.context["inline_admin_formsets"][0].formset
    (video,) = [form for form in formset.forms if form["name"].value() == "video"]
    assert video.non_field_errors() == [
        "cannot retire root/algorithm/video: it has 1 queued or admitted jobs; "
        "cancel or finish them first"
    ]
    assert "cannot retire root/algorithm/video" in response.content.decode()
    assert QuotaNode.objects.get(path="root/algorithm/video").active
    data = page_data(admin_client.get(url))
    data[child(data, "text") + "-DELETE"] = "on"
    assert admin_client.post(url, data).status_code == 302
    assert not QuotaNode.objects.get(path="root/algorithm/text").active
    assert not Queue.objects.get(name="root-algorithm-text").active


def test_a_retired_node_is_shown_read_only(admin_client):
    url = node_url("root/interns")
    data = page_data(admin_client.get(url))
    data[child(data, "intern-text") + "-DELETE"] = "on"
    assert admin_client.post(url, data).status_code == 302
    retired = node_url("root/interns/intern-text")
    response = admin_client.get(retired)
    assert response.status_code == 200 and not response.context["has_change_permission"]
    html = response.content.decode()
    assert 'name="min_text"' not in html and ">cpu 64</div>" in html
    assert admin_client.post(retired, node_form()).status_code == 403


# YAML in and out.


def test_the_admin_exports_the_tree_and_imports_it_back_unchanged(admin_client):
    response = admin_client.get(reverse("admin:queues_quotanode_export"))
    assert response["Content-Disposition"] == 'attachment; filename="elasticquotatree.yaml"'
    exported = response.content.decode()
    assert exported == exchange.tree_yaml()
    assert k8s_schema.errors(yaml.safe_load(exported)) == []
    upload = SimpleUploadedFile("tree.yaml", exported.encode())
    url = reverse("admin:queues_quotanode_tree")
    response = admin_client.post(url, {"document": "", "file": upload}, follow=True)
    assert [str(m) for m in response.context["messages"]] == [
        "The quota tree already matched the YAML: nothing changed."
    ]
    assert admin_client.get(reverse("admin:queues_quotanode_export")).content.decode() == exported


def test_an_uploaded_tree_is_applied_and_audited_as_a_yaml_import(admin_client, staff):
    document = yaml.safe_load(exchange.tree_yaml())
    document["spec"]["root"]["children"][0]["children"][1]["max"]["cpu"] = "20"  # video
    upload = SimpleUploadedFile("tree.yaml", yaml.safe_dump(document).encode())
    url = reverse("admin:queues_quotanode_tree")
    response = admin_client.post(url, {"document": "", "file": upload}, follow=True)
    assert [str(m) for m in response.context["messages"]] == [
        "The quota tree was applied: 1 node changed.",
        "updated root/algorithm/video: max cpu: 14 → 20",
    ]
    entry = AuditEntry.objects.exclude(source="command").get()
    assert (entry.object_key, entry.action, entry.actor) == (
        "root/algorithm/video",
        "updated",
        staff,
    )
    assert entry.source == "yaml import"


def test_an_uploaded_tree_with_errors_is_refused_in_place(admin_client):
    url = reverse("admin:queues_quotanode_tree")
    bad = b"spec:\n  root: {name: root, max: {cpu: -1}}\n"
    response = admin_client.post(url, {"file": SimpleUploadedFile("t.yaml", bad)})
    assert response.status_code == 200
    assert response.context["errors"] == {"spec.root.max.cpu": ["'-1' is negative"]}
    response = admin_client.post(url, {"file": SimpleUploadedFile("t.yaml", b"\xff\xfe")})
    assert response.context["errors"] == {"file": ["t.yaml is not UTF-8 text"]}
    assert QuotaNode.objects.get(path="root").max["cpu"] == 64_000
    assert not AuditEntry.objects.filter(source="yaml import").exists()


def test_the_admin_exports_a_valid_volcano_queue_per_leaf(admin_client):
    response = admin_client.get(reverse("admin:queues_quotanode_export_volcano"))
    assert response["Content-Disposition"] == 'attachment; filename="volcano-queues.yaml"'
    queues = list(yaml.safe_load_all(response.content))
    assert [q["metadata"]["name"] for q in queues] == sorted(
        Queue.objects.filter(active=True).values_list("name", flat=True)
    )
    assert all(k8s_schema.errors(q) == [] for q in queues)


def test_the_changelist_links_the_exports_and_the_history(admin_client):
    html = admin_client.get(reverse("admin:queues_quotanode_changelist")).content.decode()
    assert reverse("admin:queues_quotanode_export") in html
    assert reverse("admin:queues_quotanode_export_volcano") in html
    assert reverse("admin:audit_auditentry_changelist") in html


# Departments and people.


def test_the_department_page_lists_its_people_and_what_each_role_may_do(
    admin_client, manager, member, departments
):
    url = reverse("admin:queues_department_change", args=[departments["algorithm"].pk])
    response = admin_client.get(url)
    html = text_of(response.content.decode())
    assert "Members submit jobs to the department's queues" in html.replace("&#x27;", "'")
    assert "cancel their own jobs" in html
    assert "raise a job's priority" in html.replace("&#x27;", "'")
    assert "cancel any job of the department" in html
    assert "Staff may do everything in every department" in html
    formset = response.context["inline_admin_formsets"][0].formset
    assert [(f.instance.user.username, f.instance.role) for f in formset.initial_forms] == [
        ("bob", "manager"),
        ("alice", "member"),
    ]
    listing = admin_client.get(reverse("admin:queues_department_changelist")).content.decode()
    (row,) = [r for r in listing.split("<tr") if ">algorithm</a>" in r]
    assert (
        '<td class="field-managers_list">bob</td><td class="field-members_list">alice</td>' in row
    )


def test_the_user_page_shows_the_persons_departments_and_roles(admin_client, manager):
    url = reverse("admin:auth_user_change", args=[manager.pk])
    response = admin_client.get(url)
    assert response.status_code == 200
    (inline,) = [
        i for i in response.context["inline_admin_formsets"] if i.formset.model is Membership
    ]
    assert [(f.instance.department.name, f.instance.role) for f in inline.formset.forms] == [
        ("algorithm", "manager")
    ]
    assert "Departments and roles (edit them on the department" in response.content.decode()


def test_the_department_inline_adds_changes_and_removes_people_with_audit(
    admin_client, staff, manager, member, other_member, departments
):
    algorithm = departments["algorithm"]
    url = reverse("admin:queues_department_change", args=[algorithm.pk])
    data = page_data(admin_client.get(url))
    rows = {data[k]: k.removesuffix("-user") for k in data if k.endswith("-user") and data[k]}
    data[rows[member.pk] + "-role"] = "manager"
    data[rows[other_member.pk] + "-DELETE"] = "on"
    last = int(data["membership_set-TOTAL_FORMS"]) - 1
    ian = get_user_model().objects.create_user("dan")
    data[f"membership_set-{last}-user"] = ian.pk
    data[f"membership_set-{last}-role"] = "member"
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["errors"]
    roles = dict(algorithm.membership_set.values_list("user__username", "role"))
    assert roles == {"bob": "manager", "alice": "manager", "dan": "member"}
    entries = AuditEntry.objects.filter(object_type="membership", source="admin", actor=staff)
    assert sorted(entries.values_list("object_key", "action", "before", "after")) == [
        ("algorithm/alice", "updated", {"role": "member"}, {"role": "manager"}),
        ("algorithm/carol", "deleted", {"role": "member"}, None),
        ("algorithm/dan", "created", None, {"role": "member"}),
    ]


def test_an_admin_creates_and_deletes_a_department_with_audit(admin_client, staff, tree):
    response = admin_client.post(
        reverse("admin:queues_department_add"),
        {
            "name": "research",
            "quota_node": tree["root/interns"].pk,
            "membership_set-TOTAL_FORMS": "1",
            "membership_set-INITIAL_FORMS": "0",
            "membership_set-0-user": staff.pk,
            "membership_set-0-role": "manager",
        },
    )
    assert response.status_code == 302, response.context["errors"]
    department = Department.objects.get(name="research")
    assert department.membership_set.get().role == "manager"
    url = reverse("admin:queues_department_delete", args=[department.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not Department.objects.filter(name="research").exists()
    assert list(
        AuditEntry.objects.filter(actor=staff)
        .order_by("id")
        .values_list("object_type", "object_key", "action")
    ) == [
        ("department", "research", "created"),
        ("membership", "research/root-admin", "created"),
        ("membership", "research/root-admin", "deleted"),
        ("department", "research", "deleted"),
    ]


def test_a_child_name_written_twice_is_shown_on_the_second_row(admin_client):
    url = node_url("root/algorithm")
    data = page_data(admin_client.get(url))
    add_child(data, name="speech", min_text="cpu: 0", max_text="cpu: 4")
    data["children-TOTAL_FORMS"] = "4"  # the browser's "Add another child"
    data.update({"children-3-name": "speech", "children-3-max_text": "cpu: 4"})
    data.update({"children-3-min_text": "cpu: 0", "children-3-parent": data["children-0-parent"]})
    response = admin_client.post(url, data)
    assert response.status_code == 200
    forms = response.context["inline_admin_formsets"][0].formset.forms
    assert [form.errors.get("name") for form in forms] == [
        None,
        None,
        None,
        ["'speech' appears twice"],
    ]


@pytest.mark.parametrize(
    "admin_name", ["queues_quotanode", "audit_auditentry", "queues_department"]
)
def test_changelists_cost_the_same_queries_for_more_rows(admin_client, departments, admin_name):
    url = reverse(f"admin:{admin_name}_changelist")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(url).status_code == 200
        return len(captured)

    small = queries()
    document = yaml.safe_load(exchange.tree_yaml())
    document["spec"]["root"]["children"][2]["children"] += [
        {"name": f"intern-{n}", "max": {"cpu": 4}, "namespaces": [f"intern-{n}"]} for n in range(3)
    ]
    tree_apply(document=document)
    for name in ("research", "sales"):
        department = department_create(name=name, quota_node=QuotaNode.objects.get(path="root"))
        membership_set(department=department, username=f"{name}-lead", role="manager")
    assert queries() == small


def _video_cpu(min: str, max: str) -> str:
    """The tree's YAML with root/algorithm/video's cpu set to ``min`` and ``max``."""
    document = yaml.safe_load(exchange.tree_yaml())
    video = document["spec"]["root"]["children"][0]["children"][1]
    video["min"]["cpu"], video["max"]["cpu"] = min, max
    return yaml.safe_dump(document)


@pytest.fixture
def three_running(member):
    """Three of alice's 4-cpu jobs admitted in video (12 cpu: its min)."""
    small = {**RAY_JOB, "workers": [], "head": {"resources": {"cpu": "4", "memory": "2Gi"}}}
    jobs = [job_submit(user=member, draft=job_parse({**small, "name": f"j{n}"})) for n in range(3)]
    admission_cycle()
    return jobs


def test_the_tree_editor_previews_whose_jobs_stop_before_it_applies(admin_client, three_running):
    url = reverse("admin:queues_quotanode_tree")
    text = _video_cpu("4", "8")

    shown = admin_client.post(url, {"document": text, "action": "preview"})

    page = shown.content.decode()
    assert shown.status_code == 200
    assert "What applying this tree would do now" in page
    newest = three_running[2]
    assert f"#{newest.pk} j2 (alice, root-algorithm-video)" in page
    assert "lowered below its usage" in page
    assert f'name="previewed" value="{newest.pk}"' in page
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 14_000  # unwritten

    applied = admin_client.post(
        url, {"document": text, "action": "apply", "previewed": [str(newest.pk)]}
    )

    assert applied.status_code == 302
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 8_000
    # The audit keeps the preview the admin confirmed, beside the node's own change.
    confirmed = AuditEntry.objects.get(object_type=AuditEntry.ObjectType.QUOTA_TREE)
    assert confirmed.actor.username == "root-admin"
    assert confirmed.after["preempted"] == [
        {"job": newest.pk, "owner": "alice", "queue": "root-algorithm-video", "by_the_change": True}
    ]
    assert confirmed.after["changes"] == [
        "updated root/algorithm/video: min cpu: 12 → 4; max cpu: 14 → 8"
    ]


def test_applying_asks_again_when_it_would_now_preempt_jobs_not_previewed(
    admin_client, three_running
):
    url = reverse("admin:queues_quotanode_tree")
    # Previewed when the change preempted nobody; now it would preempt j2.
    asked = admin_client.post(url, {"document": _video_cpu("4", "8"), "action": "apply"})

    assert asked.status_code == 200
    page = asked.content.decode()
    assert "Since your preview, applying would preempt 1 more job" in page
    assert f"#{three_running[2].pk} j2" in page
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 14_000


def test_the_roots_page_sets_the_half_life_and_a_childs_weight(admin_client):
    url = node_url("root")
    data = page_data(admin_client.get(url))
    assert "weight" not in data and data["half_life_text"] == ""  # the root has no siblings
    data.update({"half_life_text": "7d", f"{child(data, 'interns')}-weight": "2"})
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert QuotaNode.objects.get(path="root").half_life == timedelta(days=7)
    assert QuotaNode.objects.get(path="root/interns").weight == 2.0
    assert QuotaNode.objects.get(path="root/algorithm").weight == 1.0
    # Shown again as it was written.
    data = page_data(admin_client.get(url))
    assert data["half_life_text"] == "7d" and data[f"{child(data, 'interns')}-weight"] == 2.0
    # A leaf's page has a weight but no half-life: the tree has one.
    assert "half_life_text" not in page_data(admin_client.get(video_url()))


def test_a_bad_half_life_or_weight_is_refused_in_place(admin_client):
    url = node_url("root")
    data = page_data(admin_client.get(url))
    data.update({"half_life_text": "a week", f"{child(data, 'interns')}-weight": "-1"})
    response = admin_client.post(url, data)
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert "must be a duration from 1h to 365d" in " ".join(form.errors["half_life_text"])
    (interns,) = [
        f for inline in response.context["inline_admin_formsets"] for f in inline.formset.forms
        if f.instance.name == "interns"
    ]  # fmt: skip
    assert "must be a number above 0" in " ".join(interns.errors["weight"])
    assert QuotaNode.objects.get(path="root").half_life is None


def test_a_nodes_page_sets_its_stop_policy_and_limits_and_previews_a_drain(
    admin_client, three_running
):
    url = node_url("root/algorithm")
    data = page_data(admin_client.get(url))
    assert (data["stop_policy"], data["limits_text"]) == ("", "")
    data.update({
        "stop_policy": "HoldAndDrain",
        "limits_text": "maxTime: 1d\nperPerson.jobs: 2\nperPerson.resources.nvidia.com/gpu: 4",
    })  # fmt: skip
    shown = admin_client.post(url, {**data, "_preview": "Preview the change"})
    page = shown.content.decode()
    assert "HoldAndDrain" in page
    assert "is drained (stopPolicy HoldAndDrain)" in page  # the running jobs it preempts
    assert QuotaNode.objects.get(path="root/algorithm").stop_policy == ""
    response = admin_client.post(url, {**data, "previewed": [str(job.pk) for job in three_running]})
    assert response.status_code == 302, response.context["adminform"].form.errors
    node = QuotaNode.objects.get(path="root/algorithm")
    assert node.stop_policy == "HoldAndDrain"
    assert node.limits == {
        "maxTime": 86400, "perPerson": {"jobs": 2, "resources": {"nvidia.com/gpu": 4}},
    }  # fmt: skip
    shown_again = page_data(admin_client.get(url))
    assert shown_again["limits_text"] == (
        "maxTime: 1d\nperPerson.jobs: 2\nperPerson.resources.nvidia.com/gpu: 4"
    )


def test_a_bad_stop_policy_or_limit_is_refused_in_place(admin_client):
    url = node_url("root/algorithm")
    data = page_data(admin_client.get(url))
    data.update({"limits_text": "maxTime: forever\nperPerson.jobs: 0\nspeed: 3"})
    response = admin_client.post(url, data)
    assert response.status_code == 200
    said = " ".join(response.context["adminform"].form.errors["limits_text"])
    assert "maxTime: must be a duration from 1s to 365d" in said
    assert "perPerson.jobs: must be a whole number from 1 to 100000" in said
    assert "speed: unknown field" in said
    assert QuotaNode.objects.get(path="root/algorithm").limits == {}


def test_a_nodes_page_previews_its_change_before_saving_it(admin_client, three_running):
    url = video_url()
    data = page_data(admin_client.get(url))
    data.update({"min_text": "cpu: 4\nmemory: 12Gi", "max_text": "cpu: 8\nmemory: 14Gi"})

    shown = admin_client.post(url, {**data, "_preview": "Preview the change"})

    assert shown.status_code == 200
    page = shown.content.decode()
    assert "What saving this change would do now" in page
    newest = three_running[2]
    assert f"#{newest.pk} j2 (alice, root-algorithm-video)" in page
    assert f'name="previewed" value="{newest.pk}"' in page
    assert "Please correct the error" not in page  # a preview is no error
    assert "more job" not in page  # nothing was previewed before it
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 14_000  # unsaved

    saved = admin_client.post(url, {**data, "previewed": [str(newest.pk)]})

    assert saved.status_code == 302
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 8_000
    assert AuditEntry.objects.filter(object_type=AuditEntry.ObjectType.QUOTA_TREE).exists()


def test_saving_a_node_shows_the_preview_instead_when_it_would_preempt_unseen_jobs(
    admin_client, three_running
):
    url = video_url()
    data = page_data(admin_client.get(url))
    data.update({"min_text": "cpu: 4\nmemory: 12Gi", "max_text": "cpu: 8\nmemory: 14Gi"})

    asked = admin_client.post(url, data)  # saved at once, never previewed

    assert asked.status_code == 200
    assert "Since your preview, applying would preempt 1 more job" in asked.content.decode()
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 14_000
    # A change that preempts nobody is saved at once, as before.
    data.update({"max_text": "cpu: 16\nmemory: 14Gi", "min_text": "cpu: 12\nmemory: 12Gi"})
    assert admin_client.post(url, data).status_code == 302
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 16_000


def test_an_admin_edits_a_pool_s_share_on_the_node_s_page_and_the_pools_are_kept(admin_client):
    """A node's page writes a pool's share as a line of its own (``nvidia.com/gpu@h100: 4``);
    saving it with another share keeps the tree's pools and the other nodes' shares."""
    tree_apply(document=pooled_tree_document())
    url = node_url("root/algorithm")
    data = page_data(admin_client.get(url))
    assert "nvidia.com/gpu@h100: 4" in data["min_text"].splitlines()
    video = child(data, "video")
    assert "nvidia.com/gpu@h100: 4" in data[f"{video}-max_text"].splitlines()
    data[f"{video}-max_text"] = data[f"{video}-max_text"].replace(
        "nvidia.com/gpu@h100: 4", "nvidia.com/gpu@h100: 3"
    )
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["errors"]
    assert QuotaNode.objects.get(path="root/algorithm/video").max["nvidia.com/gpu@h100"] == 3
    assert QuotaNode.objects.get(path="root/algorithm").min["nvidia.com/gpu@a100"] == 4
    assert [p["name"] for p in QuotaNode.objects.get(path="root").node_pools] == ["h100", "a100"]
    # A share of a pool the tree does not declare is refused on its row, nothing saved.
    data[f"{video}-max_text"] += "\nnvidia.com/gpu@v100: 2"
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert QuotaNode.objects.get(path="root/algorithm/video").max["nvidia.com/gpu@h100"] == 3
