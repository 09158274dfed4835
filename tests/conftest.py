"""Shared fixtures: the seed's quota tree, four personas, API clients, a real Celery worker,
the Kubernetes API server emulator, the tests' own OpenID provider and a CI platform's
OIDC issuer. The helpers they
use, and that the test modules import, are in tests/support.

Personas (as in docs/architecture.md section 1): ``staff`` (admin), ``manager`` and
``member`` of the algorithm department (which owns root/algorithm and so the video and text
queues), and ``outsider``, a member of infrastructure who must never see algorithm's jobs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import psycopg
import pytest
from django.conf import settings as django_settings
from django.utils import timezone, translation

from portal.throttling import LIMITS

from .support.database import server_url
from .support.identity import CLIENT_ID, CLIENT_SECRET, GROUP_MAP, Provider
from .support.kube_emulator import emulator
from .support.oidc_issuer import Issuer, Issuers
from .support.paths import REPO
from .support.personas import client_for, person, user
from .support.polling import wait_for
from .support.pooler import pgbouncer, through
from .support.receiver import receiver
from .support.trees import seed_tree_document


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
def _api_limits_out_of_reach(settings):
    """The API's limits (portal/throttling.py) are counted in every test, far above what any
    test sends: only tests/api/test_throttling.py, which sets them low, is about them."""
    for limit in LIMITS:
        setattr(settings, limit.setting, "1000000/min")


@pytest.fixture(autouse=True)
def _default_language_and_zone():
    """A request read in Chinese or in another zone leaves them active in its thread (the
    test client runs in the test's): every test starts, and leaves, in the defaults."""
    translation.activate(django_settings.LANGUAGE_CODE)
    timezone.deactivate()
    yield
    translation.activate(django_settings.LANGUAGE_CODE)
    timezone.deactivate()


@pytest.fixture(autouse=True)
def _fresh_backend():
    """The cluster backend is made once from the settings and kept: a test that changed
    them (a smaller simulated cluster) may have had it made again by a page it rendered.
    Set up first, this is torn down last, once the settings are back."""
    from jobs.cluster import get_backend

    before = _watch_threads()
    yield
    if get_backend.cache_info().currsize:
        get_backend().close()
    get_backend.cache_clear()
    # A test's watches end with it: one left streaming from a stopped emulator logs its
    # failures into the next tests, and holds a thread and a connection. The test that
    # left it fails, not every test after it.
    left = wait_for(lambda: not _watch_threads() - before, timeout=10, what="the watches to end")
    assert left, f"the watches still run: {sorted(t.name for t in _watch_threads() - before)}"


def _watch_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("watch ")}


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


@pytest.fixture
def staff(db):
    return user("root-admin", is_staff=True, is_superuser=True)


@pytest.fixture
def manager(departments):
    return person(departments["algorithm"], "bob", "manager")


@pytest.fixture
def member(departments):
    return person(departments["algorithm"], "alice", "member")


@pytest.fixture
def other_member(departments):
    return person(departments["algorithm"], "carol", "member")


@pytest.fixture
def outsider(departments):
    return person(departments["infrastructure"], "oscar", "member")


@pytest.fixture
def intern(departments):
    return person(departments["interns"], "ian", "member")


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


@pytest.fixture
def kube():
    """The Kubernetes API server emulator (tests/support/kube_emulator.py), empty."""
    with emulator() as emu:
        yield emu


def pytest_addoption(parser):
    parser.addoption(
        "--through-pgbouncer",
        action="store_true",
        help="run the tests' database connections through a PgBouncer in transaction "
        "pooling mode (tests/support/pooler.py); `make test` runs the admission and sync "
        "tests so",
    )


@pytest.fixture(scope="session", autouse=True)
def _through_pgbouncer(request, django_db_setup):
    """With --through-pgbouncer, every connection after the test database's creation goes
    through a PgBouncer in transaction mode; the database is dropped directly again."""
    if not request.config.getoption("--through-pgbouncer"):
        yield
        return
    with pgbouncer() as port, through(port):
        yield


def pytest_configure(config):
    # Part of `make test` like every test; the marker lets a quick loop leave them out
    # (-m "not faults"): they start subprocesses and stop servers.
    config.addinivalue_line(
        "markers", "faults: kills workers and stops servers (tests/engine/test_faults.py)"
    )


# ---- An OpenID provider of the tests' own (tests/support/identity_provider) ------


@pytest.fixture(scope="module")
def identity_provider(django_db_setup):
    """The provider's process, on a fresh database of its own, for this module's tests."""
    # Beside this run's own test database, so runs side by side keep apart.
    database = f"{django_settings.DATABASES['default']['NAME']}_idp"
    with psycopg.connect(server_url("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{database}"')
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.identity_provider"],
        cwd=REPO,
        env={**os.environ, "IDP_DATABASE_URL": server_url(database)},
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
        with psycopg.connect(server_url("postgres"), autocommit=True) as admin:
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


# ---- A CI platform's OIDC issuer of the tests' own (tests/support/oidc_issuer.py) -------


@pytest.fixture(scope="session")
def oidc_issuers(tmp_path_factory):
    """The issuer process, started once for the run; each test makes its own issuer in it."""
    keys_dir = tmp_path_factory.mktemp("oidc-issuers")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.oidc_issuer", "--keys-dir", str(keys_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("listening on "), (
            f"the OIDC issuer did not start (exit {process.poll()})"
        )
        yield Issuers(url=f"http://127.0.0.1:{int(line.split()[-1])}", keys_dir=keys_dir)
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def oidc_issuer(oidc_issuers) -> Issuer:
    """A new issuer with one published RS256 key. Its URL is its own, so nothing Caldera
    cached of another test's issuer (keys, the time of a refetch) reaches this test."""
    return oidc_issuers.issuer()


# Webhooks: the settings that let a delivery reach the tests' receiver on 127.0.0.1 over
# http, with retries a few hundredths of a second apart, and the receiver.


@pytest.fixture
def receivable(settings):
    """Deliveries may reach 127.0.0.1 over http, and retry quickly."""
    settings.WEBHOOK_ALLOW_HTTP = True
    # localhost may resolve to ::1 as well as 127.0.0.1 (the receiver listens on the latter).
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32", "::1/128"]
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0.05
    settings.WEBHOOK_RETRY_MAX_SECONDS = 0.2
    return settings


@pytest.fixture
def listener():
    """A real HTTP receiver on 127.0.0.1, answering 200 until told otherwise."""
    with receiver() as found:
        yield found
