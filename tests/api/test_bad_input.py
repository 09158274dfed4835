"""No input answers 500: each is a 400 naming the field and the reason.

PostgreSQL refuses a NUL in text and UTF-8 has no unpaired surrogates, so such text is
refused at the edge (portal/input.py, portal/middleware.py) wherever it comes in: JSON
bodies, query strings, paths, cookies, tokens and HTML forms. Offsets and limits are
bounded, and values of the wrong type are named, not crashed on.
"""

from __future__ import annotations

import copy
import json
import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from jobs.document.validation import OFFSET_MAX, PAGE_MAX
from jobs.models import Job
from portal.input import json_problem
from queues.models import Department, QuotaNode

from ..support.jobs import PYTORCH_JOB, RAY_JOB
from ..support.trees import seed_tree_document

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"
BATCH = "/api/v1/jobs/batch/"
NUL = "\u0000"
NUL_REASON = "contains the control character U+0000"


def ray_job(**changes) -> dict:
    return {**copy.deepcopy(RAY_JOB), **changes}


def with_worker(**changes) -> dict:
    job = ray_job()
    job["workers"][0].update(changes)
    return job


def with_head_cpu(value) -> dict:
    job = ray_job()
    job["head"]["resources"]["cpu"] = value
    return job


def error_of(response, field: str) -> str:
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field], response.json()
    return response.json()[field][0]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (ray_job(name="a" + NUL), "name"),
        (ray_job(image="rayproject/ray" + NUL), "image"),
        (ray_job(entrypoint="python" + NUL + " main.py"), "entrypoint"),
        (ray_job(script="print(1)\n" + NUL), "script"),
        (ray_job(queue=NUL), "queue"),
        (ray_job(env={"A": "x" + NUL}), "env.A"),
        (ray_job(pip=["torch" + NUL]), "pip[0]"),
        (with_worker(name="w" + NUL), "workers[0].name"),
        (with_head_cpu("4" + NUL), "head.resources.cpu"),
        ({**copy.deepcopy(PYTORCH_JOB), "command": ["torchrun", NUL]}, "command[1]"),
    ],
)
def test_a_nul_in_any_field_of_a_job_is_named(api, member, body, field):
    response = api(member).post(JOBS, body, format="json")

    assert NUL_REASON in error_of(response, field)
    assert not Job.objects.exists()


@pytest.mark.parametrize("character", ["\u0001", "\u0008", "\u000b", "\u001b", "\u001f"])
def test_other_control_characters_are_refused_in_free_text_too(api, member, character):
    response = api(member).post(JOBS, ray_job(script="print(1)" + character), format="json")

    reason = error_of(response, "script")
    assert f"U+{ord(character):04X}" in reason
    assert "only tab, line feed and carriage return are allowed" in reason


def test_tab_and_line_breaks_are_fine_in_free_text(api, member):
    script = "import ray\r\n\tray.init()\n"
    response = api(member).post(JOBS, ray_job(script=script), format="json")

    assert response.status_code == 201, response.json()
    assert Job.objects.get().script == script


def test_a_key_with_a_control_character_is_refused_at_its_parent(api, member):
    response = api(member).post(JOBS, ray_job(env={"A\u0000": "x"}), format="json")

    assert "a key contains the control character U+0000" in error_of(response, "env")


def test_an_unpaired_surrogate_is_refused(api, member):
    body = json.dumps(ray_job(image="ray\ud800"))  # json escapes it: \ud800
    response = api(member).post(JOBS, body, content_type="application/json")

    assert "unpaired surrogate (U+D800)" in error_of(response, "image")


def test_a_nul_in_a_batch_names_the_job_and_its_field(api, member):
    response = api(member).post(
        BATCH, {"jobs": [ray_job(), ray_job(name="b" + NUL)]}, format="json"
    )

    assert NUL_REASON in error_of(response, "jobs[1].name")
    assert not Job.objects.exists()


def test_a_body_nested_too_deep_is_refused(api, member):
    body = "[" * 5000 + "]" * 5000
    response = api(member).post(JOBS, body, content_type="application/json")

    assert "nested deeper than" in error_of(response, "body")


def test_a_nul_in_the_quota_tree_is_named(api, staff):
    document = seed_tree_document()
    document["spec"]["root"]["children"][0]["namespaces"] = ["a" + NUL]

    response = api(staff).put("/api/v1/quota-tree/", document, format="json")

    assert NUL_REASON in error_of(response, "spec.root.children[0].namespaces[0]")
    assert not QuotaNode.objects.exists()


def test_a_nul_in_a_member_or_a_department_is_named(api, staff, departments):
    response = api(staff).post(
        "/api/v1/departments/algorithm/members/", {"username": "a" + NUL}, format="json"
    )
    assert NUL_REASON in error_of(response, "username")
    response = api(staff).post(
        "/api/v1/departments/", {"name": "x", "quota_node": "root" + NUL}, format="json"
    )
    assert NUL_REASON in error_of(response, "quota_node")
    assert Department.objects.count() == len(departments)


@pytest.mark.parametrize(
    ("url", "field"),
    [
        (JOBS + "?queue=%00", "queue"),
        (JOBS + "?state=queued%01", "state"),
        ("/api/v1/queues/root-algorithm-video/?offset=%00", "offset"),
        ("/api/v1/queues/a%00b/", "path"),
        ("/api/v1/departments/algorithm/members/a%00b/", "path"),
        (JOBS + "?a%00=1", "a\\u0000"),
    ],
)
def test_a_control_character_in_a_url_is_named(api, staff, url, field):
    client = api(staff)
    method = client.delete if "members" in url else client.get

    reason = error_of(method(url), field)

    assert "control character U+000" in reason


def test_a_person_gets_a_page_naming_the_field(client, member):
    client.force_login(member)

    response = client.get("/queues/a%00b/")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "Bad request" in page and "path" in page and NUL_REASON in page


@pytest.mark.parametrize(
    ("url", "form", "field"),
    [
        ("/jobs/new/", {"queue": "root/algorithm/video", "name": "a" + NUL}, "name"),
        ("/jobs/new/preview/", {"image": NUL}, "image"),
        ("/accounts/login/", {"username": "alice" + NUL, "password": "x"}, "username"),
        ("/admin/login/", {"username": NUL, "password": "x"}, "username"),
    ],
)
def test_a_nul_in_a_form_field_is_a_400_page(client, member, url, form, field):
    if not url.startswith(("/accounts/", "/admin/")):
        client.force_login(member)

    response = client.post(url, form)

    assert response.status_code == 400
    assert field in response.content.decode() and NUL_REASON in response.content.decode()
    assert not Job.objects.exists()


def test_a_nul_in_the_admins_search_is_a_400_page(admin_client, tree):
    response = admin_client.get(reverse("admin:jobs_job_changelist") + "?q=%00")

    assert response.status_code == 400


def test_line_breaks_in_a_form_textarea_are_fine(client, member):
    client.force_login(member)
    form = {
        "queue": "root/algorithm/video",
        "kind": "ray",
        "name": "with-script",
        "image": "rayproject/ray:2.36.1",
        "script": "import ray\r\n\tray.init()\r\n",
        "head_cpu": "1",
        "env": "A=1\r\nB=2",
    }

    response = client.post("/jobs/new/", form)

    assert response.status_code == 302, response.content.decode()
    assert Job.objects.get().env == {"A": "1", "B": "2"}


def test_a_nul_in_a_cookie_or_a_token_is_not_a_500(client, member):
    response = client.get("/", headers={"Cookie": 'sessionid="\\000\\000\\000\\000\\000\\000"'})
    assert response.status_code == 400

    response = client.get(JOBS, headers={"Authorization": "Token a\u0000b"})
    assert response.status_code == 401


def test_a_huge_offset_is_refused_by_the_queue_api_naming_it(api, member):
    url = "/api/v1/queues/root-algorithm-video/?offset=99999999999999999999"

    reason = error_of(api(member).get(url), "offset")

    assert reason == f"must be at most {OFFSET_MAX}, got '99999999999999999999'"
    assert api(member).get(url.replace("99999999999999999999", str(OFFSET_MAX))).status_code == 200


def test_a_huge_offset_is_refused_by_the_queue_page(client, member):
    client.force_login(member)

    response = client.get("/queues/root-algorithm-video/?offset=99999999999999999999")

    assert response.status_code == 400
    assert f"Offset: must be at most {OFFSET_MAX}" in response.content.decode()


@pytest.mark.parametrize("offset", ["99999999999999999999", str(OFFSET_MAX + 1)])
def test_a_huge_offset_is_refused_by_the_jobs_list(api, member, offset):
    assert "must be at most" in error_of(api(member).get(f"{JOBS}?offset={offset}"), "offset")


@pytest.mark.parametrize(("query", "field"), [("limit=many", "limit"), ("offset=1.5", "offset")])
def test_a_limit_or_offset_that_is_no_integer_is_named(api, member, query, field):
    assert "must be an integer" in error_of(api(member).get(f"{JOBS}?{query}"), field)


@pytest.mark.parametrize("limit", ["99999999999999999999", str(PAGE_MAX + 1)])
def test_it_refuses_a_limit_past_a_page_naming_it(api, member, limit):
    reason = error_of(api(member).get(f"{JOBS}?limit={limit}"), "limit")

    assert reason == f"must be at most {PAGE_MAX}, got {limit!r}"
    assert api(member).get(f"{JOBS}?limit={PAGE_MAX}").status_code == 200


@pytest.fixture
def job_id(api, member) -> int:
    return api(member).post(JOBS, ray_job(), format="json").json()["id"]


QUEUE = "root-algorithm-video"
# Every list of the API and of the pages, with values of its parameters that are refused:
# negative, empty, repeated, not a number, not an allowed value, past a bound.
BAD_PARAMETERS = [
    (JOBS, "limit=-3", "limit"),
    (JOBS, "offset=-1", "offset"),
    (JOBS, "mine=banana", "mine"),
    (JOBS, "limit=5&limit=6", "limit"),
    (JOBS, "limit=", "limit"),
    (JOBS, "q=", "q"),
    (JOBS, "kind=tensorflow", "kind"),
    (JOBS, "state=queued,,backoff", "state"),
    (JOBS, "state=", "state"),
    (JOBS, "priority_min=1.5", "priority_min"),
    (JOBS, "submitted_after=", "submitted_after"),
    (JOBS, "sort=-", "sort"),
    (JOBS, "after=", "after"),
    ("/api/v1/jobs/{id}/events/", "limit=-1", "limit"),
    ("/api/v1/jobs/{id}/events/", "limit=&offset=", "limit"),
    ("/api/v1/jobs/{id}/events/", "limit=&offset=", "offset"),
    ("/api/v1/jobs/{id}/events/", "offset=x", "offset"),
    ("/api/v1/jobs/{id}/events/", f"limit={PAGE_MAX + 1}", "limit"),
    ("/api/v1/jobs/{id}/log/", "tail_lines=", "tail_lines"),
    ("/api/v1/jobs/{id}/log/", "tail_lines=0", "tail_lines"),
    ("/api/v1/jobs/{id}/log/", "tail_lines=1&tail_lines=2", "tail_lines"),
    (f"/api/v1/queues/{QUEUE}/", "offset=-5", "offset"),
    (f"/api/v1/queues/{QUEUE}/", "offset=", "offset"),
    (f"/api/v1/queues/{QUEUE}/", "limit=0", "limit"),
    ("/api/v1/quota-tree/history/", "range=", "range"),
    ("/api/v1/quota-tree/history/", "range=year", "range"),
    ("/api/v1/quota-tree/history/", "range=day&range=week", "range"),
    ("/api/v1/quota-tree/history/", "node=", "node"),
    ("/api/v1/quota-tree/history/", "node=cluster", "node"),
    ("/jobs/", "limit=-3", "limit"),
    ("/jobs/", "mine=banana", "mine"),
    ("/jobs/", "limit=5&limit=6", "limit"),
    ("/jobs/", "limit=", "limit"),
    ("/jobs/", "state=sleeping", "state"),
    ("/jobs/{id}/", "events=0", "events"),
    ("/jobs/{id}/", "events=", "events"),
    ("/jobs/{id}/", "events=last", "events"),
    ("/jobs/{id}/log/", "lines=maybe", "lines"),
    ("/jobs/new/", "copy=abc", "copy"),
    (f"/queues/{QUEUE}/", "offset=-5", "offset"),
    (f"/queues/{QUEUE}/", "offset=", "offset"),
    (f"/queues/{QUEUE}/", "range=year", "range"),
    ("/quota/", "range=", "range"),
    ("/quota/", "node=", "node"),
    ("/quota/history.csv", "range=", "range"),
]


@pytest.mark.parametrize(("path", "query", "name"), BAD_PARAMETERS)
def test_it_refuses_a_bad_list_parameter_naming_it(api, client, member, job_id, path, query, name):
    url = f"{path.format(id=job_id)}?{query}"
    if path.startswith("/api/"):
        response = api(member).get(url)
        assert response.status_code == 400, response.content
        assert name in response.json(), response.json()
    else:
        client.force_login(member)
        response = client.get(url)
        assert response.status_code == 400, response.content
        page = response.content.decode()  # "<code>limit</code>: ...", "Limit: ..."
        assert re.search(rf"\b{name}(</code>)?: ", page, re.IGNORECASE), page


def test_it_refuses_a_user_name_that_is_no_json_string(api, staff, departments):
    url = "/api/v1/departments/algorithm/members/"

    for username in (0, 12.5, True, ["alice"], None):
        response = api(staff).post(url, {"username": username}, format="json")

        assert response.status_code == 400, response.content
        assert list(response.json()) == ["username"]
    assert not User.objects.filter(username__in=["0", "12.5", "True"]).exists()
    assert api(staff).post(url, {"username": "0"}, format="json").status_code == 201


def test_it_refuses_a_field_a_body_does_not_take(api, staff, departments):
    response = api(staff).post(
        "/api/v1/departments/algorithm/members/",
        {"username": "zed", "rol": "manager"},
        format="json",
    )

    assert error_of(response, "rol") == "unknown field"
    assert not User.objects.filter(username="zed").exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (with_worker(name=["a", "list"]), "workers[0].name"),
        (with_worker(name={"an": "object"}), "workers[0].name"),
        (with_worker(replicas={"n": 1}), "workers[0].replicas"),
        (with_worker(resources=["cpu", "4"]), "workers[0].resources"),
        (with_head_cpu({"cores": 4}), "head.resources.cpu"),
        (with_head_cpu(True), "head.resources.cpu"),
        (with_head_cpu(10**30), "head.resources.cpu"),
        (with_head_cpu("1e999999999"), "head.resources.cpu"),
        (with_head_cpu("9" * 5000), "head.resources.cpu"),
        (
            ray_job(
                head={"resources": {"cpu": "1", "memory": "8E"}},
                workers=[{"replicas": 2, "resources": {"cpu": "1", "memory": "8E"}}],
            ),
            "request",
        ),
        (ray_job(priority="9" * 5000), "priority"),
        (ray_job(priority=[1]), "priority"),
        (ray_job(run_seconds=10**400), "run_seconds"),
        (ray_job(run_seconds={"s": 1}), "run_seconds"),
        (ray_job(env={"A": ["x"]}), "env.A"),
        (ray_job(env=["A=1"]), "env"),
        (ray_job(pip=[{"torch": "2"}]), "pip[0]"),
        (ray_job(name=["x"]), "name"),
        (ray_job(head=[1]), "head"),
        (ray_job(workers={"a": 1}), "workers"),
    ],
)
def test_a_value_of_the_wrong_type_or_size_is_named(api, member, body, field):
    response = api(member).post(JOBS, body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert not Job.objects.exists()


def test_two_worker_groups_named_by_objects_are_each_named(api, member):
    job = ray_job()
    job["workers"] = [
        {"name": {"a": 1}, "replicas": 1, "resources": {"cpu": "1"}},
        {"name": {"a": 1}, "replicas": 1, "resources": {"cpu": "1"}},
    ]

    response = api(member).post(JOBS, job, format="json")

    assert response.status_code == 400
    assert {"workers[0].name", "workers[1].name"} <= set(response.json())


def test_a_priority_of_many_digits_in_the_form_is_named(client, member):
    client.force_login(member)
    form = {
        "queue": "root/algorithm/video",
        "kind": "ray",
        "name": "digits",
        "image": "rayproject/ray:2.36.1",
        "entrypoint": "python main.py",
        "head_cpu": "1",
        "priority": "9" * 5000,
    }

    response = client.post("/jobs/new/", form)

    assert response.status_code == 400
    assert "must be between -1000 and 1000" in response.content.decode()
    assert not Job.objects.exists()


def test_a_tree_node_named_by_a_list_is_named(api, staff):
    document = seed_tree_document()
    children = document["spec"]["root"]["children"]
    children[0]["name"] = ["a"]
    children[1]["name"] = ["a"]

    response = api(staff).put("/api/v1/quota-tree/", document, format="json")

    assert response.status_code == 400
    assert {"spec.root.children[0].name", "spec.root.children[1].name"} <= set(response.json())


@pytest.mark.parametrize("role", [["manager"], {"r": 1}, 5])
def test_a_member_role_of_the_wrong_type_is_named(api, staff, departments, role):
    response = api(staff).post(
        "/api/v1/departments/algorithm/members/", {"username": "zed", "role": role}, format="json"
    )

    assert response.status_code == 400 and "role" in response.json()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"script": "line one\n\tline two\r\n"}, None),
        ({"name": "emoji 😀 and a literal \\u0000"}, None),
        ({"name": "delete \x7f is printable enough to store"}, None),
        ({"jobs": [{"name": "a"}, {"env": {"X": "b\x0b"}}]}, "jobs[1].env.X"),
        ({"jobs": [{"name": "half \ud800"}]}, "jobs[0].name"),
        ({"head": {"resources\n": 1}}, "head"),
    ],
)
def test_a_body_is_read_quickly_and_walked_only_to_name_a_problem(body, problem):
    """Most bodies are clean and pass without a walk string by string; a problem is
    still named by its field, wherever it is."""
    found = json_problem(body)
    assert (found and found[0]) == problem
