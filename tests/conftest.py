"""Shared fixtures: the seed's quota tree, four personas, API clients, a real Celery worker.

Personas (as in docs/architecture.md section 1): ``staff`` (admin), ``manager`` and
``member`` of the algorithm department (which owns root/algorithm and so the video and text
queues), and ``outsider``, a member of infrastructure who must never see algorithm's jobs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import requests
import yaml
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

ROOT = Path(__file__).resolve().parents[1]
SEED_TREE = ROOT / "queues" / "data" / "seed-tree.yaml"

RAY_JOB = {
    "queue": "root/algorithm/video",
    "kind": "ray",
    "runtime": "kuberay",
    "name": "rayjob-video",
    "image": "rayproject/ray:2.36.1",
    "entrypoint": "python /home/ray/samples/sample_code.py",
    "head": {"resources": {"cpu": "4", "memory": "4G"}},
    "workers": [{"name": "small-group", "replicas": 2, "resources": {"cpu": "4", "memory": "4G"}}],
    "priority": 0,
    "run_seconds": 600,
}

PYTORCH_JOB = {
    "queue": "root/algorithm/text",
    "kind": "pytorch",
    "runtime": "kubeflow",
    "name": "resnet-ddp",
    "image": "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
    "command": ["torchrun", "train.py"],
    "master": {"resources": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}},
    "workers": [
        {
            "name": "worker",
            "replicas": 2,
            "resources": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
        }
    ],
    "run_seconds": 120,
}


def seed_tree_document() -> dict:
    return yaml.safe_load(SEED_TREE.read_text())


def _clear_trigger_marks() -> None:
    from jobs.engine.triggers import redis_client

    client = redis_client()
    for key in client.scan_iter("caldera:*"):
        client.delete(key)


@pytest.fixture(autouse=True)
def _clean_triggers():
    """Trigger marks left in Redis by an earlier test must not hold back this one's."""
    _clear_trigger_marks()
    yield


@pytest.fixture(autouse=True)
def _fresh_backend():
    """The cluster backend is made once from the settings and kept: a test that changed
    them (a smaller simulated cluster) may have had it made again by a page it rendered.
    Set up first, this is torn down last, once the settings are back."""
    from jobs.cluster import get_backend

    yield
    get_backend.cache_clear()


@pytest.fixture
def tree(db):
    from queues.services import tree_apply

    return {node.path: node for node in tree_apply(document=seed_tree_document())}


@pytest.fixture
def departments(tree):
    from queues.departments import department_create

    return {
        name: department_create(name=name, quota_node=tree[path])
        for name, path in [
            ("algorithm", "root/algorithm"),
            ("infrastructure", "root/infrastructure"),
            ("interns", "root/interns"),
        ]
    }


def _user(username: str, **extra):
    return get_user_model().objects.create_user(
        username=username, password="pw-" + username, **extra
    )


@pytest.fixture
def staff(db):
    return _user("root-admin", is_staff=True, is_superuser=True)


def _person(department, username: str, role: str):
    """A department's member or manager, created as the API does, with password ``pw-<name>``."""
    from queues.departments import membership_set

    membership_set(department=department, username=username, role=role)
    user = get_user_model().objects.get(username=username)
    user.set_password("pw-" + username)
    user.save(update_fields=["password"])
    return user


@pytest.fixture
def manager(departments):
    return _person(departments["algorithm"], "bob", "manager")


@pytest.fixture
def member(departments):
    return _person(departments["algorithm"], "alice", "member")


@pytest.fixture
def other_member(departments):
    return _person(departments["algorithm"], "carol", "member")


@pytest.fixture
def outsider(departments):
    return _person(departments["infrastructure"], "oscar", "member")


@pytest.fixture
def intern(departments):
    return _person(departments["interns"], "ian", "member")


def client_for(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def api():
    """``api(user)`` -> an APIClient authenticated with the user's token."""
    return client_for


@pytest.fixture
def celery_worker(transactional_db):
    """A real Celery worker (in a thread of this process) consuming from the real broker.

    Tests that use it commit their data (transactional_db), so the worker sees it.
    """
    from celery.contrib.testing.worker import start_worker

    from portal.celery import app

    app.control.purge()
    # Setting up the tree fired triggers whose tasks the purge just dropped: without this,
    # their "pending" marks would hold back new triggers until they expire.
    _clear_trigger_marks()
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10) as worker:
        yield worker


def pytest_configure(config):
    # Part of `make test` like every test; the marker lets a quick loop leave them out
    # (-m "not faults"): they start subprocesses and stop servers.
    config.addinivalue_line(
        "markers", "faults: kills workers and stops servers (tests/test_faults.py)"
    )


def wait_for(predicate, timeout: float = 20.0):
    """Poll until ``predicate()`` is true (a worker, a watch or a child process acts in
    its own time) and return its value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"not true within {timeout}s")


# ---- An OpenID provider of the tests' own (tests/identity_provider) ----------------

CLIENT_ID, CLIENT_SECRET = "caldera", "caldera-secret"
# As a Keycloak realm would send them (full group paths).
GROUP_MAP = {
    "/caldera/algorithm": "algorithm:member",
    "/caldera/algorithm-leads": "algorithm:manager",
    "/caldera/interns": ["interns:member"],
    "/caldera/admins": "admin",
}


@dataclass
class Provider:
    url: str
    issuer: str

    def control(self, **body) -> None:
        response = requests.post(f"{self.url}/control/", json=body, timeout=10)
        response.raise_for_status()

    def register(self, *portals: str) -> None:
        """Caldera, reached at ``portals``, as the provider's client."""
        self.control(
            client={
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": [f"{url}/oidc/callback/" for url in portals],
            }
        )

    def person(self, username: str, groups: list[str], **profile) -> None:
        """A person at the provider, with password ``idp-<username>``."""
        password = "idp-" + username
        self.control(user={"username": username, "password": password, "groups": groups, **profile})


def _server_url(database: str) -> str:
    db = django_settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgresql://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{database}"


@pytest.fixture(scope="module")
def identity_provider(django_db_setup):
    """The provider's process, on a fresh database of its own, for this module's tests."""
    # Beside this run's own test database, so runs side by side keep apart.
    database = f"{django_settings.DATABASES['default']['NAME']}_idp"
    with psycopg.connect(_server_url("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{database}"')
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.identity_provider"],
        cwd=ROOT,
        env={**os.environ, "IDP_DATABASE_URL": _server_url(database)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = None
        for line in process.stdout:
            if line.startswith("listening on "):
                port = int(line.split()[-1])
                break
        assert port, f"the identity provider did not start (exit {process.poll()})"
        url = f"http://127.0.0.1:{port}"
        provider = Provider(url=url, issuer=f"{url}/openid")
        provider.register("http://testserver")  # Django's test client
        yield provider
    finally:
        process.terminate()
        process.wait(timeout=10)
        with psycopg.connect(_server_url("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@pytest.fixture
def provider(identity_provider, settings, departments):
    """Caldera configured for the provider, as a deployment's environment would."""
    settings.OIDC_ISSUER = identity_provider.issuer
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_RP_SCOPES = "openid email profile groups"
    settings.OIDC_PROVIDER_NAME = "Company SSO"
    settings.OIDC_GROUP_MAP = GROUP_MAP
    identity_provider.control(faults={"audience": None, "unpublished_key": False})
    yield identity_provider
    identity_provider.control(faults={"audience": None, "unpublished_key": False})
