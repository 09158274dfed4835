"""Reads at depth: what a position, a queue's first page and the queue page cost at 1k,
10k and 100k pending jobs in one queue, with 1,000 queues in the tree; and the jobs list
(jobs/reads/listing.py) over all of them: its first page, a page nine tenths of the way down by
cursor (by submission and by priority), and the jobs page's HTML.

The jobs are queued through the batch service (so tickets and pending blocks are written
as in production) and nothing admits them: no Celery worker runs. At each depth the load
generator (bench/load.py, its own process, one client) reads from gunicorn for a few
seconds: a job's detail with its position (jobs spread over the whole queue), the queue's
first page through the API, and the queue page's HTML as a signed-in user sees it.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile

from .kueue import quota_tree
from .services import REPO

DEPARTMENTS, LEAVES = 10, 100  # 1,000 queues
DEPTHS = (1_000, 10_000, 100_000)
DEEP_QUEUE = "root/dept-0/queue-0"
DEEP_NAME = DEEP_QUEUE.replace("/", "-")  # the queue's name, as in its page's address
OTHER_PENDING = 5  # jobs waiting in each of the other 999 queues


def tree_document() -> dict:
    departments = [
        {
            "name": f"dept-{d}",
            "min": {"cpu": LEAVES},
            "max": {"cpu": 10 * LEAVES},
            "children": [
                {
                    "name": f"queue-{q}",
                    "min": {"cpu": 1},
                    "max": {"cpu": 10},
                    "namespaces": [f"dept-{d}-queue-{q}"],
                }
                for q in range(LEAVES)
            ],
        }
        for d in range(DEPARTMENTS)
    ]
    total = DEPARTMENTS * LEAVES
    return quota_tree(min_cpu=total, max_cpu=10 * total, children=departments)


def _job(queue: str, index: int) -> dict:
    return {
        "queue": queue,
        "kind": "ray",
        "name": f"sweep-{index}",
        "image": "rayproject/ray:2.36.1",
        "entrypoint": "python train.py",
        "head": {"resources": {"cpu": "1"}},
        "priority": index % 3,  # three priorities, so positions cross priority classes
    }


def measure(*, base_url: str, env: dict, seconds: float) -> dict:
    """Fill the deep queue step by step and read at each depth; returns the figures."""
    from django.contrib.auth import get_user_model

    from access.services import full_token
    from jobs.models import Job
    from jobs.services import BATCH_MAX, job_submit_batch
    from queues.services import tree_apply

    tree_apply(document=tree_document())
    users = get_user_model().objects
    user = users.filter(username="reader").first() or users.create_superuser(
        "reader", "reader@example.com", "reader-password"
    )
    token = full_token(user, name="bench")
    cookie = _session_cookie(user)
    others = [
        f"root/dept-{d}/queue-{q}"
        for d in range(DEPARTMENTS)
        for q in range(LEAVES)
        if f"root/dept-{d}/queue-{q}" != DEEP_QUEUE
    ]
    documents = [_job(queue, i) for queue in others for i in range(OTHER_PENDING)]
    for start in range(0, len(documents), BATCH_MAX):
        job_submit_batch(user=user, documents=documents[start : start + BATCH_MAX])

    rng = random.Random(1)
    results, queued = [], 0
    for depth in DEPTHS:
        while queued < depth:
            count = min(BATCH_MAX, depth - queued)
            job_submit_batch(
                user=user, documents=[_job(DEEP_QUEUE, queued + i) for i in range(count)]
            )
            queued += count
        deep = list(Job.objects.filter(queue__node__path=DEEP_QUEUE).values_list("id", flat=True))
        sample = rng.sample(deep, min(500, len(deep)))
        targets = {
            "job detail (with position)": ([f"/api/v1/jobs/{pk}/" for pk in sample], None),
            "queue, first page (API)": ([f"/api/v1/queues/{DEEP_NAME}/"], None),
            "queue page (HTML)": ([f"/queues/{DEEP_NAME}/"], cookie),
            **_job_list_targets(cookie),
        }
        for label, (paths, session) in targets.items():
            figures = _read(base_url, token, paths, session, seconds, env)
            figures |= {"read": label, "pending": depth}
            print(f"bench: reads {json.dumps(figures)}", flush=True)
            results.append(figures)
    return {"queues": DEPARTMENTS * LEAVES, "reads": results}


def _job_list_targets(cookie: str) -> dict[str, tuple[list[str], str | None]]:
    """The jobs list's reads: page 1, and pages that start nine tenths of the way down
    (as a reader who followed "Next page" that far would ask for them)."""
    from jobs.models import Job
    from jobs.reads.listing import cursor_text

    jobs = Job.objects.order_by("-id").values_list("priority", "id")
    count = jobs.count()
    _, by_id = jobs[count * 9 // 10]
    by_priority = Job.objects.order_by("-priority", "-id").values_list("priority", "id")
    priority, pk = by_priority[count * 9 // 10]
    return {
        "jobs list, first page (API)": (["/api/v1/jobs/"], None),
        "jobs list, 90% down by cursor (API)": (
            [f"/api/v1/jobs/?after={cursor_text((by_id, by_id))}"],
            None,
        ),
        "jobs list by priority, 90% down (API)": (
            [f"/api/v1/jobs/?sort=-priority&after={cursor_text((priority, pk))}"],
            None,
        ),
        "jobs list, name filter (API)": (["/api/v1/jobs/?q=sweep-4242"], None),
        "jobs page (HTML)": (["/jobs/"], cookie),
    }


def _session_cookie(user) -> str:
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    # The backend a password sign-in records: axes' backend, first in the list, only
    # refuses locked-out sign-ins and cannot load a session's user.
    session[BACKEND_SESSION_KEY] = "portal.sign_in.LocalAccounts"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


def _read(base_url, token, paths, cookie, seconds, env) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
        json.dump(paths, file)
        file.flush()
        command = [sys.executable, "-m", "bench.load", "--url", base_url, "--token", token,
                   "--clients", "1", "--seconds", str(seconds), "--warmup", "1",
                   "--paths", file.name]  # fmt: skip
        if cookie:
            command += ["--cookie", cookie]
        done = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, check=True
        )
    return json.loads(done.stdout)
