"""Settings read from the environment: a bad value stops the process with its name."""

import os
import subprocess
import sys

import pytest

from ..support.paths import REPO

PRINT_RUNTIMES = "from django.conf import settings; print(settings.CLUSTER_RUNTIMES)"


def load_settings(**overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", **overrides}
    return subprocess.run(
        [sys.executable, "-c", PRINT_RUNTIMES],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_cluster_runtimes_are_read_from_the_environment():
    done = load_settings(CLUSTER_RUNTIMES=" volcano , kubeflow ")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['volcano', 'kubeflow']"


@pytest.mark.parametrize("value", ["kuberay,kubernetes", " , "])
def test_an_unknown_runtime_stops_the_process_and_names_the_setting(value):
    done = load_settings(CLUSTER_RUNTIMES=value)

    assert done.returncode != 0
    assert "CLUSTER_RUNTIMES lists kuberay, kubeflow and/or volcano" in done.stderr


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"CLUSTER_BACKEND": "k8s"}, "CLUSTER_BACKEND is simulated or kubernetes, got 'k8s'"),
        ({"CLUSTER_GATE": "queue"}, "CLUSTER_GATE is create or suspend, got 'queue'"),
        (
            {"CLUSTER_BACKEND": "kubernetes", "CLUSTER_PUBLISH_QUOTA": "volcano,kueue"},
            "CLUSTER_PUBLISH_QUOTA lists elasticquotatree and/or volcano",
        ),
        (
            {"CLUSTER_PUBLISH_QUOTA": "volcano"},
            "CLUSTER_PUBLISH_QUOTA needs CLUSTER_BACKEND=kubernetes",
        ),
        ({"START_TIMEOUT_ATTEMPTS": "0"}, "START_TIMEOUT_ATTEMPTS must be at least 1, got 0"),
        ({"START_TIMEOUT_ATTEMPTS": "five"}, "START_TIMEOUT_ATTEMPTS must be an integer"),
        (
            {"JOB_LOG_LIMIT_BYTES": "0"},
            "JOB_LOG_TAIL_LINES, JOB_LOG_LIMIT_BYTES and JOB_LOG_TIMEOUT_SECONDS must be above 0",
        ),
        ({"JOB_LOG_TIMEOUT_SECONDS": "soon"}, "JOB_LOG_TIMEOUT_SECONDS must be a number"),
        (
            {"RAY_DASHBOARD_URL": "ray.example.com/{service}"},
            "RAY_DASHBOARD_URL must begin with https:// or http://",
        ),
        (
            {"RAY_DASHBOARD_URL": "https://ray.example.com/{cluster}/"},
            "RAY_DASHBOARD_URL may hold the placeholders {namespace}, {service}, {name} and {id}",
        ),
        (
            {"RAY_DASHBOARD_URL": "https://ray.example.com/{service"},
            "RAY_DASHBOARD_URL may hold the placeholders",
        ),
        (
            {"USAGE_HISTORY_SECONDS": "0"},
            "USAGE_HISTORY_SECONDS and USAGE_HISTORY_DAYS must be at least 1, got 0 and 14",
        ),
        ({"USAGE_HISTORY_DAYS": "a week"}, "USAGE_HISTORY_DAYS must be an integer"),
        ({"IDEMPOTENCY_KEY_HOURS": "0"}, "IDEMPOTENCY_KEY_HOURS must be at least 1, got 0"),
        (
            {"WEBHOOK_ALLOWED_NETWORKS": "10.20.0.0/16,intranet"},
            "WEBHOOK_ALLOWED_NETWORKS: 'intranet' is not a network (10.0.0.0/8)",
        ),
        (
            {"WEBHOOK_MAX_ATTEMPTS": "0"},
            "WEBHOOK_MAX_ATTEMPTS and WEBHOOK_PAUSE_AFTER_FAILURES must be at least 1",
        ),
        (
            {"ESTIMATE_DEPTH": "0"},
            "ESTIMATE_SECONDS must be above 0, ESTIMATE_DEPTH at least 1 and ESTIMATE_SHARE "
            "above 0 and at most 1, got 10, 0 and 0.1",
        ),
        (
            {"ESTIMATE_SHARE": "1.5"},
            "ESTIMATE_SECONDS must be above 0, ESTIMATE_DEPTH at least 1 and ESTIMATE_SHARE "
            "above 0 and at most 1, got 10, 200 and 1.5",
        ),
    ],
)
def test_a_bad_cluster_setting_stops_the_process_and_names_it(overrides, message):
    done = load_settings(**overrides)

    assert done.returncode != 0
    assert message in done.stderr


def test_publishing_the_quota_tree_adds_its_beat_entry():
    script = "from django.conf import settings; print(sorted(settings.CELERY_BEAT_SCHEDULE))"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "CLUSTER_BACKEND": "kubernetes",
        "CLUSTER_PUBLISH_QUOTA": "elasticquotatree, volcano",
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "['accounting', 'admit', 'estimates', 'fair-share', 'jobs-archive', 'publish-quota', "
        "'submission-keys-prune', 'sync', 'tokens-expire', 'usage-audit', 'usage-history', "
        "'webhooks', 'webhooks-prune']"
    )


PRINT_BINDING = (
    "from django.conf import settings;"
    " print(settings.DATABASES['default']['OPTIONS']['server_side_binding'])"
)


@pytest.mark.parametrize(("value", "expected"), [(None, "True"), ("0", "False"), ("1", "True")])
def test_server_side_binding_is_on_unless_a_pooler_asks_it_off(value, expected):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings"}
    env.pop("DATABASE_SERVER_SIDE_BINDING", None)
    if value is not None:
        env["DATABASE_SERVER_SIDE_BINDING"] = value
    done = subprocess.run(
        [sys.executable, "-c", PRINT_BINDING],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == expected


def test_a_bad_binding_setting_stops_the_process_and_names_it():
    done = load_settings(DATABASE_SERVER_SIDE_BINDING="sometimes")
    assert done.returncode != 0
    assert "DATABASE_SERVER_SIDE_BINDING must be a boolean" in done.stderr


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"API_SUBMIT_RATE_PER_TOKEN": "3000"},
            "API_SUBMIT_RATE_PER_TOKEN must be a count of at least 1 per s, min, hour or day "
            "(3000/min), or off; got '3000'",
        ),
        ({"API_READ_RATE_PER_PERSON": "0/min"}, "API_READ_RATE_PER_PERSON must be a count"),
        ({"API_READ_RATE_PER_TOKEN": "10/week"}, "API_READ_RATE_PER_TOKEN must be a count"),
        (
            {"API_THROTTLE_TIMEOUT_SECONDS": "2"},
            "API_THROTTLE_TIMEOUT_SECONDS must be above 0 and at most 1, and "
            "API_THROTTLE_REST_SECONDS at least 0, got 2 and 5",
        ),
    ],
)
def test_a_bad_api_limit_stops_the_process_and_names_it(overrides, message):
    done = load_settings(**overrides)

    assert done.returncode != 0
    assert message in done.stderr


PRINT_LIMITS = (
    "from django.conf import settings;"
    " print(settings.API_SUBMIT_RATE_PER_TOKEN, settings.API_READ_RATE_PER_PERSON)"
)


def test_an_api_limit_is_a_rate_or_off():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "API_SUBMIT_RATE_PER_TOKEN": " 50/hour ",
        "API_READ_RATE_PER_PERSON": "OFF",
    }
    done = subprocess.run(
        [sys.executable, "-c", PRINT_LIMITS],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip

    assert done.stdout.split() == ["50/hour", "OFF"]
