"""The accounting's answer over a year: how long GET /api/v1/accounting/ takes for a year
of history grouped by department, in monthly buckets, and finer: by leaf, by runtime and
day, and by person (half a year; last month; a year under one department).

A year of summary rows as beat would have written them (jobs/usage/accounting.py): DAYS
days x LEAVES leaves x PEOPLE people per leaf x RUNTIMES runtimes, every cell used every
day, each with four resources held and a wait histogram, and their month rows; the days
marked summarised, so the answer reads the summary alone, as it does once beat has run
(today aside, which is computed live from the ledger, empty here). Written with COPY,
then ANALYZE.

The answers are asked in this process through Django's test client (no HTTP server, no
network), signed in as staff, who see every row: the time is the view's, the summary's
statements' and the answer's rendering. Each is asked REQUESTS times after one warm-up;
the figures are the median and the slowest.

Imported by bench/__main__.py once Django is set up.
"""

from __future__ import annotations

import json
import statistics
import time
from datetime import UTC, date, datetime, timedelta

DAYS = 365
DEPARTMENTS = 6
LEAVES = 60  # 10 per department
PEOPLE = 30  # per leaf
RUNTIMES = ("kuberay", "kubeflow")
REQUESTS = 5
WAIT_BUCKETS = 21


def tree_document() -> dict:
    per = LEAVES // DEPARTMENTS
    children = [
        {
            "name": f"dept{d}",
            "min": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"},
            "max": {"cpu": "640", "memory": "2560Gi", "nvidia.com/gpu": "80"},
            "children": [
                {
                    "name": f"leaf{d}-{n}",
                    "min": {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "0"},
                    "max": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"},
                    "namespaces": [f"ns{d}-{n}"],
                }
                for n in range(per)
            ],
        }
        for d in range(DEPARTMENTS)
    ]
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {
            "root": {
                "name": "root",
                "min": {"cpu": "3840", "memory": "15360Gi", "nvidia.com/gpu": "480"},
                "max": {"cpu": "3840", "memory": "15360Gi", "nvidia.com/gpu": "480"},
                "children": children,
            }
        },
    }


def fill(first: date) -> int:
    """The summary rows of DAYS days from ``first``; returns how many."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from jobs.models import ACCOUNTING_DAYS, ACCOUNTING_LEAF_DAYS, ACCOUNTING_MONTHS, AccountingDone
    from jobs.tables.accounting import month_rollup, next_month
    from queues.departments import department_create
    from queues.models import QuotaNode
    from queues.services import tree_apply

    tree_apply(document=tree_document())
    for d in range(DEPARTMENTS):
        department_create(name=f"dept{d}", quota_node=QuotaNode.objects.get(path=f"root/dept{d}"))
    User = get_user_model()
    User.objects.bulk_create(User(username=f"p{i}") for i in range(LEAVES * PEOPLE))
    people = list(User.objects.order_by("pk").values_list("pk", flat=True))
    leaves = [
        f"root/dept{d}/leaf{d}-{n}"
        for d in range(DEPARTMENTS)
        for n in range(LEAVES // DEPARTMENTS)
    ]
    columns = (
        "day, path, runtime, held, succeeded, failed, cancelled, preemptions, admissions, "
        "wait_seconds, waits"
    )
    rows, leaf_rows = 0, []
    with connection.cursor() as cursor:
        copy_sql = f"COPY {ACCOUNTING_DAYS} ({columns}, owner_id) FROM STDIN"
        with cursor.cursor.copy(copy_sql) as copy:
            for offset in range(DAYS):
                day = (first + timedelta(days=offset)).isoformat()
                for index, path in enumerate(leaves):
                    for runtime in RUNTIMES:
                        leaf = {
                            "held": {},
                            "figures": [0, 0, 0, 0, 0, 0.0],
                            "waits": [0] * WAIT_BUCKETS,
                        }
                        for person in people[index * PEOPLE : (index + 1) * PEOPLE]:
                            held = {
                                "cpu": 4000 * 3600 * (1 + person % 5),
                                "memory": 16 * 2**30 * 3600,
                                "nvidia.com/gpu": 3600 * (person % 3),
                                "pods": 3 * 3600,
                            }
                            figures = [2, 1, 0, person % 2, 3, 120.0]
                            waits = [1, 1, 1] + [0] * (WAIT_BUCKETS - 3)
                            copy.write_row(
                                (
                                    day,
                                    path,
                                    runtime,
                                    json.dumps(held),
                                    *figures,
                                    _array(waits),
                                    person,
                                )
                            )
                            rows += 1
                            for name, value in held.items():
                                leaf["held"][name] = leaf["held"].get(name, 0) + value
                            leaf["figures"] = [
                                a + b for a, b in zip(leaf["figures"], figures, strict=True)
                            ]
                            leaf["waits"] = [
                                a + b for a, b in zip(leaf["waits"], waits, strict=True)
                            ]
                        leaf_rows.append(
                            (
                                day,
                                path,
                                runtime,
                                json.dumps(leaf["held"]),
                                *leaf["figures"],
                                _array(leaf["waits"]),
                            )
                        )
        with cursor.cursor.copy(f"COPY {ACCOUNTING_LEAF_DAYS} ({columns}) FROM STDIN") as copy:
            for row in leaf_rows:
                copy.write_row(row)
        month = first.replace(day=1)
        while month <= first + timedelta(days=DAYS - 1):
            with transaction.atomic():  # as beat writes them, with a day
                month_rollup(month)
            month = next_month(month)
        cursor.execute(f"ANALYZE {ACCOUNTING_DAYS}")
        cursor.execute(f"ANALYZE {ACCOUNTING_LEAF_DAYS}")
        cursor.execute(f"ANALYZE {ACCOUNTING_MONTHS}")
    now = datetime.now(UTC)
    AccountingDone.objects.bulk_create(
        AccountingDone(day=first + timedelta(days=offset), summarised_at=now)
        for offset in range(DAYS)
    )
    return rows


def _array(values: list[int]) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def timed(client, label: str, query: dict) -> dict:
    client.get("/api/v1/accounting/", query)  # warm-up
    times, size, count = [], 0, 0
    for _ in range(REQUESTS):
        started = time.perf_counter()
        response = client.get("/api/v1/accounting/", query)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.content[:300]
        size = len(response.content)
        count = len(response.json()["rows"]) if query.get("format") != "csv" else 0
    return {
        "label": label,
        "query": "&".join(f"{k}={v}" for k, v in query.items()),
        "rows": count,
        "bytes": size,
        "p50_ms": statistics.median(times),
        "max_ms": max(times),
    }


def measure() -> dict:
    from django.contrib.auth import get_user_model
    from django.test import Client

    today = datetime.now(UTC).date()
    first = today - timedelta(days=DAYS)
    started = time.perf_counter()
    rows = fill(first)
    fill_seconds = time.perf_counter() - started
    staff = get_user_model().objects.create_user(username="bench-staff", is_staff=True)
    client = Client(HTTP_HOST="localhost")
    client.force_login(staff)
    year = {"from": first.isoformat(), "to": (today - timedelta(days=1)).isoformat()}
    half = {**year, "from": (today - timedelta(days=180)).isoformat()}
    this_month = today.replace(day=1)
    last_month = {
        "from": (this_month - timedelta(days=1)).replace(day=1).isoformat(),
        "to": (this_month - timedelta(days=1)).isoformat(),
    }
    answers = [
        timed(
            client,
            "a year by department, monthly",
            {**year, "group": "department", "every": "month"},
        ),
        timed(
            client,
            "the same as CSV",
            {**year, "group": "department", "every": "month", "format": "csv"},
        ),
        timed(client, "a year by leaf, monthly", {**year, "group": "leaf", "every": "month"}),
        timed(client, "a year by runtime, daily", {**year, "group": "runtime", "every": "day"}),
        # A year by person is 1,800 people x 13 months, past the answer's 20,000 rows.
        timed(client, "180 days by person, monthly", {**half, "group": "person", "every": "month"}),
        timed(client, "last month by person", {**last_month, "group": "person"}),
        timed(
            client,
            "a year by person under one department, monthly",
            {**year, "group": "person", "every": "month", "node": "root/dept0"},
        ),
    ]
    return {
        "summary_rows": rows,
        "days": DAYS,
        "leaves": LEAVES,
        "people_per_leaf": PEOPLE,
        "runtimes": len(RUNTIMES),
        "fill_seconds": fill_seconds,
        "answers": answers,
    }
