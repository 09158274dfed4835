"""Access tokens through the API: made with a scope, shown once, kept as a digest, obeyed
everywhere a request's departments and rights are read, revoked, expired, audited."""

from __future__ import annotations

import copy
import hashlib
import io
from datetime import timedelta
from importlib import import_module

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from access.models import AccessToken
from access.services import full_token, tokens_expire
from access.tasks import expire
from audit.models import AuditEntry
from jobs.models import Job
from queues.api_base import WithinScope
from queues.departments import membership_set

from ..support.jobs import INTERN_JOB, RAY_JOB

pytestmark = pytest.mark.django_db
TOKENS = "/api/v1/tokens/"
EXCHANGE = "api/v1/auth/exchange/"  # the one API view without a credential
legacy = import_module("access.migrations.0002_legacy_tokens")


def session_for(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def bearer(key: str, address: str = "10.0.0.1") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def make(user, **body) -> dict:
    """A token of ``user``'s made on their behalf (through a session, as their page does)."""
    response = session_for(user).post(TOKENS, {"name": "ci", **body}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_new_token_is_shown_once_and_kept_only_as_its_digest(member):
    made = make(member, right="submit")

    key = made["token"]
    assert key.startswith("cal_pat_") and len(key) == 46
    assert made["prefix"] == key[:14] and made["right"] == "submit"
    assert made["departments"] is None and made["state"] == "active"
    stored = AccessToken.objects.get(pk=made["id"])
    assert stored.digest == hashlib.sha256(key.encode()).hexdigest()
    with connection.cursor() as cursor:  # the whole row, as text, holds no secret
        cursor.execute(f"SELECT t::text FROM {AccessToken._meta.db_table} t")
        assert key not in cursor.fetchone()[0]
    listed = session_for(member).get(TOKENS).json()
    assert [t["prefix"] for t in listed] == [made["prefix"]] and "token" not in listed[0]
    assert listed[0]["user"] == "alice"  # what `caldera whoami` reads


def test_a_token_expires_after_the_default_days_unless_asked(member, settings):
    settings.ACCESS_TOKEN_DEFAULT_DAYS = 90
    made = AccessToken.objects.get(pk=make(member, right="read")["id"])
    assert made.expires_at - made.created_at == pytest.approx(
        timedelta(days=90), abs=timedelta(minutes=1)
    )

    settings.ACCESS_TOKEN_MAX_DAYS = 30
    response = session_for(member).post(
        TOKENS, {"name": "long", "right": "read", "expires_in_days": 31}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {"expires_in_days": ["from 1 to 30 days"]}


def test_never_is_offered_only_where_settings_allow_it(member, settings):
    settings.ACCESS_TOKEN_ALLOW_NEVER = False
    body = {"name": "forever", "right": "read", "expires_in_days": None}
    refused = session_for(member).post(TOKENS, body, format="json")
    assert refused.status_code == 400 and "expires_in_days" in refused.json()

    settings.ACCESS_TOKEN_ALLOW_NEVER = True
    made = session_for(member).post(TOKENS, body, format="json")
    assert made.status_code == 201 and made.json()["expires_at"] is None


def test_a_read_token_reads_and_is_refused_a_submission_naming_the_scope(member):
    key = make(member, right="read")["token"]

    assert bearer(key).get("/api/v1/jobs/").status_code == 200
    response = bearer(key).post("/api/v1/jobs/", RAY_JOB, format="json")

    assert response.status_code == 403
    assert response.json() == {"detail": "this token's scope is read; this needs submit"}
    assert not Job.objects.exists()


def test_a_submit_token_submits_and_the_job_is_traced_to_it(member):
    made = make(member, right="submit")

    response = bearer(made["token"]).post("/api/v1/jobs/", RAY_JOB, format="json")

    assert response.status_code == 201
    assert Job.objects.get(pk=response.json()["id"]).token_id == made["id"]


def test_a_managers_submit_token_cannot_jump_the_queue(api, manager, member):
    key = make(manager, right="submit")["token"]
    job = api(member).post("/api/v1/jobs/", RAY_JOB, format="json").json()

    raised = bearer(key).patch(f"/api/v1/jobs/{job['id']}/", {"priority": 5}, format="json")
    moved = bearer(key).post(f"/api/v1/jobs/{job['id']}/move-to-head/")
    high = bearer(key).post("/api/v1/jobs/", {**RAY_JOB, "priority": 3}, format="json")

    assert raised.status_code == 403
    assert raised.json() == {"detail": "this token's scope is submit; this needs manage"}
    assert moved.status_code == 403
    assert moved.json() == {"detail": "this token's scope is submit; this needs manage"}
    assert high.status_code == 400
    assert "this token's scope is submit; this needs manage" in high.json()["priority"][0]
    manage = make(manager, right="manage")["token"]
    again = bearer(manage).patch(f"/api/v1/jobs/{job['id']}/", {"priority": 5}, format="json")
    assert again.status_code == 200 and again.json()["priority"] == 5


def test_a_token_of_one_department_sees_and_submits_only_there(api, member, departments):
    membership_set(department=departments["interns"], username=member.username, role="member")
    api(member).post("/api/v1/jobs/", RAY_JOB, format="json")
    api(member).post("/api/v1/jobs/", INTERN_JOB, format="json")
    key = make(member, right="submit", departments=["interns"])["token"]

    listed = bearer(key).get("/api/v1/jobs/").json()["results"]
    departments_seen = bearer(key).get("/api/v1/departments/").json()
    queues_seen = bearer(key).get("/api/v1/queues/").json()
    outside = bearer(key).post("/api/v1/jobs/", RAY_JOB, format="json")

    assert [job["queue"] for job in listed] == ["root-interns-intern-video"]
    assert [d["name"] for d in departments_seen] == ["interns"]
    assert queues_seen and all(q["name"].startswith("root-interns-") for q in queues_seen)
    assert outside.status_code == 403
    assert outside.json() == {
        "detail": "this token's scope does not include the department algorithm"
    }
    inside = bearer(key).post("/api/v1/jobs/", INTERN_JOB, format="json")
    assert inside.status_code == 201


def test_a_token_names_only_the_persons_departments(member):
    response = session_for(member).post(
        TOKENS, {"name": "x", "right": "read", "departments": ["infrastructure"]}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {"departments": ["infrastructure: not a department of alice"]}


def test_staff_rights_need_a_token_that_names_admin(staff, member):
    tree = "/api/v1/quota-tree/"
    manage = make(staff, right="manage")["token"]
    admin = make(staff, right="admin")["token"]
    document = session_for(staff).get(tree).json()

    refused = bearer(manage).put(tree, document, format="json")
    everyone = bearer(manage).get("/api/v1/departments/").json()

    assert refused.status_code == 403
    assert refused.json() == {"detail": "this token's scope is manage; this needs admin"}
    assert everyone == []  # a staff member's manage token: only their own departments
    assert bearer(admin).put(tree, document, format="json").status_code == 200
    assert len(bearer(admin).get("/api/v1/departments/").json()) == 3
    not_staff = session_for(member).post(TOKENS, {"name": "x", "right": "admin"}, format="json")
    assert not_staff.json() == {"right": ["admin is for staff only"]}


def test_a_token_makes_tokens_only_with_manage_and_never_more_than_itself(member, departments):
    membership_set(department=departments["interns"], username=member.username, role="member")
    submit = make(member, right="submit")["token"]
    manage = make(member, right="manage", departments=["interns"])["token"]

    by_submit = bearer(submit).post(TOKENS, {"name": "y", "right": "read"}, format="json")
    wider = bearer(manage).post(TOKENS, {"name": "y", "right": "read"}, format="json")
    narrower = bearer(manage).post(
        TOKENS, {"name": "y", "right": "read", "departments": ["interns"]}, format="json"
    )

    assert by_submit.status_code == 403
    assert by_submit.json() == {"detail": "this token's scope is submit; this needs manage"}
    assert wider.status_code == 400 and "departments" in wider.json()
    assert narrower.status_code == 201


def test_a_revoked_token_is_refused_saying_so_and_the_others_keep_working(member):
    first, second = make(member, right="read"), make(member, right="read")

    assert session_for(member).delete(f"{TOKENS}{first['id']}/").status_code == 204
    refused = bearer(first["token"]).get("/api/v1/jobs/")

    assert refused.status_code == 401
    assert refused.json()["detail"].startswith("the token was revoked on ")
    assert bearer(second["token"]).get("/api/v1/jobs/").status_code == 200


def test_an_expired_token_is_refused_saying_so(member):
    made = make(member, right="read")
    AccessToken.objects.filter(pk=made["id"]).update(expires_at=timezone.now() - timedelta(1))

    refused = bearer(made["token"]).get("/api/v1/jobs/")

    assert refused.status_code == 401
    assert refused.json()["detail"].startswith("the token expired on ")


def test_a_malformed_token_is_refused_before_any_lookup(member):
    key = make(member, right="read")["token"]
    typo = key[:-1] + ("A" if key[-1] != "A" else "B")

    refused = bearer(typo).get("/api/v1/jobs/")

    assert refused.status_code == 401
    assert refused.json() == {"detail": "the token is malformed (its checksum does not match)"}


def test_a_token_revokes_itself_with_any_right_but_others_only_with_manage(member):
    read, other = make(member, right="read"), make(member, right="read")

    others = bearer(read["token"]).delete(f"{TOKENS}{other['id']}/")
    itself = bearer(read["token"]).delete(f"{TOKENS}{read['id']}/")

    assert others.status_code == 403
    assert itself.status_code == 204
    assert AccessToken.objects.get(pk=read["id"]).revoked_at is not None
    assert AccessToken.objects.get(pk=other["id"]).revoked_at is None


def test_nobody_sees_or_revokes_anothers_token(member, other_member):
    theirs = make(other_member, right="read")

    response = session_for(member).delete(f"{TOKENS}{theirs['id']}/")

    assert response.status_code == 404
    assert AccessToken.objects.get(pk=theirs["id"]).revoked_at is None


def test_revoke_all_ends_every_token_of_the_person_only(member, other_member):
    mine = [make(member, right="read")["token"] for _ in range(2)]
    theirs = make(other_member, right="read")["token"]

    response = session_for(member).post(f"{TOKENS}revoke-all/")

    assert response.json() == {"revoked": 2}
    assert all(bearer(key).get("/api/v1/jobs/").status_code == 401 for key in mine)
    assert bearer(theirs).get("/api/v1/jobs/").status_code == 200


def test_creation_first_use_from_an_address_revocation_and_expiry_are_audited(member):
    made = make(member, right="read")
    key, entry_key = made["token"], f"alice/{made['prefix']}"
    bearer(key, "10.0.0.1").get("/api/v1/jobs/")
    bearer(key, "10.0.0.1").get("/api/v1/jobs/")
    bearer(key, "10.0.0.2").get("/api/v1/jobs/")
    session_for(member).delete(f"{TOKENS}{made['id']}/")
    expiring = make(member, right="read")
    AccessToken.objects.filter(pk=expiring["id"]).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )

    assert tokens_expire() == 1
    assert tokens_expire() == 0  # recorded once
    entries = AuditEntry.objects.filter(object_type="access token", object_key=entry_key)
    assert [(e.action, e.after) for e in entries.order_by("id")] == [
        ("created", entries.order_by("id")[0].after),
        ("used", {"address": "10.0.0.1"}),
        ("used", {"address": "10.0.0.2"}),
        ("revoked", None),
    ]
    assert AuditEntry.objects.filter(
        object_key=f"alice/{expiring['prefix']}", action="expired"
    ).exists()


def test_last_use_is_written_at_most_once_a_minute(member):
    made = make(member, right="read")
    token = AccessToken.objects.filter(pk=made["id"])
    bearer(made["token"]).get("/api/v1/jobs/")
    first = token.get().last_used_at
    bearer(made["token"]).get("/api/v1/jobs/")
    assert token.get().last_used_at == first
    token.update(last_used_at=first - timedelta(minutes=2))

    bearer(made["token"]).get("/api/v1/jobs/")

    assert token.get().last_used_at > first
    assert token.get().last_used_from == "10.0.0.1"


def test_full_tokens_of_scripts_carry_the_persons_rights(staff, member):
    assert len(bearer(full_token(staff, name="ops")).get("/api/v1/departments/").json()) == 3
    job = bearer(full_token(member, name="ci")).post("/api/v1/jobs/", RAY_JOB, format="json")
    assert job.status_code == 201


def _api_views(resolver=None, prefix=""):
    resolver = resolver or get_resolver()
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            yield from _api_views(pattern, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern) and (prefix + str(pattern.pattern)).startswith(
            "api/v1/"
        ):
            yield prefix + str(pattern.pattern), pattern.callback


def test_every_api_view_checks_the_tokens_scope():
    methods = ("GET", "POST", "PUT", "PATCH", "DELETE")
    found = [(route, view) for route, view in _api_views() if route != EXCHANGE]
    assert len(found) > 15
    for route, callback in found:
        view_class = callback.view_class
        for method in methods:
            if not hasattr(view_class, method.lower()):
                continue
            view = view_class()
            view.request = type("Request", (), {"method": method})()
            permissions = view.get_permissions()
            assert any(isinstance(p, WithinScope) for p in permissions), (route, method)


def test_a_legacy_token_keeps_working_hashed_with_full_rights(member):
    key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamptz,"
            " user_id integer)"
        )
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, now(), %s)", [key, member.pk])
    with connection.schema_editor() as editor:
        legacy.move_legacy_tokens(apps, editor)

    assert "authtoken_token" not in connection.introspection.table_names()
    token = AccessToken.objects.get(user=member)
    assert (token.kind, token.name, token.right, token.all_departments) == (
        "legacy", "legacy", "manage", True
    )  # fmt: skip
    assert token.expires_at is not None
    response = bearer(key).post("/api/v1/jobs/", copy.deepcopy(RAY_JOB), format="json")
    assert response.status_code == 201


def test_the_command_makes_a_token_from_a_shell_and_prints_it_once(member):
    out = io.StringIO()

    call_command(
        "token_create", "alice", "--name", "ops", "--right", "read",
        "--department", "algorithm", stdout=out,
    )  # fmt: skip

    key = out.getvalue().strip()
    assert bearer(key).get("/api/v1/jobs/").status_code == 200
    token = AccessToken.objects.get(user=member)
    assert (token.name, token.right, [d.name for d in token.departments.all()]) == (
        "ops", "read", ["algorithm"]
    )  # fmt: skip
    with pytest.raises(CommandError, match="departments: interns: not a department of alice"):
        call_command("token_create", "alice", "--name", "x", "--department", "interns")


def test_beat_records_expiries(member, settings):
    made = make(member, right="read")
    AccessToken.objects.filter(pk=made["id"]).update(expires_at=timezone.now() - timedelta(1))

    assert settings.CELERY_BEAT_SCHEDULE["tokens-expire"]["task"] == expire.name
    assert expire() == 1
